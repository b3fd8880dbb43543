"""Orbax checkpoints of the train state plus the host-side loop state; a damaged one
is named and set aside, not a traceback."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import shutil
import sys
from typing import Any, Iterator

import jax
import orbax.checkpoint as ocp

from lnorm.errors import UserError

#: Room a checkpoint needs beyond its arrays' bytes: orbax's metadata and the host dict.
_CHECKPOINT_OVERHEAD_BYTES = 1 << 20
#: What orbax's writers say when the disk is full (a tensorstore error, not an OSError).
_DISK_FULL_TEXTS = ("No space left on device", "Disk quota exceeded")


def _megabytes(n: int) -> str:
  return f"{n / 1e6:.1f} MB"


class DiskFullError(UserError):
  """A checkpoint does not fit on the workdir's disk."""


#: The suffix of a checkpoint folder set aside as damaged: orbax lists only folders
#: named by a step (or ending in ``_<step>``), so it no longer sees it.
DAMAGED_SUFFIX = ".damaged"
#: How much of orbax's error a message quotes: its first line says what failed to read.
_REASON_CHARS = 240


class DamagedCheckpointError(UserError):
  """A checkpoint that orbax cannot restore: a file truncated, missing or corrupt."""

  def __init__(self, step: int, path: str, reason: str):
    super().__init__(f"The checkpoint at step {step} ({path}) does not restore: {reason}.")
    self.step, self.path, self.reason = step, path, reason


@dataclasses.dataclass(frozen=True)
class Restored:
  """A restored checkpoint: the train state, the loop's host records, the step."""
  state: Any
  host: dict[str, Any]
  step: int


def _unprinted_failed_reads() -> None:
  """orbax reads a checkpoint's arrays concurrently; when one fails, it raises that
  error, closes its event loop and leaves the other reads behind. Python prints each
  as "Exception ignored", with its array's tensorstore spec or "Event loop is
  closed": dozens of lines beside the one warning that says what is damaged. From
  the first restore on, this process leaves those unprinted; every other exception
  Python cannot raise is printed as before."""
  previous = sys.unraisablehook
  if getattr(previous, "drops_failed_reads", False):
    return

  def hook(unraisable):
    if not _left_by_orbax(unraisable):
      previous(unraisable)

  hook.drops_failed_reads = True
  sys.unraisablehook = hook


def _left_by_orbax(unraisable) -> bool:
  code = getattr(unraisable.object, "cr_code", None)
  if code is not None and f"{os.sep}orbax{os.sep}" in code.co_filename:
    return True  # A read of orbax's that failed too.
  # A read that finished after orbax closed its loop: the result has nowhere to go.
  return (isinstance(unraisable.exc_value, RuntimeError) and
          str(unraisable.exc_value) == "Event loop is closed")


def _reason(error: BaseException) -> str:
  """The first line of the error orbax's raise came from, which names the file and
  what is wrong with it (orbax's own says which array, then prints its tensorstore
  spec over dozens of lines)."""
  while error.__cause__ is not None:
    error = error.__cause__
  lines = str(error).strip().splitlines()
  reason = lines[0].strip() if lines else type(error).__name__
  if len(reason) > _REASON_CHARS:
    reason = reason[:_REASON_CHARS - 3] + "..."
  return reason.rstrip(".")


class Checkpointer:
  """Saves ``(state, host)`` under ``workdir/checkpoints``; restores the latest.

  ``host`` is a small JSON-able dict of loop bookkeeping (running epoch sums),
  saved with the state so that a resumed run's metrics equal an uninterrupted one's.
  """

  def __init__(self, workdir: str, max_to_keep: int = 2):
    self.directory = os.path.join(os.path.abspath(workdir), "checkpoints")
    self._manager = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True))

  def latest_step(self) -> int | None:
    return self._manager.latest_step()

  def steps(self) -> list[int]:
    """The steps of the checkpoints orbax lists, oldest first."""
    return sorted(self._manager.all_steps())

  def path(self, step: int) -> str:
    return os.path.join(self.directory, str(step))

  def save(self, step: int, state: Any, host: dict[str, Any]) -> None:
    self.check_room(state)
    # The save finishes in the background while the loop keeps updating ``host``:
    # hand orbax a snapshot, or a resumed run's epoch averages would drift.
    snapshot = copy.deepcopy(host)
    with self._disk_full_as_user_error():
      self._manager.save(step, args=ocp.args.Composite(
          state=ocp.args.StandardSave(state), host=ocp.args.JsonSave(snapshot)), force=True)

  def reached_preemption(self, steps: range) -> bool:
    """Whether the job's preemption sync point is among ``steps``: a SIGTERM to any
    process of a multi-process job (JAX's preemption service takes it from Python
    there) sets one step at which every process saves, the step after the furthest
    any process has reported (orbax's ``reached_preemption``, JAX's
    ``reached_preemption_sync_point``). The protocol asks for every step, in order,
    from the start, so the loop passes each step of each call, once; those of the
    first call include the steps before the one it resumed from, so that a notice
    that came during the set-up (every process still at step 0) is not missed.
    Always False for one process (no service)."""
    if jax.process_count() == 1:
      return False
    return any([self._manager.reached_preemption(s) for s in steps])  # Every step.

  def check_room(self, state: Any) -> None:
    """Refuses a save the disk cannot hold: orbax would fail in its background threads
    with hundreds of lines of asyncio tracebacks, and leave a partial checkpoint."""
    needed = sum(getattr(x, "nbytes", 0) for x in jax.tree.leaves(state))
    needed += _CHECKPOINT_OVERHEAD_BYTES
    free = shutil.disk_usage(self.directory).free
    if free < needed:
      raise DiskFullError(self._disk_full_message(
          f"a checkpoint of this run takes about {_megabytes(needed)} and the disk has "
          f"{_megabytes(free)} free"))

  def _disk_full_message(self, why: str) -> str:
    latest = self._manager.latest_step()
    resume = (f"it resumes from the last complete checkpoint (step {latest})"
              if latest is not None else "it starts over, as no checkpoint was saved")
    return (f"No room for a checkpoint in {self.directory}: {why}. Free space on that "
            f"disk, or use a --workdir on another one, and rerun the same command: "
            f"{resume}.")

  @contextlib.contextmanager
  def _disk_full_as_user_error(self) -> Iterator[None]:
    """The disk filled while orbax wrote (another process took the space)."""
    try:
      yield
    except Exception as e:  # pylint: disable=broad-except  (orbax raises ValueError)
      if not any(text in str(e) for text in _DISK_FULL_TEXTS):
        raise
      raise DiskFullError(self._disk_full_message("the disk filled while it was "
                                                  "written")) from None

  def restore(self, abstract_state: Any, step: int | None = None) -> Restored:
    """Restores the checkpoint of ``step`` (default: the latest) into the shapes and
    shardings of ``abstract_state`` (from ``jax.eval_shape``), so a sharded state
    comes back sharded the same way. One that does not restore is a
    :class:`DamagedCheckpointError` that quotes orbax's reason."""
    step = self._manager.latest_step() if step is None else step
    _unprinted_failed_reads()  # Before: a read left behind may fail at once.
    try:
      restored = self._manager.restore(step, args=ocp.args.Composite(
          state=ocp.args.StandardRestore(abstract_state), host=ocp.args.JsonRestore()))
    except MemoryError:  # The machine's shortage, not the checkpoint's fault.
      raise
    except Exception as e:  # pylint: disable=broad-except
      # orbax raises what its readers raise: ValueError (tensorstore's DATA_LOSS,
      # OUT_OF_RANGE, NOT_FOUND), json's JSONDecodeError, KeyError, FileNotFoundError.
      raise DamagedCheckpointError(step, self.path(step), _reason(e)) from None
    return Restored(restored["state"], restored["host"], int(step))

  def set_aside(self, step: int) -> str:
    """Moves a damaged checkpoint out of orbax's sight, to ``<step>.damaged`` beside
    the others (kept, for a look, never deleted), so that the run can save that step
    again; returns where it went."""
    source = self.path(step)
    target, n = source + DAMAGED_SUFFIX, 1
    while os.path.exists(target):  # Damaged before, at the same step.
      n += 1
      target = f"{source}{DAMAGED_SUFFIX}-{n}"
    # The processes of a multi-host job share the folder: the first moves it, and
    # none lists the steps again before it has.
    if jax.process_index() == 0:
      os.rename(source, target)
    ocp.multihost.sync_global_processes(f"lnorm_set_aside_{step}")
    self._manager.reload()
    return target

  def discard(self, step: int) -> None:
    """Deletes an intact checkpoint that the run makes again (see
    ``checkpoint_policy.resume``)."""
    self._manager.delete(step)
    self._manager.reload()

  def wait(self) -> None:
    with self._disk_full_as_user_error():
      self._manager.wait_until_finished()

  def close(self) -> None:
    try:
      with self._disk_full_as_user_error():
        self._manager.wait_until_finished()
    finally:
      self._manager.close()


def abstract_like(tree: Any) -> Any:
  """ShapeDtypeStructs with the shardings of ``tree``: a restore target."""
  return jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
      if isinstance(x, jax.Array) else x, tree)


def restore_latest(workdir: str, abstract_state: Any,
                   fix: str = "train it first with `lnorm train`") -> tuple[Any, int]:
  """``(state, step)``: the latest checkpoint of a finished or running run, restored
  into ``abstract_state`` (what ``TrainStateInitializer.from_checkpoint`` builds for
  the commands that read one). A run with no checkpoint is a ``UserError`` that says
  ``fix``; a damaged one names the rerun that repairs it."""
  checkpointer = Checkpointer(workdir)
  try:
    if checkpointer.latest_step() is None:
      raise UserError(f"{workdir} holds no checkpoint: {fix}.")
    restored = checkpointer.restore(abstract_state)
  except DamagedCheckpointError as e:
    raise UserError(f"{e} Rerun the `lnorm train` command of {workdir}: it sets the "
                    "damaged checkpoint aside and trains on from the newest intact "
                    "one.") from None
  finally:
    checkpointer.close()
  return restored.state, restored.step
