"""Deterministic batches from in-memory splits.

The order of epoch e is a permutation drawn from (seed, e) alone, so a run resumed at
any step sees exactly the batches an uninterrupted run would have seen.
"""

from __future__ import annotations

from typing import Iterator, Mapping

import numpy as np

Arrays = Mapping[str, np.ndarray]


def epoch_order(num_examples: int, seed: int, epoch: int) -> np.ndarray:
  return np.random.default_rng([seed, epoch]).permutation(num_examples)


def steps_per_epoch(num_examples: int, batch_size: int) -> int:
  """Training drops the last partial batch, so every step has the full batch size
  (batch statistics and the BLN mixing weights depend on it)."""
  return num_examples // batch_size


def train_chunk(arrays: Arrays, batch_size: int, seed: int, epoch: int,
                first_step: int, num_steps: int) -> dict[str, np.ndarray]:
  """``num_steps`` consecutive training batches of an epoch, stacked as [K, B, ...]."""
  n = len(next(iter(arrays.values())))
  order = epoch_order(n, seed, epoch)
  index = order[first_step * batch_size:(first_step + num_steps) * batch_size]
  return {k: v[index].reshape((num_steps, batch_size) + v.shape[1:]) for k, v in arrays.items()}


def eval_batches(arrays: Arrays, batch_size: int,
                 multiple_of: int = 1) -> Iterator[dict[str, np.ndarray]]:
  """The whole split in order. The last batch keeps its true size when possible (so
  mini-batch statistics never see padding); it is padded to a multiple of
  ``multiple_of`` (the device count) only when needed, with ``mask`` marking padding."""
  n = len(next(iter(arrays.values())))
  for start in range(0, n, batch_size):
    batch = {k: v[start:start + batch_size] for k, v in arrays.items()}
    size = len(next(iter(batch.values())))
    padded = -(-size // multiple_of) * multiple_of
    mask = np.zeros(padded, np.float32)
    mask[:size] = 1.0
    if padded != size:
      batch = {k: np.concatenate([v, np.repeat(v[-1:], padded - size, 0)])
               for k, v in batch.items()}
    batch["mask"] = mask
    yield batch
