"""The BLN experiments end to end through the CLI (batch sizes 1 and 25) and the
16-configuration inference search on a tiny trained model."""

from __future__ import annotations

import csv
import json
import math
import os

import jax
import numpy as np
import pytest

from lnorm.evaluation import bln_search
from lnorm import cli
from lnorm import config as config_lib
from lnorm.training import assembly, steps
from tests.helpers import epoch_records

CIFAR = "configs/bln_cifar.py:norm=bln,batch_size={bs},smoke=true"
IMDB = "configs/bln_imdb.py:norm=bln,batch_size={bs},smoke=true"
# 40 synthetic training images (40 steps at batch size 1), 10 validation, 10 test.
SMALL = ["--config.data.synthetic_size=40"]


def train(spec: str, workdir: str, *extra: str) -> None:
  assert cli.main(["train", "--config", spec, "--workdir", workdir, *SMALL, *extra]) == 0


@pytest.fixture(scope="module")
def bln_b1_run(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("bln") / "cifar_bln_b1")
  train(CIFAR.format(bs=1), workdir)
  return workdir


def _finite_epoch(workdir):
  [record] = epoch_records(workdir)
  assert all(math.isfinite(v) for v in record.values() if isinstance(v, float))
  return record


def test_cifar_smoke_batch_size_1(bln_b1_run):
  _finite_epoch(bln_b1_run)
  with open(os.path.join(bln_b1_run, "config.json")) as f:
    record = json.load(f)
  # The axis convention is part of the recorded config.
  assert record["config"]["norm_axes"] == "conventional"
  assert record["steps_per_epoch"] == 40
  # All 40 steps ran in one fused call, which measured the norms at its last step.
  assert _finite_epoch(bln_b1_run)["train/grad_norm"] > 0


def test_imdb_smoke_batch_size_25(tmp_path):
  # With the CIFAR run at batch size 1 above, both experiments and both batch sizes
  # go through the CLI; the IMDB model at batch size 1 is checked for NaNs in
  # test_bln_models.py without a training run, to keep this file fast.
  workdir = str(tmp_path / "run")
  train(IMDB.format(bs=25), workdir, "--config.num_epochs=2")
  first, last = epoch_records(workdir)
  # The large test set is evaluated after the last epoch only.
  assert "validation/error" in first and "test/error" not in first
  assert math.isfinite(last["test/error"]) and math.isfinite(last["validation/error"])


def test_search_rows_are_finite_and_the_selection_is_the_validation_optimum(
    bln_b1_run, capsys):
  assert cli.main(["bln-search", "--workdir", bln_b1_run]) == 0
  out = capsys.readouterr().out
  assert "selected on validation" in out
  with open(os.path.join(bln_b1_run, bln_search.CSV_FILE)) as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 16
  assert {r["inference"] for r in rows} == set(bln_search.bln_inference_configurations())
  numbers = [float(r[k]) for r in rows for k in r if k.endswith(("_loss", "_accuracy"))]
  assert all(math.isfinite(x) for x in numbers)  # No NaN at batch size 1.
  [selected] = [r for r in rows if r["selected"] == "1"]
  best = min(float(r["validation_loss"]) for r in rows)
  assert float(selected["validation_loss"]) == best
  with open(os.path.join(bln_b1_run, bln_search.JSON_FILE)) as f:
    assert json.load(f)["selected"]["inference"] == selected["inference"]
  # 'pppp' is the configuration the training loop evaluated with (population
  # statistics only, so the evaluation order does not matter).
  [pppp] = [r for r in rows if r["inference"] == "pppp"]
  [record] = epoch_records(bln_b1_run)
  assert float(pppp["validation_loss"]) == pytest.approx(record["validation/nll"], rel=1e-5)


def test_grouped_evaluation_equals_separate_batches(bln_b1_run):
  # Mini-batch statistics over batches of 3 (the last one of 1): one vmapped call
  # must give what evaluating each batch on its own gives.
  config = assembly.load_run_config(bln_b1_run)
  trained = config.norm_options.bln.inference
  mesh = bln_search.one_device_mesh()
  run = assembly.assemble(config, mesh=mesh)
  task, model = bln_search.model_for_inference(run, "bbbb")
  # The mode is an argument: the model is built from a copy of the run's config.
  assert run.config is config and config.norm_options.bln.inference == trained != "bbbb"
  state = bln_search.restore_state(run, bln_b1_run)
  arrays = run.dataset.splits["validation"]
  grouped = bln_search.evaluate_split(bln_search.GroupedEvaluator(task, model), state,
                                      arrays, 3, mesh, examples_per_call=6)
  # And the model it built normalizes with batches of 3, not as the run's own does.
  own = bln_search.evaluate_split(bln_search.GroupedEvaluator(run.task, run.model), state,
                                  arrays, 3, mesh, examples_per_call=6)
  assert abs(own["loss"] - grouped["loss"]) > 1e-4 * abs(own["loss"])
  step = jax.jit(steps.make_eval_step(task, model))
  total_nll = total_err = 0.0
  n = len(arrays["label"])
  for start in range(0, n, 3):
    batch = {k: v[start:start + 3] for k, v in arrays.items()}
    batch["mask"] = np.ones(len(batch["label"]), np.float32)
    sums, _ = step(state, batch)
    total_nll += float(sums["nll"])
    total_err += float(sums["error"])
  assert grouped["loss"] == pytest.approx(total_nll / n, rel=1e-5)
  assert grouped["accuracy"] == pytest.approx(1 - total_err / n, rel=1e-5)


def test_config_from_flat_round_trip():
  config = config_lib.load_config(IMDB.format(bs=1))
  flat = json.loads(json.dumps(config_lib.to_flat_dict(config)))
  rebuilt = assembly.config_from_flat(flat)
  # config.json is flat, so empty groups (norm_options.none) are not in it.
  assert config_lib.to_flat_dict(rebuilt) == config_lib.to_flat_dict(config)
  assert rebuilt.model.lstm_sizes == (8, 4)  # Tuples come back as tuples.


def test_search_of_a_missing_run_is_a_clear_error(tmp_path, capsys):
  assert cli.main(["bln-search", "--workdir", str(tmp_path)]) == 2
  assert "config.json" in capsys.readouterr().err


def test_the_default_inference_agrees_with_the_runs_own_evaluation_mid_epoch(tmp_path):
  # max_steps=7 stops inside the first epoch of 10 steps: the checkpoint holds the
  # epoch's sums, not yet population statistics. The search's default (pppp) must
  # score what the run's own last evaluation logged, not the untrained statistics.
  workdir = str(tmp_path / "run")
  train(CIFAR.format(bs=4), workdir, "--config.max_steps=7", "--config.steps_per_call=1",
        "--config.eval_splits=('validation',)")
  [record] = epoch_records(workdir)
  assert record["step"] == 7 and record["epoch"] == 0.7
  result = bln_search.search(workdir, configurations=["pppp"], splits=("validation",))
  scores = result.rows[0].scores["validation"]
  np.testing.assert_allclose(scores["loss"], record["validation/nll"], rtol=1e-5)
  np.testing.assert_allclose(1 - scores["accuracy"], record["validation/error"], atol=1e-6)
