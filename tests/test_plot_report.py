"""``lnorm plot`` and ``lnorm report`` on fabricated run directories (no training)."""

from __future__ import annotations

import json
import os

import pytest

from lnorm import cli
from lnorm.analysis import plotting
from lnorm.analysis import report
from lnorm.analysis import published as results
from lnorm.errors import UserError
from lnorm.analysis.runs import load_runs
from tests.helpers import run_record


def fake_run(workdir, config, data, epochs, num_epochs=None):
  """A run directory as lnorm train leaves it: config.json and metrics.jsonl."""
  os.makedirs(workdir)
  flat = {"experiment": "perm_mnist", "seed": 0, "num_epochs": num_epochs or len(epochs),
          "steps_per_call": 7, "wandb.group": "g", **config}
  with open(os.path.join(workdir, "config.json"), "w") as f:
    json.dump({"config": flat, "data": data}, f)
  with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
    for i, metrics in enumerate(epochs, 1):
      f.write(json.dumps({"step": i * 100 - 50, "epoch": i - 0.5, "train/loss": 9.0}) + "\n")
      f.write(json.dumps({"step": i * 100, "epoch": i, "time/epoch_seconds": 1.0,
                          **metrics}) + "\n")


def sort_configs(root):
  """Rewrites every config.json under ``root`` with its fields in alphabetical order,
  as `lnorm train` writes them (so `data.corpus` comes before `experiment`)."""
  for folder, _, files in os.walk(root):
    if "config.json" in files:
      path = os.path.join(folder, "config.json")
      with open(path) as f:
        record = json.load(f)
      with open(path, "w") as f:
        json.dump(record, f, sort_keys=True)


FULL_MNIST = {"name": "mnist", "source": "files", "synthetic": False,
              "num_examples": {"train": 55000, "validation": 5000, "test": 10000}}
EMBEDDED = {"name": "mnist", "source": "embedded", "synthetic": False,
            "num_examples": {"train": 4000, "validation": 500, "test": 500}}


@pytest.fixture
def fig6_dir(tmp_path):
  """Figure 6's six runs, one of them unfinished (1 of 3 epochs)."""
  root = tmp_path / "fig6"
  for b in (128, 4):
    for i, n in enumerate(("none", "bn", "ln")):
      curve = [{"train/nll": 0.5 / (e * (i + 1)), "test/error": 0.1 / (e + i),
                "train/loss": 0.5 / e} for e in (1, 2)]
      fake_run(str(root / f"norm={n},batch_size={b}"),
               {"norm": n, "batch_size": b, "norm_options.bn.unbiased": b == 4,
                "steps_per_call": 256 // b}, FULL_MNIST, curve)
  fake_run(str(root / "unfinished"), {"norm": "ln", "batch_size": 64}, FULL_MNIST,
           [{"test/error": 0.3, "train/nll": 1.0}], num_epochs=3)
  return str(root)


def test_runs_are_labelled_by_what_differs(fig6_dir):
  runs = load_runs([fig6_dir])
  labels = {r.label for r in runs}
  # steps_per_call does not change results and unbiased follows from batch_size.
  assert "norm=bn,batch_size=4" in labels and len(labels) == 7


def test_runs_of_several_experiments_are_labelled_by_experiment_and_used_fields(tmp_path):
  """`lnorm plot runs/ar runs/st` drew `data.corpus=cnn` for attentive-reader runs that
  trained on the books: a field the skip-thoughts runs lack and that no run used."""
  books = {"name": "cloze", "source": "cloze_books", "num_examples": {"train": 4407}}
  for norm in ("none", "ln"):
    fake_run(str(tmp_path / "ar" / norm),
             {"experiment": "attentive_reader", "norm": norm, "data.corpus": "cnn",
              "data.source": "cloze_books", "optimizer.learning_rate": 5e-4}, books,
             [{"validation/error": 0.5}])
    fake_run(str(tmp_path / "st" / norm),
             {"experiment": "skip_thoughts", "norm": norm, "data.source": "files",
              "optimizer.learning_rate": 2e-4}, {"name": "books", "source": "files"},
             [{"validation/token_nll": 5.0}])
  fake_run(str(tmp_path / "st" / "seed1"),
           {"experiment": "skip_thoughts", "norm": "ln", "seed": 1, "data.source": "files",
            "optimizer.learning_rate": 2e-4}, {"name": "books", "source": "files"},
           [{"validation/token_nll": 5.0}])
  sort_configs(tmp_path)
  runs = load_runs([str(tmp_path / "ar"), str(tmp_path / "st")])
  assert sorted(r.label for r in runs) == [
      "attentive_reader: norm=ln", "attentive_reader: norm=none",
      "skip_thoughts: norm=ln,seed=0", "skip_thoughts: norm=ln,seed=1",
      "skip_thoughts: norm=none,seed=0"]
  # One experiment alone: the fields that differ, as before.
  assert sorted(r.label for r in load_runs([str(tmp_path / "ar")])) == ["norm=ln", "norm=none"]


def test_a_run_is_labelled_by_the_data_it_trained_on_not_its_config_auto(tmp_path):
  """Two runs of one config, source 'auto': one found the full MNIST files, the other
  fell back to the embedded digits. That is what tells them apart."""
  fake_run(str(tmp_path / "a"), {"norm": "ln", "data.source": "auto"}, FULL_MNIST,
           [{"test/error": 0.1}])
  fake_run(str(tmp_path / "b"), {"norm": "ln", "data.source": "auto"}, EMBEDDED,
           [{"test/error": 0.2}])
  assert [r.label for r in load_runs([str(tmp_path)])] == [
      "data.source=files", "data.source=embedded"]


def test_plot_and_compare_print_those_labels(tmp_path, capsys):
  for experiment in ("attentive_reader", "skip_thoughts"):
    for norm in ("none", "ln"):
      fake_run(str(tmp_path / experiment / norm),
               {"experiment": experiment, "norm": norm,
                **({"data.corpus": "cnn"} if experiment == "attentive_reader" else {})},
               {}, [{"validation/error": 0.5 if norm == "none" else 0.4}])
  sort_configs(tmp_path)
  assert cli.main(["plot", str(tmp_path), "--metric", "validation/error",
                   "--out", str(tmp_path / "curves")]) == 0
  printed = capsys.readouterr().out
  assert "attentive_reader: norm=ln" in printed and "corpus" not in printed
  with open(tmp_path / "curves.svg") as f:
    svg = f.read()
  assert "skip_thoughts: norm=none" in svg and "corpus" not in svg
  # Runs of one experiment: the legend names the norms, the title the experiment.
  assert cli.main(["plot", str(tmp_path / "skip_thoughts"), "--metric", "validation/error",
                   "--out", str(tmp_path / "st")]) == 0
  with open(tmp_path / "st.svg") as f:
    svg = f.read()
  assert "skip_thoughts" in svg and "norm=ln" in svg and "skip_thoughts: norm" not in svg
  assert cli.main(["compare", str(tmp_path), "--metric", "validation/error",
                   "--json", str(tmp_path / "c.json")]) == 0
  printed = capsys.readouterr().out
  assert "Updates to target, validation/error, experiment=skip_thoughts" in printed
  assert "corpus" not in printed
  with open(tmp_path / "c.json") as f:
    tables = json.load(f)
  assert [t["context"] for t in tables] == ["experiment=attentive_reader",
                                           "experiment=skip_thoughts"]
  assert sorted(r["label"] for g in tables[1]["groups"] for r in g["per_run"]) == [
      "skip_thoughts: norm=ln", "skip_thoughts: norm=none"]


def test_epoch_axis_takes_mid_epoch_evaluations_but_not_running_train_losses(tmp_path):
  workdir = str(tmp_path / "run")
  fake_run(workdir, {}, FULL_MNIST, [{"train/loss": 1.0, "test/error": 0.2}])
  with open(os.path.join(workdir, "metrics.jsonl"), "a") as f:
    f.write(json.dumps({"step": 130, "epoch": 1.3, "test/error": 0.1}) + "\n")
  (run,) = load_runs([workdir])
  assert run.series("test/error") == ([1.0, 1.3], [0.2, 0.1])
  # The mid-epoch train/loss of 9.0 at epoch 0.5 is a running value: left out.
  assert run.series("train/loss") == ([1.0], [1.0])
  assert run.series("train/loss", x="step") == ([50.0, 100.0], [9.0, 1.0])


def test_plot_metric_against_step_log_scaled(fig6_dir, tmp_path, capsys):
  out = str(tmp_path / "curves")
  assert cli.main(["plot", fig6_dir, "--metric", "train/loss", "--x", "step", "--log",
                   "--out", out]) == 0
  for ext in (".png", ".svg"):
    assert os.path.getsize(out + ext) > 1000
  assert "norm=ln,batch_size=4" in capsys.readouterr().out


def test_paper_figure_by_name(fig6_dir, tmp_path):
  paths = plotting.plot_figure("ln-fig6", load_runs([fig6_dir]),
                               str(tmp_path / "fig6"))
  assert [os.path.basename(p) for p in paths] == ["fig6.png", "fig6.svg"]
  with open(paths[1]) as f:
    svg = f.read()
  for title in ("train NLL, batch 128", "test error, batch 4"):
    assert title in svg


def test_plot_errors_are_user_errors(fig6_dir, tmp_path):
  runs = load_runs([fig6_dir])
  with pytest.raises(UserError, match="Figures: "):
    plotting.plot_figure("ln-fig99", runs, str(tmp_path / "x"))
  with pytest.raises(UserError, match="needs runs of experiment 'draw'"):
    plotting.plot_figure("ln-fig4", runs, str(tmp_path / "x"))
  with pytest.raises(UserError, match="Metrics found: .*test/error"):
    plotting.plot_metrics(runs, ["test/accuracy"], str(tmp_path / "x"))
  (tmp_path / "empty").mkdir()
  with pytest.raises(UserError, match="No metrics.jsonl"):
    load_runs([str(tmp_path / "empty")])


def test_report_rows(fig6_dir, tmp_path, capsys):
  out = str(tmp_path / "REPORT.md")
  assert cli.main(["report", fig6_dir, "--out", out]) == 0
  text = capsys.readouterr().out
  with open(out) as f:
    assert f.read() == text
  lines = [l for l in text.splitlines() if l.startswith("| perm_mnist")]
  assert len(lines) == 12  # 6 finished runs x (train NLL, test error); not the unfinished one.
  row = next(l for l in lines if "norm=bn,batch_size=4 | test/error" in l)
  cells = [c.strip() for c in row.strip("|").split("|")]
  assert cells[3].startswith("not given")
  assert "Figure 6" in cells[4]
  assert cells[5] == "0.03333"  # The final epoch of bn (i = 1): 0.1 / (2 + 1).
  assert "mnist (files), 55000 train" == cells[7]
  assert cells[8] == "2"
  assert "Not finished (left out)" in text and "unfinished" in text


@pytest.mark.parametrize("max_steps, finished", [(150, True), (200, False)])
def test_a_run_ended_by_max_steps_mid_epoch(tmp_path, max_steps, finished):
  """Its last epoch record is the partial epoch 1.5, at step 150."""
  workdir = str(tmp_path / "run")
  fake_run(workdir, {"norm": "ln", "batch_size": 128, "max_steps": max_steps},
           FULL_MNIST, [{"test/error": 0.2, "train/nll": 0.4}], num_epochs=5)
  with open(os.path.join(workdir, "metrics.jsonl"), "a") as f:
    f.write(json.dumps({"step": 150, "epoch": 1.5, "time/epoch_seconds": 0.5,
                        "test/error": 0.1, "train/nll": 0.3}) + "\n")
  result = report.collect([workdir])
  assert bool(result.rows) == finished and bool(result.unfinished) != finished
  if finished:
    assert {r.epochs for r in result.rows} == {"1.5"}
    assert {r.measured for r in result.rows if r.metric == "test/error"} == {"0.1"}


def test_report_best_counts_mid_epoch_evaluations_as_compare_does(tmp_path):
  workdir = str(tmp_path / "run")
  fake_run(workdir, {"norm": "ln", "batch_size": 128},
           FULL_MNIST, [{"test/error": 0.2, "train/nll": 0.4}])
  with open(os.path.join(workdir, "metrics.jsonl"), "a") as f:
    f.write(json.dumps({"step": 150, "epoch": 1.5, "test/error": 0.05,
                        "train/nll": 0.01}) + "\n")
    f.write(json.dumps({"step": 200, "epoch": 2, "time/epoch_seconds": 1.0,
                        "test/error": 0.1, "train/nll": 0.3}) + "\n")
  record = run_record(workdir)
  record["config"]["num_epochs"] = 2
  with open(os.path.join(workdir, "config.json"), "w") as f:
    json.dump(record, f)
  best = {r.metric: r.best for r in report.collect([workdir]).rows}
  # The mid-epoch test error counts; the mid-epoch train NLL is a running value.
  assert best == {"test/error": "0.05", "train/nll": "0.3"}
  # The column says what it holds: the best value, and the epoch it was logged at.
  table = report.collect([workdir]).markdown().splitlines()
  header = [c.strip() for c in table[0].strip("|").split("|")]
  assert header[6] == "best (at epoch)" and "best epoch" not in header
  cells = {row.split("|")[3].strip(): [c.strip() for c in row.strip("|").split("|")]
           for row in table[2:] if row.startswith("| perm_mnist")}
  assert cells["test/error"][6] == "0.05 (1.5)" and cells["train/nll"][6] == "0.3 (2)"


def test_report_has_updates_to_target_per_batch_size(fig6_dir, capsys):
  """In fig6_dir the test errors are 0.1 / (epoch + i), i = 0, 1, 2 for none, bn, ln:
  the baseline's best, 0.05, comes at step 200; bn reaches it at step 100 and ln
  (0.033) too."""
  assert cli.main(["report", fig6_dir]) == 0
  text = capsys.readouterr().out
  section = text[text.index("## Updates to target"):]
  for b in (128, 4):
    heading = f"### perm_mnist, batch_size={b}: test/error against norm=none"
    assert heading in section
    table = section[section.index(heading):].split("###")[1]
    rows = {l.split("|")[1].strip(): [c.strip() for c in l.strip("|").split("|")]
            for l in table.splitlines() if l.startswith("| norm=")}
    assert rows["norm=none (baseline)"][4:6] == ["200", "1.00"]
    assert rows["norm=bn"][2:6] == ["0.03333", "1/1", "100", "0.50"]
    assert rows["norm=ln"][4:6] == ["100", "0.50"]
    assert "Target: test/error <= 0.05" in table


def test_report_compares_with_bn_where_no_run_is_unnormalized(tmp_path):
  """The BLN paper's baseline is BN: bn's best test loss is 1.6 (epoch 2); bln has
  1.5 at epoch 1. Only a norm=bln run of another experiment: no comparison there."""
  cifar = {"name": "cifar10", "source": "files", "num_examples": {"train": 45000}}
  for norm, losses in {"bln": (1.5, 1.4), "bn": (1.7, 1.6)}.items():
    fake_run(str(tmp_path / norm), {"experiment": "bln_cifar", "norm": norm,
                                    "batch_size": 25}, cifar,
             [{"test/nll": v, "test/accuracy": 0.4} for v in losses])
  fake_run(str(tmp_path / "imdb"), {"experiment": "bln_imdb", "norm": "bln"}, {},
           [{"test/nll": 0.5}])
  (comparisons,) = report.collect([str(tmp_path)]).comparisons
  (table,) = comparisons.tables
  assert (comparisons.experiment, table.metric, table.baseline) == (
      "bln_cifar", "test/nll", "norm=bn")
  bln = next(g for g in table.groups if g.setting == "norm=bln")
  assert table.target == 1.6 and bln.runs[0].step == 100 and bln.runs[0].step_ratio == 0.5


def test_plot_marks_the_target_and_the_crossings(fig6_dir, tmp_path):
  """The dashed line at the baseline's best, a star where each run first reaches it."""
  runs = [r for r in load_runs([fig6_dir]) if r.config["batch_size"] == 4]
  fig, ax = plotting._pyplot().subplots()
  assert plotting._draw(ax, runs, "test/error", "step", False, target="norm=none") == 3
  (target,) = [l for l in ax.lines if l.get_linestyle() == "--"]
  assert list(target.get_ydata()) == [0.05, 0.05]
  stars = sorted((float(l.get_xdata()[0]), float(l.get_ydata()[0]))
                 for l in ax.lines if l.get_marker() == "*")
  assert stars == [(100.0, 0.1 / 3), (100.0, 0.1 / 2), (200.0, 0.1 / 2)]  # ln, bn, none.
  plotting._pyplot().close(fig)
  out = str(tmp_path / "target")
  assert cli.main(["plot", fig6_dir, "--metric", "test/error", "--target", "--out", out]) == 0
  assert os.path.getsize(out + ".png") > 1000
  with pytest.raises(UserError, match="No run matches --baseline norm=bln"):
    plotting.plot_metrics(runs, ["test/error"], out, target="norm=bln")


def test_report_marks_partial_and_synthetic_data_and_compares_numbers(tmp_path):
  fake_run(str(tmp_path / "embedded"), {"norm": "ln", "batch_size": 128}, EMBEDDED,
           [{"test/error": 0.2, "train/nll": 0.4}])
  fake_run(str(tmp_path / "cifar"), {"experiment": "bln_cifar", "norm": "bln", "batch_size": 25},
           {"name": "cifar10", "source": "synthetic", "synthetic": True,
            "num_examples": {"train": 45000, "validation": 5000}},
           [{"test/error": 0.6, "test/nll": 1.7}, {"test/error": 0.5, "test/nll": 1.6}])
  rows = report.collect([str(tmp_path)]).rows
  embedded = [r for r in rows if r.experiment == "perm_mnist"]
  assert all("PARTIAL (8% of mnist)" in r.data for r in embedded)
  cifar = {r.metric: r for r in rows if r.experiment == "bln_cifar"}
  assert "SYNTHETIC" in cifar["test/nll"].data
  assert cifar["test/accuracy"].paper == "0.455" and cifar["test/accuracy"].measured == "0.5"
  assert cifar["test/nll"].paper == "1.531" and cifar["test/nll"].best == "1.6"
  assert cifar["test/nll"].epochs == "2 (paper: 15)"
  assert "BLN" in cifar["test/nll"].source


def test_published_results_have_sources():
  assert len({p.source for p in results.PUBLISHED}) >= 4
  draw = {p.setting["norm"]: p.value for p in results.PUBLISHED if p.experiment == "draw"}
  assert draw == {"none": 82.36, "ln_cell": 82.09, "wn": None}
  assert results.metric_value({"test/error": 0.25}, "test/accuracy") == pytest.approx(0.75)


def test_invariance_command(capsys):
  """`lnorm invariance` (issue 6, item 4) prints LN paper Table 1 as measured."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  module = cli.COMMANDS.get("invariance", ("lnorm.evaluation.invariance",))[0]
  if importlib.util.find_spec(module) is None:
    pytest.skip(f"{module} does not exist yet")
  assert cli.main(["invariance"]) == 0
  assert "Matches LN paper Table 1 and the RMSNorm paper's rows." in capsys.readouterr().out


def test_a_subset_protocol_is_named_by_its_fraction(tmp_path):
  # BLN's protocol: 20% of the 45,000 images left after holding out 5,000, i.e. 9,000
  # train + 5,000 validation = 28% of CIFAR-10's 50,000, which is not what was asked.
  fake_run(str(tmp_path / "cifar"), {"experiment": "bln_cifar", "norm": "bln", "batch_size": 25,
                                     "data.subset_fraction": 0.2},
           {"name": "cifar10", "source": "files", "num_examples": {"train": 9000,
                                                                   "validation": 5000}},
           [{"test/error": 0.6, "test/nll": 1.7}])
  (row, *_) = report.collect([str(tmp_path)]).rows
  assert row.data == "cifar10 (files), 9000 train; PARTIAL (20% training subset)"
