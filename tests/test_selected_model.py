"""``select_on``: the loop keeps the model of the evaluation where a validation metric is
best and, after the last update, evaluates the run's other splits on it
(``lnorm.training.selected_model``); the report reads that test value as the test at
the selected evaluation (``lnorm.analysis.claims.selected_test``)."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from lnorm import cli
from lnorm.analysis import claims
from lnorm.analysis import runs as runs_lib
from lnorm.analysis import selection
from lnorm.analysis.runs import Run
from lnorm.training.selected_model import SelectedModel

# 4,000 digits at batch 8, a run of 300 updates inside the first epoch, validation
# every 70 updates (70, 140, 210, 280 and the last record at 300: five evaluations,
# a count that does not divide the run).
SMOKE = ["--config", "configs/perm_mnist.py:norm=bn,batch_size=8,smoke=true",
         "--config.progress_bar=false", "--config.hidden_sizes=16",
         "--config.eval_batch_size=300", "--config.steps_per_call=10",
         "--config.eval_every_steps=70", "--config.max_steps=300",
         "--config.optimizer.learning_rate=0.03"]
VALIDATION_ONLY = ["--config.eval_splits=('validation',)",
                   "--config.eval_every_splits=('validation',)",
                   "--config.final_eval_splits=('test',)"]


def _train(workdir, *extra):
  return cli.main(["train", *SMOKE, "--workdir", workdir, *extra])


def _records(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f if line.strip()]


@pytest.mark.slow
def test_selected_test_equals_test_evaluated_at_the_selected_evaluation(tmp_path):
  """The run that evaluates test only at its end reports, for the evaluation with the
  lowest validation error, the test values a run evaluating test at every evaluation
  measured there: the same model, not the last one."""
  selecting, every = str(tmp_path / "selecting"), str(tmp_path / "every")
  assert _train(selecting, *VALIDATION_ONLY,
                "--config.select_on=validation/error") == 0
  assert _train(every, "--config.eval_splits=('validation','test')",
                "--config.eval_every_splits=('validation','test')") == 0
  kept, measured = _records(selecting), _records(every)
  evaluations = [r for r in kept if "validation/error" in r]
  assert [r["step"] for r in evaluations] == [70, 140, 210, 280, 300]
  errors = [r["validation/error"] for r in evaluations]
  first_best = evaluations[errors.index(min(errors))]["step"]
  last = kept[-1]
  assert last["step"] == 300 and last["selected/step"] == first_best
  # The test claim of this check needs a selection other than the last model.
  assert first_best != 300, "the smoke run's best is its last evaluation: lengthen it"
  at_best = next(r for r in measured if r["step"] == first_best)
  assert at_best["validation/error"] == min(errors)  # The same trajectory.
  assert last["selected/test/error"] == at_best["test/error"]
  assert last["selected/test/nll"] == pytest.approx(at_best["test/nll"], rel=1e-6)
  # The last model's test is kept beside it (the BLN protocol reads it).
  assert last["test/error"] == measured[-1]["test/error"]
  assert last["selected/test/error"] != last["test/error"]
  # Only the other splits are evaluated on the kept model: its validation is logged.
  assert not [k for k in last if k.startswith("selected/validation/")]
  assert os.path.exists(os.path.join(selecting, "selected", "variables.msgpack"))
  # A run stopped at the best evaluation and resumed past it keeps that model: the
  # store outlives the process, and the evaluation after the resume is worse.
  resumed = str(tmp_path / "resumed")
  select = ["--config.select_on=validation/error"]
  assert _train(resumed, *VALIDATION_ONLY, *select, f"--config.max_steps={first_best}") == 0
  assert _train(resumed, *VALIDATION_ONLY, *select) == 0
  again = _records(resumed)[-1]
  assert again["step"] == 300 and again["selected/step"] == first_best
  assert again["selected/test/error"] == last["selected/test/error"]


@pytest.mark.parametrize("value, missing", [
    ("validation", "'<split>/<metric>'"),
    ("test/error", "eval_splits or eval_every_splits: validation)"),
])
def test_a_select_on_no_evaluation_measures_is_refused(tmp_path, capsys, value, missing):
  workdir = str(tmp_path / "w")
  assert _train(workdir, *VALIDATION_ONLY, f"--config.select_on={value}") == 2
  err = capsys.readouterr().err
  assert f"select_on={value!r}" in err and missing in err and "Traceback" not in err
  assert not os.path.exists(workdir)  # Refused before the workdir or the data.


class _State:
  """The two fields SelectedModel reads and replaces, as flax's TrainState has them."""

  def __init__(self, value):
    self.params = {"w": np.full((3,), value, np.float32)}
    self.batch_stats = {"mean": np.full((2,), -value, np.float32)}

  def replace(self, params, batch_stats):
    new = _State(0.0)
    new.params, new.batch_stats = params, batch_stats
    return new


def test_lowest_error_or_highest_recall_kept_first_of_ties_and_nan_ignored(tmp_path):
  error = SelectedModel("validation/error", str(tmp_path / "error"))
  for step, value in [(1, 0.5), (2, 0.3), (3, float("nan")), (4, 0.3), (5, 0.4)]:
    error.offer(step, {"validation/error": value}, _State(step))
  error.offer(6, {"validation/nll": 0.0}, _State(6))  # Not the selection's metric.
  seen = []
  scores = error.evaluate(_State(9), lambda s, splits: seen.append(splits) or
                          {"test/error": float(s.params["w"][0]),
                           "test/mean": float(s.batch_stats["mean"][0])}, ["test"])
  assert scores == {"selected/step": 2, "selected/test/error": 2.0,
                    "selected/test/mean": -2.0}
  assert seen == [("test",)]
  rsum = SelectedModel("validation/rsum", str(tmp_path / "rsum"))
  for step, value in [(1, 50.0), (2, 80.0), (3, 70.0)]:
    rsum.offer(step, {"validation/rsum": value}, _State(step))
  assert rsum.evaluate(_State(0), lambda s, _: {}, ["test"]) == {"selected/step": 2}
  nothing = SelectedModel("validation/error", str(tmp_path / "none"))
  nothing.offer(1, {"validation/error": math.inf}, _State(1))
  assert nothing.evaluate(_State(0), lambda s, _: {"x": 1}, ["test"]) == {}


def _run(points, select_on="validation/error"):
  config = {"select_on": select_on} if select_on else {}
  return Run(path="", name="r", config=config, data={}, epochs=[], points=points)


POINTS = [{"step": 10, "validation/error": 0.30, "validation/nll": 0.9},
          {"step": 20, "validation/error": 0.20, "validation/nll": 0.8},
          {"step": 30, "validation/error": 0.20, "validation/nll": 0.7},  # A tie.
          {"step": 40, "validation/error": 0.25, "validation/nll": 0.6, "test/nll": 0.65,
           "selected/step": 20, "selected/test/error": 0.22}]


def test_the_report_reads_the_model_kept_from_the_first_best_evaluation():
  assert claims.selected_test(_run(POINTS), "validation/error", True) == 0.22
  # The model of step 20 whatever chose it; another metric's best (step 40, the last
  # model) reads the last model's test.
  assert claims.selected_test(_run(POINTS, ""), "validation/error", True) == 0.22
  assert claims.selected_test(_run(POINTS), "validation/nll", True) == 0.65
  moved = [dict(p) for p in POINTS]
  moved[-1]["selected/step"] = 30  # Not the first of the tie: not this evaluation.
  assert claims.selected_test(_run(moved), "validation/error", True) is None
  # Test evaluated at the best evaluation itself wins (the run measured it there).
  measured = [dict(p) for p in POINTS]
  measured[1]["test/error"] = 0.21
  assert claims.selected_test(_run(measured), "validation/error", True) == 0.21


# Order-embeddings' records: the task keeps its own best model and names its step
# (best/step) in the last record, beside the test scores of that model.
KEPT = [{"step": 40, "validation/rsum": 100.0, "best/step": 40},
        {"step": 80, "validation/rsum": 110.0, "best/step": 80},
        {"step": 120, "validation/rsum": 105.0, "best/step": 80, "test/rsum": 97.0}]


def test_a_tasks_test_scores_belong_to_the_model_it_kept_not_to_its_last_step():
  run = _run(KEPT, "")
  assert run.test_at(80) == {"test/rsum": 97.0}
  assert run.test_at(120) == {}  # The last model was never tested.
  assert claims.selected_test(run, "validation/rsum", False) == 97.0
  other = [dict(p) for p in KEPT]
  other[-1]["best/step"] = 40  # Kept by another rule: not the claim's selection.
  assert claims.selected_test(_run(other, ""), "validation/rsum", False) is None
  assert _run(other, "").test_at(40) == {"test/rsum": 97.0}


def test_lnorm_select_reports_the_kept_models_test(tmp_path):
  workdir = tmp_path / "run"
  workdir.mkdir()
  with open(workdir / "config.json", "w") as f:
    json.dump({"config": {"select_on": "validation/error", "num_epochs": 1}, "data": {}}, f)
  with open(workdir / "metrics.jsonl", "w") as f:
    f.writelines(json.dumps(p) + "\n" for p in POINTS)
  chosen = selection.select(runs_lib.load_runs([str(workdir)]),
                            "validation/error").best.scored[0]
  assert (chosen.step, chosen.best, chosen.test) == (20, 0.20, {"test/error": 0.22})


def test_the_test_column_says_how_many_seeds_have_a_selected_test_value():
  row = claims.Row("e", "", "ln", "validation/error", 10)
  assert claims.headline_cells([row])[0][-1] == "not evaluated there"
  row.test, row.tested = claims.mean_interval([0.25]), 1
  assert claims.headline_cells([row])[0][-1] == "0.25 (1 of 10 seeds)"
  row.test, row.tested = claims.mean_interval([0.25, 0.27, 0.26]), 3
  assert claims.headline_cells([row])[0][-1].endswith("] (3 of 10 seeds)")
  row.runs = 3
  assert claims.headline_cells([row])[0][-1] == claims.mean_interval(
      [0.25, 0.27, 0.26]).text(".4g")
  row.runs, row.tested, row.test = 1, 1, claims.mean_interval([0.25])
  assert claims.headline_cells([row])[0][-1] == "0.25 (1 seed)"
