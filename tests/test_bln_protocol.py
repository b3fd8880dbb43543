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


# --- test-batch statistics (rule version 3) -------------------------------------------------


def write_search(path, rows, batch_size=25):
  """A bln_search.json of ``rows``: (inference, validation loss, validation accuracy,
  test accuracy), the first selected (as the search would: lowest validation loss)."""
  full = [{"inference": inf, "selected": i == 0,
           "scores": {"validation": {"loss": loss, "accuracy": val},
                      "test": {"loss": loss + 0.1, "accuracy": test}}}
          for i, (inf, loss, val, test) in enumerate(rows)]
  with open(os.path.join(path, "bln_search.json"), "w") as f:
    json.dump({"norm": "bln", "batch_size": batch_size, "selected": full[0], "rows": full}, f)


SEARCH = [("bbbb", 1.0, 0.60, 0.59),  # Selected: statistics of the test batch.
          ("pppb", 1.2, 0.50, 0.52),  # The best of the four population ones on validation ...
          ("pppp", 1.3, 0.49, 0.55),  # ... not this one, the best on test.
          ("bppp", 1.1, 0.58, 0.58)]


def test_bln_restricted_to_population_batch_statistics_is_selected_on_validation(tmp_path):
  path = write_run(tmp_path, "bln", 0, [0.9, 0.8])
  write_search(path, SEARCH)
  assert value(path) == pytest.approx(0.41)
  (run,) = runs_lib.load_runs([str(path)])
  assert bln_protocol.population_value(run, "validation/error", True) == pytest.approx(0.48)
  assert [bln_protocol.uses_test_batch(r[0]) for r in SEARCH] == [True, False, False, True]
  assert bln_protocol.uses_test_batch("pbpp")  # Std_B from the batch is the batch's too.


def test_the_protocol_line_says_bln_uses_test_batch_statistics(tmp_path):
  for s, last in enumerate((0.50, 0.51, 0.49)):
    write_run(tmp_path, "bn", s, [0.40, 0.45, last])
    write_search(write_run(tmp_path, "bln", s, [0.9, 0.8, 0.7]),
                 SEARCH if s else [SEARCH[1], SEARCH[0]])  # Seed 0 selected pppb.
  runs = runs_lib.load_runs([str(tmp_path)])
  ev = claims.judge(runs, "bln_toy", PROTOCOL, "validation/error")
  (verdict,) = claims.decide([ev])
  assert ("BLN is evaluated with the statistics of test batches of 25 (E_B or Std_B from "
          "the batch) in 2 of 3 seeds (bbbb 2)") in verdict.why
  # Under the protocol BLN's test errors are 0.48, 0.41, 0.41 against BN's 0.51, 0.52,
  # 0.50; restricted to population statistics 0.48 each: -0.03, -0.04, -0.02.
  assert ev.estimate.value == pytest.approx((-0.03 - 0.11 - 0.09) / 3)
  assert ("with BLN restricted to population batch statistics (pp..), -0.03 [-0.05484, "
          "-0.005159] (shown, not a verdict)") in verdict.why
  assert len(ev.hypotheses) == 2  # The restricted value is not tested.


def test_at_batch_size_one_the_batch_is_the_example(tmp_path):
  write_search(write_run(tmp_path, "bln", 0, [0.9], batch_size=1), SEARCH, batch_size=1)
  note = bln_protocol.statistics_note(runs_lib.load_runs([str(tmp_path)]))
  assert note == ("BLN is evaluated with mini-batch statistics of single test examples "
                  "(batch size 1: no other example's information) in 1 of 1 seeds (bbbb 1)")


def test_the_selection_here_is_the_searchs_on_every_committed_search():
  """bln_protocol.select (no JAX) picks what lnorm.evaluation.bln_search selected."""
  root = os.path.join(os.path.dirname(os.path.dirname(__file__)), "results", "cpu")
  searched = 0
  for experiment in ("bln_imdb", "bln_cifar"):
    for member in sorted(os.listdir(os.path.join(root, experiment))):
      path = os.path.join(root, experiment, member, "bln_search.json")
      if os.path.exists(path):
        with open(path) as f:
          search = json.load(f)
        assert bln_protocol.select(search["rows"])["inference"] == (
            search["selected"]["inference"]), path
        searched += 1
  assert searched >= 20
