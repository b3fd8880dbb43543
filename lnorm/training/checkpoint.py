"""Orbax checkpoints of the train state plus the host-side loop state."""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
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

  def save(self, step: int, state: Any, host: dict[str, Any]) -> None:
    self.check_room(state)
    # The save finishes in the background while the loop keeps updating ``host``:
    # hand orbax a snapshot, or a resumed run's epoch averages would drift.
    snapshot = copy.deepcopy(host)
    with self._disk_full_as_user_error():
      self._manager.save(step, args=ocp.args.Composite(
          state=ocp.args.StandardSave(state), host=ocp.args.JsonSave(snapshot)), force=True)

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

  def restore(self, abstract_state: Any) -> tuple[Any, dict[str, Any]]:
    """Restores the latest checkpoint into the shapes and shardings of
    ``abstract_state`` (from ``jax.eval_shape``), so a sharded state comes back
    sharded the same way."""
    step = self._manager.latest_step()
    restored = self._manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract_state), host=ocp.args.JsonRestore()))
    return restored["state"], restored["host"]

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
  """The latest checkpoint of a finished or running run, for the commands that read
  one (``lnorm bln-search``, ``evaluate``, ``sample``): ``(state, step)``. A run with
  no checkpoint is a ``UserError`` that says ``fix``."""
  checkpointer = Checkpointer(workdir)
  try:
    step = checkpointer.latest_step()
    if step is None:
      raise UserError(f"{workdir} holds no checkpoint: {fix}.")
    state, _ = checkpointer.restore(abstract_state)
  finally:
    checkpointer.close()
  return state, int(step)
