"""The benchmark's verdicts, rule version 2 (``lnorm.analysis.rule``): one verdict per
claim, and the headline table.

A claim compares two sides of one experiment: the runs whose config field (``norm``
by default) has the claim's value, and those with the value it is judged against,
within the runs that match ``where``. Seeds that share their data order are analysed
as pairs. Every decision is taken on a validation metric; test values are reported at
the evaluation validation selects. What a claim's kind measures:

- ``speed``: updates to reach the baseline's levels, as a ratio (:mod:`speed`);
- ``final``: each seed's best validation value (or, with ``value="bln_protocol"``,
  the BLN paper's protocol: BLN's test value under the inference configuration its
  search selected on validation, against the other's test value after its last
  epoch), as a difference;
- ``matches`` (equivalence within the minimum effect), ``matches_or_beats``
  (non-inferiority), ``at_chance`` (does not beat the trivial model by the minimum
  effect), ``step_time`` (seconds per update, as a ratio, from a dedicated timing:
  :mod:`timing`).

Each claim gets its evidence (:func:`judge`); the verdicts follow for all claims at
once (:func:`decide`), because Holm's adjustment of the p-values needs them all. The
rule in words is in ``docs/benchmark.md``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Mapping, Sequence

import numpy as np
from scipy import stats

from lnorm.analysis import bln_protocol
from lnorm.analysis import compare
from lnorm.analysis import curves as curves_lib
from lnorm.analysis import inference
from lnorm.analysis import report
from lnorm.analysis import rule
from lnorm.analysis import speed as speed_lib
from lnorm.analysis import timing as timing_lib
from lnorm.analysis import validity
from lnorm.analysis.inference import Estimate
from lnorm.analysis.runs import Run, lower_is_better, train_seconds

# The verdict labels, for readers of this module.
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = rule.REPRODUCED, rule.NOT_REPRODUCED, rule.INCONCLUSIVE
NOT_RUN, NOT_TESTABLE, NO_DIFFERENCE = rule.NOT_RUN, rule.NOT_TESTABLE, rule.NO_DIFFERENCE

KINDS, RATIO_KINDS, Claim = rule.KINDS, rule.RATIO_KINDS, rule.Claim


@dataclasses.dataclass(frozen=True)
class Interval:
  """A point estimate and its 95% interval over ``n`` seeds (NaN with one seed)."""
  estimate: float
  low: float
  high: float
  n: int

  def text(self, fmt: str = ".2f") -> str:
    if self.n == 1:
      return f"{self.estimate:{fmt}} (1 seed)"
    return f"{self.estimate:{fmt}} [{self.low:{fmt}}, {self.high:{fmt}}]"


def mean_interval(values: Sequence[float]) -> Interval | None:
  """Mean and 95% t-interval; None without values."""
  if not len(values):
    return None
  v = np.asarray(values, dtype=np.float64)
  mean = float(v.mean())
  if len(v) < 2:
    return Interval(mean, math.nan, math.nan, 1)
  se = float(stats.sem(v))
  if se == 0:
    return Interval(mean, mean, mean, len(v))
  low, high = stats.t.interval(rule.CONFIDENCE, len(v) - 1, loc=mean, scale=se)
  return Interval(mean, float(low), float(high), len(v))


def ratio_text(e: Estimate) -> str:
  return f"{math.exp(e.value):.2f} [{math.exp(e.low):.2f}, {math.exp(e.high):.2f}]"


def difference_text(e: Estimate, sign: float = 1.0) -> str:
  low, high = sorted((sign * e.low, sign * e.high))
  return f"{sign * e.value:.4g} [{low:.4g}, {high:.4g}]"


# --- the runs of a claim ---------------------------------------------------------------------


def finished_runs(runs: Sequence[Run], experiment: str) -> list[Run]:
  """The runs of ``experiment`` that a verdict counts: trained to the end, or stopped
  as not finite (a seed that never reaches a level)."""
  return [r for r in runs if str(r.config.get("experiment")) == experiment
          and report._finished(r)]  # pylint: disable=protected-access


def _seed(run: Run) -> int:
  return int(run.config.get("seed", 0))


def side_runs(runs: Sequence[Run], where: Mapping[str, str], field: str,
              value: str) -> list[Run]:
  return sorted((r for r in runs if compare.matches(r.config, {**where, field: value})),
                key=_seed)


def _side(runs: Sequence[Run], metric: str, lower: bool) -> speed_lib.Side:
  return speed_lib.Side(tuple(_seed(r) for r in runs),
                        tuple(curves_lib.curve(r, metric, lower) for r in runs))


# --- per-seed values of the final-value kinds --------------------------------------------------


def best_value(run: Run, metric: str, lower: bool) -> float | None:
  """The seed's best validation value, lower is better (negated otherwise)."""
  return validity.best_value(curves_lib.curve(run, metric, lower))


def seconds_per_update(run: Run) -> float | None:
  known = [(p.get("step"), t) for p, t in zip(run.points, train_seconds(run.points))
           if t is not None and p.get("step")]
  return known[-1][1] / known[-1][0] if known else None


def log_seconds_per_update(run: Run, metric: str, lower: bool) -> float | None:
  del metric, lower  # Time does not depend on the metric.
  v = seconds_per_update(run)
  return math.log(v) if v else None


#: How a claim reads one seed: (run, metric, lower is better) -> value, lower is
#: better. ``bln_protocol``: the BLN paper's protocol (lnorm.analysis.bln_protocol).
VALUES: dict[str, Callable[[Run, str, bool], float | None]] = {
    "best": best_value, "bln_protocol": bln_protocol.protocol_value,
    "log_seconds_per_update": log_seconds_per_update}


def _values(runs: Sequence[Run], read: str, metric: str, lower: bool,
            trivial: float | None) -> dict[int, float]:
  """One value per seed; a seed that stopped as not finite before it logged any
  value counts as the trivial model (it learned nothing), and is left out when no
  trivial value is known."""
  out = {}
  for r in runs:
    v = VALUES[read](r, metric, lower)
    if v is None and r.diverged and trivial is not None and read != "log_seconds_per_update":
      v = trivial
    if v is not None:
      out[_seed(r)] = v
  return out


def _reader(claim: Claim) -> str:
  return "log_seconds_per_update" if claim.kind == "step_time" else claim.value


def _difference(ours: Mapping[int, float], theirs: Mapping[int, float]) -> Estimate | None:
  """mean(ours) - mean(theirs): paired over common seeds when at least MIN_SEEDS
  match (a t-interval on the differences), else Welch's."""
  common = sorted(set(ours) & set(theirs))
  if len(common) >= rule.MIN_SEEDS:
    d = np.array([ours[s] - theirs[s] for s in common])
    se = float(d.std(ddof=1) / math.sqrt(len(d)))
    return Estimate(float(d.mean()), se, len(d) - 1, len(d), True)
  a, b = np.array(list(ours.values())), np.array(list(theirs.values()))
  if len(a) < 2 or len(b) < 2:
    return None
  va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
  se = math.sqrt(va + vb)
  df = ((va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
        if va + vb > 0 else min(len(a), len(b)) - 1)
  return Estimate(float(a.mean() - b.mean()), se, max(1, int(df)), min(len(a), len(b)),
                  False, n_other=max(len(a), len(b)))


def _one_sample(values: Sequence[float], minus: float) -> Estimate | None:
  v = np.asarray(values, dtype=np.float64) - minus
  if len(v) < 2:
    return None
  return Estimate(float(v.mean()), float(v.std(ddof=1) / math.sqrt(len(v))), len(v) - 1,
                  len(v), True)


# --- one claim's evidence --------------------------------------------------------------------


@dataclasses.dataclass
class Evidence:
  """What a claim's runs show, before the family's adjustment decides the verdict.

  ``verdict`` is set when no test is needed (not run, not testable, too few seeds);
  otherwise ``estimate`` and ``p`` are. Effects are oriented so that negative is the
  claimed direction (fewer updates, a lower error)."""
  claim: Claim
  metric: str
  verdict: str = ""
  why: str = ""
  estimate: Estimate | None = None
  p: float | None = None
  seeds: int = 0
  needed: int | None = None
  notes: list[str] = dataclasses.field(default_factory=list)
  speed: speed_lib.SpeedResult | None = None


def _p_value(kind: str, e: Estimate, m: float) -> float:
  """The p-value of the claim's own test, on effects oriented negative-is-claimed."""
  if kind == "matches":  # Two one-sided tests: within (-m, m).
    return max(e.one_sided_p(-m, above=True), e.one_sided_p(m, above=False))
  if kind == "matches_or_beats":  # Not worse by m or more.
    return e.one_sided_p(m, above=False)
  if kind == "at_chance":  # Not better than chance by m or more.
    return e.one_sided_p(-m, above=True)
  return e.p_value()


def _needed(claim: Claim, e: Estimate) -> int | None:
  return inference.seeds_needed(claim.effect, e.sigma, e.floor, e.paired)


def judge(runs: Sequence[Run], experiment: str, claim: Claim, metric: str,
          timings: Sequence[Mapping] = ()) -> Evidence:
  """The evidence on ``claim`` from the finished runs of ``experiment``; a step_time
  claim's from its dedicated timing among ``timings`` (``timing.load``)."""
  if claim.kind == "step_time":  # The members' logged times measure the machine's load.
    found = timing_lib.evidence(claim, timings)
    return Evidence(claim, timing_lib.METRIC, found.verdict, found.why, found.estimate,
                    found.p, notes=found.notes)
  ev = Evidence(claim, metric)
  finished = finished_runs(runs, experiment)
  ours = side_runs(finished, claim.where, claim.field, claim.norm)
  theirs = side_runs(finished, claim.where, claim.field, claim.against)
  missing = [v if claim.field == "norm" else f"{claim.field}={v}"
             for v, side in ((claim.norm, ours), (claim.against, theirs)) if not side]
  if missing:
    ev.verdict, ev.why = NOT_RUN, f"no finished {' or '.join(missing)} runs yet"
    return ev
  silent = [r.name for r in ours + theirs if not r.diverged and not r.records(metric)]
  if silent:
    ev.verdict = NOT_TESTABLE
    ev.why = f"{len(silent)} run(s) logged no {metric}: {', '.join(silent[:4])}"
    return ev
  lower = lower_is_better(metric)
  task = side_runs(finished, {k: v for k, v in claim.where.items() if k != "norm"},
                   "norm", "none")
  found = validity.trivial_value(task or ours + theirs, metric)
  trivial = None if found is None else (found[0] if lower else -found[0])
  if found is None:
    ev.notes.append("no trivial baseline recorded: the task gate was not checked")
  elif task:
    gate = validity.learned([curves_lib.curve(r, metric, lower) for r in task],
                            found[0], found[1], lower)
    if not gate.passed:
      ev.verdict, ev.why = NOT_TESTABLE, f"the task is not learned: {gate.why}"
      return ev
  if claim.kind == "speed":
    gate = validity.evaluated_each_level(
        [curves_lib.curve(r, metric, lower) for r in theirs])
    if not gate.passed:
      ev.verdict = NOT_TESTABLE
      ev.why = f"the curve is not evaluated often enough: {gate.why}"
      return ev
  if claim.needs_convergence:
    gate = validity.converged([curves_lib.curve(r, metric, lower) for r in theirs],
                              claim.against if claim.field == "norm"
                              else f"{claim.field}={claim.against}")
    if not gate.passed:
      ev.verdict = NOT_TESTABLE
      ev.why = f"the run ends before the baseline converges: {gate.why}"
      return ev
  ev.seeds = min(len(ours), len(theirs)) if claim.kind != "at_chance" else len(ours)
  if ev.seeds < rule.MIN_SEEDS:
    ev.verdict = INCONCLUSIVE
    ev.why = f"{len(ours)} and {len(theirs)} seeds; the rule's pilot needs {rule.MIN_SEEDS}"
    return ev
  if claim.kind == "speed":
    result = speed_lib.speed(_side(theirs, metric, lower), _side(ours, metric, lower))
    ev.speed, ev.estimate = result, result.estimate
    ev.why = (f"updates ratio {ratio_text(result.estimate)} "
              f"({'paired' if result.estimate.paired else 'unpaired'}, "
              f"{result.estimate.n} seeds)")
    if result.censored or result.censored_baseline:
      ev.why += (f"; crossings after the run: {result.censored}/{result.crossings} of "
                 f"{claim.norm}, {result.censored_baseline} of {claim.against}")
  elif claim.kind == "at_chance":
    if trivial is None:
      ev.verdict, ev.why = INCONCLUSIVE, "no trivial baseline recorded to compare with"
      return ev
    values = _values(ours, _reader(claim), metric, lower, trivial)
    ev.estimate = _one_sample(list(values.values()), trivial)
    ev.why = f"best value minus the trivial model's {difference_text(ev.estimate, 1 if lower else -1)}"
  else:
    ev.estimate = _difference(_values(ours, _reader(claim), metric, lower, trivial),
                              _values(theirs, _reader(claim), metric, lower, trivial))
    if ev.estimate is None:
      ev.verdict, ev.why = INCONCLUSIVE, "too few seeds with a value"
      return ev
    what = {"log_seconds_per_update": "seconds per update, ratio",
            "best": "difference of best values",
            "bln_protocol": "difference of test values under the BLN paper's protocol"
            }[_reader(claim)]
    text = (ratio_text(ev.estimate) if claim.kind in RATIO_KINDS
            else difference_text(ev.estimate, 1 if lower else -1))
    ev.why = (f"{what} {text} ({'paired' if ev.estimate.paired else 'unpaired'}, "
              f"{ev.estimate.n} seeds)")
  ev.p = _p_value(claim.kind, ev.estimate, claim.effect)
  ev.needed = _needed(claim, ev.estimate)
  return ev


# --- the verdicts, all claims at once ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Verdict:
  verdict: str
  why: str
  p: float | None = None
  p_adjusted: float | None = None


def _verdict(ev: Evidence, p_adjusted: float) -> tuple[str, str]:
  """The verdict on tested evidence, and what to add to its text."""
  e, c, m = ev.estimate, ev.claim, ev.claim.effect
  significant = p_adjusted < rule.ALPHA
  if c.kind in ("speed", "final", "step_time"):
    if significant and e.high < 0:
      if c.claimed_ratio is not None:
        claimed = math.log(c.claimed_ratio)
        if not e.low <= claimed <= e.high:
          return (rule.REPRODUCED_NOT_SIZE,
                  f"the interval excludes the claimed {c.claimed_ratio:g}")
        return REPRODUCED, f"compatible with the claimed {c.claimed_ratio:g}"
      return REPRODUCED, ""
    if significant and e.low > 0:
      return NOT_REPRODUCED, "the effect goes the other way"
    if -m < e.low and e.high < m:
      return NO_DIFFERENCE, f"an effect of {_effect_text(c)} or more is ruled out"
  elif c.kind == "matches":
    if significant and -m < e.low and e.high < m:
      return REPRODUCED, f"within ±{_effect_text(c)}"
    if e.low > m or e.high < -m:
      return NOT_REPRODUCED, f"differs by more than {_effect_text(c)}"
  elif c.kind == "matches_or_beats":
    if significant and e.high < m:
      return REPRODUCED, f"not worse by {_effect_text(c)}"
    if e.low > m:
      return NOT_REPRODUCED, f"worse by more than {_effect_text(c)}"
  elif c.kind == "at_chance":
    if significant and e.low > -m:
      return REPRODUCED, f"does not beat the trivial model by {_effect_text(c)}"
    if e.high < -m:
      return NOT_REPRODUCED, "it learns: it beats the trivial model"
  return INCONCLUSIVE, _need_text(ev)


def _effect_text(c: Claim) -> str:
  if c.kind in RATIO_KINDS:
    return f"{1 - math.exp(-c.effect):.0%}"
  return f"{c.effect:g}"


def _need_text(ev: Evidence) -> str:
  if ev.claim.kind == "step_time":  # Decided by rounds of a timing, not by seeds.
    return timing_lib.TOO_WIDE
  if ev.needed is None:
    if ev.estimate is not None and ev.estimate.floor >= ev.claim.effect:
      return ("no number of seeds resolves it: the evaluation grid's resolution "
              f"(±{ev.estimate.floor:.2f} on the log scale) is as wide as the minimum "
              f"effect ({ev.claim.effect:.2f})")
    return f"over {inference.MAX_NAMED_SEEDS} seeds needed"
  if ev.needed > ev.seeds:
    cap = f", over the CPU cap of {rule.SEED_CAP}" if ev.needed > rule.SEED_CAP else ""
    return f"{ev.needed} seeds needed ({ev.seeds} run{cap})"
  return ""


def decide(evidence: Sequence[Evidence]) -> list[Verdict]:
  """Each claim's verdict: Holm's adjustment over the p-values of every tested claim,
  then the rule (docs/benchmark.md)."""
  tested = [i for i, ev in enumerate(evidence) if ev.p is not None and not ev.verdict]
  adjusted = dict(zip(tested, inference.holm([evidence[i].p for i in tested])))
  out = []
  for i, ev in enumerate(evidence):
    why = f"{ev.metric}: {ev.why}" if ev.why else ev.metric
    if i not in adjusted:
      out.append(Verdict(ev.verdict, "; ".join([why] + ev.notes)))
      continue
    verdict, more = _verdict(ev, adjusted[i])
    parts = [why, f"p = {ev.p:.2g}, {adjusted[i]:.2g} after Holm's adjustment over "
             f"{len(tested)} claims"] + ([more] if more else []) + ev.notes
    out.append(Verdict(verdict, "; ".join(parts), ev.p, adjusted[i]))
  return out


def planned_seeds(ev: Evidence, pilot: int) -> int:
  """Seeds by power: the seeds the claim needs to detect its minimum effect (at least
  the pilot's, at most rule.SEED_CAP); the pilot's alone when the need is over the cap
  or cannot be met (more seeds would not change the verdict), or when the verdict
  needs no test."""
  if ev.p is None or ev.needed is None or ev.needed > rule.SEED_CAP:
    return pilot
  return max(pilot, ev.needed)


# --- the headline table ------------------------------------------------------------------------


@dataclasses.dataclass
class Row:
  """One normalizer of one experiment (and variant) against its baseline (``reference``:
  norm=none, or the experiment's reference normalizer)."""
  experiment: str
  context: str
  norm: str
  metric: str
  runs: int
  diverged: int = 0
  speed: speed_lib.SpeedResult | None = None
  seconds: Estimate | None = None
  best: Interval | None = None
  test: Interval | None = None
  tested: int = 0  # Seeds with a test value at their selected evaluation.
  problem: str = ""
  reference: str = "none"


def selected_test(run: Run, metric: str, lower: bool) -> float | None:
  """The test value of the model at the evaluation where ``metric`` (a validation
  metric) is first best (``Run.test_at``: evaluated there, or on the model the run
  kept from there); None when test was not evaluated on that model."""
  split, _, name = metric.partition("/")
  test = f"test/{name}"
  if split != "validation" or test == metric:
    return None
  best = None
  for p in run.records(metric):
    v = float(p[metric])
    if math.isfinite(v) and (best is None or (v < best[0] if lower else v > best[0])):
      best = (v, p)
  if best is None:
    return None
  return run.test_at(best[1]["step"]).get(test)


def headline_row(runs: Sequence[Run], baseline: Sequence[Run], experiment: str,
                 context: str, norm: str, metric: str, reference: str = "none") -> Row:
  lower = lower_is_better(metric)
  row = Row(experiment, context, norm, metric, len(runs), sum(r.diverged for r in runs),
            reference=reference)
  bests = [b for b in (best_value(r, metric, lower) for r in runs) if b is not None]
  row.best = mean_interval([b if lower else -b for b in bests])
  tests = [t for t in (selected_test(r, metric, lower) for r in runs) if t is not None]
  row.test, row.tested = mean_interval(tests), len(tests)
  if not baseline:
    row.problem = "no baseline run"
    return row
  if not all(r.records(metric) or r.diverged for r in list(runs) + list(baseline)):
    row.problem = f"a run logged no {metric}"
    return row
  row.speed = speed_lib.speed(_side(baseline, metric, lower), _side(runs, metric, lower))
  row.seconds = _difference(
      _values(runs, "log_seconds_per_update", metric, lower, None),
      _values(baseline, "log_seconds_per_update", metric, lower, None))
  return row


HEADER = ("experiment", "normalizer", "validation metric", "seeds",
          "updates ÷ baseline's", "crossings after the run", "time per update ÷ baseline's",
          "best validation value", "test at that evaluation")


def _ratio_cell(e: Estimate | None) -> str:
  if e is None:
    return "n/a"
  if e.n < 2:
    return f"{math.exp(e.value):.2f} (1 seed)"
  return ratio_text(e)


def _test_cell(r: Row) -> str:
  """The test value at the selected evaluations, saying how many seeds have one."""
  if not r.test:
    return "not evaluated there"
  if r.tested == r.runs:
    return r.test.text(".4g")
  if r.tested == 1:
    return f"{r.test.estimate:.4g} (1 of {r.runs} seeds)"
  return f"{r.test.text('.4g')} ({r.tested} of {r.runs} seeds)"


def headline_cells(rows: Sequence[Row]) -> list[list[str]]:
  """The table's cells, one list per row, in HEADER's order."""
  out = []
  for r in rows:
    where = f", {r.context}" if r.context else ""
    norm = f"{r.norm} (baseline)" if r.norm == r.reference else r.norm
    stopped = f" ({r.diverged} diverged)" if r.diverged else ""
    censored = (f"{r.speed.censored}/{r.speed.crossings}" if r.speed else "—")
    cells = [f"{r.experiment}{where}", norm, r.metric, f"{r.runs}{stopped}",
             r.problem or _ratio_cell(r.speed.estimate if r.speed else None), censored,
             _ratio_cell(r.seconds), r.best.text(".4g") if r.best else "—",
             _test_cell(r)]
    out.append(cells)
  return out


def headline_markdown(rows: Sequence[Row]) -> str:
  lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
  lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
            for cells in headline_cells(rows)]
  return "\n".join(lines) + "\n"
