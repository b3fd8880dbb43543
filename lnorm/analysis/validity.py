"""The rule's validity gate: no verdict on a task that cannot show the claim.

Checks, each a distinct label, never "not reproduced":

- **both arms learn** (rule version 3): each side of a claim must beat the
  experiment's trivial model clearly, that is, the 95% t-interval of the mean over its
  seeds of each seed's best validation value lies entirely on the better side of the
  trivial model's value (majority class, unigram model, most frequent candidate: each
  experiment records its own in config.json, :attr:`lnorm.analysis.runs.Run.trivial`).
  A comparison with an arm that never learned measures where its censored crossings
  were placed, not a normalizer. (Version 2 checked the experiment's ``norm=none``
  alone, and skipped the check where a claim's cell had no such run.) An at-chance
  claim, about an arm that does not learn, asks it of the cell's other normalizers:
  the task must be learnable there;
- **the run reaches convergence**, for the claims that are about it (final-value
  claims, and speed claims whose paper speaks of convergence or of reaching the
  baseline's best): most seeds of the side the claim is judged against must have
  converged, by :func:`lnorm.analysis.curves.still_improving` with
  ``rule.CONVERGED_SHARE``. The other speed claims are judged on the speed statistic,
  which compares the curves over the run as far as it goes and needs no convergence;
- **every quarter evaluated**, for speed claims.
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


def learned(bests: Sequence[float], trivial: float, model: str, name: str,
            lower_is_better: bool) -> Gate:
  """Whether the arm ``name`` beats the trivial model clearly: the upper 95% bound of
  its seeds' mean best value lies below the trivial model's value. ``bests`` and
  ``trivial`` are lower-is-better (negated for a higher-is-better metric), as the
  rule's curves are; a seed that diverged before any value counts as the trivial
  model (the caller's ``claims._values``)."""
  sign = 1.0 if lower_is_better else -1.0
  values = np.asarray(bests, dtype=np.float64)
  shown = lambda v: f"{sign * v:.4g}"  # pylint: disable=unnecessary-lambda-assignment
  if len(values) < 2:
    # Not a verdict on the task: the rule's pilot (3 seeds) decides what one seed shows.
    return Gate(True, f"{len(values)} {name} seed(s) with a value: too few to tell "
                f"whether it learns")
  mean = float(values.mean())
  bound = float(mean + stats.t.ppf(0.5 + rule.CONFIDENCE / 2, len(values) - 1)
                * values.std(ddof=1) / math.sqrt(len(values)))
  where = (f"mean best {shown(mean)} over {len(values)} seeds (95% bound "
           f"{shown(bound)}) against the {model}'s {shown(trivial)}")
  return Gate(bound < trivial, where)


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
