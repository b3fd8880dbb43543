"""When the loop saves a checkpoint, and what a run starts from.

The loop saves at every epoch end, at the end of a run cut by ``max_steps``, on SIGTERM
or Ctrl-C, and in between when :class:`CheckpointTimer` says one is due. A run whose
workdir holds a checkpoint resumes from it (:func:`resume`).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from lnorm.training import records
from lnorm.training import workdir as workdir_lib
from lnorm.training.checkpoint import Checkpointer, abstract_like

#: The first time-based checkpoint comes after at most this many seconds; later ones
#: every checkpoint_every_secs. Without it the first checkpoint waited for an epoch's
#: end or checkpoint_every_secs (300 s), and a kill before it lost everything: a
#: handwriting epoch at scale=cpu is 1,366 steps. One more save costs about a second,
#: and bounds the work a crash in the first minutes loses to one minute. A time, not a
#: number of steps, because a step takes a millisecond in one experiment and a second
#: in another.
FIRST_CHECKPOINT_SECS = 60.0


class CheckpointTimer:
  """When the next time-based checkpoint is due: ``every_secs`` after the last save,
  and the first one sooner (FIRST_CHECKPOINT_SECS)."""

  def __init__(self, every_secs: float, have_checkpoint: bool,
               clock: Callable[[], float] = time.time):
    self.every_secs = every_secs
    self.have_checkpoint = have_checkpoint
    self._clock = clock
    self._last = clock()

  def due(self) -> bool:
    interval = self.every_secs
    if not self.have_checkpoint:
      interval = min(interval, FIRST_CHECKPOINT_SECS)
    return self._clock() - self._last > interval

  def saved(self) -> None:
    self.have_checkpoint = True
    self._last = self._clock()


def resume(checkpointer: Checkpointer, state: Any,
           workdir: str) -> tuple[Any, dict[str, Any], int]:
  """``(state, host records, step)`` to start from: the latest checkpoint's, or
  ``state`` with fresh records at step 0, saying why when an earlier attempt left files
  but no checkpoint."""
  if checkpointer.latest_step() is None:
    left = workdir_lib.earlier_attempt(workdir)
    if left:
      logging.warning(
          "Starting from scratch: %s holds no checkpoint, only the %s of an earlier "
          "attempt that stopped before its first checkpoint (killed, crashed or out of "
          "disk); they are replaced.", workdir, left)
    return state, records.initial(), 0
  state, saved = checkpointer.restore(abstract_like(state))
  # Bookkeeping added in later versions starts from its initial value.
  host = {**records.initial(), **saved}
  logging.info("Resuming from the checkpoint at step %d.", int(state.step))
  return state, host, int(state.step)
