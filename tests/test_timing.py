"""Step-time claims from a dedicated timing (lnorm.analysis.timing): the statistic at
its thresholds, the stopping rule, the round-robin order, and a claim decided by its
timing record, not by the members' logged times. No training."""

from __future__ import annotations

import json
import math
import os

import pytest

from lnorm.analysis import claims
from lnorm.analysis import rule
from lnorm.analysis import runs as runs_lib
from lnorm.analysis import timing
from lnorm.sweeps import benchmark as bench
from lnorm.sweeps import benchmark_suite as suite
from lnorm.training import throughput


CLAIM = claims.Claim("rms_time", "RMSNorm takes less time per update than LN", "t",
                     "rms", "ln", kind="step_time", where={"placement": "pre"})


def test_the_median_of_timings_1_1_10_is_1():
  assert timing.summary([1.0, 1.0, 10.0]) == {"median": 1.0, "min": 1.0, "max": 10.0,
                                             "rounds": 3}


def rounds_with_effects(effects):
  """Baseline steps of 1 s and the other's of exp(effect) s, one per round."""
  return [1.0] * len(effects), [math.exp(e) for e in effects]


@pytest.mark.parametrize("negatives, excludes_zero", [(8, True), (7, False)])
def test_the_interval_and_the_sign_test_agree_at_the_threshold(negatives, excludes_zero):
  # 9 rounds: the interval is the 2nd to the 8th order statistic (P(B <= 1) = 10/512
  # <= 2.5% < P(B <= 2) = 46/512), so it lies below 0 with 8 negative rounds, not 7;
  # the sign test's p is 2 P(B <= 1) = 0.039 or 2 P(B <= 2) = 0.18.
  effects = [-0.01 * (i + 1) for i in range(negatives)] + [0.03] * (9 - negatives)
  r = timing.paired_ratio(*rounds_with_effects(effects))
  ordered = sorted(effects)
  assert (r.low, r.high) == (pytest.approx(ordered[1]), pytest.approx(ordered[7]))
  assert (r.high < 0) == excludes_zero
  assert (r.p < 1 - rule.CONFIDENCE) == excludes_zero
  assert r.p == pytest.approx(2 * (10 if excludes_zero else 46) / 512)


def test_an_outlier_round_moves_the_median_not_the_estimate():
  # A step of the other slowed 10x by another process: one round of nine.
  effects = [-0.05, -0.04, -0.06, -0.05, -0.05, -0.04, -0.06, -0.05, math.log(10)]
  r = timing.paired_ratio(*rounds_with_effects(effects))
  assert r.value == pytest.approx(-0.05)
  assert r.n == 9


def test_too_few_rounds_have_no_interval_and_six_have_the_whole_range():
  assert timing.paired_ratio(*rounds_with_effects([-0.1] * 5)) is None
  r = timing.paired_ratio(*rounds_with_effects([-0.3, -0.1, -0.2, 0.1, -0.4, -0.15]))
  assert (r.low, r.high) == (pytest.approx(-0.4), pytest.approx(0.1))


def test_rounds_must_pair():
  with pytest.raises(ValueError, match="3 and 2 rounds"):
    timing.paired_ratio([1.0, 1.0, 1.0], [1.0, 1.0])


def test_the_relative_half_width_is_of_the_ratio():
  r = timing.RatioEstimate(math.log(0.5), math.log(0.49), math.log(0.53), 40, 0.01)
  assert r.relative_half_width == pytest.approx(0.02 / 0.5)


def spread(rounds, width):
  """Baseline 1 s; the other 0.9 s times a spread of ±width over the rounds."""
  other = [0.9 * (1 + width * ((i % 7) - 3) / 3) for i in range(rounds)]
  return {"ln": [1.0] * rounds, "rms": other}


def test_the_stopping_rule(monkeypatch):
  monkeypatch.setattr(timing, "MIN_ROUNDS", 12)
  monkeypatch.setattr(timing, "CHECK_EVERY", 5)
  monkeypatch.setattr(timing, "MAX_ROUNDS", 40)
  narrow, wide = 0.015, 0.2  # Spreads whose intervals are within 2%, and not.
  assert timing.stop_reason(spread(11, narrow), "ln") is None  # Before MIN_ROUNDS.
  assert "within ±2%" in timing.stop_reason(spread(12, narrow), "ln")
  assert timing.stop_reason(spread(13, narrow), "ln") is None  # Not a check round.
  assert "within ±2%" in timing.stop_reason(spread(17, narrow), "ln")
  assert timing.stop_reason(spread(37, wide), "ln") is None
  assert timing.stop_reason(spread(40, wide), "ln") == "the cap of 40 rounds"
  # Every ratio must be narrow, not just one.
  three = {**spread(17, narrow), "dyt": spread(17, wide)["rms"]}
  assert timing.stop_reason(three, "ln") is None


def test_rounds_interleave_each_starting_one_name_further():
  calls = []
  steps = {name: (lambda name=name: calls.append(name)) for name in "abc"}
  times = throughput.time_rounds(steps, rounds=4)
  assert calls == list("abc" "bca" "cab" "abc")
  assert all(len(t["wall"]) == len(t["cpu"]) == 4 for t in times.values())


def test_rounds_go_on_until_the_stop_says_so():
  seen = []

  def stop(cpu):
    seen.append({name: len(s) for name, s in cpu.items()})
    return "enough" if len(seen) == 3 else None

  times = throughput.time_rounds({"a": lambda: None, "b": lambda: None}, stop=stop)
  assert seen == [{"a": n, "b": n} for n in (1, 2, 3)]
  assert len(times["a"]["cpu"]) == 3
  with pytest.raises(ValueError, match="either rounds or stop"):
    throughput.time_rounds({"a": lambda: None}, rounds=2, stop=stop)


# --- a claim decided by its timing record ----------------------------------------------------

CONFIG = {"experiment": "toy", "placement": "pre", "model.width": 128, "max_steps": 1000}


def timing_record(folder, ln, rms, config=CONFIG, created="2026-12-01T00:00:00+00:00",
                  cores=(1,), threads="1"):
  report = {"experiment": "toy", "baseline": "ln", "shapes": {},
            "seconds": {"ln": {"cpu": ln, "wall": ln}, "rms": {"cpu": rms, "wall": rms}}}
  record = timing.make_record(report, {**config, "norm": "ln"}, stopped="the test",
                              command="lnorm flops ...", environment={
                                  "cpu_affinity": list(cores), "xla_cpu_threads": threads},
                              code={"commit": None})
  record["created"] = created
  path = os.path.join(str(folder), "toy", timing.TIMING_FOLDER,
                      f"{created[:10]}-{timing.record_name(['ln', 'rms'], config)}")
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f:
    json.dump(record, f)
  return path


def member(folder, norm, seed, seconds_per_update, **config):
  path = os.path.join(str(folder), "toy", f"norm={norm},seed={seed}")
  os.makedirs(path)
  with open(os.path.join(path, "config.json"), "w") as f:
    json.dump({"config": {**CONFIG, "norm": norm, "seed": seed, **config}}, f)
  with open(os.path.join(path, "metrics.jsonl"), "w") as f:
    for step in (500, 1000):
      f.write(json.dumps({"step": step, "epoch": step / 1000, "validation/error": 0.5,
                          "time/train_seconds": seconds_per_update * step,
                          **({"time/epoch_seconds": 1.0} if step == 1000 else {})}) + "\n")


def verdict_of(folder):
  folder = os.path.join(str(folder), "toy")
  has_members = any("metrics.jsonl" in files for _, _, files in os.walk(folder))
  runs = runs_lib.load_runs([folder]) if has_members else []
  assert claims.finished_runs(runs, "toy") == runs  # Every member counts.
  ev = claims.judge(runs, "toy", CLAIM, "validation/error", timing.load(folder))
  return ev, claims.decide([ev])[0]


FASTER = [0.8 + 0.001 * (i % 5) for i in range(40)]  # rms: 20% less, every round.


def test_the_timing_decides_and_the_members_logged_times_do_not(tmp_path):
  for s in range(3):  # The members' logs say RMSNorm is twice as slow.
    member(tmp_path, "ln", s, 0.1)
    member(tmp_path, "rms", s, 0.2)
  timing_record(tmp_path, [1.0] * 40, FASTER)
  ev, verdict = verdict_of(tmp_path)
  assert verdict.verdict == claims.REPRODUCED
  assert math.exp(ev.estimate.value) == pytest.approx(0.802)
  assert verdict.why.startswith(f"{timing.METRIC}: ratio 0.802 [0.801, 0.803], the "
                                "median of 40 round-robin rounds of timing/")
  assert "Holm" in verdict.why and not ev.notes


def test_without_a_timing_the_claim_is_not_run(tmp_path):
  member(tmp_path, "ln", 0, 0.1)
  member(tmp_path, "rms", 0, 0.05)
  ev, verdict = verdict_of(tmp_path)
  assert verdict.verdict == claims.NOT_RUN
  assert "no timing of rms against ln" in verdict.why
  assert "--compare-norms ln,rms --timing-record" in verdict.why


def test_a_timing_of_another_config_is_refused(tmp_path):
  path = timing_record(tmp_path, [1.0] * 40, FASTER)
  with open(path) as f:
    record = json.load(f)
  (loaded,) = timing.load(os.path.join(str(tmp_path), "toy"))
  drift = ["model.width: 128 -> 256", "a: 1 -> 2", "b: 1 -> 2", "c: 1 -> 2"]
  ev = claims.judge([], "toy", CLAIM, "validation/error", [{**loaded, "drift": drift}])
  assert ev.verdict == claims.NOT_TESTABLE
  assert ev.why == (f"the timing timing/{os.path.basename(path)} ran another config than "
                    "the members' command (model.width: 128 -> 256, a: 1 -> 2, b: 1 -> 2 "
                    "and 1 more): time it again")
  assert record["config"]["model.width"] == 128


def test_the_report_compares_a_timings_config_with_the_members_command(tmp_path):
  e = suite.BY_NAME["perm_mnist"]
  (b4,) = e.scales["cpu"].variants
  (plan,) = bench.plans([e], "cpu", str(tmp_path / "w"), ["none", "ln", "bn"], [0])
  now = bench.command_config(e, "cpu", b4, "ln", 0)
  folder = tmp_path / "records"
  report = {"experiment": "perm_mnist", "baseline": "ln", "shapes": {},
            "seconds": {"ln": {"cpu": [1.0], "wall": [1.0]},
                        "bn": {"cpu": [1.0], "wall": [1.0]}}}
  for name, config in (("same", now), ("wider", {**now, "hidden_sizes": [7]})):
    record = timing.make_record(report, config, stopped="", command="", environment={},
                                code={})
    path = folder / "perm_mnist" / timing.TIMING_FOLDER / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
  same, wider = bench._timings(plan, str(folder))  # pylint: disable=protected-access
  assert same["drift"] == []
  # As a stale record's: the timing's value, then the command's now.
  assert wider["drift"] == [f"hidden_sizes: [7] -> {now['hidden_sizes']}"]


def test_a_timing_of_another_setting_does_not_count(tmp_path):
  timing_record(tmp_path, [1.0] * 40, FASTER, config={**CONFIG, "placement": "post"})
  _, verdict = verdict_of(tmp_path)
  assert verdict.verdict == claims.NOT_RUN


def test_the_newest_timing_decides(tmp_path):
  timing_record(tmp_path, [1.0] * 40, FASTER, created="2026-12-01T00:00:00+00:00")
  timing_record(tmp_path, [1.0] * 40, [1.0 + 0.001 * (i % 5) for i in range(40)],
                created="2026-12-02T00:00:00+00:00")
  ev, _ = verdict_of(tmp_path)
  assert math.exp(ev.estimate.value) == pytest.approx(1.002)


def test_a_wide_timing_is_inconclusive_and_says_to_time_more_rounds(tmp_path):
  wide = [0.6, 1.5, 0.7, 1.4, 0.8, 1.3, 0.9, 1.2] * 3
  timing_record(tmp_path, [1.0] * 24, wide)
  _, verdict = verdict_of(tmp_path)
  assert verdict.verdict == claims.INCONCLUSIVE
  assert timing.TOO_WIDE in verdict.why


def test_a_timing_not_pinned_to_one_core_says_so(tmp_path):
  timing_record(tmp_path, [1.0] * 40, FASTER, cores=(0, 1), threads="2")
  ev, verdict = verdict_of(tmp_path)
  assert ev.notes == ["the timing ran on 2 cores, not one pinned core",
                      "the timing ran with 2 XLA:CPU threads, not one"]
  assert "not one pinned core" in verdict.why


def test_an_unreadable_timing_record_is_one_line(tmp_path):
  folder = tmp_path / "toy" / timing.TIMING_FOLDER
  folder.mkdir(parents=True)
  (folder / "x.json").write_text("{not json")
  with pytest.raises(timing.UserError, match=r"x.json is not a readable timing record"):
    timing.load(str(tmp_path / "toy"))
