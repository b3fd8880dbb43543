"""The benchmark's statistics and verdicts: the headline table and one verdict per claim.

Every number starts from :func:`lnorm.analysis.compare.compare` (updates and time to
the baseline's best held-out value, per run) on the runs and metric that the
normalizer table takes (:mod:`lnorm.analysis.norm_table`). Over seeds:

- a **ratio** (updates or time to target, divided by the baseline's) is summarised
  by its geometric mean and a 95% Student-t interval computed on the logarithms of
  the per-seed ratios (``scipy.stats.t``), then exponentiated: ratios are
  multiplicative, and the interval of a log ratio is symmetric in speed-up and
  slow-down. Seeds that never reached the target have no ratio; they are counted;
- a **best held-out value** by its mean and 95% t-interval;
- a difference of two settings' best values (a "final" claim) by Welch's t-interval
  (``scipy.stats.ttest_ind(equal_var=False).confidence_interval``).

The verdict rule is :func:`speed_verdict` and :func:`final_verdict`, stated in
``docs/benchmark.md`` before the runs.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Sequence

import numpy as np
from scipy import stats

from lnorm.analysis import compare
from lnorm.analysis import norm_table
from lnorm.analysis import report
from lnorm.analysis.runs import Run
from lnorm.errors import UserError

CONFIDENCE = 0.95
#: Fewer finished seeds than this on either side of a claim: inconclusive.
MIN_SEEDS = 3
#: A speed claim is not reproduced when the interval rules out a saving larger than
#: this (its lower end is at or above 1 - NO_EFFECT_MARGIN).
NO_EFFECT_MARGIN = 0.1

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive at this scale"
#: Not a verdict: one side of the claim has no finished runs.
NOT_RUN = "not run yet"


@dataclasses.dataclass(frozen=True)
class Interval:
  """A point estimate and its 95% interval over ``n`` seeds; the interval is NaN
  with one seed, and equal to the estimate when every seed agrees."""
  estimate: float
  low: float
  high: float
  n: int

  def text(self, fmt: str = ".2f") -> str:
    if self.n == 1:
      return f"{self.estimate:{fmt}} (1 seed)"
    return f"{self.estimate:{fmt}} [{self.low:{fmt}}, {self.high:{fmt}}]"


def _t_interval(values: np.ndarray) -> tuple[float, float, float]:
  mean = float(np.mean(values))
  if len(values) < 2:
    return mean, math.nan, math.nan
  se = float(stats.sem(values))
  if se == 0:
    return mean, mean, mean
  low, high = stats.t.interval(CONFIDENCE, len(values) - 1, loc=mean, scale=se)
  return mean, float(low), float(high)


def ratio_interval(ratios: Sequence[float]) -> Interval | None:
  """Geometric mean and 95% t-interval of positive ratios, on their logs."""
  if not ratios:
    return None
  logs = np.log(np.asarray(ratios, dtype=np.float64))
  mean, low, high = _t_interval(logs)
  return Interval(math.exp(mean), math.exp(low), math.exp(high), len(ratios))


def mean_interval(values: Sequence[float]) -> Interval | None:
  """Mean and 95% t-interval."""
  if not values:
    return None
  mean, low, high = _t_interval(np.asarray(values, dtype=np.float64))
  return Interval(mean, low, high, len(values))


def difference_interval(a: Sequence[float], b: Sequence[float]) -> Interval | None:
  """mean(a) - mean(b) and Welch's 95% interval; None with fewer than 2 of either."""
  if len(a) < 2 or len(b) < 2:
    return None
  a_, b_ = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
  difference = float(a_.mean() - b_.mean())
  if np.ptp(a_) == 0 and np.ptp(b_) == 0:
    return Interval(difference, difference, difference, min(len(a), len(b)))
  ci = stats.ttest_ind(a_, b_, equal_var=False).confidence_interval(CONFIDENCE)
  return Interval(difference, float(ci.low), float(ci.high), min(len(a), len(b)))


# --- verdicts ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Verdict:
  verdict: str
  why: str


def speed_verdict(group: compare.Group, baseline: compare.Group) -> Verdict:
  """The rule for "``group`` reaches the baseline's best held-out value in fewer
  updates", on the groups of one :class:`compare.Comparison`:

  1. fewer than MIN_SEEDS runs on either side: inconclusive;
  2. fewer than half of the claimed normalizer's seeds reach the target: not
     reproduced (it does not get where the baseline gets);
  3. every seed reaches it and the 95% interval of the ratio lies below 1:
     reproduced;
  4. the interval's lower end is at or above 1 - NO_EFFECT_MARGIN (a saving above
     10% is ruled out): not reproduced;
  5. otherwise inconclusive.
  """
  n, n_base = len(group.runs), len(baseline.runs)
  if n < MIN_SEEDS or n_base < MIN_SEEDS:
    return Verdict(INCONCLUSIVE, f"{n} and {n_base} seeds; the rule needs {MIN_SEEDS}")
  reached = len(group.reached)
  if reached * 2 < n:
    return Verdict(NOT_REPRODUCED, f"{reached}/{n} seeds reached the target")
  interval = ratio_interval([r.step_ratio for r in group.reached])
  where = f"updates ratio {interval.text()}, {reached}/{n} seeds reached"
  if reached == n and interval.high < 1:
    return Verdict(REPRODUCED, where)
  if interval.low >= 1 - NO_EFFECT_MARGIN:
    return Verdict(NOT_REPRODUCED, where)
  return Verdict(INCONCLUSIVE, where)


def final_verdict(group: compare.Group, baseline: compare.Group,
                  lower_is_better: bool) -> Verdict:
  """The rule for "``group`` ends with a better best held-out value than the
  baseline": with at least MIN_SEEDS seeds each, Welch's 95% interval of the
  difference of the mean best values entirely on the better side of 0: reproduced;
  entirely on the worse side: not reproduced; otherwise (or with fewer seeds)
  inconclusive."""
  return values_verdict([r.best for r in group.runs if r.best is not None],
                        [r.best for r in baseline.runs if r.best is not None],
                        lower_is_better, "best values")


def values_verdict(ours: Sequence[float], theirs: Sequence[float], lower_is_better: bool,
                   what: str) -> Verdict:
  """The final-value rule on one value per seed of each side (``what`` names them)."""
  if len(ours) < MIN_SEEDS or len(theirs) < MIN_SEEDS:
    return Verdict(INCONCLUSIVE, f"{len(ours)} and {len(theirs)} seeds; the rule needs "
                   f"{MIN_SEEDS}")
  interval = difference_interval(ours, theirs)
  where = f"difference of {what} {interval.text('.4g')}"
  better = interval.high < 0 if lower_is_better else interval.low > 0
  worse = interval.low > 0 if lower_is_better else interval.high < 0
  if better:
    return Verdict(REPRODUCED, where)
  if worse:
    return Verdict(NOT_REPRODUCED, where)
  return Verdict(INCONCLUSIVE, where)


# --- the headline table ---------------------------------------------------------------------


@dataclasses.dataclass
class Row:
  """One normalizer in one column of :mod:`norm_table`: its seeds against the target."""
  experiment: str
  context: str
  norm: str
  metric: str
  runs: int
  reached: int
  steps: Interval | None
  seconds: Interval | None
  best: Interval | None
  problem: str = ""
  diverged: int = 0  # Runs that stopped on a value that was not finite.


def _comparison(runs: Sequence[Run], metric: str, baseline_norm: str) -> compare.Comparison:
  (comparison,) = compare.compare(runs, metric, f"norm={baseline_norm}")
  return comparison


def headline_rows(runs: Sequence[Run], metrics: Mapping[str, str] | None = None) -> list[Row]:
  """A row per experiment column and normalizer, baseline (norm=none) first.

  ``metrics`` names an experiment's held-out metric where the one ``lnorm report``
  takes would not test the claim (order-embeddings' R@1 of caption retrieval alone,
  where the paper's validation score sums six recalls)."""
  table = norm_table.from_runs(runs)
  out = []
  for column in table.columns:
    metric = (metrics or {}).get(column.experiment) or column.metric
    baseline = column.cells.get(("none", ""))
    for key in table.rows:
      cell = column.cells.get(key)
      if cell is None:
        continue
      norm = f"{key[0]}, {key[1]}" if key[1] else key[0]
      row = Row(column.experiment, column.context, norm, metric or "", len(cell.runs),
                0, None, None, None)
      if baseline is None or not metric or (column.problem and metric == column.metric):
        row.problem = column.problem or "no baseline run"
        out.append(row)
        continue
      members = baseline.runs + ([] if key == ("none", "") else cell.runs)
      try:
        comparison = _comparison(members, metric, "none")
      except UserError as e:  # E.g. a run that did not log the metric.
        row.problem = str(e)
      else:
        group = (comparison.baseline_group if key == ("none", "") else
                 next(g for g in comparison.groups if not g.is_baseline))
        row.reached = len(group.reached)
        row.diverged = sum(r.run.diverged for r in group.runs)
        row.steps = ratio_interval([r.step_ratio for r in group.reached if r.step_ratio])
        seconds = [r.seconds_ratio for r in group.reached]
        row.seconds = ratio_interval(seconds) if seconds and None not in seconds else None
        row.best = mean_interval([r.best for r in group.runs if r.best is not None])
      out.append(row)
  return out


HEADER = ("experiment", "normalizer", "held-out metric", "seeds reached / run",
          "updates to target ÷ baseline's", "time ÷ baseline's", "best held-out value")


def headline_markdown(rows: Sequence[Row]) -> str:
  lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
  for r in rows:
    where = f", {r.context}" if r.context else ""
    norm = f"{r.norm} (baseline)" if r.norm == "none" else r.norm
    if r.problem:
      cells = [f"{r.experiment}{where}", norm, r.metric, f"—/{r.runs}", r.problem, "", ""]
    else:
      stopped = f" ({r.diverged} diverged)" if r.diverged else ""
      cells = [f"{r.experiment}{where}", norm, r.metric, f"{r.reached}/{r.runs}{stopped}",
               r.steps.text() if r.steps else "never",
               r.seconds.text() if r.seconds else "n/a",
               r.best.text(".4g") if r.best else "—"]
    lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
  return "\n".join(lines) + "\n"


# --- judging one claim -------------------------------------------------------------------------


def finished_runs(runs: Sequence[Run], experiment: str) -> list[Run]:
  """The runs of ``experiment`` that a verdict counts: trained to the end, or stopped
  as not finite (a seed that never reaches the target)."""
  return [r for r in runs if str(r.config.get("experiment")) == experiment
          and report._finished(r)]  # pylint: disable=protected-access


def judge(runs: Sequence[Run], experiment: str, norm: str, against: str, kind: str = "speed",
          where: Mapping[str, str] | None = None, metric: str | None = None) -> Verdict:
  """The verdict on "``norm`` beats ``against``" from the finished runs of
  ``experiment`` that match ``where`` (config fields), on ``metric``, by default the
  one the headline table takes for the experiment."""
  finished = finished_runs(runs, experiment)
  if not finished:
    return Verdict(NOT_RUN, "no finished runs yet")
  metric = metric or report._target_metric(experiment, finished)  # pylint: disable=protected-access
  chosen = [r for r in finished if compare.matches(r.config, where or {})
            and str(r.config.get("norm")) in (norm, against)]
  have = {str(r.config.get("norm")) for r in chosen}
  missing = [n for n in (norm, against) if n not in have]
  if missing:
    return Verdict(NOT_RUN, f"no finished {' or '.join(missing)} runs yet")
  if metric is None:
    return Verdict(INCONCLUSIVE, "no held-out metric that every run logged")
  comparisons = compare.compare(chosen, metric, f"norm={against}")
  if len(comparisons) != 1:
    return Verdict(INCONCLUSIVE, "the runs differ in more than the normalizer and seed")
  (c,) = comparisons
  group = next(g for g in c.groups if not g.is_baseline)
  if kind == "speed":
    verdict = speed_verdict(group, c.baseline_group)
  elif kind == "final":
    verdict = final_verdict(group, c.baseline_group, c.lower_is_better)
  else:
    raise ValueError(f"Unknown claim kind {kind!r}: expected speed or final.")
  return Verdict(verdict.verdict, f"{metric}: {verdict.why}")
