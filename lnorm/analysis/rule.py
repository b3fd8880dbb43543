"""The benchmark's verdict rule, version 3: every parameter in one place, and its hash.

The rule is stated in full in ``docs/benchmark.md`` ("The verdict rule"), with what
changed from version 2 and why. Two hashes, kept apart since version 3:

- :func:`rule_hash`, of these parameters and of every claim the suite judges (what it
  compares and how): the report names the rule version and hash that judged it.
  Changing any of them after seeing results is a new rule version: bump ``VERSION``
  and say so in docs/benchmark.md. ``tests/test_rule.py`` pins it, so that no change
  slips in unnoticed.
- :func:`setting_hash`, of what a member trains (its experiment's config, overrides
  and variant), which its records carry as ``benchmark_hash``: it decides whether a
  record is a run of its member's command, whatever rule later judges it. (Version 2
  hashed the rule into every record, so a new rule refused every record made before
  it; its records are recognised by ``benchmark_suite.RULE_V2_HASHES``.)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import types
from typing import Any, Mapping

VERSION = 3

#: Every interval is a 95% interval; every test is at 5% after Holm's adjustment.
CONFIDENCE = 0.95
ALPHA = 0.05
#: The pilot: no verdict with fewer seeds on either side of a claim ...
MIN_SEEDS = 3
#: ... and five seeds where an experiment's member takes under QUICK_MINUTES of wall
#: time, as its seed-0 records measure it (:func:`pilot_size`).
QUICK_PILOT_SEEDS = 5
QUICK_MINUTES = 5.0
#: Seeds by power: enough to detect the claim's minimum effect with this power, at
#: this two-sided level per claim (ALPHA over the claims the suite plans to judge,
#: Bonferroni: the strictest step of Holm's adjustment), up to the scale's cap
#: (:func:`seed_cap`): 10 where a member takes a CPU core for minutes, 30 on a GPU,
#: whose members take a fraction of that; the papers' settings, hours a member, 10.
POWER = 0.8
PLANNED_CLAIMS = 30
SEED_CAPS = types.MappingProxyType({"cpu": 10, "gpu": 30, "paper": 10})
#: The speed statistic's levels: the baseline's smoothed mean curve at these
#: fractions of its run (its best value up to there).
LEVEL_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
#: A speed claim's minimum effect when its paper states no size: 10% fewer updates.
SPEED_MIN_SAVING = 0.10
#: A final-value claim's minimum effect when its paper states no size, in the
#: metric's own units (every final-value claim is on an error rate: one point).
FINAL_MIN_DIFFERENCE = 0.01
#: What a final-value (and at-chance, matches) claim reads of a seed: its last
#: evaluation, the model the run ends with; never the best of its evaluations, which
#: noise biases towards "it learns".
FINAL_VALUE = "last"
#: A run has not converged when its smoothed curve's best improved over the last
#: quarter of the run by more than this share of the whole run's improvement.
CONVERGED_SHARE = 0.05
#: The bootstrap of the speed statistic: resamples and the generator's seed, fixed so
#: that the report regenerates to the digit.
BOOTSTRAP_RESAMPLES = 9999
BOOTSTRAP_SEED = 0

# The verdicts.
REPRODUCED = "reproduced"
REPRODUCED_NOT_SIZE = "reproduced in direction, not in size"
NOT_REPRODUCED = "not reproduced"
NO_DIFFERENCE = "no difference"
SMALLER_THAN_CLAIMED = "smaller than claimed"
INCONCLUSIVE = "inconclusive at this scale"
NOT_TESTABLE = "not testable at this scale"
NOT_RUN = "not run yet"
REFUSED = "not judged: records made under another rule or setting"


#: What a claim can compare (lnorm.analysis.claims says how each is judged).
KINDS = ("speed", "final", "matches", "matches_or_beats", "at_chance", "step_time")
#: Kinds whose effect is a log ratio (shown as a ratio); the others a difference.
RATIO_KINDS = ("speed", "step_time")


@dataclasses.dataclass(frozen=True)
class Claim:
  """One claim of a paper, tested on one experiment's runs: ``norm`` against
  ``against``, values of the config ``field``, among the runs that match ``where``.

  ``claimed_ratio``: the size the paper states for a speed claim (0.5 for "about
  twice as fast"): a hypothesis of its own ("smaller than claimed"), and the effect
  the power rule plans to detect. ``about_convergence``: the claim speaks of
  convergence or of reaching the baseline's best, so the validity gate asks that the
  runs converge. ``min_effect`` overrides the rule's default margin (a 10% saving of
  updates; one point of error for a final value). ``value``: what a final-value claim
  reads of each seed (``last``: its last evaluation; ``bln_protocol``: the BLN paper's
  protocol).
  """
  key: str
  text: str
  source: str
  norm: str
  against: str
  kind: str = "speed"
  where: Mapping[str, str] = dataclasses.field(default_factory=dict)
  field: str = "norm"
  claimed_ratio: float | None = None
  about_convergence: bool = False
  value: str = FINAL_VALUE
  min_effect: float | None = None

  @property
  def margin(self) -> float:
    """The margin on the estimate's scale (a log ratio, or the metric's units) within
    which an effect counts as none: the rule's default, or ``min_effect``; never the
    paper's claimed size (a test against that is "smaller than claimed")."""
    if self.min_effect is not None:
      return self.min_effect
    if self.kind in RATIO_KINDS:
      return speed_min_effect(None)
    return FINAL_MIN_DIFFERENCE

  @property
  def claimed_effect(self) -> float | None:
    """The paper's stated size on the log scale (log 0.5 for "twice as fast"), else None."""
    return None if self.claimed_ratio is None else math.log(self.claimed_ratio)

  @property
  def effect(self) -> float:
    """The effect the power rule plans to detect: the paper's stated size where it
    states one, else the margin."""
    if self.claimed_ratio is not None and self.min_effect is None:
      return speed_min_effect(self.claimed_ratio)
    return self.margin

  @property
  def needs_convergence(self) -> bool:
    return self.about_convergence or self.kind not in RATIO_KINDS



def seed_cap(scale: str) -> int:
  """The most seeds the power rule plans for a claim at ``scale`` (:data:`SEED_CAPS`)."""
  try:
    return SEED_CAPS[scale]
  except KeyError:
    raise ValueError(f"no seed cap for scale {scale!r}; the rule's scales: "
                     f"{', '.join(SEED_CAPS)}") from None


def planning_alpha() -> float:
  return ALPHA / PLANNED_CLAIMS


def pilot_size(minutes: float | None) -> int:
  """The pilot's seeds for an experiment whose members take ``minutes`` of wall time
  (the mean of its seed-0 records; None before any is recorded, or where one does not
  record its wall time: the smaller pilot, which every pilot begins with)."""
  if minutes is not None and minutes < QUICK_MINUTES:
    return QUICK_PILOT_SEEDS
  return MIN_SEEDS


def speed_min_effect(claimed_ratio: float | None) -> float:
  """The minimum effect of a speed claim on the log scale: the paper's claimed ratio
  of updates where it states one (DRAW's "about twice as fast" is 0.5), else a 10%
  saving."""
  ratio = claimed_ratio if claimed_ratio is not None else 1 - SPEED_MIN_SAVING
  return -math.log(ratio)


def parameters() -> dict[str, Any]:
  """The rule as data: what :func:`rule_hash` hashes, with the claims."""
  return {
      "version": VERSION, "confidence": CONFIDENCE, "alpha": ALPHA,
      "multiplicity": "holm over every hypothesis a verdict rests on, counting those "
                      "that can be true at once (shaffer)",
      "min_seeds": MIN_SEEDS, "quick_pilot_seeds": QUICK_PILOT_SEEDS,
      "quick_minutes": QUICK_MINUTES,
      "pilot": "mean time/wall_seconds of the experiment's seed-0 records; the smaller "
               "pilot where one does not record it",
      "judged_seeds": "the pilot and the plan from the pilot alone; later seeds exploratory",
      "power": POWER, "power_tails": "nct sf of both tails",
      "planned_claims": PLANNED_CLAIMS, "seed_caps": dict(SEED_CAPS),
      "level_fractions": list(LEVEL_FRACTIONS), "smoothing": "mean of 3 neighbours",
      "speed_min_saving": SPEED_MIN_SAVING, "final_min_difference": FINAL_MIN_DIFFERENCE,
      "final_value": FINAL_VALUE,
      "no_difference": "two one-sided tests at the margin, in the family",
      "claimed_size": "two-sided test of the claimed size, in the family",
      "gate": "both arms' 95% bound of the mean best beats the trivial model",
      "p_values": "effective standard error: the interval's half-width over its t quantile",
      "step_time": "a dedicated round-robin timing: the median of its rounds' log ratios, "
                   "sign-test interval and p-values, its stopping rule hashed with the claims",
      "converged_share": CONVERGED_SHARE, "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
      "bootstrap_seed": BOOTSTRAP_SEED,
      "speed_statistic": "paired mean log ratio of crossings, bootstrap standard error, "
                         "Student-t interval, grid floor",
  }


def _digest(value: Any) -> str:
  text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def rule_hash(claims: Any) -> str:
  """The hash of the rule: its parameters and ``claims``, every claim the suite judges
  as data (``benchmark_suite.claims_record``: what each compares, on which metric)."""
  return _digest({"rule": parameters(), "claims": claims})


def setting_hash(setting: Mapping[str, Any]) -> str:
  """The hash a member's records carry: ``setting``, what the member trains (its
  experiment's config, overrides and variant), but not its normalizer or seed, so that
  adding seeds or a normalizer leaves the other members' records valid, nor the rule
  that judges it."""
  return _digest({"setting": setting})
