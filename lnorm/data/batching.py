"""Deterministic batches from in-memory splits.

The order of epoch e is a permutation drawn from (seed, e) alone, so a run resumed at
any step sees exactly the batches an uninterrupted run would have seen.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Mapping

import numpy as np

Arrays = Mapping[str, np.ndarray]


def epoch_order(num_examples: int, seed: int, epoch: int) -> np.ndarray:
  return np.random.default_rng([seed, epoch]).permutation(num_examples)


def steps_per_epoch(num_examples: int, batch_size: int) -> int:
  """Training drops the last partial batch, so every step has the full batch size
  (batch statistics and the BLN mixing weights depend on it)."""
  return num_examples // batch_size


@dataclasses.dataclass(frozen=True)
class LengthBuckets:
  """Batches of examples of similar length, each padded to its bucket's length rather
  than to the longest example of the split: a step costs what its examples need, and
  a jitted step compiles once per bucket.

  Attributes:
    feature: the padded array, [N, T, ...], its padding after the real steps.
    length: the array of real lengths, [N].
    edges: the padded lengths, ascending; the last is T.
    group_steps: consecutive training batches drawn from one bucket. A multiple of
      ``steps_per_call`` gives every fused call of the loop a single shape.
  """
  feature: str
  length: str
  edges: tuple[int, ...]
  group_steps: int = 1

  @classmethod
  def from_quantiles(cls, arrays: Arrays, feature: str, length: str, num_buckets: int,
                     group_steps: int = 1, multiple: int = 8) -> "LengthBuckets":
    """Edges at the quantiles of the training lengths (so that buckets hold about
    equal shares), rounded up to a multiple of ``multiple``."""
    if num_buckets < 1 or group_steps < 1:
      raise ValueError(f"LengthBuckets needs num_buckets >= 1 and group_steps >= 1, got "
                       f"{num_buckets} and {group_steps}.")
    width = arrays[feature].shape[1]
    quantiles = np.quantile(arrays[length], np.arange(1, num_buckets) / num_buckets)
    edges = {min(width, max(multiple, int(-(-q // multiple) * multiple))) for q in quantiles}
    return cls(feature, length, tuple(sorted(edges | {width})), group_steps)

  def bucket_of(self, lengths) -> np.ndarray:
    return np.searchsorted(self.edges, lengths, side="left")

  def epoch_order(self, arrays: Arrays, batch_size: int, seed: int, epoch: int) -> np.ndarray:
    """A permutation cut into groups of ``group_steps`` batches, in a random order.
    Each bucket's examples fill as many groups as they can; what is left of all the
    buckets fills mixed groups. Which examples a training epoch drops (the last
    ``n % batch_size``) is as random as without buckets."""
    n = len(arrays[self.length])
    order = epoch_order(n, seed, epoch)
    used, dropped = order[:n - n % batch_size], order[n - n % batch_size:]
    bucket = self.bucket_of(arrays[self.length][used])
    group = batch_size * self.group_steps
    groups, rest = [], []
    for b in range(len(self.edges)):
      members = used[bucket == b]
      full = len(members) - len(members) % group
      groups.extend(members[:full].reshape(-1, group))
      rest.append(members[full:])
    rng = np.random.default_rng([seed, epoch, 1])
    rest = rng.permutation(np.concatenate(rest))
    full = len(rest) - len(rest) % group
    groups.extend(rest[:full].reshape(-1, group))
    # The one group short of group_steps batches goes last, so that every other group
    # starts on a multiple of group_steps steps.
    shuffled = [groups[i] for i in rng.permutation(len(groups))]
    return np.concatenate(shuffled + [rest[full:], dropped])

  def trim(self, batch: Arrays, time_axis: int) -> dict[str, np.ndarray]:
    """The batch with ``feature`` cut to the bucket of its longest example."""
    width = self.edges[int(self.bucket_of(np.max(batch[self.length])))]
    trimmed = np.take(batch[self.feature], np.arange(width), axis=time_axis)
    return {**batch, self.feature: trimmed}

  def sorted_by_length(self, arrays: Arrays) -> dict[str, np.ndarray]:
    """The split in order of length, so that evaluation batches trim well (the order
    of a split does not change its mean metrics)."""
    order = np.argsort(arrays[self.length], kind="stable")
    return {k: v[order] for k, v in arrays.items()}


def training_order(arrays: Arrays, batch_size: int, seed: int, epoch: int,
                   buckets: LengthBuckets | None = None) -> np.ndarray:
  """The order of training epoch ``epoch``: a permutation, grouped by length with
  ``buckets``. The loop computes it once per epoch rather than once per call."""
  if buckets is None:
    return epoch_order(len(next(iter(arrays.values()))), seed, epoch)
  return buckets.epoch_order(arrays, batch_size, seed, epoch)


def train_chunk(arrays: Arrays, batch_size: int, seed: int, epoch: int,
                first_step: int, num_steps: int, buckets: LengthBuckets | None = None,
                order: np.ndarray | None = None) -> dict[str, np.ndarray]:
  """``num_steps`` consecutive training batches of an epoch, stacked as [K, B, ...];
  with ``buckets``, grouped by length and trimmed to the longest of the K batches.
  ``order``: the epoch's :func:`training_order`, if already computed."""
  if order is None:
    order = training_order(arrays, batch_size, seed, epoch, buckets)
  index = order[first_step * batch_size:(first_step + num_steps) * batch_size]
  chunk = {k: v[index].reshape((num_steps, batch_size) + v.shape[1:])
           for k, v in arrays.items()}
  return chunk if buckets is None else buckets.trim(chunk, time_axis=2)


def eval_batches(arrays: Arrays, batch_size: int, multiple_of: int = 1,
                 buckets: LengthBuckets | None = None) -> Iterator[dict[str, np.ndarray]]:
  """The whole split in order, each batch trimmed to its bucket with ``buckets`` (sort
  the split once with :meth:`LengthBuckets.sorted_by_length` for batches that trim
  well). The last batch keeps its true size when possible (so mini-batch statistics
  never see padding); it is padded to a multiple of ``multiple_of`` (the device count)
  only when needed, with ``mask`` marking padding."""
  n = len(next(iter(arrays.values())))
  for start in range(0, n, batch_size):
    batch = {k: v[start:start + batch_size] for k, v in arrays.items()}
    if buckets is not None:
      batch = buckets.trim(batch, time_axis=1)
    size = len(next(iter(batch.values())))
    padded = -(-size // multiple_of) * multiple_of
    mask = np.zeros(padded, np.float32)
    mask[:size] = 1.0
    if padded != size:
      batch = {k: np.concatenate([v, np.repeat(v[-1:], padded - size, 0)])
               for k, v in batch.items()}
    batch["mask"] = mask
    yield batch
