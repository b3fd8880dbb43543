"""When the loop evaluates inside an epoch: the evaluation schedule, on steps alone.

Both of its parts depend on the step alone, never on time or on where a run was
resumed, so that a resumed run evaluates at the steps an uninterrupted one does.
"""

from __future__ import annotations

import bisect

from lnorm.errors import ConfigError
from lnorm.training import defaults


def crossed_multiple(every: int, before: int, after: int) -> bool:
  """Whether a multiple of ``every`` (0: never) lies in (before, after]: the call that
  took the run from step ``before`` to ``after`` passed it."""
  return bool(every) and after // every > before // every


class EvalSchedule:
  """The steps of the mid-epoch evaluations: every ``eval_every_steps`` and the
  ``eval_points_per_decade`` geometric points (``defaults.geometric_steps``)."""

  def __init__(self, every_steps: int, points_per_decade: int, last_step: int):
    if every_steps < 0 or points_per_decade < 0:
      raise ConfigError(
          f"eval_every_steps={every_steps}, eval_points_per_decade={points_per_decade}: "
          "use 0 to turn a schedule off, or a positive number.")
    self.every_steps = every_steps
    self.points = defaults.geometric_steps(points_per_decade, last_step)

  def due(self, before: int, after: int) -> bool:
    """Whether the call from step ``before`` to ``after`` reached an evaluation step:
    with several steps per call, the first call boundary at or past it evaluates."""
    passed_point = bisect.bisect_right(self.points, after) > bisect.bisect_right(
        self.points, before)
    return passed_point or crossed_multiple(self.every_steps, before, after)
