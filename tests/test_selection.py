"""Selection on validation (``lnorm.analysis.selection``, ``lnorm report --select``) on
constructed logs, with hand-computed answers: the selected setting is the one whose
seeds' best validation values have the best mean, and its test metrics are read where
each seed was selected, even when another setting or another epoch has a better
test value."""

from __future__ import annotations

import json
import math
import os
import re

import pytest

from lnorm import cli
from lnorm.analysis import runs as runs_lib
from lnorm.analysis import selection
from lnorm.sweeps import runner as sweep_lib
from lnorm.errors import UserError


def _write_run(workdir, config, points):
  """A run directory as `lnorm train` leaves it: config.json and metrics.jsonl."""
  os.makedirs(workdir, exist_ok=True)
  with open(os.path.join(workdir, "config.json"), "w") as f:
    json.dump({"config": config, "data": {}}, f)
  with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
    for p in points:
      f.write(json.dumps({k: (str(v) if isinstance(v, float) and math.isnan(v) else v)
                          for k, v in p.items()}) + "\n")


def _epochs(validation, test, steps_per_epoch=10, extra=None):
  return [{"step": (e + 1) * steps_per_epoch, "epoch": e + 1, "time/epoch_seconds": 1.0,
           "train/loss": 1.0 / (e + 1), "validation/error": v, "test/error": t,
           "test/nll": 10 * t, **(extra or {})}
          for e, (v, t) in enumerate(zip(validation, test))]


#: (learning rate, seed) -> (validation errors, test errors) per epoch.
LOGS = {
    # Best validation 0.20 at epoch 2, where the test error is 0.21 (its best test
    # error, 0.05 at epoch 3, must not be reported).
    (1e-3, 0): ([0.30, 0.20, 0.25], [0.31, 0.21, 0.05]),
    (1e-3, 1): ([0.28, 0.24, 0.22], [0.29, 0.25, 0.23]),  # 0.22 at epoch 3 -> 0.23.
    # The lowest test error of all (0.01), but a worse mean validation: 0.235.
    (1e-2, 0): ([0.26, 0.23, 0.27], [0.01, 0.02, 0.03]),
    (1e-2, 1): ([0.25, 0.24, float("nan")], [0.02, 0.02, 0.02]),  # NaN is skipped.
}


@pytest.fixture
def sweep_dir(tmp_path):
  root = tmp_path / "lr_sweep"
  for (lr, seed), (val, test) in LOGS.items():
    config = {"experiment": "perm_mnist", "norm": "ln", "num_epochs": 3, "seed": seed,
              "data.seed": 0, "optimizer.learning_rate": lr, "wandb.name": f"lr{lr}-s{seed}"}
    _write_run(str(root / f"optimizer.learning_rate={lr},seed={seed}"), config,
               _epochs(val, test))
  # A member that diverged before it was evaluated: no validation value.
  _write_run(str(root / "optimizer.learning_rate=0.1,seed=0"),
             {"experiment": "perm_mnist", "norm": "ln", "num_epochs": 3, "seed": 0,
              "optimizer.learning_rate": 0.1},
             [{"step": 3, "epoch": 0.3, "train/loss": 9.0}])
  return str(root)


def test_selects_on_mean_best_validation_and_reports_test_where_selected(sweep_dir):
  sel = selection.select(runs_lib.load_runs([sweep_dir]), "validation/error")
  assert sel.lower_is_better
  by_name = {s.name: s for s in sel.settings}
  assert set(by_name) == {"optimizer.learning_rate=0.001", "optimizer.learning_rate=0.01",
                          "optimizer.learning_rate=0.1"}
  assert by_name["optimizer.learning_rate=0.001"].mean == pytest.approx(0.21)
  assert by_name["optimizer.learning_rate=0.001"].std == pytest.approx(0.02 / math.sqrt(2))
  assert by_name["optimizer.learning_rate=0.01"].mean == pytest.approx(0.235)
  best = sel.best
  assert best.name == "optimizer.learning_rate=0.001"
  # Each seed at its own best-validation epoch, and its test metrics there.
  assert [(c.label, c.epoch, c.step, c.best) for c in best.scored] == [
      ("seed=0", 2, 20, 0.20), ("seed=1", 3, 30, 0.22)]
  assert [c.test for c in best.scored] == [
      {"test/error": 0.21, "test/nll": pytest.approx(2.1)},
      {"test/error": 0.23, "test/nll": pytest.approx(2.3)}]
  mean, std, n = best.test_stat("test/error")
  assert (mean, n) == (pytest.approx(0.22), 2) and std == pytest.approx(0.02 / math.sqrt(2))
  # The run without a validation value is named, not counted.
  assert [c.run.name for c in sel.without] == ["optimizer.learning_rate=0.1,seed=0"]

  text = sel.text()
  assert "optimizer.learning_rate=0.001 (selected)" in text
  assert "0.22 ± 0.014" in text  # The test error at the selected epochs.
  selected_part = text[text.index("Selected:"):text.index("No validation/error")]
  numbers = {float(x) for x in re.findall(r"\d+\.\d+", selected_part)}
  assert {0.21, 0.23, 0.22} <= numbers
  assert not {0.05, 0.01, 0.02} & numbers  # Never the best test values.
  assert "No validation/error logged (not counted): optimizer.learning_rate=0.1,seed=0" in text
  assert "Not finished" in text  # The diverged run stopped at epoch 0.3 of 3.


def test_a_higher_is_better_metric_selects_the_maximum(tmp_path):
  for lr, acc in ((1e-3, [0.7, 0.9, 0.8]), (1e-2, [0.85, 0.86, 0.87])):
    points = _epochs([1 - a for a in acc], [0.5, 0.4, 0.3],
                     extra=None)
    for p, a in zip(points, acc):
      p["validation/accuracy"] = a
    _write_run(str(tmp_path / f"lr={lr}"), {"optimizer.learning_rate": lr, "num_epochs": 3},
               points)
  sel = selection.select(runs_lib.load_runs([str(tmp_path)]), "validation/accuracy")
  assert not sel.lower_is_better
  assert sel.best.name == "optimizer.learning_rate=0.001"
  assert sel.best.scored[0].epoch == 2 and sel.best.scored[0].test["test/error"] == 0.4


def test_a_mid_epoch_evaluation_can_be_the_selected_point(tmp_path):
  points = _epochs([0.30, 0.25], [0.3, 0.2])
  # A mid-epoch evaluation (eval_every_steps) better than both epoch ends.
  points.insert(1, {"step": 15, "epoch": 1.5, "validation/error": 0.10, "test/error": 0.12})
  _write_run(str(tmp_path / "run"), {"num_epochs": 2}, points)
  sel = selection.select(runs_lib.load_runs([str(tmp_path / "run")]), "validation/error")
  chosen = sel.best.scored[0]
  assert (chosen.step, chosen.epoch, chosen.test) == (15, 1.5, {"test/error": 0.12})


def test_a_kept_best_model_is_the_selected_point(tmp_path):
  """order-embeddings keeps the parameters with the best selection score in best/ and
  logs the test scores of those parameters at the end, naming their step."""
  workdir = tmp_path / "oe"
  points = [
      {"step": 300, "epoch": 0.5, "validation/rsum": 120.0, "validation/image_r1": 10.0,
       "best/step": 300, "best/selection_rsum": 120.0},
      {"step": 600, "epoch": 1, "time/epoch_seconds": 1.0, "validation/rsum": 110.0,
       "validation/image_r1": 12.0, "best/step": 300, "best/selection_rsum": 120.0, "test/rsum": 95.0,
       "test/caption_r1": 30.0},
  ]
  _write_run(str(workdir), {"num_epochs": 1}, points)
  sel = selection.select(runs_lib.load_runs([str(workdir)]), "validation/rsum")
  chosen = sel.best.scored[0]
  assert not sel.lower_is_better
  assert (chosen.step, chosen.best) == (300, 120.0)
  assert chosen.test == {"test/rsum": 95.0, "test/caption_r1": 30.0}
  # Selected where the run did not keep its model: no test value, not the kept one's.
  sel = selection.select(runs_lib.load_runs([str(workdir)]), "validation/image_r1")
  assert (sel.best.scored[0].step, sel.best.scored[0].test) == (600, {})


def test_a_metric_no_run_logged_is_an_error(sweep_dir):
  with pytest.raises(UserError, match="No run logged validation/loss.*validation/error"):
    selection.select(runs_lib.load_runs([sweep_dir]), "validation/loss")


def test_sweep_members_are_grouped_by_their_overrides_and_unstarted_ones_named(sweep_dir):
  members = sweep_lib.make_members(
      [{"optimizer.learning_rate": str(lr), "seed": str(s)} for lr, s in LOGS]
      + [{"optimizer.learning_rate": "0.3", "seed": "0"}], sweep_dir)
  sel = sweep_lib.select_members(members, "validation/error")
  assert sel.best.name == "optimizer.learning_rate=0.001"
  assert [c.run.name for c in sel.without] == ["optimizer.learning_rate=0.3,seed=0"]


def test_report_select_prints_the_same_selection(sweep_dir, tmp_path, capsys):
  out = tmp_path / "selection.md"
  assert cli.main(["report", sweep_dir, "--select", "validation/error", "--out", str(out)]) == 0
  text = capsys.readouterr().out
  assert text == out.read_text()
  assert "## Selection on validation/error" in text
  assert "| optimizer.learning_rate=0.001 (selected) | 2 | 0.21 ± 0.014 |" in text
  assert "| seed=0 | epoch 2, step 20 | 0.2 | 0.21 | 2.1 |" in text
  assert cli.main(["report", sweep_dir, "--select", "validation/bleu"]) == 2
  assert "No run logged validation/bleu" in capsys.readouterr().err



def test_a_tie_between_two_steps_selects_the_first_and_its_test_value(tmp_path):
  run = tmp_path / "tie"
  run.mkdir()
  (run / "config.json").write_text(json.dumps({"config": {"experiment": "x", "seed": 0},
                                               "data": {}}))
  (run / "metrics.jsonl").write_text("".join(json.dumps(p) + "\n" for p in [
      {"step": 10, "validation/error": 0.3, "test/error": 0.35},
      {"step": 20, "validation/error": 0.2, "test/error": 0.25},
      {"step": 30, "validation/error": 0.2, "test/error": 0.15},  # Tied: not chosen.
      {"step": 40, "validation/error": float("nan"), "test/error": 0.1}]))
  from lnorm.analysis.runs import load_runs  # pylint: disable=g-import-not-at-top
  (setting,) = selection.select(load_runs([str(tmp_path)]), "validation/error").settings
  (choice,) = setting.runs
  assert (choice.best, choice.step, choice.test) == (0.2, 20, {"test/error": 0.25})
