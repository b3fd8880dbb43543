"""Deterministic validation hold-outs and training subsets.

Indices are drawn from a seeded generator and then sorted, so every split keeps the
source's order; shuffling is the batcher's job.
"""

from __future__ import annotations

import numpy as np

from lnorm.data import core

# Separate streams, so that changing the subset fraction never moves the hold-out.
_HOLDOUT_STREAM = 0
_SUBSET_STREAM = 1


def split_tail(arrays: dict[str, np.ndarray], size: int, what: str):
  """(head, tail) with the last ``size`` examples in the tail."""
  n = len(next(iter(arrays.values())))
  _check_size(size, n, what)
  head = {k: v[:n - size] for k, v in arrays.items()}
  tail = {k: v[n - size:] for k, v in arrays.items()}
  return head, tail


def holdout(arrays: dict[str, np.ndarray], size: int, seed: int, what: str):
  """(rest, held_out): ``size`` examples drawn at random (seeded) are held out."""
  n = len(next(iter(arrays.values())))
  _check_size(size, n, what)
  perm = np.random.default_rng([seed, _HOLDOUT_STREAM]).permutation(n)
  held = np.sort(perm[:size])
  rest = np.sort(perm[size:])
  return core.take_fields(arrays, rest), core.take_fields(arrays, held)


def subset(arrays: dict[str, np.ndarray], fraction: float, seed: int, what: str):
  """A seeded random ``fraction`` of the examples (all of them at 1.0)."""
  if not 0.0 < fraction <= 1.0:
    raise ValueError(f"{what}: subset_fraction must be in (0, 1], got {fraction}")
  if fraction == 1.0:
    return arrays
  n = len(next(iter(arrays.values())))
  keep = max(1, int(round(fraction * n)))
  perm = np.random.default_rng([seed, _SUBSET_STREAM]).permutation(n)
  return core.take_fields(arrays, np.sort(perm[:keep]))


def _check_size(size: int, n: int, what: str):
  if not 0 <= size < n:
    raise ValueError(f"{what}: validation_size must be in [0, {n}), got {size}")
