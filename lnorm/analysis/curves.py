"""Held-out curves as the benchmark's rule reads them: smoothed over neighbouring
evaluations, and the update at which a curve first reaches a level.

Every curve is turned so that lower is better (a higher-is-better metric such as
order-embeddings' R-sum is negated), so one comparison serves every metric.

- **Smoothing**: the mean of each evaluation and its two neighbours (one neighbour at
  either end of the curve). A single lucky or unlucky evaluation then moves a crossing
  by at most one evaluation, instead of deciding it (order-embeddings' validation
  R-sum moves by about 4 points between successive evaluations).
- **Crossing**: the first evaluation at which the smoothed curve is at or below a
  level, interpolated linearly between that evaluation and the one before it (the
  curve is known only at evaluations; the interpolated update is the best estimate of
  where it crossed). The **bracket** of a crossing is the pair of evaluations it lies
  between; its width on the log scale, ``log(t_k / t_(k-1))``, is the evaluation
  grid's resolution there, which the rule's intervals never go below.
- A curve that never reaches a level within its run is **censored**: its crossing is
  "after the run", placed at the next evaluation the run would have made (the last
  evaluation plus the last spacing), the earliest update at which it could have been
  seen. It is neither dropped nor counted as a failure.

Everything here is vectorised over a leading batch of level sets, because the rule's
bootstrap recomputes the levels for every resample.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from lnorm.analysis.runs import Run


@dataclasses.dataclass(frozen=True)
class Curve:
  """A run's held-out curve, lower is better: ``steps`` increasing, ``values`` finite."""
  steps: np.ndarray  # float64 [K]
  values: np.ndarray  # float64 [K], the metric, negated when higher is better.
  diverged: bool  # The run stopped on a loss or gradient that was not finite.

  @property
  def smoothed(self) -> np.ndarray:
    return smooth(self.values)


def curve(run: Run, metric: str, lower_is_better: bool) -> Curve:
  """``metric`` at every evaluation of ``run`` that logged a finite value; a step
  logged twice keeps its last value (a resumed run can repeat an evaluation)."""
  by_step: dict[float, float] = {}
  for record in run.records(metric):
    value, step = float(record[metric]), record.get("step")
    if step is not None and math.isfinite(value):
      by_step[float(step)] = value if lower_is_better else -value
  steps = np.array(sorted(by_step), dtype=np.float64)
  values = np.array([by_step[s] for s in steps], dtype=np.float64)
  return Curve(steps, values, run.diverged)


def smooth(values: np.ndarray) -> np.ndarray:
  """Each value averaged with its neighbours: three points, two at either end."""
  values = np.asarray(values, dtype=np.float64)
  if len(values) < 3:
    return values.copy() if len(values) < 2 else np.full_like(values, values.mean())
  padded_sum = np.convolve(values, np.ones(3), mode="same")
  counts = np.full(len(values), 3.0)
  counts[0] = counts[-1] = 2.0
  return padded_sum / counts


def levels_at_fractions(steps: np.ndarray, mean_curves: np.ndarray,
                        fractions: tuple[float, ...]) -> np.ndarray:
  """The levels a reference (the baseline's mean smoothed curve) had reached by each
  fraction of its run: the best value at the evaluations up to ``fraction`` x the
  last evaluated update. ``mean_curves`` is ``[..., K]`` on ``steps``; returns
  ``[..., len(fractions)]``. Taking the best so far keeps the levels in order when
  the reference curve rises again (overfitting)."""
  running_best = np.minimum.accumulate(mean_curves, axis=-1)
  out = []
  for f in fractions:
    k = int(np.searchsorted(steps, f * steps[-1], side="right")) - 1
    out.append(running_best[..., max(k, 0)])
  return np.stack(out, axis=-1)


@dataclasses.dataclass(frozen=True)
class Crossings:
  """Where a curve first reaches each of a batch of levels, shaped like the levels."""
  steps: np.ndarray  # The interpolated update; "after the run" where censored.
  censored: np.ndarray  # bool: never reached within the run.
  log_width: np.ndarray  # log(t_k / t_(k-1)) of the bracket; 0 where censored.


def crossings(c: Curve, levels: np.ndarray, after_run: float) -> Crossings:
  """The crossing of each level in ``levels`` (any shape) by ``c``'s smoothed curve.

  ``after_run`` is the update a censored crossing is placed at (see
  :func:`censoring_place`): a diverged run, whose curve stops early, never reaches a
  level it had not reached, so it is censored at the same place as a run that ran to
  the end without reaching it.
  """
  levels = np.asarray(levels, dtype=np.float64)
  s, t = c.smoothed, c.steps
  if len(t) == 0:
    shape = levels.shape
    return Crossings(np.full(shape, after_run), np.ones(shape, bool), np.zeros(shape))
  below = s <= levels[..., None]  # [..., K]
  reached = below.any(axis=-1)
  k = np.argmax(below, axis=-1)
  prev = np.maximum(k - 1, 0)
  s_k, s_prev, t_k, t_prev = s[k], s[prev], t[k], t[prev]
  with np.errstate(divide="ignore", invalid="ignore"):
    share = np.where(k > 0, (s_prev - levels) / (s_prev - s_k), 1.0)
  step = np.where(k > 0, t_prev + share * (t_k - t_prev), t_k)
  # A crossing at the first evaluation has no evaluation before it: its resolution is
  # taken as the grid's first spacing.
  first_width = math.log(t[1] / t[0]) if len(t) > 1 and t[0] > 0 else 0.0
  with np.errstate(divide="ignore"):
    width = np.where(k > 0, np.log(t_k / np.where(t_prev > 0, t_prev, t_k)), first_width)
  return Crossings(np.where(reached, step, after_run), ~reached,
                   np.where(reached, width, 0.0))


def censoring_place(curves: list[Curve]) -> tuple[float, float]:
  """(the comparison's last evaluated update, the update a censored crossing is put
  at): the last evaluation of the longest run plus that run's last spacing."""
  longest = max(curves, key=lambda c: (c.steps[-1] if len(c.steps) else -1.0))
  t = longest.steps
  if len(t) == 0:
    return 0.0, 1.0
  spacing = t[-1] - t[-2] if len(t) > 1 else t[-1]
  return float(t[-1]), float(t[-1] + spacing)


def mean_curve(curves: list[Curve], steps: np.ndarray) -> np.ndarray:
  """``[len(curves), K]``: each curve's smoothed values on ``steps`` (interpolated
  where a run evaluated at other updates; held at its last value past its end)."""
  return np.stack([np.interp(steps, c.steps, c.smoothed) for c in curves])


def still_improving(c: Curve, share: float) -> bool:
  """True when the smoothed curve's best improved, over the last quarter of the run,
  by more than ``share`` of the whole run's improvement (first evaluation to best):
  the run ended before it converged. A curve whose best came earlier (it overfits
  afterwards) has converged."""
  s, t = c.smoothed, c.steps
  if len(t) < 2:
    return False
  total = s[0] - s.min()
  if total <= 0:
    return False
  before = t < t[0] + 0.75 * (t[-1] - t[0])
  last_quarter = s[before].min() - s.min()
  return bool(last_quarter > share * total)
