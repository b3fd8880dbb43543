"""The rule's statistics (lnorm.analysis.inference, rule version 3) against values
computed here by other means: one test gives the p-value and the interval, the floor
in both; the power of the t-test by numerical integration; the multiplicity
adjustment that counts the hypotheses able to be true at once. No records, no JAX."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from lnorm.analysis import inference, rule
from lnorm.analysis.inference import Estimate, Null, Span

pytestmark = pytest.mark.quick

INF = math.inf


# --- one test gives the p-value and the interval ---------------------------------------------


def test_a_floor_wider_than_the_spread_is_in_the_p_value():
  """Skip-thoughts under rule version 2: every seed crossed between the same two
  evaluations, so the standard error was tiny, the interval was the grid's floor
  (±0.45) and spanned no effect, yet the p-value read 6e-8."""
  e = Estimate(value=-0.3, se=0.01, df=4, n=5, paired=True, floor=0.45)
  t = stats.t.ppf(0.975, 4)
  assert e.half_width == 0.45 > t * e.se  # The floor sets the interval...
  assert e.low < 0 < e.high
  assert e.effective_se == pytest.approx(0.45 / t)
  assert e.p_value() == pytest.approx(2 * stats.t.sf(0.3 / (0.45 / t), 4))  # ... and p.
  assert e.p_value() > 0.05
  assert 2 * stats.t.sf(0.3 / 0.01, 4) < 1e-4  # What the standard error alone gives.


def test_the_interval_contains_the_null_exactly_when_p_is_above_the_level():
  rng = np.random.default_rng(57)
  agree = 0
  for _ in range(600):
    e = Estimate(value=float(rng.normal(0, 1)), se=float(rng.exponential(0.3)),
                 df=int(rng.integers(1, 12)), n=5, paired=True,
                 floor=float(rng.choice([0.0, rng.exponential(0.5)])))
    null = float(rng.normal(0, 1))
    if abs(abs(e.value - null) - e.half_width) < 1e-9:
      continue  # On the boundary itself p is the level: a set of measure zero.
    assert (e.low <= null <= e.high) == (e.p_value(null) > rule.ALPHA), (e, null)
    agree += 1
  assert agree > 550


def test_a_regions_p_value_is_below_the_level_exactly_when_the_interval_misses_it():
  rng = np.random.default_rng(3)
  m = 0.1
  regions = {
      "no effect": (Span(0.0, 0.0),),
      "a difference of m or more": (Span(-INF, -m), Span(m, INF)),
      "worse by m or more": (Span(m, INF),),
      "under m": (Span(-m, m, True, True),),
  }
  for _ in range(200):
    e = Estimate(float(rng.normal(0, 0.3)), float(rng.exponential(0.05)), 4, 5, True,
                 floor=float(rng.choice([0.0, 0.08])))
    for name, region in regions.items():
      ends = [x for s in region for x in (s.low, s.high) if math.isfinite(x)]
      if min(abs(b - x) for b in (e.low, e.high) for x in ends) < 1e-9:
        continue  # An interval that ends on the region's end: p is the level itself.
      misses = not any(e.low <= s.high and s.low <= e.high for s in region)
      assert (inference.region_p_value(e, region) < rule.ALPHA) == misses, (name, e)


def test_one_seed_tests_nothing():
  e = Estimate(0.5, 0.0, 0, 1, True)
  assert e.p_value() == 1.0 and e.one_sided_p(0.0, above=True) == 1.0
  assert math.isinf(e.half_width)


# --- the power of the t-test ------------------------------------------------------------------


def _power_by_integration(n: int, effect: float, sigma: float, alpha: float) -> float:
  """P(|T| > t) for T = (Z + d) / sqrt(V / df), Z normal and V chi-square: each tail
  as an integral over V, no noncentral t distribution involved."""
  df, d = n - 1, effect * math.sqrt(n) / sigma
  t = stats.t.ppf(1 - alpha / 2, df)
  chi2 = lambda v: stats.chi2.pdf(v, df)  # pylint: disable=unnecessary-lambda-assignment
  upper = integrate.quad(lambda v: stats.norm.sf(t * math.sqrt(v / df) - d) * chi2(v),
                         0, INF, epsabs=1e-13, limit=200)[0]
  lower = integrate.quad(lambda v: stats.norm.cdf(-t * math.sqrt(v / df) - d) * chi2(v),
                         0, INF, epsabs=1e-13, limit=200)[0]
  return upper + lower


@pytest.mark.parametrize("n,effect", [(4, 4.0), (3, 4.1), (8, 2.2), (9, 2.2), (4, 20.0),
                                      (3, 0.3)])
def test_the_power_where_scipys_noncentral_cdf_is_nan(n, effect):
  """At the rule's level (0.05/30) and these noncentralities scipy's ``nct.cdf`` of
  the lower tail is NaN (rule version 2's power was NaN there); the power agrees with
  an integration that does not use it. (3, 0.3): a small effect, where the lower tail
  is not negligible, checks its sign."""
  alpha = rule.planning_alpha()
  df, d = n - 1, effect * math.sqrt(n)
  t = stats.t.ppf(1 - alpha / 2, df)
  if effect > 1:
    with np.errstate(all="ignore"):
      assert math.isnan(stats.nct.cdf(-t, df, d))  # The region of the bug.
  assert inference.power(n, effect, 1.0, alpha) == pytest.approx(
      _power_by_integration(n, effect, 1.0, alpha), rel=1e-6, abs=1e-12)


def test_the_power_rises_with_the_seeds_and_is_never_nan():
  alpha = rule.planning_alpha()
  for effect in np.linspace(0.1, 6, 16):
    for paired in (True, False):
      powers = [inference.power(n, effect, 1.0, alpha, paired) for n in range(2, 60)]
      assert all(math.isfinite(p) and 0 <= p <= 1 for p in powers)
      assert all(b >= a - 1e-12 for a, b in zip(powers, powers[1:])), (effect, paired)


def test_a_plan_that_nan_made_longer_now_stops_at_the_first_count_with_the_power():
  # Effect 2.2 standard deviations: version 2 read NaN at 8 seeds and 9, and named 10.
  alpha = rule.planning_alpha()
  assert inference.seeds_needed(2.2, 1.0) == 8
  assert _power_by_integration(8, 2.2, 1.0, alpha) >= 0.8 > _power_by_integration(
      7, 2.2, 1.0, alpha)


def test_the_power_rule_against_hand_computed_cases():
  # G*Power, one-sample (paired) t, two-sided 0.05, power 0.8: d = 1 needs 10 seeds,
  # d = 0.5 needs 34; two independent samples with d = 1, 17 per side.
  assert inference.seeds_needed(1.0, 1.0, alpha=0.05, target_power=0.8) == 10
  assert inference.seeds_needed(0.5, 1.0, alpha=0.05, target_power=0.8) == 34
  assert inference.seeds_needed(1.0, 1.0, paired=False, alpha=0.05, target_power=0.8) == 17
  assert inference.power(10, 1, 1, 0.05) > 0.8 > inference.power(9, 1, 1, 0.05)
  # A grid as coarse as the effect: no number of seeds resolves it.
  assert inference.seeds_needed(0.1, 0.05, floor=0.1) is None
  assert inference.seeds_needed(0.1, 0.05, floor=0.099) is not None
  # The rule's own level is 0.05 / 30 claims.
  assert rule.planning_alpha() == pytest.approx(0.05 / 30)


def test_the_unpaired_spread_per_seed_with_sides_of_different_sizes():
  """Welch's standard error of two sides of 3 and 7 seeds with the same spread s is
  s * sqrt(1/3 + 1/7): the spread per seed the power rule plans with is s, not the
  standard error times sqrt(3) (paired) or over sqrt(2/3) (equal sides)."""
  s = 0.2
  e = Estimate(0.1, s * math.sqrt(1 / 3 + 1 / 7), 6, 3, False, n_other=7)
  assert e.sigma == pytest.approx(s)
  assert inference.seeds_needed(0.2, e.sigma, paired=False) == inference.seeds_needed(
      1.0, 1.0, paired=False)  # Planned on the effect in units of s.


# --- many hypotheses ---------------------------------------------------------------------------


def test_holm_on_a_hand_computed_example():
  # Sorted: 0.005 x 4 = 0.02; 0.01 x 3 = 0.03; 0.03 x 2 = 0.06; 0.04 x 1, raised to 0.06.
  assert inference.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
  assert inference.holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # Capped at 1.
  assert inference.holm([]) == []


def test_the_hypotheses_that_can_be_true_at_once():
  m, size = 0.1, math.log(0.5)
  zero, beyond = (Span(0.0, 0.0),), (Span(-INF, -m), Span(m, INF))
  claimed, under = (Span(size, size),), (Span(-m, m, True, True),)

  def count(*nulls):
    return inference.most_true_at_once(nulls)

  # No effect and an effect of the margin or more: never both.
  assert count(Null("a", zero), Null("a", beyond)) == 1
  # The claimed size lies beyond the margin: it and "the margin or more" can be.
  assert count(Null("a", zero), Null("a", beyond), Null("a", claimed)) == 2
  # Two claims' effects are unrelated.
  assert count(Null("a", zero), Null("a", beyond), Null("b", zero), Null("b", beyond)) == 2
  # A margin and the open stretch inside it share no point; closed, they share ±m.
  assert count(Null("a", beyond), Null("a", under)) == 1
  assert count(Null("a", beyond), Null("a", (Span(-m, m),))) == 2


def test_holm_with_exclusive_hypotheses_on_a_hand_computed_example():
  """Two claims, each "no effect" (a) and "a difference of m or more" (b): sorted
  0.01 (1a), 0.02 (2a), 0.03 (1b), 0.5 (2b). At most one per claim is true: the
  multipliers are 2, 2 (claims 1 and 2 still open), 2, 1, where Holm's are 4, 3, 2, 1."""
  m = 0.1
  zero, beyond = (Span(0.0, 0.0),), (Span(-INF, -m), Span(m, INF))
  nulls = [Null(1, zero), Null(2, zero), Null(1, beyond), Null(2, beyond)]
  p = [0.01, 0.02, 0.03, 0.5]
  assert inference.holm(p, nulls) == pytest.approx([0.02, 0.04, 0.06, 0.5])
  assert inference.holm(p) == pytest.approx([0.04, 0.06, 0.06, 0.5])
  with pytest.raises(ValueError, match="3 null regions for 4 p-values"):
    inference.holm(p, nulls[:3])
