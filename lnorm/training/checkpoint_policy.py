"""When the loop saves a checkpoint and when it stops, and what a run starts from.

The loop saves at every epoch end, at the end of a run cut by ``max_steps``, on SIGTERM
or Ctrl-C, and in between when :class:`CheckpointTimer` says one is due; after each
train call and at each epoch end :class:`CheckpointDecisions` says which, the same on
every process of a job. A run whose workdir holds a checkpoint resumes from it
(:func:`resume`), or from an earlier one when the latest is damaged or the record has
lost a line after the earlier one.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import time
from typing import Any, Callable

import numpy as np

from lnorm.errors import UserError
from lnorm.training import metrics_writer
from lnorm.training import parallel
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


#: What each process contributes to a decision: [a timed checkpoint is due by its
#: clock, why it asks to stop]. The reasons: none, the job's preemption sync point
#: (a SIGTERM to any process), or the number of a signal this process caught itself.
_NO_STOP, _PREEMPTED = 0, -1


@dataclasses.dataclass(frozen=True)
class Decision:
  """What every process of the job does now: save a timed checkpoint, and stop (with
  why, for the message that ends the run)."""
  save: bool = False
  stop: str | None = None


class CheckpointDecisions:
  """When to save a timed checkpoint and whether to stop, decided alike by every
  process of a job.

  Each process has its own clock and its own signals. Acting on them alone, one
  process entered a checkpoint (a collective: orbax's barriers) while another trained
  on, and both waited for each other for ever (issue 61). So process 0's clock decides
  timed checkpoints, and a stop that any process asks for stops every process at the
  same step: after each train call (:meth:`after_call`) and at each epoch end
  (:meth:`at_epoch_end`) the processes exchange their two numbers in one all-gather
  (``parallel.gather_from_processes``; nothing is sent with one process). The
  interval stays a time, not a number of steps, because a step takes a millisecond
  in one experiment and a second in another, and its time varies inside a run too.

  A stop comes from a signal this process caught (Ctrl-C, or SIGTERM in a process on
  its own) or from the job's preemption sync point: in a job, JAX's preemption
  service takes SIGTERM from Python, tells every process, and they agree on a step
  (``Checkpointer.reached_preemption``). Once decided, a stop stays decided: the
  processes decide it together, so they also stop asking together.
  """

  def __init__(self, timer: CheckpointTimer, checkpointer: Checkpointer,
               gather: Callable[[np.ndarray], np.ndarray] = parallel.gather_from_processes):
    self.timer, self._checkpointer, self._gather = timer, checkpointer, gather
    self._reported = 0  # The last step passed to the preemption sync point.
    self.stop: str | None = None

  def after_call(self, step: int, signals) -> Decision:
    """After the train call that ended at ``step``: save, stop, or train on.
    ``signals``: the command's ``StopSignals``."""
    preempted = self._checkpointer.reached_preemption(range(self._reported + 1, step + 1))
    self._reported = step
    return self._decide(self.timer.due(), preempted, signals)

  def at_epoch_end(self, signals) -> Decision:
    """After an epoch's record and checkpoint: stop, or train on (no timed save)."""
    return self._decide(False, False, signals)

  def saved(self) -> None:
    self.timer.saved()

  def _decide(self, due: bool, preempted: bool, signals) -> Decision:
    if self.stop:
      return Decision(stop=self.stop)
    reason = _PREEMPTED if preempted else _signal_number(signals.received)
    # Row i: process i's [due, reason]; process 0's clock is the job's.
    rows = self._gather(np.asarray([int(due), reason], np.int32))
    self.stop = _stop_reason(rows[:, 1])
    return Decision(save=bool(rows[0, 0]) and not self.stop, stop=self.stop)


def _signal_number(name: str | None) -> int:
  return _NO_STOP if name is None else int(signal.Signals[name])


def _stop_reason(reasons: np.ndarray) -> str | None:
  """Why the job stops, from each process's reason: "SIGTERM" as a process on its own
  says it; in a job, which process caught what."""
  asked = [(i, int(r)) for i, r in enumerate(reasons) if r != _NO_STOP]
  if not asked:
    return None
  if len(reasons) == 1:  # As before there were jobs: "Stopped by SIGTERM at step 42".
    return signal.Signals(asked[0][1]).name
  if any(r == _PREEMPTED for _, r in asked):
    return "SIGTERM to a process of the job (JAX's preemption sync point)"
  by_signal: dict[str, list[int]] = {}
  for i, r in asked:
    by_signal.setdefault(signal.Signals(r).name, []).append(i)
  return " and ".join(
      f"{name} to process{'es' if len(ids) > 1 else ''} {', '.join(map(str, ids))}"
      for name, ids in by_signal.items())


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
