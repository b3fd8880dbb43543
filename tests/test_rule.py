"""The verdict rule, version 3 (lnorm.analysis.rule, claims, speed, validity), on
metric logs written here whose answers are known: no training, no JAX.

Each test names the line of the rule it checks; together they cover what a reviewer
asks of the rule: a baseline judged against itself, a clear effect with the pilot's
seeds, pairing, censoring, the evaluation grid, the multiplicity adjustment, the
validity gate on both arms, the value a final claim reads, equivalence at the
margin. The statistics alone are tests/test_inference.py's; the seeds, the report
and records of other rules, tests/test_seed_plan.py's.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os

import numpy as np
import pytest
from scipy import stats

from lnorm.analysis import bln_protocol
from lnorm.analysis import claims
from lnorm.analysis import curves
from lnorm.analysis import inference
from lnorm.analysis import rule
from lnorm.analysis import runs as runs_lib
from lnorm.analysis import speed
from lnorm.analysis import validity
from lnorm.sweeps import benchmark as bench
from lnorm.sweeps import benchmark_suite as suite

pytestmark = pytest.mark.quick

STEPS = np.arange(10, 1010, 10)  # Evaluations every 10 updates for 1,000 updates.


def write_run(root, norm, seed, values, steps=STEPS, experiment="toy", trivial=None,
              **config):
  """A finished run of ``len(values)`` evaluations of validation/error at ``steps``,
  the last an epoch end, 0.1 s of training per update."""
  path = os.path.join(str(root), f"norm={norm},seed={seed}")
  os.makedirs(path)
  record = {"config": {"experiment": experiment, "norm": norm, "seed": seed,
                       "max_steps": int(steps[-1]), **config}, "data": {}}
  if trivial is not None:
    record["trivial"] = {"model": "majority class", "values": {"validation/error": trivial}}
  with open(os.path.join(path, "config.json"), "w") as f:
    json.dump(record, f)
  with open(os.path.join(path, "metrics.jsonl"), "w") as f:
    for i, (step, v) in enumerate(zip(steps, values)):
      point = {"step": int(step), "epoch": (i + 1) / len(values),
               "validation/error": float(v), "time/train_seconds": 0.1 * float(step)}
      if i == len(values) - 1:
        point["time/epoch_seconds"] = 1.0
      f.write(json.dumps(point) + "\n")
  return path


def perm_mnist_config(norm, seed, **changed):
  """The fields beside ``write_run``'s own of perm_mnist's config at batch 4 as its
  command runs it now, the suite's hash included, with ``changed``: a record of
  another config is stale (config drift)."""
  e = suite.BY_NAME["perm_mnist"]
  (b4,) = e.scales["cpu"].variants
  config = {**bench.command_config(e, "cpu", b4, norm, seed), **changed}
  return {k: v for k, v in config.items() if k not in ("experiment", "norm", "seed")}


def decay(scale, seed, steps=STEPS, noise=0.0, floor=0.1):
  """An error curve falling from 1 towards ``floor`` with time constant ``scale``."""
  rng = np.random.default_rng(seed)
  return floor + (1 - floor) * np.exp(-steps / scale) + noise * rng.standard_normal(len(steps))


def judge(root, claim, metric="validation/error"):
  runs = runs_lib.load_runs([str(root)])
  ev = claims.judge(runs, "toy", claim, metric)
  (verdict,) = claims.decide([ev])
  return ev, verdict


SPEED = claims.Claim("c", "faster", "test", "ln", "none")


# --- the speed statistic ---------------------------------------------------------------------


def test_a_baseline_judged_against_itself_is_no_difference(tmp_path):
  for s in range(5):
    write_run(tmp_path, "none", s, decay(200, s, noise=0.01))
  ev, verdict = judge(tmp_path, claims.Claim("c", "x", "t", "none", "none"))
  assert ev.estimate.value == 0 and ev.estimate.se == 0  # Every pair is the same run.
  assert verdict.verdict == claims.NO_DIFFERENCE
  # The interval is the evaluation grid's resolution, and it rules out a 10% saving.
  assert math.exp(ev.estimate.low) > 0.9 and ev.estimate.floor > 0


def test_a_copy_of_the_baseline_is_never_not_reproduced(tmp_path):
  """The old rule's target (the baseline's mean best) was reached by about half the
  baseline's own seeds, so an identical normalizer read "not reproduced"; the levels
  at quarters of the run are reached by both."""
  for s in range(10):
    write_run(tmp_path, "none", s, decay(200, s, noise=0.005))
    write_run(tmp_path, "ln", s, decay(200, 100 + s, noise=0.005))
  ev, verdict = judge(tmp_path, SPEED)
  assert verdict.verdict in (claims.NO_DIFFERENCE, claims.INCONCLUSIVE)
  assert verdict.verdict == claims.NO_DIFFERENCE  # Ten seeds of low noise decide it.
  assert 0.95 < math.exp(ev.estimate.value) < 1.05


def test_a_clear_twofold_effect_is_reproduced_with_three_seeds(tmp_path):
  for s in range(3):
    write_run(tmp_path, "none", s, decay(200, s, noise=0.003))
    write_run(tmp_path, "ln", s, decay(100, 10 + s, noise=0.003))
  ev, verdict = judge(tmp_path, SPEED)
  assert verdict.verdict == claims.REPRODUCED, verdict.why
  assert math.exp(ev.estimate.value) == pytest.approx(0.5, abs=0.05)
  assert ev.estimate.paired and ev.estimate.n == 3


def test_the_claimed_size_is_checked_not_only_the_direction(tmp_path):
  for s in range(5):
    write_run(tmp_path, "none", s, decay(200, s, noise=0.002))
    write_run(tmp_path, "ln", s, decay(160, 10 + s, noise=0.002))  # 0.8, not 0.5.
  sized = claims.Claim("c", "twice as fast", "t", "ln", "none", claimed_ratio=0.5)
  _, verdict = judge(tmp_path, sized)
  assert verdict.verdict == rule.REPRODUCED_NOT_SIZE
  assert "excludes the claimed 0.5" in verdict.why
  _, plain = judge(tmp_path, SPEED)
  assert plain.verdict == claims.REPRODUCED


def test_a_slower_normalizer_is_not_reproduced_the_other_way(tmp_path):
  for s in range(5):
    write_run(tmp_path, "none", s, decay(100, s, noise=0.002))
    write_run(tmp_path, "ln", s, decay(200, 10 + s, noise=0.002))
  _, verdict = judge(tmp_path, SPEED)
  assert verdict.verdict == claims.NOT_REPRODUCED and "other way" in verdict.why


def _seed_effect_curves(seed, scale):
  """A seed's data order makes every normalizer slow or fast by the same factor."""
  factor = [0.6, 1.0, 1.5, 0.8, 1.3, 0.7, 1.2][seed]
  return decay(scale * factor, 50 + seed, noise=0.001)


def test_paired_and_unpaired_differ_where_seeds_share_their_data_order(tmp_path):
  paired, unpaired = tmp_path / "paired", tmp_path / "unpaired"
  for s in range(7):
    write_run(paired, "none", s, _seed_effect_curves(s, 150))
    write_run(paired, "ln", s, _seed_effect_curves(s, 120))
    write_run(unpaired, "none", s, _seed_effect_curves(s, 150))
    # The same curves under other seed numbers: no normalizer seed has a partner.
    write_run(unpaired, "ln", 100 + s, _seed_effect_curves(s, 120))
  ep, _ = judge(paired, SPEED)
  eu, _ = judge(unpaired, SPEED)
  assert ep.estimate.paired and not eu.estimate.paired
  assert ep.estimate.value == pytest.approx(eu.estimate.value, abs=0.02)
  # The seed effect cancels within pairs: the paired interval is far narrower.
  assert ep.estimate.half_width < 0.5 * eu.estimate.half_width
  assert ep.estimate.high < 0 < eu.estimate.high


def test_the_standard_error_is_the_t_statistics_for_known_pair_effects(tmp_path):
  """Baseline seeds alike (the levels do not move between resamples) and normalizer
  seeds at known speeds: the bootstrap's standard error, scaled by sqrt(n / (n - 1)),
  is the usual standard error of the mean of the pairs' effects."""
  factors = [0.5, 0.6, 0.7, 0.55, 0.8]
  for s, f in enumerate(factors):
    write_run(tmp_path, "none", s, decay(200, 0))
    write_run(tmp_path, "ln", s, decay(200 * f, 0))
  ev, _ = judge(tmp_path, SPEED)
  effects = []
  for c in claims.side_runs(runs_lib.load_runs([str(tmp_path)]), {}, "norm", "ln"):
    x = curves.crossings(curves.curve(c, "validation/error", True), ev.speed.levels, 1e9)
    base = curves.crossings(curves.curve(
        claims.side_runs(runs_lib.load_runs([str(tmp_path)]), {}, "norm", "none")[0],
        "validation/error", True), ev.speed.levels, 1e9)
    effects.append(np.mean(np.log(x.steps / base.steps)))
  assert ev.estimate.value == pytest.approx(np.mean(effects))
  expected = np.std(effects, ddof=1) / math.sqrt(len(effects))
  assert ev.estimate.se == pytest.approx(expected, rel=0.03)


def test_a_censored_seed_moves_the_interval_towards_slower_and_is_kept(tmp_path):
  late, never = tmp_path / "late", tmp_path / "never"
  for root in (late, never):
    for s in range(4):
      write_run(root, "none", s, decay(200, s, noise=0.002))
      if s:
        write_run(root, "ln", s, decay(120, 10 + s, noise=0.002))
  # Seed 0 of ln reaches the last level only at its last evaluations, or never.
  slow = decay(200, 0, noise=0.002)
  write_run(late, "ln", 0, np.concatenate([slow[:-3], [slow[-1] - 0.01] * 3]))
  write_run(never, "ln", 0, np.maximum(slow, 0.5))
  e_late, _ = judge(late, SPEED)
  e_never, _ = judge(never, SPEED)
  assert e_never.speed.censored > 0 == e_late.speed.censored
  assert e_never.estimate.n == e_late.estimate.n == 4  # Not dropped.
  assert e_never.estimate.value > e_late.estimate.value
  assert e_never.estimate.high > e_late.estimate.high


def test_a_censored_crossing_is_placed_after_the_run():
  c = curves.Curve(np.array([10.0, 20.0, 30.0]), np.array([1.0, 0.9, 0.8]), False)
  x = curves.crossings(c, np.array([0.86, 0.5]), after_run=40.0)
  # Smoothed 0.95, 0.9, 0.85: 0.86 is crossed between updates 20 and 30, 0.5 never.
  assert x.censored.tolist() == [False, True]
  assert x.steps[1] == 40.0 and x.log_width[1] == 0
  assert curves.censoring_place([c]) == (30.0, 40.0)


def test_crossings_interpolate_between_evaluations_and_report_the_bracket():
  c = curves.Curve(np.array([10.0, 20.0, 30.0, 40.0]), np.array([1.0, 1.0, 0.0, 0.0]), False)
  # Smoothed: 1, 2/3, 1/3, 0. The level 0.5 lies halfway between updates 20 and 30.
  x = curves.crossings(c, np.array([0.5]), after_run=50.0)
  assert x.steps[0] == pytest.approx(25.0)
  assert x.log_width[0] == pytest.approx(math.log(30 / 20))


def test_the_grid_spacing_bounds_the_interval_width(tmp_path):
  coarse = np.arange(100, 1100, 100)
  fine = np.arange(10, 1010, 10)
  for root, steps in ((tmp_path / "coarse", coarse), (tmp_path / "fine", fine)):
    for s in range(5):  # Every seed alike: no spread, so only the grid is left.
      write_run(root, "none", s, decay(200, 0, steps=steps), steps=steps)
      write_run(root, "ln", s, decay(100, 0, steps=steps), steps=steps)
  e_coarse, _ = judge(tmp_path / "coarse", SPEED)
  e_fine, _ = judge(tmp_path / "fine", SPEED)
  for e in (e_coarse, e_fine):
    assert e.estimate.se == 0
    assert e.estimate.high - e.estimate.low == pytest.approx(2 * e.estimate.floor)
  # The coarse grid's brackets are at least one spacing of 100 at an update <= 1000.
  assert e_coarse.estimate.floor >= math.log(1000 / 900)
  assert e_coarse.estimate.floor > 3 * e_fine.estimate.floor


def test_the_levels_are_the_baselines_best_so_far_at_quarters_of_its_run():
  steps = np.array([100.0, 200, 300, 400, 500, 600, 700, 800])
  mean = np.array([5.0, 4, 3, 2, 2.5, 1, 1.5, 1.2])
  levels = curves.levels_at_fractions(steps, mean, (0.25, 0.5, 0.75, 1.0))
  # At 200, 400, 600 and 800 updates; the rise at 500 does not lower the bar.
  assert levels.tolist() == [4.0, 2.0, 1.0, 1.0]


def test_the_target_is_resampled_so_its_uncertainty_is_in_the_interval(tmp_path, monkeypatch):
  """The levels are recomputed from each bootstrap resample's baseline seeds: the
  standard error differs from one with the levels frozen at the full sample's (the
  target's noise can widen or, where it moves both sides' crossings alike, narrow
  the paired ratio's spread; either way it is accounted for)."""
  for s in range(6):  # Baseline seeds that end at different errors: a noisy target.
    write_run(tmp_path, "none", s, decay(200 * (1 + 0.2 * (s % 3)), s, noise=0.001,
                                         floor=0.1 + 0.05 * (s % 2)))
    write_run(tmp_path, "ln", s, decay(150 * (1 + 0.2 * (s % 3)), 10 + s, noise=0.001))
  calls = []
  recompute = speed._Crossings.levels
  monkeypatch.setattr(speed._Crossings, "levels",
                      lambda self, index: calls.append(np.atleast_2d(index))
                      or recompute(self, index))
  ev, _ = judge(tmp_path, SPEED)
  resampled = np.concatenate([c for c in calls if c.shape[0] > 1])
  assert len({tuple(sorted(row)) for row in resampled}) > 100  # Many baseline resamples.
  frozen = recompute
  full = {}

  def fixed_levels(self, index):
    if "levels" not in full:
      full["levels"] = frozen(self, np.arange(len(self.base.curves))[None])[0]
    return np.broadcast_to(full["levels"], (np.atleast_2d(index).shape[0],
                                            len(full["levels"])))

  monkeypatch.setattr(speed._Crossings, "levels", fixed_levels)
  ev_fixed, _ = judge(tmp_path, SPEED)
  assert ev_fixed.estimate.se > 0
  assert ev.estimate.se != pytest.approx(ev_fixed.estimate.se, rel=0.05)


# --- many claims, seeds by power -------------------------------------------------------------


def evidence_of(claim, value, se, n=5, floor=0.0):
  """``claim``'s evidence with an estimate and its hypotheses, as judge leaves it."""
  e = inference.Estimate(value, se, n - 1, n, True, floor)
  return claims.Evidence(claim, "validation/error", estimate=e,
                         hypotheses=claims._hypotheses(claim, e), seeds=n)


def effect_with_p(p, se=0.1, df=4):
  """The (negative) effect whose two-sided p against no effect is ``p``."""
  return -stats.t.isf(p / 2, df) * se


def test_holm_decides_at_its_threshold():
  """Two claims with p just under 0.05 each: both pass alone, neither after the
  adjustment. Each has two hypotheses (no effect; a difference of 10% or more), of
  which at most one is true: two claims count 2, not 4."""
  ev = evidence_of(SPEED, effect_with_p(0.026), 0.1)
  other = evidence_of(SPEED, effect_with_p(0.03), 0.1)
  alone = claims.decide([ev])[0]
  both = claims.decide([ev, other])
  assert alone.verdict == claims.REPRODUCED and alone.p_adjusted == pytest.approx(0.026)
  assert both[0].p_adjusted == pytest.approx(0.052)  # 0.026 x 2 > 0.05: not significant.
  assert [v.verdict for v in both] == [claims.INCONCLUSIVE, claims.INCONCLUSIVE]
  assert "Holm's adjustment over 4 hypotheses of 2 claims" in both[0].why


def test_a_p_value_that_the_floor_makes_large_takes_no_rank():
  """The Transformer's warm-up claim under version 2: p = 0.00036 from the standard
  error, an interval the floor widens past 1. Its p now reads the interval, and
  another claim's p, 0.03, is adjusted as if it were alone in being significant."""
  floored = evidence_of(SPEED, math.log(1.2), 0.03, floor=0.25)
  assert floored.estimate.low < 0 < floored.estimate.high
  assert floored.p > 0.05
  other = evidence_of(SPEED, effect_with_p(0.02), 0.1)
  verdicts = claims.decide([floored, other])
  assert verdicts[0].verdict == claims.INCONCLUSIVE
  assert verdicts[1].p_adjusted == pytest.approx(0.04)  # 0.02 x 2 claims, not x 1.
  assert verdicts[1].verdict == claims.REPRODUCED


@pytest.mark.parametrize("scale, cap", [("cpu", 10), ("gpu", 30), ("paper", 10)])
def test_seeds_by_power_after_the_pilot_up_to_the_scales_cap(scale, cap):
  assert rule.seed_cap(scale) == cap
  ev = evidence_of(SPEED, -0.05, 0.1)
  ev.scale = scale
  for needed, planned in ((None, 5), (3, 5), (7, 7), (cap, cap), (cap + 1, 5)):
    ev.needed = needed
    assert claims.planned_seeds(ev, 5) == planned, needed
  ev.hypotheses = []  # Not tested (not run, not testable): no more seeds.
  ev.needed = 7
  assert claims.planned_seeds(ev, 5) == 5


def test_a_scale_without_a_cap_is_refused():
  with pytest.raises(ValueError, match="no seed cap for scale 'tpu'; the rule's scales: "
                     "cpu, gpu, paper"):
    rule.seed_cap("tpu")


def test_the_inconclusive_verdict_names_the_seeds_needed(tmp_path):
  rng = np.random.default_rng(3)
  for s in range(3):
    write_run(tmp_path, "none", s, decay(200 * math.exp(0.3 * rng.standard_normal()), s))
    write_run(tmp_path, "ln", s, decay(190 * math.exp(0.3 * rng.standard_normal()), 9 + s))
  ev, verdict = judge(tmp_path, SPEED)
  assert verdict.verdict == claims.INCONCLUSIVE
  assert f"{ev.needed} seeds needed (3 run, over the cpu scale's cap of 10)" in verdict.why
  ev = claims.judge(runs_lib.load_runs([str(tmp_path)]), "toy", SPEED, "validation/error",
                    scale="gpu")
  (verdict,) = claims.decide([ev])
  assert f"{ev.needed} seeds needed (3 run, over the gpu scale's cap of 30)" in verdict.why


def test_the_cap_a_need_is_over_is_its_scales():
  assert claims.over_cap_text(10, "cpu") == ""
  assert claims.over_cap_text(11, "cpu") == ", over the cpu scale's cap of 10"
  assert claims.over_cap_text(30, "gpu") == ""
  assert claims.over_cap_text(31, "gpu") == ", over the gpu scale's cap of 30"


# --- the validity gate -----------------------------------------------------------------------


def test_a_baseline_that_does_not_learn_leaves_the_claim_not_testable(tmp_path):
  for s in range(3):  # Best errors about 0.85 against a trivial 0.80.
    write_run(tmp_path, "none", s, decay(200, s, floor=0.85, noise=0.002), trivial=0.8)
    write_run(tmp_path, "ln", s, decay(100, 9 + s, floor=0.5, noise=0.002), trivial=0.8)
  _, verdict = judge(tmp_path, SPEED)
  assert verdict.verdict == claims.NOT_TESTABLE
  assert "none does not learn: mean best 0.8481 over 3 seeds (95% bound 0.85" in verdict.why
  assert "against the majority class's 0.8" in verdict.why


def test_both_arms_must_learn(tmp_path):
  """The reader's "LN trains faster than the LSTM" compared the LSTM with an LN that
  never left chance: its crossings all censored, the ratio their placement."""
  for s in range(3):
    write_run(tmp_path, "none", s, decay(200, s, floor=0.5, noise=0.002), trivial=0.8)
    write_run(tmp_path, "ln", s, decay(100, 9 + s, floor=0.85, noise=0.002), trivial=0.8)
  _, verdict = judge(tmp_path, SPEED)
  assert verdict.verdict == claims.NOT_TESTABLE
  assert "ln does not learn: mean best 0.84" in verdict.why


def test_the_gate_holds_where_the_cell_has_no_baseline_run(tmp_path):
  """Version 2 checked norm=none alone and skipped the gate silently where the
  claim's cell had none (11 claims): BLN against BN, with no none run."""
  final = claims.Claim("c", "lower", "t", "bln", "bn", kind="final")
  flat = lambda v: np.full(len(STEPS), v)  # pylint: disable=unnecessary-lambda-assignment
  for s in range(3):
    write_run(tmp_path, "bln", s, flat(0.5 + 0.001 * s), trivial=0.8)
    write_run(tmp_path, "bn", s, flat(0.85 + 0.001 * s), trivial=0.8)
  _, verdict = judge(tmp_path, final)
  assert verdict.verdict == claims.NOT_TESTABLE and "bn does not learn" in verdict.why


def test_a_gate_whose_mean_beats_the_trivial_model_but_whose_bound_does_not():
  bests = [0.70, 0.76, 0.82]  # Mean 0.76 < 0.8; upper 95% bound 0.76 + 4.30 x 0.0346.
  assert np.mean(bests) < 0.8
  gate = validity.learned(bests, 0.8, "majority class", "ln", True)
  assert not gate.passed and "95% bound 0.909" in gate.why
  assert validity.learned([0.75, 0.76, 0.77], 0.8, "majority class", "ln", True).passed


def test_the_learned_gate_at_its_threshold():
  # No spread: the bound is the mean itself; beating the trivial value by any amount
  # passes, equalling it does not.
  assert validity.learned([0.5, 0.5], 0.5001, "trivial", "ln", True).passed
  assert not validity.learned([0.5, 0.5], 0.5, "trivial", "ln", True).passed
  # A higher-is-better metric (R-sum): the values and the trivial model's are negated.
  assert validity.learned([-50.0, -50.0], -49.0, "random ranking", "ln", False).passed
  gate = validity.learned([-50.0, -50.0], -51.0, "random ranking", "ln", False)
  assert not gate.passed and "mean best 50" in gate.why and "ranking's 51" in gate.why


def test_one_seed_leaves_the_gate_to_the_pilot(tmp_path):
  write_run(tmp_path, "none", 0, decay(200, 0, floor=0.85), trivial=0.8)
  write_run(tmp_path, "ln", 0, decay(100, 0, floor=0.85), trivial=0.8)
  _, verdict = judge(tmp_path, SPEED)
  assert verdict.verdict == claims.INCONCLUSIVE and "pilot needs 3" in verdict.why


AT_CHANCE = claims.Claim("c", "does not learn", "t", "bn", "bn", kind="at_chance")


def test_an_at_chance_claim_needs_the_task_learned_by_another_arm_of_its_cell(tmp_path):
  for s in range(3):
    write_run(tmp_path, "bn", s, np.full(len(STEPS), 0.9), trivial=0.9)
    # LN's mean best, 0.89, beats chance, but not at the 95% bound.
    write_run(tmp_path, "ln", s, np.full(len(STEPS), (0.87, 0.89, 0.91)[s]), trivial=0.9)
  _, verdict = judge(tmp_path, AT_CHANCE)
  assert verdict.verdict == claims.NOT_TESTABLE
  assert "no other normalizer shows the task can be learned in this cell: ln: mean" in (
      verdict.why)
  for s in range(3):  # A normalizer that learns it: BN's claim can now be judged.
    write_run(tmp_path, "bln", s, np.full(len(STEPS), 0.5 + 0.001 * s), trivial=0.9)
  _, verdict = judge(tmp_path, AT_CHANCE)
  assert verdict.verdict == claims.REPRODUCED, verdict.why


def test_a_run_ending_before_convergence_is_not_testable_for_a_final_claim(tmp_path):
  falling = 0.9 - 0.0005 * STEPS  # Still falling at the same rate at the end.
  for s in range(3):
    write_run(tmp_path, "bln", s, falling - 0.01 + 0.001 * s)
    write_run(tmp_path, "bn", s, falling + 0.001 * s)
  _, verdict = judge(tmp_path, claims.Claim("c", "lower", "t", "bln", "bn", kind="final"))
  assert verdict.verdict == claims.NOT_TESTABLE
  assert "the run ends before the baseline converges: 3 of 3 bn seeds" in verdict.why


def test_still_improving_at_its_threshold():
  steps = np.arange(1.0, 9.0)  # The last quarter: updates > 6.25.
  # Total improvement 1.0 (first smoothed 1.0 to best 0.0); the best before the last
  # quarter is 0.05 above the best: exactly 5%, which is not "more than 5%".
  values = np.array([1.0, 1.0, 1.0, 0.05, 0.05, 0.05, 0.0, 0.0])
  c = curves.Curve(steps, values, False)
  smoothed = c.smoothed
  share = (smoothed[steps < 1 + 0.75 * 7].min() - smoothed.min()) / (smoothed[0] - smoothed.min())
  assert not curves.still_improving(c, share)
  assert curves.still_improving(c, share - 1e-9)


def test_convergence_needs_more_than_half_the_seeds_still_improving():
  improving = curves.Curve(np.arange(1.0, 9.0), np.linspace(1, 0, 8), False)
  flat = curves.Curve(np.arange(1.0, 9.0), np.array([1.0, 0.2, 0, 0, 0, 0, 0, 0]), False)
  assert validity.converged([improving, flat], "bn").passed  # Exactly half: converged.
  assert not validity.converged([improving, improving, flat], "bn").passed


def test_a_speed_claim_needs_an_evaluation_in_every_quarter(tmp_path):
  steps = np.array([10, 20, 30, 40, 50, 60, 1000])  # Nothing between 250 and 1000.
  for s in range(3):
    write_run(tmp_path, "none", s, decay(20, s, steps=steps), steps=steps)
    write_run(tmp_path, "ln", s, decay(10, s, steps=steps), steps=steps)
  _, verdict = judge(tmp_path, SPEED)
  assert verdict.verdict == claims.NOT_TESTABLE
  assert "none in the stretch of the run that ends at 50%, 75%" in verdict.why


def test_too_few_seeds_is_the_pilot_not_a_verdict(tmp_path):
  for s in range(2):
    write_run(tmp_path, "none", s, decay(200, s))
    write_run(tmp_path, "ln", s, decay(100, s))
  _, verdict = judge(tmp_path, SPEED)
  assert verdict.verdict == claims.INCONCLUSIVE and "pilot needs 3" in verdict.why


def test_a_seed_that_diverged_before_any_value_counts_as_the_trivial_model(tmp_path):
  for s in range(3):
    write_run(tmp_path, "bln", s, np.full(len(STEPS), 0.3) - 0.0001 * s, trivial=0.9)
    write_run(tmp_path, "none", s, np.full(len(STEPS), 0.35), trivial=0.9)
  for s in range(3):
    path = write_run(tmp_path, "bn", s, [0.31] if s else [float("nan")], steps=STEPS[:1],
                     trivial=0.9)
    if not s:  # Seed 0 stopped at its first update with nothing finite logged.
      diverge_at_once(path)
  runs = runs_lib.load_runs([str(tmp_path)])
  for read in ("best", "last"):
    values = claims._values(claims.side_runs(runs, {}, "norm", "bn"), read,
                            "validation/error", True, 0.9)
    assert values == {0: 0.9, 1: 0.31, 2: 0.31}, read


def diverge_at_once(path):
  """Seed's metrics as a run that stopped at its first update, nothing finite logged."""
  with open(os.path.join(path, "metrics.jsonl"), "w") as f:
    f.write(json.dumps({"step": 1, "stopped/diverged_at_step": 1}) + "\n")


def test_a_higher_is_better_metric_with_a_seed_that_diverged_before_its_first_evaluation(
    tmp_path):
  """R-sum (higher is better) is read negated; the diverged seed is the trivial
  model's R-sum, 30, negated with the rest: a sign slip would make it the best seed."""
  metric = "validation/rsum"
  for s, v in enumerate((100.0, 110.0, 0.0)):
    path = write_run(tmp_path, "ln", s, [v], steps=STEPS[:1])
    with open(os.path.join(path, "metrics.jsonl")) as f:
      point = json.loads(f.read())
    with open(os.path.join(path, "metrics.jsonl"), "w") as f:
      f.write(json.dumps({**point, metric: v}) + "\n")
    if s == 2:
      diverge_at_once(path)
  runs = runs_lib.load_runs([str(tmp_path)])
  lower = runs_lib.lower_is_better(metric)
  assert not lower
  trivial = -30.0  # claims.judge orients the trivial model's value as the curves.
  for read in ("best", "last"):
    assert claims._values(runs, read, metric, lower, trivial) == {
        0: -100.0, 1: -110.0, 2: -30.0}, read
  gate = validity.learned(list(claims._values(runs, "best", metric, lower, trivial).values()),
                          trivial, "random ranking", "ln", lower)
  assert "mean best 80 over 3 seeds" in gate.why and "random ranking's 30" in gate.why


# --- what a final value reads ----------------------------------------------------------------


FINAL = claims.Claim("c", "ends lower", "t", "bln", "bn", kind="final")


def test_a_final_value_claim_reads_the_last_evaluation_not_the_best(tmp_path):
  """Both end at 0.40; BLN's curve dips to 0.30 on the way (one lucky evaluation per
  seed). The best of each seed says BLN ends lower; the last evaluation does not."""
  for s in range(5):
    bln = np.full(len(STEPS), 0.40 + 0.001 * s)
    bln[40 + s] = 0.30
    write_run(tmp_path, "bln", s, bln, trivial=0.9)
    write_run(tmp_path, "bn", s, np.full(len(STEPS), 0.40 + 0.001 * s), trivial=0.9)
  ev, verdict = judge(tmp_path, FINAL)
  assert ev.estimate.value == pytest.approx(0.0)
  assert "difference of last values" in verdict.why
  assert verdict.verdict == claims.NO_DIFFERENCE
  best, _ = judge(tmp_path, dataclasses.replace(FINAL, value="best"))
  assert best.estimate.value == pytest.approx(-0.102)  # What version 2 read.


def test_the_at_chance_claim_reads_the_last_evaluation(tmp_path):
  """BN at batch 1 hovers at chance; one evaluation per seed dips well below it. The
  best says "it learns"; the last evaluation, at chance, does not."""
  for s in range(5):
    bn = np.full(len(STEPS), 0.90)
    bn[20 + s] = 0.80
    write_run(tmp_path, "bn", s, bn, trivial=0.9)
    write_run(tmp_path, "ln", s, np.full(len(STEPS), 0.5 + 0.001 * s), trivial=0.9)
  ev, verdict = judge(tmp_path, AT_CHANCE)
  assert ev.estimate.value == pytest.approx(0.0) and verdict.verdict == claims.REPRODUCED
  assert "last value minus the trivial model's" in verdict.why
  best, verdict = judge(tmp_path, dataclasses.replace(AT_CHANCE, value="best"))
  assert best.estimate.value == pytest.approx(-0.1)
  assert verdict.verdict == claims.NOT_REPRODUCED


def test_a_step_logged_twice_after_a_resume_counts_at_its_last_value(tmp_path):
  """A run resumed from a checkpoint logs the evaluations since it again: every reader
  takes the later value (the first was of a run that did not go on)."""
  path = write_run(tmp_path, "ln", 0, [0.5, 0.4, 0.3], steps=np.array([10, 20, 30]))
  with open(os.path.join(path, "metrics.jsonl")) as f:
    points = [json.loads(line) for line in f]
  stale = {**points[2], "validation/error": 0.1, "test/error": 0.1}
  del stale["time/epoch_seconds"]
  points = points[:2] + [stale, {**points[1], "validation/error": 0.45}, {
      **points[2], "test/error": 0.35}]
  with open(os.path.join(path, "metrics.jsonl"), "w") as f:
    f.write("".join(json.dumps(p) + "\n" for p in points))
  (run,) = runs_lib.load_runs([str(tmp_path)])
  c = curves.curve(run, "validation/error", True)
  assert c.steps.tolist() == [10, 20, 30] and c.values.tolist() == [0.5, 0.45, 0.3]
  assert claims.last_value(run, "validation/error", True) == 0.3
  assert claims.best_value(run, "validation/error", True) == 0.3
  assert claims.selected_test(run, "validation/error", True) == 0.35  # Not the stale 0.1.
  assert bln_protocol.last_value(run, "test/error") == 0.35


def test_a_crossing_interpolated_at_an_asymmetric_level():
  c = curves.Curve(np.array([10.0, 20.0, 30.0, 40.0]), np.array([1.0, 1.0, 0.0, 0.0]), False)
  # Smoothed: 1, 2/3, 1/3, 0. The level 0.6 lies a fifth of the way from update 20 to
  # 30 (2/3 - 0.6 = 1/15 of the drop of 1/3): 22, not 28 (interpolated from the far
  # end) or 25 (halfway).
  x = curves.crossings(c, np.array([0.6, 0.3]), after_run=50.0)
  assert x.steps[0] == pytest.approx(22.0)
  # 0.3 lies a tenth of the way from 1/3 (update 30) to 0 (update 40).
  assert x.steps[1] == pytest.approx(31.0)


# --- the kinds, equivalence and the claimed size ---------------------------------------------


@pytest.mark.parametrize("kind,value,se,expected", [
    ("matches", 0.0, 0.001, claims.REPRODUCED),
    ("matches", 0.05, 0.001, claims.NOT_REPRODUCED),  # Worse by 0.05 > 0.01.
    ("matches", 0.0, 0.02, claims.INCONCLUSIVE),
    ("matches_or_beats", -0.05, 0.001, claims.REPRODUCED),  # Beats it.
    ("matches_or_beats", 0.05, 0.001, claims.NOT_REPRODUCED),
    ("at_chance", 0.0, 0.001, claims.REPRODUCED),  # At the trivial model's value.
    ("at_chance", -0.2, 0.01, claims.NOT_REPRODUCED),  # Clearly beats chance.
    ("final", -0.05, 0.005, claims.REPRODUCED),
    ("final", 0.0, 0.001, claims.NO_DIFFERENCE),
    ("final", 0.05, 0.005, claims.NOT_REPRODUCED),
])
def test_each_kind_of_claim_at_clear_cases(kind, value, se, expected):
  claim = claims.Claim("c", "x", "t", "a", "b", kind=kind)
  assert claims.decide([evidence_of(claim, value, se)])[0].verdict == expected


@pytest.mark.parametrize("se,expected", [(0.002, claims.REPRODUCED),
                                         (0.004, claims.INCONCLUSIVE)])
def test_matches_or_beats_at_an_effect_of_exactly_zero(se, expected):
  """Equal on average: not worse by the margin (0.01) once the interval's upper end,
  0 + 2.776 se, is under it: se 0.002 gives 0.0056, se 0.004 gives 0.0111."""
  claim = claims.Claim("c", "x", "t", "a", "b", kind="matches_or_beats")
  ev = evidence_of(claim, 0.0, se)
  assert (ev.estimate.high < claim.margin) == (expected == claims.REPRODUCED)
  verdict = claims.decide([ev])[0]
  assert verdict.verdict == expected and verdict.p == ev.hypotheses[0].p


def test_no_difference_is_an_equivalence_test_at_the_default_margin_in_the_family():
  """An interval within ±10% (0.95 [0.91, 0.99]... on the log scale, within ±0.105)
  is "no difference" alone; its equivalence p is adjusted with the other claims'
  hypotheses, and beside a second such claim neither is."""
  e = math.log(1.0)
  alone = evidence_of(SPEED, e, 0.034)  # Half-width 2.776 x 0.034 = 0.094 < 0.105.
  assert claims.decide([alone])[0].verdict == claims.NO_DIFFERENCE
  p_equivalence = alone.hypotheses[1].p
  assert 0.025 < p_equivalence < 0.05
  both = claims.decide([alone, evidence_of(SPEED, e, 0.034)])
  assert [v.verdict for v in both] == [claims.INCONCLUSIVE] * 2
  shown = f"a difference of 10% or more: p = {p_equivalence:.2g}, {2 * p_equivalence:.2g}"
  assert f"{shown} adjusted" in both[0].why


def test_a_claimed_size_gets_its_own_test_smaller_than_claimed_not_no_difference():
  """Order-embeddings under version 2: 1.10 [0.93, 1.30] against "about 60%" read "no
  difference" with the claimed size as the margin. At the default 10% margin it is not;
  what it shows is an effect smaller than claimed."""
  claim = claims.Claim("c", "60% of the time", "t", "ln", "none", claimed_ratio=0.6)
  value, half = math.log(1.10), (math.log(1.30) - math.log(0.93)) / 2
  ev = evidence_of(claim, value, half / stats.t.ppf(0.975, 9), n=10)
  verdict = claims.decide([ev])[0]
  assert verdict.verdict == claims.SMALLER_THAN_CLAIMED
  assert "the claimed 0.6: p = " in verdict.why and "excludes the claimed 0.6" in verdict.why
  assert claim.margin == pytest.approx(-math.log(0.9))  # The rule's default ...
  assert claim.effect == pytest.approx(-math.log(0.6))  # ... the power rule's, the size.
  # Where the interval is within ±10% too, "no difference" is the stronger statement.
  close = evidence_of(claim, 0.0, 0.02, n=10)
  assert claims.decide([close])[0].verdict == claims.NO_DIFFERENCE


def test_step_time_is_not_decided_by_the_members_logged_seconds(tmp_path):
  # The members log 0.08 s an update against 0.1 s: a timing decides, and there is
  # none (tests/test_timing.py judges claims with one).
  for s in range(3):
    write_run(tmp_path, "ln", s, decay(100, s))
    path = write_run(tmp_path, "rms", s, decay(100, s))
    with open(os.path.join(path, "metrics.jsonl")) as f:  # 0.08 s an update, not 0.1.
      points = [json.loads(line) for line in f]
    with open(os.path.join(path, "metrics.jsonl"), "w") as f:
      for p in points:
        f.write(json.dumps({**p, "time/train_seconds": 0.08 * p["step"]}) + "\n")
  ev, verdict = judge(tmp_path, claims.Claim("c", "x", "t", "rms", "ln", kind="step_time"))
  assert ev.estimate is None and not ev.hypotheses and verdict.verdict == claims.NOT_RUN
  assert "no timing of rms against ln" in verdict.why


# --- the rule's hash -------------------------------------------------------------------------


#: The hash of rule version 3 and its claims (benchmark_suite.rule_hash): re-pinned when
#: version 3, not yet final, gained the per-scale seed cap and the gpu scale's claims
#: (issue 60).
RULE_HASH = "338c34e60a90a289"


def test_the_rule_is_pinned():
  """Changing any parameter of the rule, or a claim, is a new rule version: bump
  rule.VERSION, say so in docs/benchmark.md, and update this hash."""
  assert suite.rule_hash() == RULE_HASH, (
      "The verdict rule changed. A change after the runs it judges is a new rule "
      "version: bump lnorm.analysis.rule.VERSION, state the change in docs/benchmark.md, "
      "and pin the new hash here.")


def test_the_rules_hash_covers_its_claims_but_not_their_wording():
  e = suite.BY_NAME["draw"]
  reworded = dataclasses.replace(e.claims[0], text="LN is quicker", source="elsewhere")
  resized = dataclasses.replace(e.claims[0], claimed_ratio=0.7)

  def of(spec):
    return rule.rule_hash(suite.claims_record([spec]))

  assert of(dataclasses.replace(e, claims=(reworded,) + e.claims[1:])) == of(e)
  assert of(dataclasses.replace(e, claims=(resized,) + e.claims[1:])) != of(e)


def test_a_members_hash_covers_its_setting_but_not_its_seed_normalizer_or_rule(monkeypatch):
  e = suite.BY_NAME["bln_cifar"]
  b25, b1 = e.scales["cpu"].variants
  assert suite.member_hash(e, "cpu", b25) != suite.member_hash(e, "cpu", b1)
  assert suite.member_hash(e, "cpu", b25) != suite.member_hash(e, "paper", b25)
  plan = bench.plans([e], "cpu", "w", ["ln", "bn"], [0, 7])[0]
  hashes = {plan.group_overrides(m, {})["benchmark_hash"] for m in plan.members
            if m.variant == b25}
  assert hashes == {suite.member_hash(e, "cpu", b25)}
  before = suite.member_hash(e, "cpu", b25)
  monkeypatch.setattr(rule, "VERSION", 4)
  assert suite.member_hash(e, "cpu", b25) == before  # A new rule keeps the records.
  assert suite.rule_hash() != RULE_HASH


def test_every_claim_decides_on_a_validation_metric():
  for e in suite.SUITE:
    assert e.metric.startswith("validation/"), e.name
    for c in e.claims:
      assert c.kind in claims.KINDS, c.key
