"""The rule's speed statistic: how many updates a normalizer needs, as a ratio to the
baseline's, to reach where the baseline was at each quarter of its run.

The **levels** are the baseline's own smoothed validation curve, averaged over its
seeds, at 25%, 50%, 75% and 100% of its run (the best value so far at each;
``rule.LEVEL_FRACTIONS``). For every level, each run's crossing is the update at
which its own smoothed curve first reaches it (:mod:`lnorm.analysis.curves`). A seed
of the normalizer and the same seed of the baseline, which share their data order,
make a **pair**; the pair's effect is the mean over the levels of
``log(crossing of the normalizer / crossing of the baseline)``, and the statistic is
the mean over pairs: its exponential is the geometric-mean ratio of updates. The
baseline judged against itself gives exactly 0 (a ratio of 1) for every pair.

Why levels at fractions of the run rather than the baseline's best value: the best of
a noisy curve falls wherever noise puts it, most often at the very last evaluation
of a run that is still improving, so "updates to the best" measured the run's length
rather than the baseline's speed; the quarters of the run spread the comparison over
the whole course of training (the LN paper's figures compare whole curves), each is
reached by the baseline by construction, and smoothing keeps a single evaluation from
deciding a crossing.

**Uncertainty.** The levels are estimated from the baseline's seeds, so the standard
error comes from a bootstrap that resamples the pairs (``scipy.stats.bootstrap``,
``rule.BOOTSTRAP_RESAMPLES`` resamples, a fixed generator) and recomputes the levels
from each resample's baseline seeds before the crossings: the target's uncertainty is
in the interval. The bootstrap's standard error of a mean is low by the factor
sqrt((n - 1) / n); it is scaled back, and the interval takes Student-t quantiles with
n - 1 degrees of freedom. Normalizers without matching seeds are compared unpaired:
the two sides are resampled independently, and the statistic is the difference of
the two sides' mean log crossings.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Sequence

import numpy as np
from scipy import stats

from lnorm.analysis import curves as curves_lib
from lnorm.analysis import rule
from lnorm.analysis.inference import Estimate


@dataclasses.dataclass(frozen=True)
class Side:
  """One side of a comparison: a normalizer's curves by seed."""
  seeds: tuple[int, ...]
  curves: tuple[curves_lib.Curve, ...]


@dataclasses.dataclass(frozen=True)
class SpeedResult:
  estimate: Estimate
  levels: np.ndarray  # The levels from every baseline seed (lower is better).
  censored: int  # Crossings of the normalizer "after the run", of seeds x levels.
  censored_baseline: int
  crossings: int  # seeds x levels of the normalizer.
  left_out: tuple[int, ...] = ()  # Seeds without a partner, when paired.

  @property
  def ratio(self) -> float:
    return math.exp(self.estimate.value)


class _Crossings:
  """The crossings of every run of both sides for a batch of level sets."""

  def __init__(self, base: Side, other: Side, fractions: Sequence[float]):
    every = list(base.curves) + list(other.curves)
    _, self.after_run = curves_lib.censoring_place(every)
    finished = [c for c in base.curves if not c.diverged and len(c.steps)]
    reference = max(finished or base.curves, key=lambda c: len(c.steps))
    self.steps = reference.steps
    self.base_matrix = curves_lib.mean_curve(list(base.curves), self.steps)  # [Nb, K]
    # A diverged seed's curve stops early: it does not set the levels.
    self.weights = np.array([0.0 if c.diverged or not len(c.steps) else 1.0
                             for c in base.curves])
    if not self.weights.any():
      self.weights = np.ones(len(base.curves))
    self.base, self.other, self.fractions = base, other, tuple(fractions)

  def levels(self, base_index: np.ndarray) -> np.ndarray:
    """[B, Q] levels from the baseline seeds ``base_index`` [B, n] (with repeats)."""
    w = self.weights[base_index]  # [B, n]
    curves = self.base_matrix[base_index]  # [B, n, K]
    with np.errstate(invalid="ignore", divide="ignore"):
      mean = (w[..., None] * curves).sum(axis=1) / w.sum(axis=1)[..., None]
    return curves_lib.levels_at_fractions(self.steps, mean, self.fractions)

  def log_steps(self, side: Side, levels: np.ndarray) -> np.ndarray:
    """[runs, B, Q]: log crossing of each run of ``side`` for each level set."""
    return np.stack([np.log(curves_lib.crossings(c, levels, self.after_run).steps)
                     for c in side.curves])


def _gather(per_run: np.ndarray, index: np.ndarray) -> np.ndarray:
  """[B, n, Q] from [runs, B, Q] and run indices [B, n]."""
  return np.take_along_axis(per_run.transpose(1, 0, 2), index[..., None], axis=1)


def _bootstrap_se(statistic, samples: tuple[np.ndarray, ...], paired: bool) -> float:
  with warnings.catch_warnings():
    # Resamples that all agree (every seed crossing between the same evaluations) make
    # a degenerate distribution: its standard error, 0, is the answer.
    warnings.simplefilter("ignore")
    result = stats.bootstrap(samples, statistic, n_resamples=rule.BOOTSTRAP_RESAMPLES,
                             vectorized=True, paired=paired, method="percentile",
                             rng=np.random.default_rng(rule.BOOTSTRAP_SEED))
  se = float(result.standard_error)
  # Resamples that all agree still differ in the last bits of a float sum.
  return 0.0 if not math.isfinite(se) or se < 1e-12 else se


def _floor(crossings: list[curves_lib.Crossings]) -> float:
  """The evaluation grid's resolution, which the interval's half-width never goes
  below: a log ratio of two crossings can lie anywhere in a range as wide as the sum
  of their brackets' log-widths, so its half-width is their mean; averaged over the
  pairs and levels, that is the mean log-width of every bracket of both sides
  (censored crossings, which have no bracket, left out)."""
  widths = np.concatenate([np.where(c.censored, np.nan, c.log_width).ravel()
                           for c in crossings])
  widths = widths[np.isfinite(widths)]
  return float(widths.mean()) if widths.size else 0.0


def speed(base: Side, other: Side,
          fractions: Sequence[float] = rule.LEVEL_FRACTIONS) -> SpeedResult | None:
  """The speed statistic of ``other`` against ``base`` (see the module docstring);
  None when either side has no run."""
  if not base.curves or not other.curves:
    return None
  common = sorted(set(base.seeds) & set(other.seeds))
  # Pairs when the pilot's worth of seeds match (or every seed, below the pilot).
  paired = bool(common) and len(common) >= min(rule.MIN_SEEDS, len(base.seeds),
                                               len(other.seeds))
  left_out: tuple[int, ...] = ()
  if paired:
    left_out = tuple(sorted(set(base.seeds) ^ set(other.seeds)))
    base = Side(tuple(common), tuple(base.curves[base.seeds.index(s)] for s in common))
    other = Side(tuple(common), tuple(other.curves[other.seeds.index(s)] for s in common))
  x = _Crossings(base, other, fractions)

  def pair_effects(index: np.ndarray) -> np.ndarray:
    index = np.atleast_2d(index)
    levels = x.levels(index)
    return (_gather(x.log_steps(other, levels), index)
            - _gather(x.log_steps(base, levels), index)).mean(axis=-1)  # [B, n]

  def paired_statistic(index, axis=-1):
    del axis
    out = pair_effects(np.asarray(index)).mean(axis=-1)
    return out if np.ndim(index) > 1 else out[0]

  def unpaired_statistic(base_index, other_index, axis=-1):
    del axis
    b, o = np.atleast_2d(base_index), np.atleast_2d(other_index)
    levels = x.levels(b)
    out = (_gather(x.log_steps(other, levels), o).mean(axis=(1, 2))
           - _gather(x.log_steps(base, levels), b).mean(axis=(1, 2)))
    return out if np.ndim(base_index) > 1 else out[0]

  nb, no = len(base.curves), len(other.curves)
  full_levels = x.levels(np.arange(nb)[None])[0]
  base_cross = [curves_lib.crossings(c, full_levels, x.after_run) for c in base.curves]
  other_cross = [curves_lib.crossings(c, full_levels, x.after_run) for c in other.curves]
  if paired:
    n = nb
    value = float(paired_statistic(np.arange(n)))
    se = _bootstrap_se(paired_statistic, (np.arange(n),), True) if n > 1 else 0.0
    se *= math.sqrt(n / (n - 1)) if n > 1 else 1.0
    estimate = Estimate(value, se, n - 1, n, True, _floor(base_cross + other_cross))
  else:
    n = min(nb, no)
    value = float(unpaired_statistic(np.arange(nb), np.arange(no)))
    se = (_bootstrap_se(unpaired_statistic, (np.arange(nb), np.arange(no)), False)
          if n > 1 else 0.0)
    se *= math.sqrt(n / (n - 1)) if n > 1 else 1.0
    estimate = Estimate(value, se, n - 1, nb if nb <= no else no, False,
                        _floor(base_cross + other_cross), n_other=max(nb, no))
  return SpeedResult(
      estimate, full_levels,
      censored=int(sum(c.censored.sum() for c in other_cross)),
      censored_baseline=int(sum(c.censored.sum() for c in base_cross)),
      crossings=no * len(fractions), left_out=left_out)
