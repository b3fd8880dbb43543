"""The rule's validity gate: no verdict on a task that cannot show the claim.

Two checks, each a distinct label, never "not reproduced":

- **the task is learned**: the experiment's baseline (``norm=none``) must beat its
  trivial model clearly, that is, the 95% t-interval of the mean over its seeds of
  each seed's best validation value lies entirely on the better side of the trivial
  model's value (majority class, unigram model, most frequent candidate: each
  experiment records its own in config.json, :attr:`lnorm.analysis.runs.Run.trivial`);
- **the run reaches convergence**, for the claims that are about it (final-value
  claims, and speed claims whose paper speaks of convergence or of reaching the
  baseline's best): most seeds of the side the claim is judged against must have
  converged, by :func:`lnorm.analysis.curves.still_improving` with
  ``rule.CONVERGED_SHARE``. The other speed claims are judged on the speed statistic,
  which compares the curves over the run as far as it goes and needs no convergence.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np
from scipy import stats

from lnorm.analysis import curves as curves_lib
from lnorm.analysis import rule
from lnorm.analysis.runs import Run


@dataclasses.dataclass(frozen=True)
class Gate:
  passed: bool
  why: str  # What was found, with numbers (also when passed).


def trivial_value(runs: Sequence[Run], metric: str) -> tuple[float, str] | None:
  """(value, the trivial model's name) of ``metric`` from the runs' records; None
  when no run recorded one."""
  for r in runs:
    values = (r.trivial or {}).get("values") or {}
    if isinstance(values.get(metric), (int, float)):
      return float(values[metric]), str(r.trivial.get("model", "trivial model"))
  return None


def best_value(c: curves_lib.Curve) -> float | None:
  """The best (lowest, curves are lower-is-better) finite value of a curve."""
  return float(c.values.min()) if len(c.values) else None


def learned(baseline: Sequence[curves_lib.Curve], trivial: float, model: str,
            lower_is_better: bool) -> Gate:
  """Whether the baseline's mean best beats the trivial model's value clearly."""
  sign = 1.0 if lower_is_better else -1.0
  bests = np.array([b for b in map(best_value, baseline) if b is not None])
  shown = lambda v: f"{sign * v:.4g}"  # pylint: disable=unnecessary-lambda-assignment
  if len(bests) < 2:
    # Not a verdict on the task: the rule's pilot (3 seeds) decides what one seed shows.
    return Gate(True, f"{len(bests)} baseline seed(s) with a value: too few to tell "
                f"whether the task is learned")
  mean = float(bests.mean())
  high = float(mean + stats.t.ppf(0.5 + rule.CONFIDENCE / 2, len(bests) - 1)
               * bests.std(ddof=1) / math.sqrt(len(bests)))
  where = (f"the baseline's mean best {shown(mean)} (95% up to {shown(high)}) against "
           f"the {model}'s {shown(sign * trivial)}")
  return Gate(high < sign * trivial, where)


def converged(side: Sequence[curves_lib.Curve], name: str) -> Gate:
  """Whether most of ``side``'s seeds converged before their run ended."""
  finished = [c for c in side if not c.diverged]
  improving = sum(curves_lib.still_improving(c, rule.CONVERGED_SHARE) for c in finished)
  why = (f"{improving} of {len(finished)} {name} seeds still improving over their last "
         f"quarter by more than {rule.CONVERGED_SHARE:.0%} of their run's improvement")
  return Gate(improving * 2 <= len(finished), why)


def evaluated_each_level(side: Sequence[curves_lib.Curve],
                         fractions: Sequence[float] = rule.LEVEL_FRACTIONS) -> Gate:
  """Whether the curves were evaluated in every stretch of the run that a level of
  the speed statistic ends (the first quarter, the second, ...): a level with no
  evaluation before it would be set by an evaluation of a later stretch."""
  finished = [c for c in side if not c.diverged and len(c.steps)] or list(side)
  longest = max(finished, key=lambda c: len(c.steps))
  t = longest.steps
  if not len(t):
    return Gate(False, "no evaluation at all")
  edges = [0.0] + [f * t[-1] for f in fractions]
  empty = [f for f, lo, hi in zip(fractions, edges, edges[1:]) if not ((t > lo) & (t <= hi)).any()]
  why = f"{len(t)} evaluation(s)"
  if empty:
    return Gate(False, f"{why}, none in the stretch of the run that ends at "
                f"{', '.join(f'{f:.0%}' for f in empty)} of it: the speed statistic needs "
                "one in each")
  return Gate(True, why)
