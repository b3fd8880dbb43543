"""The benchmark's verdict rule, version 2: every parameter in one place, and its hash.

The rule is stated in full in ``docs/benchmark.md`` ("The verdict rule"), with the
commit that fixed it. It is fixed before the runs it judges: each benchmark member's
records carry :func:`member_hash`, the hash of these parameters together with the
member's experiment setting, and the report refuses to judge a claim on records made
under another hash. Changing any value here (or what a setting asks of its members)
after seeing results is a new rule version: bump ``VERSION`` and say so in
docs/benchmark.md. ``tests/test_rule.py`` pins the hash, so that no change slips in
unnoticed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from typing import Any, Mapping

VERSION = 2

#: Every interval is a 95% interval; every test is at 5% after Holm's adjustment.
CONFIDENCE = 0.95
ALPHA = 0.05
#: The pilot: no verdict with fewer seeds on either side of a claim.
MIN_SEEDS = 3
#: Seeds by power: enough to detect the claim's minimum effect with this power, at
#: this two-sided level per claim (ALPHA over the claims the suite plans to judge,
#: Bonferroni: the strictest step of Holm's adjustment), up to SEED_CAP on a CPU.
POWER = 0.8
PLANNED_CLAIMS = 30
SEED_CAP = 10
#: The speed statistic's levels: the baseline's smoothed mean curve at these
#: fractions of its run (its best value up to there).
LEVEL_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
#: A speed claim's minimum effect when its paper states no size: 10% fewer updates.
SPEED_MIN_SAVING = 0.10
#: A final-value claim's minimum effect when its paper states no size, in the
#: metric's own units (every final-value claim is on an error rate: one point).
FINAL_MIN_DIFFERENCE = 0.01
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
INCONCLUSIVE = "inconclusive at this scale"
NOT_TESTABLE = "not testable at this scale"
NOT_RUN = "not run yet"
REFUSED = "not judged: records made under another rule"


#: What a claim can compare (lnorm.analysis.claims says how each is judged).
KINDS = ("speed", "final", "matches", "matches_or_beats", "at_chance", "step_time")
#: Kinds whose effect is a log ratio (shown as a ratio); the others a difference.
RATIO_KINDS = ("speed", "step_time")


@dataclasses.dataclass(frozen=True)
class Claim:
  """One claim of a paper, tested on one experiment's runs: ``norm`` against
  ``against``, values of the config ``field``, among the runs that match ``where``.

  ``claimed_ratio``: the size the paper states for a speed claim (0.5 for "about
  twice as fast"); the verdict says whether the interval is compatible with it, and
  it is the claim's minimum effect for the power rule. ``about_convergence``: the
  claim speaks of convergence or of reaching the baseline's best, so the validity
  gate asks that the runs converge. ``min_effect`` overrides the rule's default
  (a 10% saving of updates; one point of error for a final value).
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
  value: str = "best"
  min_effect: float | None = None

  @property
  def effect(self) -> float:
    """The minimum effect on the estimate's scale (a log ratio, or the metric's units)."""
    if self.min_effect is not None:
      return self.min_effect
    if self.kind in RATIO_KINDS:
      return speed_min_effect(self.claimed_ratio)
    return FINAL_MIN_DIFFERENCE

  @property
  def needs_convergence(self) -> bool:
    return self.about_convergence or self.kind not in RATIO_KINDS



def planning_alpha() -> float:
  return ALPHA / PLANNED_CLAIMS


def speed_min_effect(claimed_ratio: float | None) -> float:
  """The minimum effect of a speed claim on the log scale: the paper's claimed ratio
  of updates where it states one (DRAW's "about twice as fast" is 0.5), else a 10%
  saving."""
  ratio = claimed_ratio if claimed_ratio is not None else 1 - SPEED_MIN_SAVING
  return -math.log(ratio)


def parameters() -> dict[str, Any]:
  """The rule as data: what :func:`member_hash` hashes."""
  return {
      "version": VERSION, "confidence": CONFIDENCE, "alpha": ALPHA,
      "multiplicity": "holm", "min_seeds": MIN_SEEDS, "power": POWER,
      "planned_claims": PLANNED_CLAIMS, "seed_cap": SEED_CAP,
      "level_fractions": list(LEVEL_FRACTIONS), "smoothing": "mean of 3 neighbours",
      "speed_min_saving": SPEED_MIN_SAVING, "final_min_difference": FINAL_MIN_DIFFERENCE,
      "converged_share": CONVERGED_SHARE, "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
      "bootstrap_seed": BOOTSTRAP_SEED,
      "speed_statistic": "paired mean log ratio of crossings, bootstrap standard error, "
                         "Student-t interval, grid floor",
  }


def _digest(value: Any) -> str:
  text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def rule_hash() -> str:
  """The hash of the rule alone."""
  return _digest(parameters())


def member_hash(setting: Mapping[str, Any]) -> str:
  """The hash a member's records carry: the rule and ``setting``, what the suite asks
  of the member's experiment (config, overrides, the member's variant, the claims and
  their metric, the pilot's seeds), but not its normalizer or seed, so that adding
  seeds or a normalizer leaves the other members' records valid."""
  return _digest({"rule": parameters(), "setting": setting})
