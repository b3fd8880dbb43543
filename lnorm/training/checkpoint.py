"""Orbax checkpoints of the train state plus the host-side loop state."""

from __future__ import annotations

import copy
import os
from typing import Any

import jax
import orbax.checkpoint as ocp

from lnorm.errors import UserError


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
    # The save finishes in the background while the loop keeps updating ``host``:
    # hand orbax a snapshot, or a resumed run's epoch averages would drift.
    snapshot = copy.deepcopy(host)
    self._manager.save(step, args=ocp.args.Composite(
        state=ocp.args.StandardSave(state), host=ocp.args.JsonSave(snapshot)), force=True)

  def restore(self, abstract_state: Any) -> tuple[Any, dict[str, Any]]:
    """Restores the latest checkpoint into the shapes and shardings of
    ``abstract_state`` (from ``jax.eval_shape``), so a sharded state comes back
    sharded the same way."""
    step = self._manager.latest_step()
    restored = self._manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract_state), host=ocp.args.JsonRestore()))
    return restored["state"], restored["host"]

  def wait(self) -> None:
    self._manager.wait_until_finished()

  def close(self) -> None:
    self._manager.wait_until_finished()
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
