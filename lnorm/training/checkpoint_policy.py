"""When the loop saves a checkpoint, and what a run starts from.

The loop saves at every epoch end, at the end of a run cut by ``max_steps``, on SIGTERM
or Ctrl-C, and in between when :class:`CheckpointTimer` says one is due. A run whose
workdir holds a checkpoint resumes from it (:func:`resume`), or from an earlier one
when the latest is damaged or the record has lost a line after the earlier one.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from lnorm.errors import UserError
from lnorm.training import metrics_writer
from lnorm.training import records
from lnorm.training import workdir as workdir_lib
from lnorm.training.checkpoint import (Checkpointer, DamagedCheckpointError, Restored,
                                       abstract_like)

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
  """``(state, host records, step)`` to start from: the newest intact checkpoint's, or
  ``state`` with fresh records at step 0.

  A damaged record is repaired, not skipped: the run starts before the first line of
  ``metrics.jsonl`` that does not parse (a write a kill or a full disk cut short), so
  that it logs that line's step again, and checkpoints at or after that step, which
  would leave it unlogged, are deleted (the run saves them again). A checkpoint that
  does not restore is set aside (``Checkpointer.set_aside``) when an earlier one does;
  when none does, it is a one-line error naming the workdir and the fix. Each repair
  is one warning line.
  """
  cut = metrics_writer.find_cut_line(workdir)
  steps = checkpointer.steps()
  usable = [s for s in steps if cut is None or s < cut.step]
  restored, damaged = _newest_intact(checkpointer, usable, abstract_like(state))
  if damaged and restored is None:
    reasons = "; ".join(f"step {d.step}: {d.reason}" for d in damaged)
    raise UserError(
        f"No checkpoint of {workdir} restores ({reasons}). To start the run over, "
        f"delete {checkpointer.directory} (or the whole workdir) and rerun the same "
        "command.")
  for d in damaged:
    logging.warning(
        "The checkpoint at step %d (%s) is damaged and does not restore (%s); it is "
        "moved aside to %s, and the run resumes from the checkpoint at step %d.",
        d.step, d.path, d.reason, checkpointer.set_aside(d.step), restored.step)
  superseded = [s for s in steps if s not in usable]
  for step in superseded:
    checkpointer.discard(step)
  if cut and steps:  # Without a checkpoint, the earlier attempt's files all go.
    removed = ""
    if superseded:
      removed = (f"; the checkpoint{'s' if len(superseded) > 1 else ''} at step"
                 f"{'s' if len(superseded) > 1 else ''} "
                 f"{', '.join(map(str, superseded))}, after it, "
                 f"{'are' if len(superseded) > 1 else 'is'} deleted (the run saves "
                 f"{'them' if len(superseded) > 1 else 'it'} again)")
    logging.warning(
        "%s was cut short, by a kill or a full disk while it was written: the run "
        "resumes from %s and logs the steps after it again%s.",
        cut, f"the checkpoint at step {restored.step}" if restored else
        "the start, as no checkpoint precedes that step", removed)
  if restored is None:
    left = workdir_lib.earlier_attempt(workdir)
    if left and not steps:
      logging.warning(
          "Starting from scratch: %s holds no checkpoint, only the %s of an earlier "
          "attempt that stopped before its first checkpoint (killed, crashed or out of "
          "disk); they are replaced.", workdir, left)
    return state, records.initial(), 0
  # Bookkeeping added in later versions starts from its initial value.
  host = {**records.initial(), **restored.host}
  logging.info("Resuming from the checkpoint at step %d.", restored.step)
  return restored.state, host, restored.step


def _newest_intact(checkpointer: Checkpointer, steps: list[int], abstract_state: Any
                   ) -> tuple[Restored | None, list[DamagedCheckpointError]]:
  """The newest of ``steps`` that restores, and the newer ones that did not."""
  damaged = []
  for step in reversed(steps):
    try:
      return checkpointer.restore(abstract_state, step), damaged
    except DamagedCheckpointError as e:
      damaged.append(e)
  return None, damaged
