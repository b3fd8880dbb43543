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


def mid_epoch_steps(schedule: EvalSchedule, steps_per_call: int, steps_per_epoch: int,
                    total_steps: int, until: int) -> list[int]:
  """The steps up to ``until`` at which the loop evaluates inside an epoch. The loop
  (``lnorm.training.loop``) runs each epoch from its start in calls of
  ``steps_per_call`` updates, the last one shorter at the epoch's end or at
  ``total_steps``, and evaluates after a call that reached an evaluation step unless
  the call ended the epoch (the epoch record stands in for it)."""
  found = []
  for start in range(0, min(total_steps, until), steps_per_epoch):
    stop = min(steps_per_epoch, total_steps - start)
    in_epoch = 0
    while in_epoch < stop and start + in_epoch < until:
      before, in_epoch = start + in_epoch, in_epoch + min(steps_per_call, stop - in_epoch)
      if in_epoch < stop and schedule.due(before, start + in_epoch):
        found.append(start + in_epoch)
  return [s for s in found if s <= until]


def misalignment(every_steps: int, steps_per_call: int, steps_per_epoch: int,
                 total_steps: int, shown: int = 3) -> str | None:
  """What to tell a user whose ``eval_every_steps`` the loop cannot honour exactly (it
  evaluates between jitted calls of ``steps_per_call`` updates), or None when every
  multiple of it inside an epoch is evaluated at that very step."""
  if not every_steps:
    return None
  schedule = EvalSchedule(every_steps, 0, total_steps)
  until = min(total_steps, (shown + 1) * every_steps + steps_per_call)
  asked = [s for s in range(every_steps, until + 1, every_steps)
           if s % steps_per_epoch and s < total_steps][:shown]
  if not asked:
    return None
  done = mid_epoch_steps(schedule, steps_per_call, steps_per_epoch, total_steps,
                         until)[:shown]
  if done == asked:
    return None
  divisor = max(d for d in range(1, steps_per_call + 1) if every_steps % d == 0)
  where = (f"step{'s' if len(done) > 1 else ''} {', '.join(map(str, done))}" if done else
           f"no step before the run's end at step {total_steps}")
  return (f"eval_every_steps={every_steps} with steps_per_call={steps_per_call}: the loop "
          f"evaluates between jitted calls of {steps_per_call} updates, at the first call "
          f"end at or after each multiple of {every_steps}, so the first evaluations fall at "
          f"{where}, not {', '.join(map(str, asked))}. To evaluate at exactly those steps, "
          f"set --config.steps_per_call={divisor} (a divisor of {every_steps}).")
