"""The parameters with the best validation score so far, kept beside a run.

For experiments that select their reported model on validation during training (the
order-embeddings authors kept the parameters with the best image-retrieval R@1 + R@5 +
R@10 on the first 1,000 validation images, checked every 300 updates; see
``experiments.order_embeddings.retrieval.selection_score``) rather than reporting the last one.
"""

from __future__ import annotations

import json
import os
from typing import Any

import flax
import jax


def atomic_write(path: str, data: bytes) -> None:
  """Replaces ``path`` in one step: a reader never sees a half-written file."""
  tmp = path + ".tmp"
  with open(tmp, "wb") as f:
    f.write(data)
  os.replace(tmp, path)


class BestModel:
  """``<workdir>/<name>/``: ``variables.msgpack`` and ``record.json`` (step and score,
  higher is better), kept across resumes."""

  def __init__(self, workdir: str, name: str = "best"):
    self.directory = os.path.join(workdir, name)
    self._record_path = os.path.join(self.directory, "record.json")
    self._variables_path = os.path.join(self.directory, "variables.msgpack")

  def record(self) -> dict[str, Any] | None:
    if not os.path.exists(self._record_path):
      return None
    with open(self._record_path) as f:
      return json.load(f)

  def offer(self, step: int, score: float, variables) -> bool:
    """Keeps ``variables`` if ``score`` beats the best so far; True if it did.

    A record from a later step than ``step`` belongs to a trajectory the run has
    abandoned (it resumed from an older checkpoint), so it is replaced: the kept
    model always comes from the run's own trajectory. A replay that reproduces the
    lost steps (same config and devices) ends with what an uninterrupted run keeps;
    one that does not also loses the best from before its resume point, since only
    one set of variables is stored.
    """
    best = self.record()
    if best is not None and best["step"] <= step and score <= best["score"]:
      return False
    if jax.process_index() == 0:
      os.makedirs(self.directory, exist_ok=True)
      # Each file is replaced atomically. A crash between the two leaves newer
      # variables beside the old record; the resumed run reaches the same score at
      # the same step again and rewrites both.
      atomic_write(self._variables_path,
                   flax.serialization.to_bytes(jax.device_get(variables)))
      atomic_write(self._record_path,
                   json.dumps({"step": int(step), "score": float(score)}).encode())
    return True

  def restore(self, like):
    with open(self._variables_path, "rb") as f:
      return flax.serialization.from_bytes(jax.device_get(like), f.read())
