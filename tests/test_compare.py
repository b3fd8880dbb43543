"""``lnorm compare``: updates and time to the baseline's best, on metric logs written
here whose answers are worked out by hand (no training, no JAX)."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from lnorm import cli
from lnorm.analysis import compare
from lnorm.analysis import runs as runs_lib
from lnorm.errors import UserError


def write_run(workdir, config, records):
  """A run directory as ``lnorm train`` leaves it; non-finite values are written as the
  metrics writer writes them, as strings."""
  os.makedirs(workdir)
  with open(os.path.join(workdir, "config.json"), "w") as f:
    json.dump({"config": {"experiment": "toy", "seed": 0, "num_epochs": 2, **config},
               "data": {}}, f)
  with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
    for r in records:
      r = {k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v)
           for k, v in r.items()}
      f.write(json.dumps(r) + "\n")


def curve(values, metric="test/error", steps_per_epoch=100, every=50, times=True):
  """Evaluations every ``every`` steps; those at a multiple of ``steps_per_epoch`` are
  epoch records (with a mean train loss), the others mid-epoch ones. Before each
  evaluation a running train loss of 0 is logged, as ``log_every_steps`` does: a value
  no training-metric comparison may pick up. With ``times``, 0.1 s of training per
  step in ``time/train_seconds``; the epochs took 12 s each, 2 of them compiling."""
  records = []
  for i, v in enumerate(values, 1):
    step = i * every
    records.append({"step": step, "epoch": step / steps_per_epoch, "train/loss": 0.0})
    r = {"step": step, "epoch": step / steps_per_epoch, metric: v}
    if step % steps_per_epoch == 0:
      r.update({"train/loss": steps_per_epoch / step, "time/epoch_seconds": 12.0,
                "time/compile_seconds": 2.0})
    if times:
      r["time/train_seconds"] = step / 10
    records.append(r)
  return records


def by_setting(comparison):
  return {g.setting: g for g in comparison.groups}


@pytest.fixture
def norms_dir(tmp_path):
  """Four normalizers, one seed each, evaluated at steps 50, 100, 150, 200 (mid-epoch
  at 50 and 150). The baseline's best is 0.30, at the mid-epoch step 150."""
  root = tmp_path / "norms"
  write_run(str(root / "none"), {"norm": "none"}, curve([0.50, 0.40, 0.30, 0.32]))
  write_run(str(root / "ln"), {"norm": "ln"}, curve([0.35, 0.28, 0.20, 0.25]))
  write_run(str(root / "bn"), {"norm": "bn"}, curve([0.45, 0.40, 0.35, 0.31]))
  write_run(str(root / "wn"), {"norm": "wn"}, curve([math.nan, 0.33, 0.30, math.inf]))
  return str(root)


def test_lower_is_better_with_mid_epoch_points_a_never_and_nans(norms_dir):
  (c,) = compare.compare(runs_lib.load_runs([norms_dir]), "test/error")
  assert c.lower_is_better and c.context == ""
  assert c.target == 0.30
  assert [g.setting for g in c.groups][0] == "norm=none"  # The baseline comes first.
  g = by_setting(c)
  (none,), (ln,), (bn,), (wn,) = (g[f"norm={n}"].runs for n in ("none", "ln", "bn", "wn"))
  # The baseline reaches its own best at the mid-epoch point of step 150, at 15 s.
  assert (none.step, none.epoch, none.seconds, none.step_ratio) == (150, 1.5, 15.0, 1.0)
  assert (ln.best, ln.step, ln.value) == (0.20, 100, 0.28)
  assert ln.step_ratio == pytest.approx(100 / 150)
  assert ln.seconds == pytest.approx(10.0) and ln.seconds_ratio == pytest.approx(10 / 15)
  assert bn.best == 0.31 and not bn.reached and bn.step_ratio is None
  # Reaching the target exactly counts; the NaN and the inf are skipped and counted.
  assert (wn.best, wn.step, wn.step_ratio, wn.nonfinite) == (0.30, 150, 1.0, 2)
  assert all(r.last_step == 200 for r in (none, ln, bn, wn))

  text = c.table()
  rows = {line.split()[0]: line for line in text.splitlines() if line.startswith("norm=")}
  assert "never" in rows["norm=bn"] and "0/1" in rows["norm=bn"]
  assert "0.67" in rows["norm=ln"] and "1/1" in rows["norm=ln"]
  assert "Target: test/error <= 0.3, the best of the baseline (norm=none)" in text
  assert "NaN or infinite test/error skipped (points): norm=wn (2)" in text


def test_higher_is_better_and_the_override(tmp_path):
  write_run(str(tmp_path / "none"), {"norm": "none"},
            curve([0.5, 0.7, 0.6, 0.65], metric="test/accuracy"))
  write_run(str(tmp_path / "ln"), {"norm": "ln"},
            curve([0.6, 0.72, 0.8, 0.75], metric="test/accuracy"))
  runs = runs_lib.load_runs([str(tmp_path)])
  (c,) = compare.compare(runs, "test/accuracy")
  assert not c.lower_is_better and c.target == 0.7
  (ln,) = by_setting(c)["norm=ln"].runs
  assert (ln.best, ln.step, ln.step_ratio) == (0.8, 100, 1.0)  # The baseline: also 100.
  # Told that lower is better, the target is the baseline's lowest, 0.5 at step 50,
  # and ln never goes as low.
  (c,) = compare.compare(runs, "test/accuracy", lower_is_better=True)
  assert c.target == 0.5 and not by_setting(c)["norm=ln"].reached


@pytest.mark.parametrize("metric, lower", [
    ("test/error", True), ("validation/nll_bound", True), ("test/loss", True),
    ("test/nll", True), ("test/image_mean_rank", True), ("eval/sick_mse", True),
    ("test/accuracy", False), ("test/caption_r1", False), ("test/image_r10", False),
    ("eval/mr_accuracy", False), ("test/recall@5", False), ("eval/sick_pearson", False),
    ("validation/rsum", False), ("best/validation_rsum", False)])
def test_direction_from_the_metric_name(metric, lower):
  assert runs_lib.lower_is_better(metric) is lower


def test_several_seeds_mean_std_and_how_many_reached(tmp_path):
  """Target: the mean of the baseline seeds' bests, (0.30 + 0.20) / 2 = 0.25."""
  root = tmp_path / "seeds"
  write_run(str(root / "none0"), {"norm": "none", "seed": 0}, curve([0.4, 0.3, 0.3, 0.3]))
  write_run(str(root / "none1"), {"norm": "none", "seed": 1}, curve([0.4, 0.3, 0.25, 0.2]))
  ln_curves = {0: [0.3, 0.2, 0.2, 0.2], 1: [0.3, 0.3, 0.3, 0.1], 2: [0.4, 0.4, 0.4, 0.4]}
  for seed, values in ln_curves.items():
    write_run(str(root / f"ln{seed}"), {"norm": "ln", "seed": seed}, curve(values))
  (c,) = compare.compare(runs_lib.load_runs([str(root)]), "test/error")
  assert c.target == pytest.approx(0.25)
  none, ln = by_setting(c)["norm=none"], by_setting(c)["norm=ln"]
  # Seed 0 of the baseline never gets to 0.25; seed 1 does at step 150: the reference.
  assert len(none.reached) == 1 and none.stat("step").mean == 150
  assert [r.step for r in ln.runs] == [100, 200, None]
  assert len(ln.reached) == 2 and len(ln.runs) == 3
  steps = np.array([100.0, 200.0])
  bests = np.array([0.2, 0.1, 0.4])
  assert ln.stat("step").mean == pytest.approx(steps.mean())
  assert ln.stat("step").std == pytest.approx(steps.std(ddof=1))
  assert ln.stat("step_ratio").mean == pytest.approx((steps / 150).mean())
  assert ln.stat("step_ratio").std == pytest.approx((steps / 150).std(ddof=1))
  assert ln.stat("best").mean == pytest.approx(bests.mean())
  assert ln.stat("best").std == pytest.approx(bests.std(ddof=1))
  times = steps / 10
  assert ln.stat("seconds").std == pytest.approx(times.std(ddof=1))
  row = next(l for l in c.table().splitlines() if l.startswith("norm=ln"))
  assert "2/3" in row and "150 ± 71" in row and "1.00 ± 0.47" in row
  assert "0.2333 ± 0.15" in row


def test_time_of_runs_older_than_train_seconds(tmp_path):
  """Without time/train_seconds the time is known at epoch ends only: the sum of the
  epochs' seconds minus compilation, (12 - 2) per epoch."""
  write_run(str(tmp_path / "none"), {"norm": "none"},
            curve([0.5, 0.4, 0.3, 0.2], times=False))  # Best at the epoch end 200: 20 s.
  write_run(str(tmp_path / "ln"), {"norm": "ln"},
            curve([0.5, 0.3, 0.1, 0.1], times=False))  # Reaches 0.2 mid-epoch: n/a.
  write_run(str(tmp_path / "bn"), {"norm": "bn"},
            curve([0.5, 0.2, 0.2, 0.2], times=False))  # At the epoch end 100: 10 s.
  (c,) = compare.compare(runs_lib.load_runs([str(tmp_path)]), "test/error")
  g = by_setting(c)
  assert g["norm=none"].runs[0].seconds == 20.0
  assert g["norm=bn"].runs[0].seconds == 10.0 and g["norm=bn"].runs[0].seconds_ratio == 0.5
  assert g["norm=ln"].runs[0].step == 150 and g["norm=ln"].runs[0].seconds is None
  row = next(l for l in c.table().splitlines() if l.startswith("norm=ln"))
  assert row.split().count("n/a") == 2  # The time and its ratio; the updates are known.
  assert "Time n/a: norm=ln reached the target between epoch ends" in c.table()


def test_training_metrics_are_read_at_epoch_ends(norms_dir):
  """The running train loss of 0.0 logged mid-epoch is no one's best."""
  (c,) = compare.compare(runs_lib.load_runs([norms_dir]), "train/loss")
  assert c.target == 0.5  # The epoch means are 1/1 and 1/2; the running values 0.
  assert all(r.step == 200 for g in c.groups for r in g.runs)


def test_runs_that_also_differ_in_batch_size_are_compared_per_batch_size(tmp_path):
  for b, (base, ln) in {4: ([0.4, 0.3], [0.3, 0.2]), 128: ([0.2, 0.1], [0.2, 0.2])}.items():
    write_run(str(tmp_path / f"none{b}"), {"norm": "none", "batch_size": b}, curve(base))
    write_run(str(tmp_path / f"ln{b}"), {"norm": "ln", "batch_size": b}, curve(ln))
  comparisons = compare.compare(runs_lib.load_runs([str(tmp_path)]), "test/error")
  by_context = {c.context: c for c in comparisons}
  assert set(by_context) == {"batch_size=4", "batch_size=128"}
  assert by_context["batch_size=4"].target == 0.3
  assert by_setting(by_context["batch_size=4"])["norm=ln"].runs[0].step == 50
  assert by_context["batch_size=128"].target == 0.1
  assert not by_setting(by_context["batch_size=128"])["norm=ln"].reached


def test_a_batch_size_without_a_baseline_run_is_left_out_with_a_warning(tmp_path, caplog):
  write_run(str(tmp_path / "none4"), {"norm": "none", "batch_size": 4}, curve([0.4, 0.3]))
  write_run(str(tmp_path / "ln4"), {"norm": "ln", "batch_size": 4}, curve([0.3, 0.2]))
  write_run(str(tmp_path / "ln64"), {"norm": "ln", "batch_size": 64}, curve([0.3, 0.2]))
  (c,) = compare.compare(runs_lib.load_runs([str(tmp_path)]), "test/error")
  assert c.context == "batch_size=4" and len(c.groups) == 2
  assert "Left out the runs with batch_size=64: none matches --baseline norm=none" in caplog.text


def test_json_output(norms_dir, tmp_path, capsys):
  out = str(tmp_path / "table.json")
  assert cli.main(["compare", norms_dir, "--metric", "test/error", "--json", out]) == 0
  assert "Updates to target, test/error" in capsys.readouterr().out
  with open(out) as f:
    (table,) = json.load(f)
  assert table["target"] == 0.30 and table["lower_is_better"] is True
  groups = {g["setting"]: g for g in table["groups"]}
  assert groups["norm=none"]["is_baseline"] and groups["norm=none"]["step"]["mean"] == 150
  assert groups["norm=ln"]["step_ratio"]["mean"] == pytest.approx(2 / 3)
  assert groups["norm=bn"]["reached"] == 0 and groups["norm=bn"]["step"] is None
  (wn,) = groups["norm=wn"]["per_run"]
  assert wn["nonfinite_points"] == 2 and wn["step"] == 150 and wn["epoch"] == 1.5


def test_baseline_option_and_errors(norms_dir, tmp_path, capsys):
  assert cli.main(["compare", norms_dir, "--metric", "test/error", "--baseline", "norm=bn"]) == 0
  assert "Target: test/error <= 0.31, the best of the baseline (norm=bn)" in (
      capsys.readouterr().out)
  # A missing metric: exit code 2, the runs named and the metrics they do log listed.
  assert cli.main(["compare", norms_dir, "--metric", "test/nll"]) == 2
  err = capsys.readouterr().err
  assert "4 of 4 runs logged no test/nll" in err and "test/error" in err
  assert "Traceback" not in err
  runs = runs_lib.load_runs([norms_dir])
  with pytest.raises(UserError, match="No run matches --baseline norm=bln. Settings: "
                     "norm=bn, norm=ln, norm=none, norm=wn"):
    compare.compare(runs, "test/error", baseline="norm=bln")
  with pytest.raises(UserError, match="a field no run's config has"):
    compare.compare(runs, "test/error", baseline="normalizer=none")
  with pytest.raises(UserError, match="expected FIELD=VALUE"):
    compare.compare(runs, "test/error", baseline="none")
  write_run(str(tmp_path / "nan" / "none"), {"norm": "none"}, curve([math.nan, math.nan]))
  write_run(str(tmp_path / "nan" / "ln"), {"norm": "ln"}, curve([0.3, 0.2]))
  with pytest.raises(UserError, match="no finite test/error, so there is no target"):
    compare.compare(runs_lib.load_runs([str(tmp_path / "nan")]), "test/error")


def test_runs_of_different_experiments_are_not_one_table(tmp_path, capsys):
  # The case: a Transformer run against perm-MNIST's baseline. The two share
  # no field but the normalizer tells them apart, so one table would hold both.
  write_run(str(tmp_path / "pm" / "none"), {"experiment": "perm_mnist", "norm": "none",
                                             "batch_size": 4}, curve([0.5, 0.4]))
  write_run(str(tmp_path / "lm" / "ln"), {"experiment": "transformer_lm", "norm": "ln",
                                           "placement": "pre"}, curve([0.45, 0.3]))
  assert cli.main(["compare", str(tmp_path / "pm"), str(tmp_path / "lm"),
                   "--metric", "test/error"]) == 2
  assert capsys.readouterr().err == (
      "lnorm: error: lnorm compare would put runs of different experiments in one table: "
      f"transformer_lm ({tmp_path / 'lm' / 'ln'}) and perm_mnist "
      f"({tmp_path / 'pm' / 'none'}). Pass the runs of one experiment, with its baseline.\n")
  # With a run more of one side, the count says so.
  write_run(str(tmp_path / "lm" / "rms"), {"experiment": "transformer_lm", "norm": "rms",
                                            "placement": "pre"}, curve([0.45, 0.3]))
  with pytest.raises(UserError, match=r"transformer_lm \(\S+ln and 1 more\) and perm_mnist"):
    compare.compare(runs_lib.load_runs([str(tmp_path)]), "test/error")
  # Each experiment with its own baseline: one table each, as before.
  write_run(str(tmp_path / "lm" / "none"), {"experiment": "transformer_lm", "norm": "none",
                                             "placement": "pre"}, curve([0.5, 0.4]))
  tables = compare.compare(runs_lib.load_runs([str(tmp_path)]), "test/error")
  assert [t.context for t in tables] == ["experiment=transformer_lm", "experiment=perm_mnist"]
