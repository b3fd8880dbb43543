"""Sequence lengths for the ``experiments`` phase's timed batches, as real data has them.

Every normalizer of an experiment is timed on the same batch, whose variable-length
features (its spec's ``GpuCheck.timed_lengths``) are padded to the config's padded
length and hold lengths drawn from the real training lengths within the longest of the
config's length buckets (the one padded to that length): the work a real batch of
that shape gives each implementation. cuDNN runs each sequence to its own length, the
Pallas kernels to the batch's longest, the fused and step-by-step recurrences every
padded step (docs/gpu.md, section 8); a batch of 20-token passages padded to 400
would have timed cuDNN on a twentieth of the work the others did, as the first GPU
run did.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from lnorm.analysis.specs import TimedLengths

#: The levels of a ``TimedLengths``' deciles.
DECILE_LEVELS = np.linspace(0.0, 1.0, 11)


def draw(timed: TimedLengths, shape: Sequence[int], buckets: int,
         rng: np.random.Generator) -> np.ndarray:
  """Lengths of ``shape``: the real lengths' quantile function (linear between the
  deciles) at levels uniform over the longest of ``buckets`` equal shares, the bucket
  a batch padded to ``timed.padded`` comes from; between 1 and ``timed.padded``."""
  if len(timed.deciles) != len(DECILE_LEVELS):
    raise ValueError(f"{timed.feature}: {len(timed.deciles)} deciles given, "
                     f"{len(DECILE_LEVELS)} needed (0, 10%, ..., 100%)")
  levels = rng.uniform((buckets - 1) / buckets, 1.0, size=tuple(shape))
  lengths = np.rint(np.interp(levels, DECILE_LEVELS, timed.deciles))
  return np.clip(lengths, 1, timed.padded).astype(np.int32)


def padded_to(values: np.ndarray, axis: int, width: int,
              rng: np.random.Generator) -> np.ndarray:
  """``values`` cut or widened to ``width`` along ``axis``; the added steps are copies
  of random existing ones (token ids stay in the vocabulary)."""
  have = values.shape[axis]
  if have >= width:
    return np.take(values, np.arange(width), axis=axis)
  extra = np.take(values, rng.integers(0, have, width - have), axis=axis)
  return np.concatenate([values, extra], axis=axis)


def apply(batch: Mapping[str, np.ndarray], timed: Sequence[TimedLengths], buckets: int,
          rng: np.random.Generator, *, keep_width: bool = False
          ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
  """``batch`` (leading axes [K, B]) with each of ``timed``'s features padded to its
  length and its lengths drawn (:func:`draw`), the steps past each length zero as
  padding is; and per feature what was drawn (padded length, shortest, mean, longest).
  ``keep_width``: each feature keeps its own padded width where that is shorter (the
  rehearsal's toy data), the lengths drawn within it."""
  out, drawn = dict(batch), {}
  for t in timed:
    if t.feature not in out or t.length not in out:
      raise ValueError(f"the timed batch has no {t.feature!r} or {t.length!r}: the "
                       f"spec's timed_lengths name features its data lacks")
    axis = out[t.length].ndim  # The padded axis follows the lengths' axes.
    if keep_width and out[t.feature].shape[axis] < t.padded:
      t = dataclasses.replace(t, padded=out[t.feature].shape[axis])
    values = padded_to(out[t.feature], axis, t.padded, rng)
    lengths = draw(t, out[t.length].shape, buckets, rng)
    steps = np.arange(t.padded).reshape((1,) * axis + (t.padded,) + (1,) * (values.ndim - axis - 1))
    beyond = steps >= lengths.reshape(lengths.shape + (1,) * (values.ndim - axis))
    out[t.feature] = np.where(beyond, np.zeros((), values.dtype), values)
    out[t.length] = lengths.astype(out[t.length].dtype)
    drawn[t.feature] = {"padded": t.padded, "shortest": int(lengths.min()),
                        "mean": float(lengths.mean()), "longest": int(lengths.max()),
                        "buckets": buckets, "source": t.source}
  return out, drawn
