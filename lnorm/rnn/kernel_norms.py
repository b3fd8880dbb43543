"""The recurrent normalizers as the step kernels run them (:mod:`lnorm.rnn.pallas_steps`).

Every per-example normalizer works on one row at a time, so each fits in a kernel that
holds a block of rows: LN, RMSNorm, pRMSNorm, ScaleNorm and LayerNorm-simple through
their row statistics (:class:`~lnorm.normalization.functional.RowNorm`, as the fused
recurrences take them), DyT (``gamma * tanh(alpha * x) + beta``) through
:class:`TanhNorm`: it has no statistics, and its learned scalar ``alpha`` is one more
input of the kernel. ``None`` is no normalizer.

A kernel holds a row of F features as tiles of ``[rows, width]`` (the LSTM's four gates
over 4H, the GRU's two gates over 2H, or one tile of H), padded to a power of two with
entries that ``valid`` marks false; the functions here take such a list of tiles, so
that the same code runs on whole ``[B, H]`` arrays (``valid`` None). The statistics
are LN's two passes in float32, as :mod:`lnorm.normalization.functional`'s.

What the backward pass needs is saved per step: for a ``RowNorm`` the normalized
values and 1/std, for DyT the input itself. The gains', biases' and alpha's gradients
are sums over all steps and examples, taken after the loop from those saved values
and the per-step output gradients (:func:`parameter_gradients`).
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import flax.struct
import jax
import jax.numpy as jnp

from lnorm.normalization import DynamicTanh
from lnorm.normalization.functional import RowNorm


@flax.struct.dataclass
class TanhNorm:
  """DyT over the last axis: ``scale * tanh(alpha * x) + bias``."""

  alpha: jax.Array  # [], the learned scalar
  scale: jax.Array  # [F]
  bias: jax.Array | None  # [F]; None: no bias


KernelNorm = RowNorm | TanhNorm | None


def runs_in_kernels(norm_class) -> bool:
  """Whether the step kernels run a normalizer of this class: the fused recurrences'
  (``fusable``: LN, RMSNorm, ScaleNorm, LayerNorm-simple, the identity) and DyT."""
  return issubclass(norm_class, DynamicTanh) or bool(getattr(norm_class, "fusable", False))


def of_module(norm, features: int) -> KernelNorm:
  """The parameters of a bound normalizer module over rows of ``features`` entries."""
  if isinstance(norm, DynamicTanh):
    scale, bias = norm.gain_and_bias()
    if scale is None:
      scale = jnp.ones((features,), jnp.float32)
    return TanhNorm(jnp.asarray(norm.get_variable("params", "alpha"), jnp.float32),
                    scale, bias)
  return norm.row_norm(features)


def has_statistics(norm: KernelNorm) -> bool:
  """Whether ``norm`` saves a 1/std per row (the row normalizers; DyT has none)."""
  return isinstance(norm, RowNorm)


# --- One row as tiles -------------------------------------------------------------------


class Tiles(NamedTuple):
  """Where a row of ``features`` entries lies in its tiles: tile k holds the features
  ``offsets[k] + j`` for the tile's columns j, ``valid`` (``[rows, width]``, None: all)
  marks the real entries, ``columns`` (``[1, width]``) numbers a tile's columns."""

  features: int
  offsets: tuple[int, ...]
  valid: jax.Array | None
  columns: jax.Array


class TileParameters(NamedTuple):
  """A normalizer's parameters cut as its row's tiles (each ``[1, width]``)."""

  scale: list | None
  bias: list | None
  alpha: jax.Array | None = None


def tile_parameters(norm: KernelNorm, load_vector, offsets: Sequence[int]) -> TileParameters:
  """``norm``'s gain and bias per tile, read with ``load_vector(vector, offset)``;
  ``norm`` may hold refs (in a kernel) or arrays."""
  if norm is None:
    return TileParameters(None, None)
  per_tile = lambda v: None if v is None else [load_vector(v, o) for o in offsets]
  alpha = norm.alpha[0] if isinstance(norm, TanhNorm) else None
  return TileParameters(per_tile(norm.scale), per_tile(norm.bias), alpha)


def _row_sum(values, valid) -> jax.Array:
  """Each row's sum over all its tiles' real entries: ``[rows, 1]``."""
  total = 0.0
  for v in values:
    if valid is not None:
      v = jnp.where(valid, v, 0.0)
    total = total + jnp.sum(v, axis=-1, keepdims=True)
  return total


def _in_statistic(norm: RowNorm, tiles: Tiles, k: int):
  """Which of tile k's entries pRMSNorm's statistic reads (None: all of them)."""
  size = norm.stats.size
  if size is None or size >= tiles.features:
    return None
  return (tiles.offsets[k] + tiles.columns) < size


def _statistic_valid(norm: RowNorm, tiles: Tiles, k: int):
  head = _in_statistic(norm, tiles, k)
  if head is None:
    return tiles.valid
  return head if tiles.valid is None else jnp.logical_and(tiles.valid, head)


def _scale_and_shift(values, p: TileParameters):
  out = [v * s for v, s in zip(values, p.scale)]
  return out if p.bias is None else [v + b for v, b in zip(out, p.bias)]


def forward(norm: KernelNorm, xs: list, p: TileParameters, tiles: Tiles):
  """``(outputs, saved, rstd)`` of ``norm`` on a row's tiles ``xs``: what the backward
  pass reads is ``saved`` (the normalized values, DyT's input) and ``rstd``
  (``[rows, 1]``, None without statistics)."""
  if norm is None:
    return xs, None, None
  if isinstance(norm, TanhNorm):
    return _scale_and_shift([jnp.tanh(p.alpha * x) for x in xs], p), xs, None
  if norm.stats.centered:
    mean = _row_sum(xs, tiles.valid) / tiles.features
    centered = [x - mean for x in xs]
    var = _row_sum([d * d for d in centered], tiles.valid) / tiles.features
    rstd = jax.lax.rsqrt(var + norm.eps)
    xhat = [d * rstd for d in centered]
  else:
    size = norm.stats.size or tiles.features
    square = 0.0
    for k, x in enumerate(xs):
      square = square + _row_sum([x * x], _statistic_valid(norm, tiles, k))
    rstd = jax.lax.rsqrt(square / min(size, tiles.features) + norm.eps)
    xhat = [x * rstd for x in xs]
  return _scale_and_shift(xhat, p), xhat, rstd


def output_from_saved(norm: KernelNorm, saved: list, p: TileParameters) -> list:
  """The normalizer's outputs again, from what :func:`forward` saved."""
  if isinstance(norm, TanhNorm):
    return _scale_and_shift([jnp.tanh(p.alpha * x) for x in saved], p)
  return _scale_and_shift(saved, p)


def backward(norm: KernelNorm, dys: list, saved: list, rstd, p: TileParameters,
             tiles: Tiles) -> list:
  """The input gradients of :func:`forward` for its output gradients ``dys``."""
  if norm is None:
    return dys
  if isinstance(norm, TanhNorm):
    out = []
    for dy, x, s in zip(dys, saved, p.scale):
      u = jnp.tanh(p.alpha * x)
      out.append(dy * s * p.alpha * (1.0 - u * u))
    return out
  dxhat = [dy * s for dy, s in zip(dys, p.scale)]
  stats = norm.stats
  # pRMSNorm: the sum over the whole row, divided by the entries of its statistic.
  c2 = _row_sum([d * x for d, x in zip(dxhat, saved)], tiles.valid) / min(
      stats.size or tiles.features, tiles.features)
  c1 = _row_sum(dxhat, tiles.valid) / tiles.features if stats.centered else 0.0
  out = []
  for k, (d, x) in enumerate(zip(dxhat, saved)):
    head = _in_statistic(norm, tiles, k)
    c2_k = c2 if head is None else jnp.where(head, c2, 0.0)
    out.append(rstd * (d - c1 - x * c2_k))
  return out


# --- After the loop -------------------------------------------------------------------


def parameter_gradients(norm: KernelNorm, dy: jax.Array, saved: jax.Array) -> KernelNorm:
  """The gradients of ``norm``'s parameters, summed over every step and example, from
  the output gradients ``dy [T, B, F]`` and what :func:`forward` saved (``[T, B, F]``)."""
  if norm is None:
    return None
  total = lambda a: jnp.sum(a, axis=(0, 1))
  d_bias = None if norm.bias is None else total(dy)
  if isinstance(norm, TanhNorm):
    u = jnp.tanh(norm.alpha * saved)
    d_alpha = jnp.sum(dy * norm.scale[None, None] * (1.0 - u * u) * saved)
    return TanhNorm(d_alpha, total(dy * u), d_bias)
  return norm.replace(scale=total(dy * saved), bias=d_bias)
