"""The BLN claims under the BLN paper's protocol (lnorm.analysis.bln_protocol): BLN's
inference configuration selected on validation, judged on test against the others'
test value after their last epoch, on records and searches written here (no training,
no JAX)."""

from __future__ import annotations

import json
import os

import pytest

from lnorm.analysis import bln_protocol
from lnorm.analysis import claims
from lnorm.analysis import runs as runs_lib
from lnorm.training.defaults import DIVERGED_AT


def write_run(root, norm, seed, errors, search=None, batch_size=25):
  """A run with one validation and test error per epoch; ``search`` (the selected
  configuration, its validation and test accuracy) adds a bln_search.json."""
  path = os.path.join(root, f"batch_size={batch_size},norm={norm},seed={seed}")
  os.makedirs(path)
  config = {"experiment": "bln_toy", "norm": norm, "seed": seed, "batch_size": batch_size,
            "num_epochs": len(errors)}
  with open(os.path.join(path, "config.json"), "w") as f:
    json.dump({"config": config, "data": {}}, f)
  with open(os.path.join(path, "metrics.jsonl"), "w") as f:
    for i, e in enumerate(errors, 1):
      f.write(json.dumps({"step": 10 * i, "epoch": i, "validation/error": e,
                          "test/error": e + 0.01, "time/epoch_seconds": 1.0}) + "\n")
  if search is not None:
    inference, validation, test = search
    selected = {"inference": inference, "selected": True,
                "scores": {"validation": {"loss": 1.0, "accuracy": validation},
                           "test": {"loss": 1.1, "accuracy": test}}}
    with open(os.path.join(path, "bln_search.json"), "w") as f:
      json.dump({"norm": "bln", "selected": selected, "rows": [selected]}, f)
  return path


pytestmark = pytest.mark.quick

PROTOCOL = claims.Claim("p", "BLN ends better", "t", "bln", "bn", kind="final",
                        value="bln_protocol")


def value(path, metric="validation/error", lower=True):
  (run,) = runs_lib.load_runs([str(path)])
  return bln_protocol.protocol_value(run, metric, lower)


def test_bln_is_read_at_its_selected_configuration_on_test(tmp_path):
  path = write_run(tmp_path, "bln", 0, [0.9, 0.8, 0.7], search=("bbbb", 0.55, 0.54))
  assert value(path) == pytest.approx(0.46)  # 1 - test accuracy, not validation's 0.45.
  assert bln_protocol.selected(runs_lib.load_runs([str(path)])[0]) == "bbbb"


def test_the_others_are_read_after_their_last_epoch_on_test(tmp_path):
  path = write_run(tmp_path, "bn", 0, [0.40, 0.45, 0.50])
  assert value(path) == pytest.approx(0.51)  # The last test error, not the best.


def test_a_higher_is_better_metric_is_negated(tmp_path):
  path = write_run(tmp_path, "bln", 0, [0.9], search=("pbpb", 0.55, 0.54))
  assert value(path, "validation/accuracy", lower=False) == pytest.approx(-0.54)


def test_no_search_or_a_diverged_run_has_no_value(tmp_path):
  assert value(write_run(tmp_path / "a", "bln", 0, [0.9, 0.8])) is None
  path = write_run(tmp_path / "b", "bn", 0, [0.5])
  with open(os.path.join(path, "metrics.jsonl"), "a") as f:
    f.write(json.dumps({"step": 11, DIVERGED_AT: 11}) + "\n")
  assert value(path) is None


def test_the_claim_under_the_protocol_pairs_seeds_on_test(tmp_path):
  for s, last in enumerate((0.50, 0.51, 0.49)):
    write_run(tmp_path, "bn", s, [0.40, 0.45, last])  # BN's best, 0.40, does not count.
  for s, acc in enumerate((0.55, 0.56, 0.54)):
    write_run(tmp_path, "bln", s, [0.9, 0.8, 0.7], search=("bbbb", acc, acc - 0.01))
  runs = runs_lib.load_runs([str(tmp_path)])
  ev = claims.judge(runs, "bln_toy", PROTOCOL, "validation/error")
  # BLN's test errors 0.46, 0.45, 0.47 against BN's last 0.51, 0.52, 0.50: -0.05 each.
  assert ev.estimate.paired and ev.estimate.value == pytest.approx(-0.05)
  assert "difference of test values under the BLN paper's protocol" in ev.why
  (verdict,) = claims.decide([ev])
  assert verdict.verdict == claims.REPRODUCED


def test_other_batch_sizes_are_left_out(tmp_path):
  for s in range(3):
    write_run(tmp_path, "bn", s, [0.5], batch_size=1)
    write_run(tmp_path, "bln", s, [0.9], search=("bbbb", 0.6, 0.6), batch_size=1)
  runs = runs_lib.load_runs([str(tmp_path)])
  claim = claims.Claim("p", "x", "t", "bln", "bn", kind="final", value="bln_protocol",
                       where={"batch_size": "25"})
  assert claims.judge(runs, "bln_toy", claim, "validation/error").verdict == claims.NOT_RUN
