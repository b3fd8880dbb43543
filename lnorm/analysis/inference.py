"""From an estimate and its standard error to what the rule needs: the 95% interval,
the p-value, Holm's adjustment over the claims, and the seeds a claim needs.

An :class:`Estimate` is one claim's effect (a mean log ratio of updates, or a mean
difference of values) with the standard error of everything estimated on the way,
the target included, and the degrees of freedom of its Student-t reference. With 3 to
10 seeds a normal interval would be too narrow, so intervals and p-values take t
quantiles. The ``floor`` is the smallest half-width the data can support (the
evaluation grid's resolution for crossings): an interval is never narrower.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

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
  def half_width(self) -> float:
    t = stats.t.ppf(0.5 + rule.CONFIDENCE / 2, self.df) if self.df > 0 else math.inf
    spread = t * self.se if self.se > 0 else 0.0
    return max(spread, self.floor)

  @property
  def low(self) -> float:
    return self.value - self.half_width

  @property
  def high(self) -> float:
    return self.value + self.half_width

  def p_value(self, null: float = 0.0) -> float:
    """Two-sided p of a t-test of ``value == null``; 1 when nothing varies and the
    value is the null, 0 when nothing varies and it is not."""
    if self.se <= 0 or self.df <= 0:
      return 1.0 if self.value == null else 0.0
    t = (self.value - null) / self.se
    return float(2 * stats.t.sf(abs(t), self.df))

  def one_sided_p(self, null: float, above: bool) -> float:
    """p of a one-sided t-test that the effect lies above (``above``) or below
    ``null``."""
    if self.se <= 0 or self.df <= 0:
      return 0.0 if (self.value > null if above else self.value < null) else 1.0
    t = (self.value - null) / self.se
    return float(stats.t.sf(t, self.df) if above else stats.t.cdf(t, self.df))

  @property
  def sigma(self) -> float:
    """The spread of one seed's effect (paired), or of one side's seed (unpaired),
    that the standard error implies: what the power rule plans with."""
    if self.paired:
      return self.se * math.sqrt(self.n)
    return self.se / math.sqrt(1 / self.n + 1 / (self.n_other or self.n))


def holm(pvalues: Sequence[float]) -> list[float]:
  """Holm's step-down adjusted p-values, in the order given: the i-th smallest of m
  is multiplied by (m - i + 1), and each adjusted value is at least the one before
  it in that order (Holm 1979)."""
  m = len(pvalues)
  order = sorted(range(m), key=lambda i: pvalues[i])
  adjusted = [0.0] * m
  running = 0.0
  for rank, i in enumerate(order):
    running = max(running, min(1.0, (m - rank) * pvalues[i]))
    adjusted[i] = running
  return adjusted


def power(n: int, effect: float, sigma: float, alpha: float, paired: bool = True) -> float:
  """The power of a two-sided t-test at level ``alpha`` to detect ``effect`` with
  ``n`` seeds (per side when unpaired), each with spread ``sigma`` (noncentral t)."""
  if sigma <= 0:
    return 1.0
  if paired:
    df, ncp = n - 1, effect * math.sqrt(n) / sigma
  else:
    df, ncp = 2 * n - 2, effect / (sigma * math.sqrt(2 / n))
  if df < 1:
    return 0.0
  t = stats.t.ppf(1 - alpha / 2, df)
  return float(stats.nct.sf(t, df, ncp) + stats.nct.cdf(-t, df, ncp))


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
