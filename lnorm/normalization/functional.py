"""The normalization transforms as pure functions.

Every function computes its statistics in float32, also for bfloat16 input, with a
two-pass variance: E[x^2] - E[x]^2 cancels catastrophically when the mean is large
compared with the spread. An optional ``mask`` (broadcastable to ``x``, true where an
entry is real) keeps padded entries out of the statistics.

Equation numbers refer to the LN paper (Ba et al. 2016), the BLN paper (Ziaee & Cano)
and the RMSNorm paper (Zhang & Sennrich 2019); see ``docs/experiments.md`` sec. 0
and 10. ScaleNorm (Nguyen & Salazar 2019) and DyT (Zhu et al. 2025) are written as
their papers define them.

An ``eps`` is always the caller's: its default is the normalizer's registered option
(``lnorm.normalization.modules``), written there once, never here.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Sequence

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

Axes = int | Sequence[int]


def _normalize_axes(axes: Axes, ndim: int) -> tuple[int, ...]:
  if isinstance(axes, int):
    axes = (axes,)
  return tuple(sorted(a % ndim for a in axes))


def count(x: jax.Array, axes: Axes, mask: jax.Array | None = None) -> jax.Array:
  """Number of (unmasked) entries reduced over ``axes``, with kept dims, float32."""
  axes = _normalize_axes(axes, x.ndim)
  if mask is None:
    n = 1
    for a in axes:
      n *= x.shape[a]
    shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
    return jnp.full(shape, n, jnp.float32)
  mask = jnp.broadcast_to(mask, x.shape).astype(jnp.float32)
  return jnp.sum(mask, axis=axes, keepdims=True)


def moments(
    x: jax.Array,
    axes: Axes,
    mask: jax.Array | None = None,
    ddof: int = 0,
) -> tuple[jax.Array, jax.Array]:
  """Mean and variance of ``x`` over ``axes`` (kept as size-1 dims), in float32.

  Two passes: the variance is the mean squared deviation from the mean, never
  E[x^2] - E[x]^2. ``ddof=1`` gives the unbiased estimator; a reduction over a
  single entry then falls back to the biased one instead of dividing by zero.
  """
  axes = _normalize_axes(axes, x.ndim)
  x = x.astype(jnp.float32)
  n = count(x, axes, mask)
  safe_n = jnp.maximum(n, 1.0)
  if mask is None:
    mean = jnp.sum(x, axis=axes, keepdims=True) / safe_n
    sq_dev = jnp.square(x - mean)
  else:
    # where, not a product with the mask: padding may hold inf or NaN, and 0 * inf
    # is NaN.
    m = jnp.broadcast_to(mask, x.shape).astype(bool)
    mean = jnp.sum(jnp.where(m, x, 0.0), axis=axes, keepdims=True) / safe_n
    sq_dev = jnp.where(m, jnp.square(x - mean), 0.0)
  denominator = jnp.where(n > ddof, n - ddof, safe_n)
  var = jnp.sum(sq_dev, axis=axes, keepdims=True) / denominator
  return mean, var


def standardize(x: jax.Array, mean: jax.Array, var: jax.Array, eps: float) -> jax.Array:
  """``(x - mean) / sqrt(var + eps)`` in float32."""
  return (x.astype(jnp.float32) - mean) * jax.lax.rsqrt(var + eps)


def scale_and_shift(y: jax.Array, scale: jax.Array | None, bias: jax.Array | None,
                    dtype) -> jax.Array:
  # A gain of shape (d,) for y of shape (..., d) broadcasts as in NumPy, made explicit
  # so that callers running with jax_numpy_rank_promotion='raise' can pass it.
  if scale is not None:
    y = y * jax.lax.broadcast_to_rank(jnp.asarray(scale, jnp.float32), y.ndim)
  if bias is not None:
    y = y + jax.lax.broadcast_to_rank(jnp.asarray(bias, jnp.float32), y.ndim)
  return y.astype(dtype)


def layer_norm(
    x: jax.Array,
    scale: jax.Array | None = None,
    bias: jax.Array | None = None,
    *,
    eps: float,
    axes: Axes = -1,
    mask: jax.Array | None = None,
) -> jax.Array:
  """LN paper eq. 3-4: per-example statistics over the summed inputs of a layer.

  The common case (last axis, no mask, a gain and bias over that axis only) takes a
  fused path with a hand-written backward pass (``_norm_rows``); it computes the same
  two-pass, float32 statistics.
  """
  axes = _normalize_axes(axes, x.ndim)
  d = x.shape[-1] if x.ndim else 1
  if (mask is None and x.ndim >= 1 and axes == (x.ndim - 1,) and _per_feature(scale, d)
      and _per_feature(bias, d)):
    return _layer_norm_last_axis(x, scale, bias, eps)
  return _layer_norm_autodiff(x, scale, bias, axes=axes, eps=eps, mask=mask)


def _layer_norm_autodiff(x, scale, bias, *, axes, eps, mask):
  """The general LN, differentiated by JAX; the reference for the fused path."""
  mean, var = moments(x, axes, mask)
  return scale_and_shift(standardize(x, mean, var, eps), scale, bias, x.dtype)


# --- Fused LN and RMSNorm over the last axis ------------------------------------------
# Autodiff of the two-pass LN makes XLA read the whole array about nine times (mean,
# variance, output; then several row and column reductions in the backward pass),
# and on CPU each of those reductions is a separate sweep through memory. The
# hand-written backward needs x, the per-row statistics saved by the forward pass,
# and two row sums for LN (dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat *
# xhat))), one for RMSNorm (no mean to differentiate).
#
# On CPU a large array's reductions run in blocks of rows that fit in cache: LN's two
# statistics passes, and in the backward pass the row sums together with the gain and
# bias gradients' column sums, so that x and dy are read from memory once for all of
# them (measured with scripts/bench_norms.py, docs/performance.md). The outputs (y,
# dx) are then one elementwise pass over whole arrays: a loop that writes a large
# output makes XLA fill it with zeros first, a whole extra pass through memory, and
# copy each block in and out. GPUs and TPUs already fuse row reductions into one
# kernel; a sequential loop over blocks would only serialize them there, so blocks
# are used on CPU only, and only for arrays that do not fit in cache anyway.

#: On CPU, arrays of at least this many bytes (float32) are processed in blocks.
_CPU_BLOCKED_BYTES = 8 << 20
#: Target bytes of float32 rows per block (about one core's L2 cache).
_CPU_BLOCK_BYTES = 1 << 20


def _row_block(n: int, d: int) -> int:
  """Rows per block, or n (one block) when blocking does not apply.

  The block is the divisor of n nearest to the target size, within a factor of two
  of it; when n has none, there is one block.
  """
  if jax.default_backend() != "cpu" or 4 * n * d < _CPU_BLOCKED_BYTES:
    return n
  target = max(1, _CPU_BLOCK_BYTES // (4 * d))
  candidates = [r for r in range(max(1, target // 2), min(n, 2 * target) + 1) if n % r == 0]
  if not candidates:
    return n
  block = min(candidates, key=lambda r: abs(r - target))
  return block if n // block >= 2 else n


@dataclasses.dataclass(frozen=True)
class RowStatistics:
  """Which statistics a normalizer over the last axis takes from each row.

  LN (``centered``): the mean and the variance around it, over the whole row.
  RMSNorm (not ``centered``): the mean square, ``mean(x^2)``, over the whole row or,
  for pRMSNorm, over its first ``size`` entries only. Hashable: it is a static
  argument of the fused paths.
  """

  centered: bool = True
  size: int | None = None  # Entries the statistics read (from the row's start); None: all.

  def __post_init__(self):
    if self.centered and self.size is not None:
      raise ValueError("A partial estimate (size) is defined for RMSNorm, not LN.")


#: LN's statistics, the default of the row functions below.
LN_ROWS = RowStatistics()


def rms_rows(size: int | None = None) -> RowStatistics:
  """RMSNorm's statistics; pRMSNorm's with ``size``, the entries it reads."""
  return RowStatistics(centered=False, size=size)


@flax.struct.dataclass
class RowNorm:
  """LN or RMSNorm over the last axis: ``xhat * scale + bias``, where ``xhat`` is
  ``(x - mean) / sqrt(var + eps)`` (LN) or ``x / sqrt(mean(x^2) + eps)`` (RMSNorm,
  the mean square over the first ``stats.size`` entries for pRMSNorm)."""

  scale: jax.Array  # [F]
  bias: jax.Array | None  # [F]; None: no bias
  eps: float = flax.struct.field(pytree_node=False)
  stats: RowStatistics = flax.struct.field(pytree_node=False, default=LN_ROWS)


def row_statistics(x: jax.Array, eps: float,
                   stats: RowStatistics = LN_ROWS) -> tuple[jax.Array | None, jax.Array]:
  """(mean, 1/sqrt(var + eps)) of each row of float32 ``x`` for LN, two passes; (None,
  1/sqrt(mean(x^2) + eps)) for RMSNorm, the mean square over the first ``stats.size``
  entries for pRMSNorm. Kept as a size-1 last axis: the pieces of a hand-written
  normalizer over the last axis."""
  if not stats.centered:
    head = x if stats.size is None else x[..., :stats.size]
    return None, jax.lax.rsqrt(jnp.mean(jnp.square(head), axis=-1, keepdims=True) + eps)
  mean = jnp.mean(x, axis=-1, keepdims=True)
  var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
  return mean, jax.lax.rsqrt(var + eps)


def normalize_rows(x: jax.Array, mean: jax.Array | None, rstd: jax.Array) -> jax.Array:
  """``(x - mean) * rstd``, or ``x * rstd`` without a mean (RMSNorm)."""
  return x * rstd if mean is None else (x - mean) * rstd


def row_norm_input_gradient(dy: jax.Array, xhat: jax.Array, rstd: jax.Array,
                            scale: jax.Array, stats: RowStatistics = LN_ROWS) -> jax.Array:
  """dx of ``y = xhat * scale + bias`` with ``xhat`` the row normalized by
  :func:`row_statistics`. With ``dxhat = dy * scale``: LN's
  ``rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))``; RMSNorm's
  ``rstd * (dxhat - xhat * mean(dxhat * xhat))``, where for pRMSNorm only the first
  ``size`` entries (those in the statistic) get the second term, with the sum over
  the whole row divided by ``size``. The gain and bias gradients are
  ``sum(dy * xhat)`` and ``sum(dy)`` over the rows."""
  dxhat = dy * scale[None]
  return _apply_row_coefficients(dxhat, xhat, rstd,
                                 _row_coefficients(dxhat, xhat, stats), stats)


def _row_coefficients(dxhat, xhat, stats: RowStatistics):
  """Each row's (c1, c2) of the input gradient: ``mean(dxhat)`` (LN only, else None)
  and ``mean(dxhat * xhat)`` (over the statistic's ``size`` entries for pRMSNorm)."""
  size = stats.size
  if size is not None and size < xhat.shape[-1]:
    c2 = jnp.sum(dxhat * xhat, axis=-1, keepdims=True) / size
  else:
    c2 = jnp.mean(dxhat * xhat, axis=-1, keepdims=True)
  c1 = jnp.mean(dxhat, axis=-1, keepdims=True) if stats.centered else None
  return c1, c2


def _apply_row_coefficients(dxhat, xhat, rstd, coefficients, stats: RowStatistics):
  """``rstd * (dxhat - c1 - xhat * c2)``; pRMSNorm's second term on its head only."""
  c1, c2 = coefficients
  if c1 is not None:
    return rstd * (dxhat - c1 - xhat * c2)
  size = stats.size
  if size is None or size >= xhat.shape[-1]:
    return rstd * (dxhat - xhat * c2)
  # A 0/1 row rather than a slice and a concatenation: one elementwise pass.
  in_head = jax.lax.broadcast_to_rank(
      (jnp.arange(xhat.shape[-1]) < size).astype(xhat.dtype), xhat.ndim)
  return rstd * (dxhat - xhat * (c2 * in_head))


def _rows_output(x, g, b, mean, rstd):
  """The normalizer's output from float32 statistics, in x's dtype."""
  y = normalize_rows(x.astype(jnp.float32), mean, rstd) * g[None, :]
  if b is not None:
    y = y + b[None, :]
  return y.astype(x.dtype)


def _blocked(x, block):
  if x is None:
    return None
  n = x.shape[0]
  return x.reshape((n // block, block) + x.shape[1:])


def _unblocked(x, shape):
  return None if x is None else x.reshape(shape)


def _rows_statistics(x, eps, block, stats):
  """The per-row statistics of ``x [rows, d]`` in float32. LN's two passes run block
  by block on a blocked CPU path, so that the second reads from cache; RMSNorm's one
  pass gains nothing from blocks, and the output is never computed inside them (a
  loop that writes a large output must first fill it with zeros, a whole extra pass
  through memory)."""
  x32 = lambda a: a.astype(jnp.float32)
  if block == x.shape[0] or not stats.centered:
    return row_statistics(x32(x), eps, stats)
  mean, rstd = jax.lax.map(lambda xb: row_statistics(x32(xb), eps, stats),
                           _blocked(x, block))
  return _unblocked(mean, (-1, 1)), rstd.reshape(-1, 1)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _norm_rows(x, g, b, eps, block, stats):
  mean, rstd = _rows_statistics(x, eps, block, stats)
  return _rows_output(x, g, b, mean, rstd)


def _norm_rows_fwd(x, g, b, eps, block, stats):
  mean, rstd = _rows_statistics(x, eps, block, stats)
  # Two floats per row: saving the statistics costs nothing next to recomputing them.
  return _rows_output(x, g, b, mean, rstd), (x, g, b, mean, rstd)


def _rows_gradient_sums(x, g, b, mean, rstd, dy, stats):
  """Per block: each row's input-gradient coefficients, and the column sums of the
  gain and bias gradients, ``sum(dy * xhat)`` and ``sum(dy)`` (None without a bias)."""
  dy = dy.astype(jnp.float32)
  xhat = normalize_rows(x.astype(jnp.float32), mean, rstd)
  db = None if b is None else jnp.sum(dy, axis=0)
  return _row_coefficients(dy * g[None], xhat, stats), jnp.sum(dy * xhat, axis=0), db


def _norm_rows_bwd(eps, block, stats, residuals, dy):
  """The row reductions (block by block on a blocked CPU path, reading x and dy once
  from memory for all of them), then dx in one elementwise pass over whole arrays."""
  del eps
  x, g, b, mean, rstd = residuals
  if block == x.shape[0]:
    coefficients, dg, db = _rows_gradient_sums(x, g, b, mean, rstd, dy, stats)
  else:
    def step(sums, blocks):
      xb, mean_b, rstd_b, dyb = blocks
      coefficients_b, *block_sums = _rows_gradient_sums(xb, g, b, mean_b, rstd_b, dyb,
                                                        stats)
      return jax.tree.map(jnp.add, sums, tuple(block_sums)), coefficients_b
    zeros = jnp.zeros(g.shape, jnp.float32)
    (dg, db), coefficients = jax.lax.scan(
        step, (zeros, None if b is None else zeros),
        (_blocked(x, block), _blocked(mean, block), _blocked(rstd, block),
         _blocked(dy, block)))
    coefficients = jax.tree.map(lambda c: c.reshape(-1, 1), coefficients)
  xhat = normalize_rows(x.astype(jnp.float32), mean, rstd)
  dx = _apply_row_coefficients(dy.astype(jnp.float32) * g[None], xhat, rstd, coefficients,
                               stats)
  return (dx.astype(x.dtype), dg.astype(g.dtype),
          None if b is None else db.astype(b.dtype))


_norm_rows.defvjp(_norm_rows_fwd, _norm_rows_bwd)


def _per_feature(p, d: int) -> bool:
  """Whether a gain or bias is absent or one value per entry of a last axis of d."""
  return p is None or (jnp.ndim(p) >= 1 and jnp.size(p) == d and jnp.shape(p)[-1] == d)


def _norm_last_axis(x, scale, bias, eps, stats, *, default_bias: bool):
  """The fused normalizer over the last axis. An absent gain is a constant 1; an
  absent bias a constant 0 (LN, ``default_bias``) or no bias at all (RMSNorm, whose
  layers often have none)."""
  d = x.shape[-1]
  g = jnp.ones((d,), jnp.float32) if scale is None else jnp.reshape(scale, (d,))
  if bias is not None:
    b = jnp.reshape(bias, (d,)).astype(jnp.float32)
  else:
    b = jnp.zeros((d,), jnp.float32) if default_bias else None
  rows = x.reshape(-1, d)
  y = _norm_rows(rows, g.astype(jnp.float32), b, float(eps),
                 _row_block(rows.shape[0], d), stats)
  return y.reshape(x.shape)


def _layer_norm_last_axis(x, scale, bias, eps):
  return _norm_last_axis(x, scale, bias, eps, LN_ROWS, default_bias=True)


# --- RMSNorm and pRMSNorm (Zhang & Sennrich 2019) -------------------------------------


def partial_size(d: int, p: float) -> int:
  """Entries pRMSNorm reads of d: the first ``p`` of them (rounded down, as the
  authors' ``int(d * p)``), at least one. ``p = 1`` is plain RMSNorm."""
  if not 0.0 < p <= 1.0:
    raise ValueError(f"pRMSNorm's fraction p={p} must be in (0, 1]; the paper uses "
                     "0.0625 (6.25%).")
  # The small slack keeps a product such as 0.07 * 100 = 7.000000000000001 or
  # 0.29 * 100 = 28.999999999999996 at the integer it means.
  return max(1, min(d, int(d * p + 1e-9)))


def _leading_entries(shape: Sequence[int], axes: tuple[int, ...], size: int) -> np.ndarray:
  """True at the first ``size`` entries of ``axes``, in row-major order over them, for
  every position of the other axes: the entries pRMSNorm's statistic reads."""
  sizes = [shape[a] for a in axes]
  index = np.arange(math.prod(sizes)).reshape(sizes)
  return np.expand_dims(index < size, [i for i in range(len(shape)) if i not in axes])


def mean_square(x: jax.Array, axes: Axes, mask: jax.Array | None = None,
                size: int | None = None) -> jax.Array:
  """``mean(x^2)`` over ``axes`` (kept as size-1 dims) in float32: RMSNorm's
  statistic. ``mask`` leaves padded entries out; ``size`` reads only the first
  ``size`` entries of ``axes`` (pRMSNorm), of which the masked ones are left out too."""
  axes = _normalize_axes(axes, x.ndim)
  x = x.astype(jnp.float32)
  if size is not None:
    head = jnp.asarray(_leading_entries(x.shape, axes, size))
    mask = head if mask is None else jnp.logical_and(mask, head)
  safe_n = jnp.maximum(count(x, axes, mask), 1.0)
  if mask is None:
    return jnp.sum(jnp.square(x), axis=axes, keepdims=True) / safe_n
  # where, not a product: padding may hold inf or NaN (see moments).
  m = jnp.broadcast_to(mask, x.shape).astype(bool)
  return jnp.sum(jnp.where(m, jnp.square(x), 0.0), axis=axes, keepdims=True) / safe_n


def rms_norm(
    x: jax.Array,
    scale: jax.Array | None = None,
    bias: jax.Array | None = None,
    *,
    eps: float,
    axes: Axes = -1,
    mask: jax.Array | None = None,
    partial: float = 1.0,
) -> jax.Array:
  """RMSNorm (Zhang & Sennrich 2019, eq. 4): ``g * a / sqrt(mean(a^2) + eps) + b`` per
  example over ``axes``: LN without the re-centering, so no mean.

  ``partial < 1`` is pRMSNorm: the mean square is estimated from the first
  ``partial_size(d, partial)`` of the d normalized entries (row-major over ``axes``),
  and every entry is divided by that estimate. ``mask`` leaves padded entries out of
  the statistic, as LN's does. The last axis without a mask, with a per-feature gain
  and bias, takes a fused path with a hand-written backward pass.
  """
  axes = _normalize_axes(axes, x.ndim)
  d = math.prod(x.shape[a] for a in axes)
  size = None if partial == 1.0 else partial_size(d, partial)
  last = x.shape[-1] if x.ndim else 1
  if (mask is None and x.ndim >= 1 and axes == (x.ndim - 1,) and _per_feature(scale, last)
      and _per_feature(bias, last)):
    return _norm_last_axis(x, scale, bias, eps, rms_rows(size), default_bias=False)
  return _rms_norm_autodiff(x, scale, bias, axes=axes, eps=eps, mask=mask, size=size)


def _rms_norm_autodiff(x, scale, bias, *, axes, eps, mask, size):
  """The general RMSNorm, differentiated by JAX; the reference for the fused path."""
  rstd = jax.lax.rsqrt(mean_square(x, axes, mask, size) + eps)
  return scale_and_shift(x.astype(jnp.float32) * rstd, scale, bias, x.dtype)


# --- LN's successors: ScaleNorm, DyT ------------------------------------------------


def scale_norm(
    x: jax.Array,
    scale: jax.Array,
    *,
    eps: float,
    axes: Axes = -1,
    mask: jax.Array | None = None,
) -> jax.Array:
  """ScaleNorm (Nguyen & Salazar 2019, "Transformers without Tears"):
  ``g * x / ||x||`` per example over ``axes``, with one scalar gain ``g``.

  ``eps`` goes inside the square root, ``||x|| = sqrt(sum(x^2) + eps)``, as LN's and
  RMSNorm's do; the authors' code clamps the norm at 1e-5 instead. Both only touch a
  row whose norm is near zero, where this one keeps the gradient smooth. ``mask``
  leaves padded entries out of the norm.
  """
  axes = _normalize_axes(axes, x.ndim)
  x32 = x.astype(jnp.float32)
  square = jnp.square(x32)
  if mask is not None:
    # where, not a product: padding may hold inf or NaN (see moments).
    square = jnp.where(jnp.broadcast_to(mask, x.shape).astype(bool), square, 0.0)
  inv_norm = jax.lax.rsqrt(jnp.sum(square, axis=axes, keepdims=True) + eps)
  return (jnp.asarray(scale, jnp.float32) * x32 * inv_norm).astype(x.dtype)


def dynamic_tanh(x: jax.Array, alpha: jax.Array, scale: jax.Array | None,
                 bias: jax.Array | None) -> jax.Array:
  """DyT (Zhu et al. 2025, "Transformers without Normalization"):
  ``scale * tanh(alpha * x) + bias``, with ``alpha`` one learnable scalar. No
  statistics: each entry is squashed on its own, so a mask changes nothing."""
  y = jnp.tanh(jnp.asarray(alpha, jnp.float32) * x.astype(jnp.float32))
  return scale_and_shift(y, scale, bias, x.dtype)


def batch_norm(
    x: jax.Array,
    scale: jax.Array | None,
    bias: jax.Array | None,
    *,
    mean: jax.Array,
    var: jax.Array,
    eps: float,
) -> jax.Array:
  """Batch normalization with given statistics (batch or population)."""
  return scale_and_shift(standardize(x, mean, var, eps), scale, bias, x.dtype)


def batch_moments(
    x: jax.Array,
    axes: Axes = 0,
    mask: jax.Array | None = None,
    unbiased: bool = False,
) -> tuple[jax.Array, jax.Array]:
  """Per-feature batch statistics for BN (Ioffe & Szegedy eq. 1)."""
  return moments(x, axes, mask, ddof=1 if unbiased else 0)


def weight_norm(v: jax.Array, g: jax.Array, in_axes: Axes = 0) -> jax.Array:
  """Salimans & Kingma: ``w = g * v / ||v||``, one norm per output unit.

  ``in_axes`` are the kernel's input axes (reduced over); ``g`` has the shape of the
  remaining (output) axes.
  """
  in_axes = _normalize_axes(in_axes, v.ndim)
  v32 = v.astype(jnp.float32)
  norm = jnp.sqrt(jnp.sum(jnp.square(v32), axis=in_axes, keepdims=True))
  g = jnp.expand_dims(g.astype(jnp.float32), in_axes)
  return (g * v32 / jnp.maximum(norm, 1e-12)).astype(v.dtype)


# --- Batch Layer Normalization (BLN paper, Algorithm 1-2) ----------------------------

#: The order of the four inference switches, as in BLN paper eq. 18-21.
BLN_STATISTICS = ("E_B", "Std_B", "E_F", "Std_F")


def bln_inference_configurations() -> list[str]:
  """All 16 inference configurations as strings over {p, b} in BLN_STATISTICS order.

  'p' takes the population statistic, 'b' the current mini-batch's: 'pppp' is
  all-population (BN-like), 'bbbb' is all-mini-batch (the training computation).
  """
  return [f"{a}{b}{c}{d}" for a in "pb" for b in "pb" for c in "pb" for d in "pb"]


def parse_bln_inference(config: str) -> tuple[bool, bool, bool, bool]:
  """'pbpb' -> (True, False, True, False): which statistics use the population."""
  if len(config) != 4 or set(config) - {"p", "b"}:
    raise ValueError(
        f"BLN inference configuration {config!r} is not valid: give four letters, "
        f"each 'p' (population) or 'b' (mini-batch), in the order "
        f"{', '.join(BLN_STATISTICS)}; for example 'pppp' or 'bpbb'.")
  return tuple(c == "p" for c in config)  # type: ignore[return-value]


def bln_mixing_weights(m: jax.Array | float, eps: float) -> tuple[jax.Array, jax.Array]:
  """BLN eq. 16 numerator weights of x_B and x_F for batch size m.

  They sum to 1 - 2 eps. At m = 1 the batch weight is -eps, harmless in training
  because x_B is then exactly 0. A position where every example is masked has
  m = 0; it is treated as m = 1 so that padding cannot put NaN into the gradients.
  """
  inv_m = 1.0 / jnp.maximum(jnp.asarray(m, jnp.float32), 1.0)
  return 1.0 - (inv_m + eps), inv_m - eps


def batch_layer_norm(
    x: jax.Array,
    scale: jax.Array | None,
    bias: jax.Array | None,
    *,
    batch_mean: jax.Array,
    batch_var: jax.Array,
    feature_mean: jax.Array,
    feature_var: jax.Array,
    m: jax.Array | float,
    feature_size: int,
    eps: float,
    mix_eps: float,
) -> jax.Array:
  """BLN eq. 14-17 given the four statistics (batch or population, each).

  ``feature_size`` is d, the size of the normalized feature axes (the sqrt(d)
  divisor of eq. 16); ``m`` is the batch size that sets the mixing weights.
  """
  x_b = standardize(x, batch_mean, batch_var, eps)
  x_f = standardize(x, feature_mean, feature_var, eps)
  w_b, w_f = bln_mixing_weights(m, mix_eps)
  y = (w_b * x_b + w_f * x_f) / jnp.sqrt(jnp.float32(feature_size))
  return scale_and_shift(y, scale, bias, x.dtype)


def bln_statistics(
    x: jax.Array,
    *,
    batch_axes: Axes,
    feature_axes: Axes,
    mask: jax.Array | None = None,
    batch_mean: jax.Array | None = None,
    feature_mean: jax.Array | None = None,
) -> dict[str, jax.Array]:
  """The mini-batch statistics of BLN eq. 10-13.

  Following eq. 19 and 21, a variance is taken around the mean that will be used,
  which at inference may be the population mean: pass it as ``batch_mean`` or
  ``feature_mean`` to centre the variance there.
  """
  x32 = x.astype(jnp.float32)
  m = count(x32, batch_axes, mask)
  stats = {}
  for name, axes, given_mean in (("batch", batch_axes, batch_mean),
                                 ("feature", feature_axes, feature_mean)):
    mean, var = moments(x32, axes, mask)
    if given_mean is not None:
      # The mean squared deviation around a fixed centre c is var + (mean - c)^2.
      var = var + jnp.square(mean - given_mean)
      mean = jnp.broadcast_to(given_mean, mean.shape)
    stats[f"{name}_mean"] = mean
    stats[f"{name}_var"] = var
  stats["m"] = m
  return stats
