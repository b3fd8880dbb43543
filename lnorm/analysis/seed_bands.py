"""A metric's curve per setting as the mean over its seeds, with a 95% band.

Runs are grouped by what tells them apart other than the seed (``norm=ln`` against
``norm=none``; ``batch_size=25,norm=bln``), as ``lnorm.analysis.runs.label_runs``
finds it. At each step (or epoch) a group's curve is the mean over the seeds that
logged the metric there, and its band the 95% t-interval of that mean
(``lnorm.analysis.claims.mean_interval``, the interval the headline table uses).
Only the points every seed of a group logged are kept, so that a seed which stopped
early (a non-finite loss) cannot make the curve jump where it ends.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from lnorm.analysis import claims
from lnorm.analysis.runs import (LABEL_IGNORE, Run, distinguishing_keys, fields_every_run_has,
                                 is_seed, setting_name, used_settings)


@dataclasses.dataclass(frozen=True)
class Band:
  """One setting's curve: at each x the mean over ``seeds`` runs and its 95% interval
  (NaN with one seed)."""
  label: str
  seeds: int
  xs: tuple[float, ...]
  mean: tuple[float, ...]
  low: tuple[float, ...]
  high: tuple[float, ...]


def group_by_setting(runs: Sequence[Run]) -> dict[str, list[Run]]:
  """The runs by their setting without the seed, named by the fields that differ
  (``norm=ln``), in first-seen order; one unnamed group when only seeds differ."""
  shared = fields_every_run_has([used_settings(r) for r in runs])
  keys = [k for k in distinguishing_keys(shared, ignore=LABEL_IGNORE) if not is_seed(k)]
  groups: dict[str, list[Run]] = {}
  for run, setting in zip(runs, shared):
    groups.setdefault(setting_name(setting, keys), []).append(run)
  return groups


def band(label: str, runs: Sequence[Run], metric: str, x: str = "step") -> Band | None:
  """``metric``'s mean and interval over ``runs`` at every x all of them logged it,
  except where a seed's value is not finite; None when no such point remains."""
  per_run = []
  for r in runs:
    xs, ys = r.series(metric, x)
    per_run.append(dict(zip(xs, ys)))
  common = sorted(set.intersection(*(set(p) for p in per_run))) if per_run else []
  means, lows, highs, kept = [], [], [], []
  for at in common:
    values = [p[at] for p in per_run]
    if not all(math.isfinite(v) for v in values):
      continue  # A diverged seed's point: no mean would be honest there.
    interval = claims.mean_interval(values)
    kept.append(at)
    means.append(interval.estimate)
    lows.append(interval.low)
    highs.append(interval.high)
  if not kept:
    return None
  return Band(label, len(runs), tuple(kept), tuple(means), tuple(lows), tuple(highs))


def bands(runs: Sequence[Run], metric: str, x: str = "step") -> list[Band]:
  """One band per setting (see :func:`group_by_setting`) that logged ``metric``."""
  out = []
  for label, group in group_by_setting(runs).items():
    b = band(label, group, metric, x)
    if b is not None:
      out.append(b)
  return out


def from_x(b: Band, start: float) -> Band | None:
  """``b`` from ``x >= start`` on (a log axis has no place for update 0); None if empty."""
  keep = [i for i, at in enumerate(b.xs) if at >= start]
  if not keep:
    return None
  pick = lambda values: tuple(values[i] for i in keep)
  return Band(b.label, b.seeds, pick(b.xs), pick(b.mean), pick(b.low), pick(b.high))
