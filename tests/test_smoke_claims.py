"""Smoke runs that a broken model cannot pass: LN and no norm must train to
different results, each well below chance error, with thresholds set from measured
runs of this exact setting (not from chance)."""

from __future__ import annotations

import pytest

from lnorm import cli
from tests.helpers import epoch_records

# One epoch of the 4,000 embedded digits at batch 32 (125 steps), hidden layers 32, 32.
ARGS = ["--config.progress_bar=false", "--config.batch_size=32", "--config.steps_per_call=25",
        "--config.eval_batch_size=500"]
# Measured test error (seed 0, CPU): none 0.138, ln 0.146; chance is 0.9. The
# thresholds leave a margin for other platforms' rounding; a model that learns
# markedly worse fails.
MAX_TEST_ERROR = {"none": 0.2, "ln": 0.2}


@pytest.mark.slow
def test_perm_mnist_ln_and_none_train_differently_and_well(tmp_path):
  records = {}
  for norm in ("none", "ln"):
    workdir = str(tmp_path / norm)
    assert cli.main(["train", "--config", f"configs/perm_mnist.py:norm={norm},smoke=true",
                     "--workdir", workdir, *ARGS]) == 0
    (records[norm],) = epoch_records(workdir)
  for norm, record in records.items():
    assert record["test/error"] < MAX_TEST_ERROR[norm], (norm, record["test/error"])
  # The same seed, data and dense initialisation: only the norm differs.
  assert abs(records["ln"]["train/nll"] - records["none"]["train/nll"]) > 1e-2
  assert abs(records["ln"]["test/nll"] - records["none"]["test/nll"]) > 1e-2
