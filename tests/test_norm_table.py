"""``lnorm report --by-norm``: one row per normalizer, one column per experiment, on
metric logs written here whose ratios are worked out by hand (no training, no JAX)."""

from __future__ import annotations

import json
import os

import pytest

from lnorm import cli
from lnorm.analysis import norm_table
from lnorm.errors import UserError


def write_run(workdir, config, values, metric, times=True, num_epochs=2):
  """A run evaluated every 50 steps, epochs of 100 steps (so every other evaluation is
  an epoch record). With ``times``, 0.1 s of training per step in
  ``time/train_seconds``; else only the epochs' 12 s, 2 of them compiling, so that a
  crossing between epoch ends has no known time."""
  os.makedirs(workdir)
  flat = {"seed": 0, "num_epochs": num_epochs, "norm_options.ln.scale_init": 1.0,
          "wandb.group": os.path.basename(workdir), **config}
  with open(os.path.join(workdir, "config.json"), "w") as f:
    json.dump({"config": flat, "data": {}}, f)
  with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
    for i, v in enumerate(values, 1):
      step = 50 * i
      record = {"step": step, "epoch": step / 100, metric: v}
      if step % 100 == 0:
        record.update({"train/loss": 1.0, "time/epoch_seconds": 12.0,
                       "time/compile_seconds": 2.0})
      if times:
        record["time/train_seconds"] = step / 10
      f.write(json.dumps(record) + "\n")


@pytest.fixture
def runs_dir(tmp_path):
  """perm_mnist (test/error): none's seeds have bests 0.30 and 0.34, so the target is
  0.32; seed 0 reaches it at step 150 (15 s), seed 1 never: the reference is 150.
  ln (gain 1.0) reaches it at steps 100 and 50: ratios 2/3 and 1/3; ln with gain 0.1
  at 100; rms never. draw (test/nll_bound, epoch times only): none's best 90 at the
  mid-epoch step 150, ln at 100, rms at 150. handwriting: no baseline run."""
  root = tmp_path / "runs"
  pm = {"experiment": "perm_mnist"}
  for seed, values in enumerate(([0.50, 0.40, 0.30, 0.32], [0.50, 0.36, 0.34, 0.34])):
    write_run(str(root / "pm" / f"none_s{seed}"), {**pm, "norm": "none", "seed": seed},
              values, "test/error")
  for seed, values in enumerate(([0.35, 0.28, 0.20, 0.25], [0.31, 0.28, 0.20, 0.25])):
    write_run(str(root / "pm" / f"ln_s{seed}"), {**pm, "norm": "ln", "seed": seed},
              values, "test/error")
  write_run(str(root / "pm" / "ln_gain0.1"),
            {**pm, "norm": "ln", "norm_options.ln.scale_init": 0.1},
            [0.40, 0.30, 0.30, 0.30], "test/error")
  for seed in (0, 1):
    write_run(str(root / "pm" / f"rms_s{seed}"), {**pm, "norm": "rms", "seed": seed},
              [0.45, 0.40, 0.35, 0.33], "test/error")
  write_run(str(root / "pm" / "unfinished"), {**pm, "norm": "rms", "seed": 2},
            [0.1, 0.1], "test/error", num_epochs=3)
  draw = {"experiment": "draw"}
  for norm, values in {"none": [100, 95, 90, 90], "ln": [95, 90, 88, 85],
                       "rms": [92, 91, 89, 87]}.items():
    write_run(str(root / "draw" / norm), {**draw, "norm": norm}, values,
              "test/nll_bound", times=False)
  for norm in ("ln", "rms"):
    write_run(str(root / "hw" / norm), {"experiment": "handwriting", "norm": norm},
              [3.0, 2.0, 1.5, 1.4], "validation/nll")
  return str(root)


def parse(text):
  """The header and {row label: cells} of the markdown table."""
  lines = [l for l in text.splitlines() if l.startswith("|")]
  split = lambda l: [c.strip() for c in l.strip().strip("|").split(" | ")]
  header = split(lines[0])
  return header, {split(l)[0]: split(l)[1:] for l in lines[2:]}


GAIN = "norm_options.ln.scale_init"


def test_the_table_by_hand(runs_dir, tmp_path):
  paths = [os.path.join(runs_dir, d) for d in ("pm", "draw", "hw")]
  out = str(tmp_path / "report" / "NORMS.md")
  os.makedirs(os.path.dirname(out))
  assert cli.main(["report", *paths, "--by-norm", "--out", out]) == 0
  with open(out) as f:
    text = f.read()
  header, rows = parse(text)
  # Columns in the order of the paths (not alphabetical), with their target metric.
  assert header == ["normalizer", "perm_mnist: test/error", "draw: test/nll_bound",
                    "handwriting: validation/nll"]
  # ln's runs differ in the gain in perm_mnist: two ln rows, everywhere.
  assert list(rows) == ["none (baseline)", f"ln, {GAIN}=0.1", f"ln, {GAIN}=1.0", "rms"]

  pm, draw, hw = zip(*rows.values())
  runs = "../runs/pm"  # Relative to the folder of --out.
  assert pm == (
      f"1.00× (1/2), time 1.00× · seeds [0]({runs}/none_s0), [1]({runs}/none_s1)",
      f"0.67× (1/1), time 0.67× · seed [0]({runs}/ln_gain0.1)",
      # Steps 100 and 50 against 150: 2/3 and 1/3, mean 0.5, std sqrt(2)/6 = 0.2357.
      f"0.50 ± 0.24× (2/2), time 0.50 ± 0.24× · seeds [0]({runs}/ln_s0), [1]({runs}/ln_s1)",
      f"— never reached (0/2) · seeds [0]({runs}/rms_s0), [1]({runs}/rms_s1)")
  # The baseline reached its best between epoch ends, where these logs give no time.
  assert draw == ("1.00× (1/1), time n/a · seed [0](../runs/draw/none)",
                  "— no runs",
                  "0.67× (1/1), time n/a · seed [0](../runs/draw/ln)",
                  "1.00× (1/1), time n/a · seed [0](../runs/draw/rms)")
  assert hw == ("— no runs", "— no runs",
                "— no baseline · seed [0](../runs/hw/ln)",
                "— no baseline · seed [0](../runs/hw/rms)")

  assert ("- perm_mnist: test/error <= 0.32, the mean of the best values of 2 baseline "
          "runs.") in text
  assert "- draw: test/nll_bound <= 90, the best of the baseline run." in text
  assert "- handwriting: none: no baseline run (norm=none)." in text
  assert "equally loaded machines" in text
  assert "Not finished (left out): [../runs/pm/unfinished](../runs/pm/unfinished)" in text


def test_links_are_relative_to_the_current_directory_without_out(runs_dir, tmp_path,
                                                                  monkeypatch, capsys):
  monkeypatch.chdir(tmp_path)
  assert cli.main(["report", "runs/draw", "--by-norm"]) == 0
  _, rows = parse(capsys.readouterr().out)
  assert rows["ln"] == ["0.67× (1/1), time n/a · seed [0](runs/draw/ln)"]
  # Without --by-norm, the report it always gave.
  assert cli.main(["report", "runs/draw"]) == 0
  assert "## Updates to target\n" in capsys.readouterr().out


def test_baseline_fields_make_columns_and_runs_without_a_seed_are_numbered(tmp_path):
  """Baseline runs at two batch sizes are two columns with two targets; two ln runs
  that only their directory tells apart are linked as runs 1 and 2."""
  for b, values in ((4, [0.5, 0.4, 0.3, 0.3]), (128, [0.6, 0.5, 0.5, 0.4])):
    common = {"experiment": "perm_mnist", "batch_size": b}
    write_run(str(tmp_path / f"none_b{b}"), {**common, "norm": "none"}, values,
              "test/error")
    for i in (1, 2):
      write_run(str(tmp_path / f"ln_b{b}_{i}"), {**common, "norm": "ln"},
                [0.4, 0.4, 0.4, 0.4], "test/error")
  table = norm_table.collect([str(tmp_path)])
  assert [c.title for c in table.columns] == ["perm_mnist, batch_size=128: test/error",
                                              "perm_mnist, batch_size=4: test/error"]
  _, rows = parse(table.markdown(out=str(tmp_path / "t.md")))
  # batch 128: target 0.4, the baseline at step 200, ln at 50; batch 4: target 0.3.
  assert rows["ln"] == [
      "0.25 ± 0.00× (2/2), time 0.25 ± 0.00× · runs [1](ln_b128_1), [2](ln_b128_2)",
      "— never reached (0/2) · runs [1](ln_b4_1), [2](ln_b4_2)"]


def test_a_test_metric_logged_only_at_the_end_yields_to_the_validation_curve(tmp_path):
  """Handwriting evaluates its test split once, at the end: a target on it would give
  every normalizer 1.0x. The validation curve is taken: none's best 1.4 at step 200,
  ln reaches it at step 100."""
  curves = {"none": [3.0, 2.0, 1.5, 1.4], "ln": [2.0, 1.4, 1.2, 1.1]}
  for norm, values in curves.items():
    workdir = tmp_path / norm
    write_run(str(workdir), {"experiment": "handwriting", "norm": norm}, values,
              "validation/nll")
    with open(workdir / "metrics.jsonl", "a") as f:
      f.write(json.dumps({"step": 200, "epoch": 2.0, "test/nll": values[-1] + 0.1}) + "\n")
  table = norm_table.collect([str(tmp_path)])
  assert [c.title for c in table.columns] == ["handwriting: validation/nll"]
  _, rows = parse(table.markdown())
  assert rows["ln"][0].startswith("0.50× (1/1)")


def test_no_finished_runs_is_a_clear_error(tmp_path):
  write_run(str(tmp_path / "a"), {"experiment": "draw", "norm": "none"}, [1.0],
            "test/nll_bound")
  with pytest.raises(UserError, match="No finished runs"):
    norm_table.collect([str(tmp_path)])


def test_a_baseline_without_a_finite_value_sets_no_target(tmp_path):
  nan = float("nan")
  write_run(str(tmp_path / "none"), {"experiment": "draw", "norm": "none"}, [nan] * 4,
            "test/nll_bound")
  write_run(str(tmp_path / "ln"), {"experiment": "draw", "norm": "ln"}, [90.0] * 4,
            "test/nll_bound")
  text = norm_table.collect([str(tmp_path)]).markdown()
  _, rows = parse(text)
  assert rows["none (baseline)"][0].startswith("— no target · seed [0](")
  assert rows["ln"][0].startswith("— no target · seed [0](")
  assert ("- draw: none: The baseline runs (norm=none) logged no finite test/nll_bound, "
          "so there is no target to reach.\n") in text


def test_a_field_one_experiment_varies_splits_other_experiments_rows_only_on_its_values(
    tmp_path):
  """perm_mnist ran ln at two learning rates; draw ran it at a third: a plain "ln"
  row, not a third learning-rate row. rms, whose runs differ nowhere, keeps one row
  for its two learning rates. (The main test has the other case: draw's ln at gain 1.0
  joins perm_mnist's row of gain 1.0.)"""
  lr = "optimizer.learning_rate"
  for i, (experiment, norm, rate) in enumerate((
      ("perm_mnist", "none", 1e-3), ("perm_mnist", "ln", 1e-3), ("perm_mnist", "ln", 3e-4),
      ("perm_mnist", "rms", 5e-4), ("draw", "none", 1e-3), ("draw", "ln", 5e-4),
      ("draw", "ln", 5e-4), ("draw", "rms", 1e-3))):
    metric = "test/error" if experiment == "perm_mnist" else "test/nll_bound"
    write_run(str(tmp_path / experiment / str(i)),
              {"experiment": experiment, "norm": norm, lr: rate, "seed": i}, [1.0] * 4,
              metric)
  table = norm_table.collect([str(tmp_path / "perm_mnist"), str(tmp_path / "draw")])
  assert [norm_table.row_label(r) for r in table.rows] == [
      "none (baseline)", "ln", f"ln, {lr}=0.0003", f"ln, {lr}=0.001", "rms"]
  pm, draw = table.columns
  assert set(pm.cells) == {("none", ""), ("ln", f"{lr}=0.0003"), ("ln", f"{lr}=0.001"),
                           ("rms", "")}
  assert set(draw.cells) == {("none", ""), ("ln", ""), ("rms", "")}
  assert len(draw.cells[("ln", "")].runs) == 2
