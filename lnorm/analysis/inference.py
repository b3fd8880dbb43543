"""From an estimate and its standard error to what the rule needs: the 95% interval,
the p-values of the claim's hypotheses, their multiplicity adjustment over every claim,
and the seeds a claim needs.

An :class:`Estimate` is one claim's effect (a mean log ratio of updates, or a mean
difference of values) with the standard error of everything estimated on the way,
the target included, and the degrees of freedom of its Student-t reference. With 3 to
10 seeds a normal interval would be too narrow, so intervals and p-values take t
quantiles. The ``floor`` is the smallest half-width the data can support (the
evaluation grid's resolution for crossings): an interval is never narrower.

**One test gives both the interval and the p-values** (rule version 3): every p-value
is computed with the *effective* standard error, the interval's half-width divided by
its t quantile, so that the floor is in both, and the 95% interval contains a value
exactly when the two-sided p-value of that value is at least 0.05. (Version 2 floored
the interval but not the p-value: a p of 6e-8 beside an interval of ±0.45.)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Hashable, Sequence

from scipy import stats

from lnorm.analysis import rule


@dataclasses.dataclass(frozen=True)
class Estimate:
  value: float
  se: float
  df: int
  n: int  # Pairs, or the smaller side when unpaired.
  paired: bool
  floor: float = 0.0
  n_other: int | None = None  # Unpaired: the other side's seeds.

  @property
  def t_quantile(self) -> float:
    """The two-sided 95% quantile of the t reference (inf without degrees of freedom)."""
    return float(stats.t.ppf(0.5 + rule.CONFIDENCE / 2, self.df)) if self.df > 0 else math.inf

  @property
  def half_width(self) -> float:
    """The 95% interval's half-width: the t interval's, never below the floor; one
    seed bounds nothing."""
    if self.df <= 0:
      return math.inf
    spread = self.t_quantile * self.se if self.se > 0 else 0.0
    return max(spread, self.floor)

  @property
  def low(self) -> float:
    return self.value - self.half_width

  @property
  def high(self) -> float:
    return self.value + self.half_width

  @property
  def effective_se(self) -> float:
    """The standard error every p-value uses: the interval's half-width over its t
    quantile (the standard error itself unless the floor is wider); inf with no
    degrees of freedom (one seed tests nothing)."""
    if self.df <= 0:
      return math.inf
    return self.half_width / self.t_quantile

  def _t(self, null: float) -> float | None:
    """The t statistic against ``null``; None when nothing varies (no spread, no floor)."""
    se = self.effective_se
    return None if se <= 0 else (self.value - null) / se

  def p_value(self, null: float = 0.0) -> float:
    """Two-sided p of a t-test of ``effect == null``: below 1 - CONFIDENCE exactly
    when the interval excludes ``null``. One seed tests nothing (1); with nothing
    varying, 1 when the value is the null and 0 when it is not."""
    if self.df <= 0:
      return 1.0
    t = self._t(null)
    if t is None:
      return 1.0 if self.value == null else 0.0
    return float(min(1.0, 2 * stats.t.sf(abs(t), self.df)))

  def one_sided_p(self, null: float, above: bool) -> float:
    """p of a one-sided t-test whose alternative is that the effect lies above
    (``above``) or below ``null``."""
    if self.df <= 0:
      return 1.0
    t = self._t(null)
    if t is None:
      return 0.0 if (self.value > null if above else self.value < null) else 1.0
    return float(stats.t.sf(t if above else -t, self.df))

  @property
  def sigma(self) -> float:
    """The spread of one seed's effect (paired), or of one side's seed (unpaired),
    that the standard error implies: what the power rule plans with."""
    if self.paired:
      return self.se * math.sqrt(self.n)
    return self.se / math.sqrt(1 / self.n + 1 / (self.n_other or self.n))


# --- many hypotheses -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Span:
  """A stretch of the effect's line, each end included unless open (±inf allowed)."""
  low: float
  high: float
  low_open: bool = False
  high_open: bool = False

  def contains(self, x: float) -> bool:
    above = self.low < x or (self.low == x and not self.low_open)
    below = x < self.high or (x == self.high and not self.high_open)
    return above and below

  def nearest(self, x: float) -> float:
    """The point of the span's closure nearest to ``x``."""
    return min(max(x, self.low), self.high)


#: A hypothesis's region of the effect: a union of spans.
Region = tuple[Span, ...]


def region_p_value(e: Estimate, region: Region) -> float:
  """The p-value of the hypothesis that the effect lies in ``region``: 1 where the
  estimate lies in it, else the two-sided p at the region's point nearest to the
  estimate (the largest over the region). So it is below 1 - CONFIDENCE exactly when
  the 95% interval misses the region: "no effect" (the point 0), "a difference of
  the margin or more" (two half-lines), "not worse by the margin" (one), alike."""
  if any(s.contains(e.value) for s in region):
    return 1.0
  nearest = min((s.nearest(e.value) for s in region), key=lambda x: abs(x - e.value))
  return e.p_value(nearest)


@dataclasses.dataclass(frozen=True)
class Null:
  """What a hypothesis says about one claim's effect: it lies in ``region``.
  Hypotheses about one claim (``claim``) can be true at once only where their
  regions overlap: the effect cannot be both 0 and at least the margin away."""
  claim: Hashable
  region: Region

  def contains(self, effect: float) -> bool:
    return any(s.contains(effect) for s in self.region)


def most_true_at_once(nulls: Sequence[Null]) -> int:
  """The most of ``nulls`` that can be true together: per claim, the most regions
  that share a point, summed over claims, whose effects are unrelated. The count
  changes only at the spans' ends, so the ends, the points between them and a point
  beyond each side are every case."""
  by_claim: dict[Hashable, list[Null]] = {}
  for n in nulls:
    by_claim.setdefault(n.claim, []).append(n)
  total = 0
  for group in by_claim.values():
    ends = sorted({e for n in group for s in n.region for e in (s.low, s.high)
                   if math.isfinite(e)}) or [0.0]
    points = (ends + [(a + b) / 2 for a, b in zip(ends, ends[1:])]
              + [ends[0] - 1.0, ends[-1] + 1.0])
    total += max(sum(n.contains(x) for n in group) for x in points)
  return total


def holm(pvalues: Sequence[float], nulls: Sequence[Null] | None = None) -> list[float]:
  """Holm's step-down adjusted p-values, in the order given: the i-th smallest of m
  is multiplied by the number of hypotheses not yet rejected, m - i + 1, and each
  adjusted value is at least the one before it in that order (Holm 1979).

  With ``nulls`` (one per p-value), the multiplier is instead the most of the
  hypotheses not yet rejected that can be true at once (Shaffer 1986, method 1): a
  claim's "no effect" (the effect is 0) and "a difference" (it is at least the margin
  away) are never true together, so testing both costs one rank, not two. Without
  ``nulls`` every hypothesis may be true with every other: Holm's own multiplier."""
  m = len(pvalues)
  if nulls is not None and len(nulls) != m:
    raise ValueError(f"{len(nulls)} null regions for {m} p-values")
  order = sorted(range(m), key=lambda i: pvalues[i])
  adjusted = [0.0] * m
  running = 0.0
  for rank, i in enumerate(order):
    left = order[rank:]
    k = len(left) if nulls is None else most_true_at_once([nulls[j] for j in left])
    running = max(running, min(1.0, k * pvalues[i]))
    adjusted[i] = running
  return adjusted


# --- seeds by power ---------------------------------------------------------------------------


def power(n: int, effect: float, sigma: float, alpha: float, paired: bool = True) -> float:
  """The power of a two-sided t-test at level ``alpha`` to detect ``effect`` with
  ``n`` seeds (per side when unpaired), each with spread ``sigma`` (noncentral t).

  Both tails are upper tails: P(T < -t) for T of noncentrality d is P(T' > t) for T'
  of noncentrality -d. scipy's noncentral t ``cdf`` is NaN far in its lower tail (at
  n = 4 seeds and a large noncentrality, where rule version 2's plans skipped a
  count); its ``sf`` there is finite."""
  if sigma <= 0:
    return 1.0
  if paired:
    df, ncp = n - 1, effect * math.sqrt(n) / sigma
  else:
    df, ncp = 2 * n - 2, effect / (sigma * math.sqrt(2 / n))
  if df < 1:
    return 0.0
  t = stats.t.ppf(1 - alpha / 2, df)
  out = float(stats.nct.sf(t, df, ncp) + stats.nct.sf(t, df, -ncp))
  if not math.isfinite(out):  # Never seen in the rule's range; refuse rather than skip.
    raise ArithmeticError(f"the power at n={n}, effect={effect}, sigma={sigma} is {out}")
  return min(out, 1.0)


#: The most seeds the power rule ever names: past it a claim is far out of reach.
MAX_NAMED_SEEDS = 1000


def seeds_needed(effect: float, sigma: float, floor: float = 0.0, paired: bool = True,
                 alpha: float | None = None, target_power: float | None = None) -> int | None:
  """The fewest seeds (at least MIN_SEEDS) with which a t-test detects ``effect`` at
  ``target_power``. None when no number of seeds can: the floor (the evaluation
  grid's resolution) is as wide as the effect itself, or the count passes
  MAX_NAMED_SEEDS."""
  alpha = rule.planning_alpha() if alpha is None else alpha
  target_power = rule.POWER if target_power is None else target_power
  if floor >= abs(effect):
    return None
  for n in range(max(2, rule.MIN_SEEDS), MAX_NAMED_SEEDS + 1):
    if power(n, abs(effect), sigma, alpha, paired) >= target_power:
      return n
  return None
