"""Step-time claims from a dedicated timing: the statistic, its stopping rule, the
timing record, and a claim's evidence from it.

Members' own training times measure the machine's load as much as the normalizer: on
the shared machine the benchmark ran on, one setting's seconds per update varied up
to 4x between seeds (handwriting LN 186 to 852 ms). So a ``step_time`` claim is
decided by a timing made for it (``lnorm flops --compare-norms ln,rms
--timing-record``), kept under ``results/<scale>/<experiment>/timing/``; the members'
times are shown in the headline table and decide nothing.

The timing (``lnorm.training.throughput.time_rounds``) runs rounds: each round takes
one train step of every normalizer, starting with a different one each round, so
that a round's steps share the machine's state. A round's effect is
log(normalizer's step / baseline's step) in CPU seconds (the process's time: time it
waited for its core is not counted). The estimate is the median of the rounds'
effects and its 95% interval the pair of order statistics that the sign test
inverts, the p-value that sign test's: an interval excludes 0 exactly when the
p-value is below 0.05, and a step slowed by another process is one outlier rather
than a shifted mean.

The stopping rule: at least MIN_ROUNDS rounds, then a check every CHECK_EVERY
rounds, stopping when every normalizer's ratio has an interval whose half-width is
at most TARGET_HALF_WIDTH of the ratio, or at MAX_ROUNDS. It stops on the
interval's width, never on where the interval lies.
"""

from __future__ import annotations

import dataclasses
import datetime
import glob
import hashlib
import json
import math
import os
import statistics
from typing import Any, Mapping, Sequence

from lnorm.analysis import compare
from lnorm.analysis import rule
from lnorm.errors import UserError

#: The stopping rule (module docstring).
MIN_ROUNDS = 30
CHECK_EVERY = 10
MAX_ROUNDS = 600
TARGET_HALF_WIDTH = 0.02
#: The clock the statistic reads: "cpu" (process time) or "wall".
CLOCK = "cpu"
#: Where an experiment's timing records are, beside its members' records.
TIMING_FOLDER = "timing"
#: What a step_time verdict names as its metric.
METRIC = "CPU seconds per train step, timed apart"
#: What the record's "kind" says, so that no other JSON is read as one.
RECORD_KIND = "step_time_timing"
#: Config fields that do not name what a record_name's hash covers: what names a
#: run, and where its data and logs went.
PER_RUN_FIELDS = ("norm", "seed", "wandb.", "benchmark_hash", "data.data_dir",
                  "data.cache_dir")


def summary(seconds: Sequence[float]) -> dict[str, float]:
  """The median, the fastest and the slowest of one normalizer's timed steps."""
  return {"median": statistics.median(seconds), "min": min(seconds), "max": max(seconds),
          "rounds": len(seconds)}


@dataclasses.dataclass(frozen=True)
class RatioEstimate:
  """The median of the rounds' log ratios, its 95% interval and the sign test's p.

  ``floor`` and ``paired`` read as an ``inference.Estimate``'s do, for the rule's
  verdict: no grid floor, and rounds are pairs."""
  value: float
  low: float
  high: float
  n: int
  p: float
  floor: float = 0.0
  paired: bool = True
  #: Every round's log ratio, sorted: the sign test at any point reads them.
  effects: tuple[float, ...] = ()

  def p_value(self, null: float = 0.0) -> float:
    """The two-sided sign test's p of ``median == null``: what
    ``inference.region_p_value`` reads, so a timing's hypotheses are tested as every
    other claim's (its interval misses a point exactly when this p is below 0.05)."""
    from scipy import stats  # pylint: disable=g-import-not-at-top  (`lnorm flops --help`)
    above = sum(e > null for e in self.effects)
    below = sum(e < null for e in self.effects)
    return float(stats.binomtest(above, above + below, 0.5).pvalue) if above + below else 1.0

  @property
  def relative_half_width(self) -> float:
    """Half the interval's width as a share of the ratio."""
    return (math.exp(self.high) - math.exp(self.low)) / 2 / math.exp(self.value)

  def text(self) -> str:
    return (f"{math.exp(self.value):.3f} [{math.exp(self.low):.3f}, "
            f"{math.exp(self.high):.3f}]")

  def record(self) -> dict[str, float]:
    return {"ratio": math.exp(self.value), "low": math.exp(self.low),
            "high": math.exp(self.high), "rounds": self.n, "p": self.p,
            "relative_half_width": self.relative_half_width}


def _order_statistic_rank(n: int) -> int | None:
  """The largest k (1-based) with P(B <= k - 1) <= (1 - CONFIDENCE) / 2 for B ~
  Binomial(n, 1/2): [x_(k), x_(n+1-k)] is the median's interval. None when n is too
  small for any (n < 6 at 95%)."""
  from scipy import stats  # pylint: disable=g-import-not-at-top  (`lnorm flops --help`)
  k = int(stats.binom.ppf((1 - rule.CONFIDENCE) / 2, n, 0.5))
  # ppf gives the smallest k with P(B <= k) >= q; the interval needs P(B <= k-1) <= q.
  while k >= 0 and stats.binom.cdf(k, n, 0.5) > (1 - rule.CONFIDENCE) / 2:
    k -= 1
  return k + 1 if k >= 0 else None


def paired_ratio(baseline: Sequence[float], other: Sequence[float]) -> RatioEstimate | None:
  """``other`` against ``baseline``, timed in the same rounds (index by index): the
  median of log(other / baseline) with its sign-test interval and p-value; None with
  too few rounds for a 95% interval."""
  if len(baseline) != len(other):
    raise ValueError(f"{len(baseline)} and {len(other)} rounds: a ratio pairs rounds")
  effects = sorted(math.log(o / b) for b, o in zip(baseline, other))
  n = len(effects)
  k = _order_statistic_rank(n)
  if k is None:
    return None
  estimate = RatioEstimate(statistics.median(effects), effects[k - 1], effects[n - k], n,
                           1.0, effects=tuple(effects))
  return dataclasses.replace(estimate, p=estimate.p_value(0.0))


def ratios(seconds: Mapping[str, Sequence[float]], baseline: str
           ) -> dict[str, RatioEstimate | None]:
  """Every other normalizer's ratio to ``baseline``'s step."""
  return {name: paired_ratio(seconds[baseline], s) for name, s in seconds.items()
          if name != baseline}


def narrow_enough(seconds: Mapping[str, Sequence[float]], baseline: str) -> bool:
  """Every ratio's interval is within TARGET_HALF_WIDTH of it."""
  found = ratios(seconds, baseline).values()
  return all(r is not None and r.relative_half_width <= TARGET_HALF_WIDTH for r in found)


def stop_reason(seconds: Mapping[str, Sequence[float]], baseline: str) -> str | None:
  """Why the timing stops after the rounds in ``seconds`` (the stopping rule), None
  while it goes on."""
  rounds = len(seconds[baseline])
  if rounds >= MAX_ROUNDS:
    return f"the cap of {MAX_ROUNDS} rounds"
  if (rounds >= MIN_ROUNDS and (rounds - MIN_ROUNDS) % CHECK_EVERY == 0
      and narrow_enough(seconds, baseline)):
    return f"every interval within ±{TARGET_HALF_WIDTH:.0%}"
  return None


def stopping_rule() -> dict[str, Any]:
  return {"min_rounds": MIN_ROUNDS, "check_every": CHECK_EVERY, "max_rounds": MAX_ROUNDS,
          "target_relative_half_width": TARGET_HALF_WIDTH, "clock": CLOCK}


# --- the record -----------------------------------------------------------------------------


def make_record(report: Mapping[str, Any], config: Mapping[str, Any], *, stopped: str,
                command: str, environment: Mapping[str, Any],
                code: Mapping[str, Any]) -> dict[str, Any]:
  """A timing record from ``throughput.compare_norms``'s ``report`` (its ``seconds``:
  normalizer -> clock -> every round's time), the flat ``config`` timed (the
  baseline's), why it stopped, the command, the machine and the code."""
  baseline = report["baseline"]
  seconds = report["seconds"]
  clocks = {clock: {name: s[clock] for name, s in seconds.items()} for clock in ("cpu", "wall")}
  return {
      "kind": RECORD_KIND, "experiment": report["experiment"], "baseline": baseline,
      "norms": list(seconds), "config": dict(config), "shapes": report["shapes"],
      "rounds": len(seconds[baseline]["cpu"]), "stopping_rule": stopping_rule(),
      "stopped": stopped,
      "summary": {name: {clock: summary(s[clock]) for clock in ("cpu", "wall")}
                  for name, s in seconds.items()},
      "ratios": {clock: {name: r.record() if r else None
                         for name, r in ratios(clocks[clock], baseline).items()}
                 for clock in ("cpu", "wall")},
      "seconds": seconds, "command": command, "environment": dict(environment),
      "code": dict(code),
      "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
  }


def record_name(norms: Sequence[str], config: Mapping[str, Any]) -> str:
  """The record's file name: the normalizers and a hash of what else was timed."""
  rest = {k: v for k, v in config.items() if not _per_run(k)}
  digest = hashlib.sha256(json.dumps(rest, sort_keys=True, default=str).encode()).hexdigest()
  return f"{','.join(norms)}-{digest[:8]}.json"


def _per_run(key: str) -> bool:
  return any(key == f or (f.endswith(".") and key.startswith(f)) for f in PER_RUN_FIELDS)


def load(experiment_records: str) -> list[dict[str, Any]]:
  """The timing records under ``<experiment_records>/timing/``, each with its
  ``path``; [] when there are none."""
  out = []
  for path in sorted(glob.glob(os.path.join(experiment_records, TIMING_FOLDER, "*.json"))):
    try:
      with open(path) as f:
        record = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
      raise UserError(f"{path} is not a readable timing record ({e}): fix or delete it, "
                      "or time again with `lnorm flops --compare-norms ... "
                      "--timing-record`.") from e
    if isinstance(record, dict) and record.get("kind") == RECORD_KIND:
      out.append({**record, "path": path})
  return out


# --- a claim's evidence ---------------------------------------------------------------------


@dataclasses.dataclass
class Evidence:
  """What a timing says of a step_time claim: a verdict without a test (``verdict``
  set), or an estimate and its p-value."""
  verdict: str = ""
  why: str = ""
  estimate: RatioEstimate | None = None
  p: float | None = None
  notes: list[str] = dataclasses.field(default_factory=list)


#: What an inconclusive step_time verdict adds.
TOO_WIDE = ("the timing's interval is too wide to decide: time more rounds, on a quiet "
            "core")


def evidence(claim: rule.Claim, timings: Sequence[Mapping[str, Any]]) -> Evidence:
  """The evidence on a step_time ``claim`` from the newest of ``timings`` (timing
  records of the claim's experiment) that timed both its normalizers in the claim's
  setting. A timing whose config is not the one the claim's members run (its
  ``drift``, set by the benchmark report: ``config_drift`` against the member's
  command now) makes the claim not testable."""
  if claim.field != "norm":
    return Evidence(rule.NOT_TESTABLE, f"a timing compares normalizers, not {claim.field}")
  matching = [t for t in timings
              if claim.norm in t["seconds"] and claim.against in t["seconds"]
              and compare.matches(t["config"], claim.where)]
  if not matching:
    return Evidence(rule.NOT_RUN, (
        f"no timing of {claim.norm} against {claim.against} under "
        f"{os.path.join('<records>', '<experiment>', TIMING_FOLDER)}: time them with "
        f"`lnorm flops --config ... --compare-norms {claim.against},{claim.norm} "
        "--timing-record`, pinned to one core"))
  timing = max(matching, key=lambda t: t.get("created", ""))
  name = os.path.join(TIMING_FOLDER, os.path.basename(timing.get("path", "?")))
  drift = timing.get("drift") or []
  if drift:
    return Evidence(rule.NOT_TESTABLE, (
        f"the timing {name} ran another config than the members' command ("
        + ", ".join(drift[:3]) + (f" and {len(drift) - 3} more" if len(drift) > 3 else "")
        + "): time it again"))
  seconds = timing["seconds"]
  estimate = paired_ratio(seconds[claim.against][CLOCK], seconds[claim.norm][CLOCK])
  if estimate is None:
    return Evidence(rule.INCONCLUSIVE, f"the timing {name} has too few rounds for an "
                    "interval")
  medians = ", ".join(f"{n} {statistics.median(seconds[n][CLOCK]) * 1e3:.1f} ms"
                      for n in (claim.against, claim.norm))
  found = Evidence(why=(
      f"ratio {estimate.text()}, the median of {estimate.n} round-robin rounds of "
      f"{name} ({medians}; stopped at {timing.get('stopped', '?')}); the members' "
      "logged times decide nothing"), estimate=estimate, p=estimate.p)
  machine = timing.get("environment", {})
  cores = machine.get("cpu_affinity")
  if cores is not None and len(cores) != 1:
    found.notes.append(f"the timing ran on {len(cores)} cores, not one pinned core")
  if machine.get("xla_cpu_threads") not in ("1", 1):
    found.notes.append(f"the timing ran with {machine.get('xla_cpu_threads')} XLA:CPU "
                       "threads, not one")
  return found
