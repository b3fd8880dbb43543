"""The benchmark's verdicts, rule version 3 (``lnorm.analysis.rule``): one verdict per
claim, and the headline table.

A claim compares two sides of one experiment: the runs whose config field (``norm``
by default) has the claim's value, and those with the value it is judged against,
within the runs that match ``where``. Seeds that share their data order are analysed
as pairs. Every decision is taken on a validation metric; test values are reported at
the evaluation validation selects. What a claim's kind measures:

- ``speed``: updates to reach the baseline's levels, as a ratio (:mod:`speed`);
- ``final``: each seed's last validation value (or, with ``value="bln_protocol"``,
  the BLN paper's protocol: BLN's test value under the inference configuration its
  search selected on validation, against the other's test value after its last
  epoch), as a difference;
- ``matches`` (equivalence within the margin), ``matches_or_beats``
  (non-inferiority), ``at_chance`` (the last value does not beat the trivial model by
  the margin), ``step_time`` (seconds per update, as a ratio, from a dedicated timing,
  never from the members' logged times: :mod:`timing`).

Each claim gets its evidence (:func:`judge`): the validity gate, then an estimate and
the hypotheses a verdict can rest on, each with the p-value the estimate's interval
gives it (``inference.region_p_value``). The verdicts follow for all claims at once
(:func:`decide`), because the multiplicity adjustment needs every hypothesis of every
claim. The rule in words is in ``docs/benchmark.md``.
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
from lnorm.analysis import rule
from lnorm.analysis import speed as speed_lib
from lnorm.analysis import timing as timing_lib
from lnorm.analysis import validity
from lnorm.analysis.inference import Estimate, Span
from lnorm.analysis.runs import Run, lower_is_better, train_seconds

# The verdict labels, for readers of this module.
REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = rule.REPRODUCED, rule.NOT_REPRODUCED, rule.INCONCLUSIVE
NOT_RUN, NOT_TESTABLE, NO_DIFFERENCE = rule.NOT_RUN, rule.NOT_TESTABLE, rule.NO_DIFFERENCE
SMALLER_THAN_CLAIMED = rule.SMALLER_THAN_CLAIMED

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
          and r.finished]


def _seed(run: Run) -> int:
  return int(run.config.get("seed", 0))


def side_runs(runs: Sequence[Run], where: Mapping[str, str], field: str,
              value: str) -> list[Run]:
  return sorted((r for r in runs if compare.matches(r.config, {**where, field: value})),
                key=_seed)


def side_seeds(runs: Sequence[Run], experiment: str, claim: Claim) -> tuple[set[int], set[int]]:
  """The seeds of the finished runs on each side of ``claim``: (its, against's)."""
  finished = finished_runs(runs, experiment)
  return tuple({_seed(r) for r in side_runs(finished, claim.where, claim.field, v)}
               for v in (claim.norm, claim.against))  # type: ignore[return-value]


def _side(runs: Sequence[Run], metric: str, lower: bool) -> speed_lib.Side:
  return speed_lib.Side(tuple(_seed(r) for r in runs),
                        tuple(curves_lib.curve(r, metric, lower) for r in runs))


def arm_name(claim: Claim, value: str) -> str:
  """A side of ``claim`` as the verdicts name it: ``ln``, or ``field=value``."""
  return value if claim.field == "norm" else f"{claim.field}={value}"


# --- per-seed values ---------------------------------------------------------------------------


def best_value(run: Run, metric: str, lower: bool) -> float | None:
  """The seed's best validation value, lower is better (negated otherwise): what the
  gate and the headline table read, never a final-value claim."""
  return validity.best_value(curves_lib.curve(run, metric, lower))


def last_value(run: Run, metric: str, lower: bool) -> float | None:
  """The seed's last validation value (a step logged twice keeps its last value),
  lower is better: the model the run ends with. A run that stopped on a value that
  was not finite ends with no model: None."""
  if run.diverged:
    return None
  c = curves_lib.curve(run, metric, lower)
  return float(c.values[-1]) if len(c.values) else None


def seconds_per_update(run: Run) -> float | None:
  known = [(p.get("step"), t) for p, t in zip(run.points, train_seconds(run.points))
           if t is not None and p.get("step")]
  return known[-1][1] / known[-1][0] if known else None


def log_seconds_per_update(run: Run, metric: str, lower: bool) -> float | None:
  del metric, lower  # Time does not depend on the metric.
  v = seconds_per_update(run)
  return math.log(v) if v else None


#: How a seed is read: (run, metric, lower is better) -> value, lower is better.
#: ``last``: the final-value claims' (rule.FINAL_VALUE); ``bln_protocol``: the BLN
#: paper's protocol, and ``bln_protocol_population`` the same with BLN restricted to
#: population batch statistics (lnorm.analysis.bln_protocol); ``best``: the gate's.
VALUES: dict[str, Callable[[Run, str, bool], float | None]] = {
    "best": best_value, "last": last_value, "bln_protocol": bln_protocol.protocol_value,
    "bln_protocol_population": bln_protocol.population_value,
    "log_seconds_per_update": log_seconds_per_update}

#: What each reader's values are called in a verdict.
READ_AS = {"best": "best values", "last": "last values",
           "bln_protocol": "test values under the BLN paper's protocol"}


def _values(runs: Sequence[Run], read: str, metric: str, lower: bool,
            trivial: float | None) -> dict[int, float]:
  """One value per seed; a seed that stopped as not finite without a value to read
  (before it logged any, or, for a final value, at all: it ends with no model)
  counts as the trivial model (it learned nothing), and is left out when no trivial
  value is known."""
  out = {}
  for r in runs:
    v = VALUES[read](r, metric, lower)
    if v is None and r.diverged and trivial is not None and read != "log_seconds_per_update":
      v = trivial
    if v is not None:
      out[_seed(r)] = v
  return out


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


# --- the hypotheses a verdict can rest on ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Hypothesis:
  """A null hypothesis about a claim's effect (oriented negative-is-claimed): that it
  lies in ``region``; rejecting it gives the verdict ``rejects`` (read by
  :func:`_verdict`). ``p`` is ``inference.region_p_value``'s: below the level exactly
  when the claim's 95% interval misses the region."""
  name: str  # The null, as a verdict's text names it.
  rejects: str  # What its rejection shows: "effect", "no difference", ...
  region: inference.Region
  p: float


def _hypotheses(claim: Claim, e: Estimate) -> list[Hypothesis]:
  """Every hypothesis ``claim``'s verdict can rest on, each tested on ``e``
  (docs/benchmark.md, "The hypotheses, and many claims", has them as a table)."""
  m, inf = claim.margin, math.inf
  margin = _effect_text(claim, m)

  def h(name, rejects, *spans):
    return Hypothesis(name, rejects, tuple(spans), inference.region_p_value(e, tuple(spans)))

  if claim.kind in ("speed", "final", "step_time"):
    out = [h("no effect", "effect", Span(0.0, 0.0)),
           h(f"a difference of {margin} or more", "no difference",
             Span(-inf, -m), Span(m, inf))]
    if claim.claimed_effect is not None:
      size = claim.claimed_effect
      out.append(h(f"the claimed {claim.claimed_ratio:g}", "size", Span(size, size)))
    return out
  if claim.kind == "matches":
    return [h(f"a difference of {margin} or more", "within", Span(-inf, -m), Span(m, inf)),
            h(f"a difference under {margin}", "beyond", Span(-m, m, True, True))]
  if claim.kind == "matches_or_beats":
    return [h(f"worse by {margin} or more", "not worse", Span(m, inf)),
            h(f"worse by less than {margin}, or better", "worse", Span(-inf, m, False, True))]
  if claim.kind == "at_chance":
    return [h(f"better than the trivial model by {margin} or more", "at chance",
              Span(-inf, -m)),
            h(f"better by less than {margin}, or worse", "learns", Span(-m, inf, True))]
  raise ValueError(f"claim {claim.key}: no hypotheses for kind {claim.kind!r}")


# --- one claim's evidence --------------------------------------------------------------------


@dataclasses.dataclass
class Evidence:
  """What a claim's runs show, before the family's adjustment decides the verdict.

  ``verdict`` is set when no test is needed (not run, not testable, too few seeds);
  otherwise ``estimate`` and ``hypotheses`` are. Effects are oriented so that
  negative is the claimed direction (fewer updates, a lower error)."""
  claim: Claim
  metric: str
  verdict: str = ""
  why: str = ""
  estimate: Estimate | None = None
  hypotheses: list[Hypothesis] = dataclasses.field(default_factory=list)
  seeds: int = 0
  needed: int | None = None
  notes: list[str] = dataclasses.field(default_factory=list)
  speed: speed_lib.SpeedResult | None = None
  #: The scale whose records these are: its seed cap (rule.seed_cap) bounds the plan.
  scale: str = "cpu"

  @property
  def p(self) -> float | None:
    """The p-value of the claim's first hypothesis (its effect, its equivalence...);
    None when nothing was tested."""
    return self.hypotheses[0].p if self.hypotheses else None


def _needed(claim: Claim, e: Estimate) -> int | None:
  return inference.seeds_needed(claim.effect, e.sigma, e.floor, e.paired)


def _gate(ev: Evidence, cell: Sequence[Run], ours: Sequence[Run], theirs: Sequence[Run],
          lower: bool) -> str:
  """The validity gate (lnorm.analysis.validity) on both arms of the claim; returns
  why the claim is not testable, or "" when it passed."""
  claim, metric = ev.claim, ev.metric
  found = validity.trivial_value(list(ours) + list(theirs) + list(cell), metric)
  trivial = None if found is None else (found[0] if lower else -found[0])
  if found is None:
    ev.notes.append("no trivial model recorded: whether the arms learn was not checked")
  elif claim.kind == "at_chance":
    # The claim is that its arm does not learn: the task must be learnable in its cell.
    others = sorted({str(r.config.get(claim.field)) for r in cell} - {claim.norm})
    gates = [validity.learned(
        list(_values(side_runs(cell, {}, claim.field, o), "best", metric, lower,
                     trivial).values()), trivial, found[1], arm_name(claim, o), lower)
             for o in others]
    if not any(g.passed for g in gates):
      return ("no other normalizer shows the task can be learned in this cell: "
              + ("; ".join(f"{o}: {g.why}" for o, g in zip(others, gates)) or "none ran"))
  else:
    for value, side in ((claim.norm, ours), (claim.against, theirs)):
      gate = validity.learned(list(_values(side, "best", metric, lower, trivial).values()),
                              trivial, found[1], arm_name(claim, value), lower)
      if not gate.passed:
        return f"{arm_name(claim, value)} does not learn: {gate.why}"
  if claim.kind == "speed":
    gate = validity.evaluated_each_level(
        [curves_lib.curve(r, metric, lower) for r in theirs])
    if not gate.passed:
      return f"the curve is not evaluated often enough: {gate.why}"
  if claim.needs_convergence:
    gate = validity.converged([curves_lib.curve(r, metric, lower) for r in theirs],
                              arm_name(claim, claim.against))
    if not gate.passed:
      return f"the run ends before the baseline converges: {gate.why}"
  return ""


def judge(runs: Sequence[Run], experiment: str, claim: Claim, metric: str,
          timings: Sequence[Mapping] = (), scale: str = "cpu") -> Evidence:
  """The evidence on ``claim`` from the finished runs of ``experiment`` at ``scale``
  (whose seed cap bounds the seeds it plans); a step_time claim's from its dedicated
  timing among ``timings`` (``timing.load``): the members' logged times measure the
  machine's load."""
  if claim.kind == "step_time":
    found = timing_lib.evidence(claim, timings)
    ev = Evidence(claim, timing_lib.METRIC, found.verdict, found.why, notes=found.notes,
                  scale=scale)
    if not found.verdict:
      # The sign test's p at any point (RatioEstimate.p_value) makes the same
      # hypotheses, in the same family, as every other claim's.
      ev.estimate, ev.seeds = found.estimate, found.estimate.n
      ev.hypotheses = _hypotheses(claim, found.estimate)
    return ev
  ev = Evidence(claim, metric, scale=scale)
  finished = finished_runs(runs, experiment)
  ours = side_runs(finished, claim.where, claim.field, claim.norm)
  theirs = side_runs(finished, claim.where, claim.field, claim.against)
  missing = [arm_name(claim, v) for v, side in ((claim.norm, ours), (claim.against, theirs))
             if not side]
  if missing:
    ev.verdict, ev.why = NOT_RUN, f"no finished {' or '.join(missing)} runs yet"
    return ev
  silent = [r.name for r in ours + theirs if not r.diverged and not r.records(metric)]
  if silent:
    ev.verdict = NOT_TESTABLE
    ev.why = f"{len(silent)} run(s) logged no {metric}: {', '.join(silent[:4])}"
    return ev
  lower = lower_is_better(metric)
  cell = [r for r in finished if compare.matches(
      r.config, {k: v for k, v in claim.where.items() if k != claim.field})]
  not_testable = _gate(ev, cell, ours, theirs, lower)
  if not_testable:
    ev.verdict, ev.why = NOT_TESTABLE, not_testable
    return ev
  ev.seeds = min(len(ours), len(theirs)) if claim.kind != "at_chance" else len(ours)
  if ev.seeds < rule.MIN_SEEDS:
    ev.verdict = INCONCLUSIVE
    ev.why = f"{len(ours)} and {len(theirs)} seeds; the rule's pilot needs {rule.MIN_SEEDS}"
    return ev
  found = validity.trivial_value(ours + theirs + cell, metric)
  trivial = None if found is None else (found[0] if lower else -found[0])
  sign = 1 if lower else -1
  if claim.kind == "speed":
    result = speed_lib.speed(_side(theirs, metric, lower), _side(ours, metric, lower))
    ev.speed, ev.estimate = result, result.estimate
    ev.why = (f"updates ratio {ratio_text(result.estimate)} "
              f"({'paired' if result.estimate.paired else 'unpaired'}, "
              f"{result.estimate.n} seeds)")
    if result.censored or result.censored_baseline:
      ev.why += (f"; crossings after the run: {result.censored}/{result.crossings} of "
                 f"{arm_name(claim, claim.norm)}, {result.censored_baseline} of "
                 f"{arm_name(claim, claim.against)}")
  elif claim.kind == "at_chance":
    if trivial is None:
      ev.verdict, ev.why = INCONCLUSIVE, "no trivial model recorded to compare with"
      return ev
    values = _values(ours, claim.value, metric, lower, trivial)
    ev.estimate = _one_sample(list(values.values()), trivial)
    ev.why = (f"{claim.value} value minus the trivial model's "
              f"{difference_text(ev.estimate, sign)} ({ev.estimate.n} seeds)")
  else:
    ev.estimate = _difference(_values(ours, claim.value, metric, lower, trivial),
                              _values(theirs, claim.value, metric, lower, trivial))
    if ev.estimate is None:
      ev.verdict, ev.why = INCONCLUSIVE, "too few seeds with a value"
      return ev
    ev.why = (f"difference of {READ_AS[claim.value]} {difference_text(ev.estimate, sign)} "
              f"({'paired' if ev.estimate.paired else 'unpaired'}, {ev.estimate.n} seeds)")
    if claim.value == "bln_protocol":
      ev.notes += _protocol_notes(ours, theirs, metric, lower, trivial, sign)
  ev.hypotheses = _hypotheses(claim, ev.estimate)
  ev.needed = _needed(claim, ev.estimate)
  return ev


def _protocol_notes(ours: Sequence[Run], theirs: Sequence[Run], metric: str, lower: bool,
                    trivial: float | None, sign: float) -> list[str]:
  """What a protocol claim's line says beside its verdict: which statistics BLN's
  selected configurations take, and the protocol's difference with BLN restricted to
  population batch statistics (shown, not tested)."""
  notes = [bln_protocol.statistics_note(list(ours) + list(theirs))]
  population = _difference(
      _values(ours, "bln_protocol_population", metric, lower, trivial),
      _values(theirs, "bln_protocol_population", metric, lower, trivial))
  if population is not None:
    notes.append("with BLN restricted to population batch statistics (pp..), "
                 f"{difference_text(population, sign)} (shown, not a verdict)")
  return [n for n in notes if n]


# --- the verdicts, all claims at once ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Verdict:
  verdict: str
  why: str
  p: float | None = None  # Of the hypothesis the verdict rests on (else the first).
  p_adjusted: float | None = None


def _verdict(ev: Evidence, adjusted: Mapping[str, float]) -> tuple[str, str, str]:
  """(the verdict on tested evidence, what to add to its text, the hypothesis it
  rests on) from each hypothesis's adjusted p-value, by what its rejection shows."""
  e, c = ev.estimate, ev.claim
  shown = {h.rejects for h in ev.hypotheses if adjusted[h.rejects] < rule.ALPHA}
  margin = _effect_text(c, c.margin)
  if c.kind in ("speed", "final", "step_time"):
    under_margin = (f"; by less than {margin}" if "no difference" in shown else "")
    if "effect" in shown and e.value < 0:
      if c.claimed_effect is None:
        return REPRODUCED, under_margin.lstrip("; "), "effect"
      if "size" in shown:
        return (rule.REPRODUCED_NOT_SIZE,
                f"the interval excludes the claimed {c.claimed_ratio:g}", "effect")
      return REPRODUCED, f"compatible with the claimed {c.claimed_ratio:g}", "effect"
    if "effect" in shown:
      return NOT_REPRODUCED, "the effect goes the other way" + under_margin, "effect"
    if "no difference" in shown:
      return NO_DIFFERENCE, f"an effect of {margin} or more is ruled out", "no difference"
    if "size" in shown and e.value > c.claimed_effect:
      return (SMALLER_THAN_CLAIMED, f"the interval excludes the claimed "
              f"{c.claimed_ratio:g}; an effect of {margin} is neither shown nor ruled "
              "out", "size")
  elif c.kind == "matches":
    if "within" in shown:
      return REPRODUCED, f"within ±{margin}", "within"
    if "beyond" in shown:
      return NOT_REPRODUCED, f"differs by more than {margin}", "beyond"
  elif c.kind == "matches_or_beats":
    if "not worse" in shown:
      return REPRODUCED, f"not worse by {margin}", "not worse"
    if "worse" in shown:
      return NOT_REPRODUCED, f"worse by more than {margin}", "worse"
  elif c.kind == "at_chance":
    if "at chance" in shown:
      return REPRODUCED, f"does not beat the trivial model by {margin}", "at chance"
    if "learns" in shown:
      return (NOT_REPRODUCED, f"it learns: it beats the trivial model by more than {margin}",
              "learns")
  return INCONCLUSIVE, _need_text(ev), ev.hypotheses[0].rejects


def _effect_text(c: Claim, effect: float) -> str:
  if c.kind in RATIO_KINDS:
    return f"{1 - math.exp(-effect):.0%}"
  return f"{effect:g}"


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
    return f"{ev.needed} seeds needed ({ev.seeds} run{over_cap_text(ev.needed, ev.scale)})"
  return ""


def decide(evidence: Sequence[Evidence]) -> list[Verdict]:
  """Each claim's verdict: every hypothesis of every tested claim adjusted together
  (Holm's step-down procedure, counting the hypotheses that can be true at once:
  ``inference.holm``), then the rule (docs/benchmark.md)."""
  tested = [i for i, ev in enumerate(evidence) if ev.hypotheses and not ev.verdict]
  family = [(i, h) for i in tested for h in evidence[i].hypotheses]
  adjusted_list = inference.holm([h.p for _, h in family],
                                 [inference.Null(i, h.region) for i, h in family])
  adjusted: dict[int, dict[str, float]] = {}
  for (i, h), a in zip(family, adjusted_list):
    adjusted.setdefault(i, {})[h.rejects] = a
  out = []
  for i, ev in enumerate(evidence):
    why = f"{ev.metric}: {ev.why}" if ev.why else ev.metric
    if i not in adjusted:
      out.append(Verdict(ev.verdict, "; ".join([why] + ev.notes)))
      continue
    verdict, more, rests_on = _verdict(ev, adjusted[i])
    tests = ", ".join(f"{h.name}: p = {h.p:.2g}, {adjusted[i][h.rejects]:.2g} adjusted"
                      for h in ev.hypotheses)
    parts = [why, f"{tests} (Holm's adjustment over {len(family)} hypotheses of "
             f"{len(tested)} claims)"] + ([more] if more else []) + ev.notes
    deciding = next(h for h in ev.hypotheses if h.rejects == rests_on)
    out.append(Verdict(verdict, "; ".join(parts), deciding.p, adjusted[i][rests_on]))
  return out


def exploratory_text(ev: Evidence) -> str:
  """What evidence shows without deciding a verdict (seeds beyond the plan): its
  estimate and its hypotheses' raw p-values, or why it has none."""
  if ev.verdict:
    return f"{ev.verdict}: {ev.why}"
  tests = ", ".join(f"{h.name}: p = {h.p:.2g}" for h in ev.hypotheses)
  return f"{ev.why}; {tests} (not adjusted)"


def over_cap_text(needed: int, scale: str) -> str:
  """``, over the gpu scale's cap of 30`` where ``needed`` seeds are more than the
  scale's cap (rule.seed_cap), else nothing."""
  cap = rule.seed_cap(scale)
  return f", over the {scale} scale's cap of {cap}" if needed > cap else ""


def planned_seeds(ev: Evidence, pilot: int) -> int:
  """Seeds by power: the seeds the claim needs to detect its minimum effect (at least
  the pilot's, at most the cap of the evidence's scale, rule.seed_cap); the pilot's
  alone when the need is over the cap or cannot be met (more seeds would not change
  the verdict), or when the verdict needs no test."""
  if not ev.hypotheses or ev.needed is None or ev.needed > rule.seed_cap(ev.scale):
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
  metric) is first best, a step logged twice counting at its last value
  (``Run.test_at``: evaluated there, or on the model the run kept from there); None
  when test was not evaluated on that model."""
  split, _, name = metric.partition("/")
  test = f"test/{name}"
  if split != "validation" or test == metric:
    return None
  c = curves_lib.curve(run, metric, lower)
  if not len(c.values):
    return None
  return run.test_at(int(c.steps[int(np.argmin(c.values))])).get(test)


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
