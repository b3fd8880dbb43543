"""The GPU check's parts that make its timings honest (issue 59), without JAX work:
compile everything, then time one item at a time (lnorm.gpucheck.turns); every timing
with its fastest and slowest repeat, flagged when uneven; the timed batches' lengths
drawn as the real data's longest bucket has them; the rerun compared value by value."""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import pytest

from lnorm.analysis import gpu_report
from lnorm.analysis.specs import TimedLengths
from lnorm.gpucheck import fig6, lengths, records, timing, turns

# --- compile all, then time in turn ---------------------------------------------------

#: A worker as ``python -m lnorm.gpucheck step`` is one, without JAX: it "compiles" for
#: argv[1] seconds (exit code argv[2] instead when not 0), then serves its turn.
_WORKER = """
import sys, time
from lnorm.gpucheck import turns
seconds, code = float(sys.argv[1]), int(sys.argv[2])
args = dict(zip(sys.argv[3::2], sys.argv[4::2]))
def prepare():
  time.sleep(seconds)
  if code:
    print("could not compile"); sys.exit(code)
  return {"compile_s": seconds}, lambda: {"timed": time.sleep(0.2) is None}
sys.exit(turns.serve(prepare, args["--json"], args["--ready"]))
"""


def _job(name: str, seconds: float, code: int = 0) -> turns.Job:
  return turns.Job(name, {"item": name},
                   (sys.executable, "-c", _WORKER, str(seconds), str(code)))


def test_every_item_compiles_before_any_times_and_they_time_one_at_a_time(tmp_path):
  record = records.PhaseRecord(str(tmp_path), "experiments", toy=True, settings={})
  # Three items, two compiling at once, the slowest to compile first in order; one
  # fails while compiling.
  jobs = [_job("a", 1.0), _job("b", 0.1), _job("bad", 0.1, code=3), _job("c", 0.3)]
  turns.run(record, jobs, work=str(tmp_path / "work"), deadline=time.monotonic() + 60,
            compilers=2, timing_s=1.0)
  items = record.data["items"]
  (failed,) = [i for i in items if "error" in i]
  assert failed["item"] == "bad"
  assert failed["error"].startswith("exit code 3 while compiling: could not compile")
  timed = [i for i in items if "error" not in i]
  assert [i["item"] for i in timed] == ["a", "b", "c"]  # The jobs' order.
  last_compiled = max(i["compiled_at"] for i in timed)
  assert all(i["timing_started_at"] >= last_compiled for i in timed)
  for before, after in zip(timed, timed[1:]):  # No two timings overlap.
    assert after["timing_started_at"] >= before["timing_finished_at"]


def test_what_the_time_limit_leaves_out_is_recorded(tmp_path):
  record = records.PhaseRecord(str(tmp_path), "experiments", toy=True, settings={})
  # 2.5 s left, 1 s of timing a job: "a" starts (2 s left for two), "b" would leave
  # less than its timing and never starts; "a" compiles too slowly and is stopped.
  turns.run(record, [_job("a", 30.0), _job("b", 0.1)], work=str(tmp_path / "work"),
            deadline=time.monotonic() + 2.5, compilers=1, timing_s=1.0)
  assert [(i["item"], i["error"].split(":")[0]) for i in record.data["items"]] == [
      ("a", "stopped while compiling"), ("b", "not run")]


def test_a_compiled_item_without_time_to_time_exits_untimed(tmp_path):
  record = records.PhaseRecord(str(tmp_path), "experiments", toy=True, settings={})
  workers = turns.compile_all(record, [_job("a", 0.1)], work=str(tmp_path / "work"),
                              deadline=time.monotonic() + 30, compilers=1, timing_s=1.0)
  turns.time_in_turn(record, workers, deadline=time.monotonic() - 1)
  assert record.data["items"] == [{"item": "a", "error": "compiled, not timed: the "
                                   "phase's time limit came first"}]
  assert workers[0].process.returncode == 0
  assert not (tmp_path / "work" / "a.json").exists()


# --- timing -----------------------------------------------------------------------------


@pytest.mark.parametrize("slowest, uneven", [(1.5, False), (1.5001, True)])
def test_a_timing_is_uneven_past_one_and_a_half_times_its_fastest(slowest, uneven):
  record = timing.Timing(median_s=1.2, min_s=1.0, max_s=slowest, repeats=7).record()
  assert record["uneven"] is uneven and record["spread"] == slowest
  assert gpu_report.spread(record).endswith("**uneven**)" if uneven else f"({slowest:.2f}×)")


def test_a_timing_budget_stops_after_the_fewest_repeats():
  calls = []
  slow = lambda: calls.append(time.sleep(0.01))
  t = timing.time_repeats(slow, repeats=50, warmup=2, sync=lambda _: None, budget_s=0.001)
  assert t.repeats == timing.MIN_REPEATS and len(calls) == timing.MIN_REPEATS + 2
  assert timing.time_repeats(slow, repeats=3, warmup=0, sync=lambda _: None,
                             budget_s=0.001).repeats == 3


def test_the_report_gives_a_calls_spread_per_update():
  assert gpu_report.spread({"min_s": 0.004, "max_s": 0.012}, per=2) == (
      "2 ms – 6 ms (3.00×, **uneven**)")
  assert gpu_report.spread({}) == "—"


# --- lengths as the real data's have them ----------------------------------------------

PASSAGE = TimedLengths("passage", "passage_length", (9, 79, 93, 104, 115, 126, 141, 159,
                                                     186, 235, 398), padded=400, source="t")


def test_lengths_are_drawn_from_the_longest_bucket():
  rng = np.random.default_rng(0)
  drawn = lengths.draw(PASSAGE, (3, 1000), buckets=4, rng=rng)
  assert drawn.shape == (3, 1000) and drawn.dtype == np.int32
  # Levels 75% to 100%: between the 70% and 80% deciles' interpolation and the longest.
  assert drawn.min() >= round(159 + 0.5 * (186 - 159)) and drawn.max() <= 398
  one = lengths.draw(PASSAGE, (1000,), buckets=1, rng=rng)
  assert one.min() < 79 and one.max() > 235  # One bucket: the whole distribution.


def test_lengths_refuse_deciles_of_the_wrong_count():
  bad = TimedLengths("x", "x_length", (1, 2, 3), padded=5, source="t")
  with pytest.raises(ValueError, match=r"x: 3 deciles given, 11 needed"):
    lengths.draw(bad, (2,), buckets=1, rng=np.random.default_rng(0))


def test_the_timed_batch_is_padded_and_zero_past_each_length():
  rng = np.random.default_rng(1)
  k, b, t, width = 2, 3, 7, 5  # Data 7 steps long, padded to 400.
  batch = {"passage": rng.integers(1, 50, (k, b, t, width)).astype(np.int32),
           "passage_length": np.full((k, b), t, np.int32),
           "question": rng.integers(1, 50, (k, b, 4)).astype(np.int32)}
  out, drawn = lengths.apply(batch, [PASSAGE], buckets=4, rng=rng)
  assert out["passage"].shape == (k, b, 400, width)
  assert out["question"] is batch["question"]  # Not a timed feature: as it was.
  for i in range(k):
    for j in range(b):
      n = out["passage_length"][i, j]
      assert (out["passage"][i, j, n:] == 0).all() and (out["passage"][i, j, :n] > 0).all()
  assert drawn["passage"]["padded"] == 400 and drawn["passage"]["buckets"] == 4
  assert drawn["passage"]["shortest"] == out["passage_length"].min()
  # The rehearsal's toy data keep their width: 7 steps, the lengths within it.
  toy, drawn = lengths.apply(batch, [PASSAGE], buckets=4, rng=rng, keep_width=True)
  assert toy["passage"].shape == (k, b, t, width) and drawn["passage"]["padded"] == t
  assert 1 <= toy["passage_length"].min() and toy["passage_length"].max() <= t
  with pytest.raises(ValueError, match="the timed batch has no 'passage' or "
                     "'passage_length'"):
    lengths.apply({"question": batch["question"]}, [PASSAGE], 4, rng)


# --- the rerun --------------------------------------------------------------------------


def _points(*losses):
  return [{"step": i + 1, "train/loss": x, "time/epoch_seconds": 1.0 + i,
           "train/examples_per_sec": 100.0 + i} for i, x in enumerate(losses)]


def test_a_rerun_is_compared_value_by_value_but_for_the_clocks():
  same = fig6.compare_records(_points(1.0, float("nan")), _points(1.0, float("nan")))
  assert same["identical"] and same["values_compared"] == 2
  moved = fig6.compare_records(_points(1.0, 0.5, 0.25), _points(1.0, 0.5000001, 0.2))
  assert not moved["identical"] and moved["values_differing"] == 2
  assert moved["first_difference"] == {"point": 1, "step": 2, "key": "train/loss",
                                       "first": 0.5, "second": 0.5000001}
  assert moved["largest_relative_difference"] == pytest.approx(0.2)
  shorter = fig6.compare_records(_points(1.0, 0.5), _points(1.0))
  assert shorter["points"] == [2, 1] and shorter["values_differing"] == 1
  assert not fig6.compare_records([], [])["identical"]  # Nothing compared.


def test_the_report_says_whether_the_rerun_matched():
  same = {"norm": "ln", "seed": 0, **fig6.compare_records(_points(1.0), _points(1.0))}
  assert gpu_report._rerun(same) == (
      "Rerun of norm=ln, seed 0: identical, all 1 logged values (the clocks left out).")
  moved = {"norm": "ln", "seed": 0, **fig6.compare_records(_points(1.0), _points(2.0))}
  assert gpu_report._rerun(moved).startswith(
      "Rerun of norm=ln, seed 0: **differs** in 1 of 1 logged values, first at step 1 "
      "(train/loss: 1.0 against 2.0)")
  failed = {"norm": "ln", "seed": 0, "outcome": {"exit_code": 1}}
  assert gpu_report._rerun(failed) == "Rerun of norm=ln, seed 0: did not finish (exit code 1)."


def test_a_record_survives_a_json_round_trip():
  # The workers' results travel as JSON: the timing record holds only JSON values.
  record = timing.Timing(1.0, 0.5, 2.0, 3).record()
  assert json.loads(json.dumps(record)) == record
