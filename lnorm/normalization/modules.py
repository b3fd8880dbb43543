"""Thin Flax Linen wrappers around the pure transforms in ``functional``.

Activation normalizers share one call signature, ``norm(x, *, train, mask=None)``, so
models can swap them without knowing which one they hold. Population statistics live
in the ``batch_stats`` collection.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from lnorm.normalization import functional as F

Initializer = Callable[..., jax.Array]


def _feature_shape(x_shape: Sequence[int], reduced_axes: tuple[int, ...]) -> tuple[int, ...]:
  """Shape of a statistic reduced over ``reduced_axes`` (kept as size-1 dims)."""
  return tuple(1 if i in reduced_axes else s for i, s in enumerate(x_shape))


def _param_shape(x_shape: Sequence[int], feature_axes: tuple[int, ...]) -> tuple[int, ...]:
  """Gain and bias cover the feature axes and broadcast over the rest."""
  return tuple(s if i in feature_axes else 1 for i, s in enumerate(x_shape))


def _axes(axes: int | Sequence[int], ndim: int) -> tuple[int, ...]:
  return F._normalize_axes(axes, ndim)


class Identity(nn.Module):
  """The 'none' normalizer: same signature, no computation."""

  @nn.compact
  def __call__(self, x, *, train: bool = False, mask=None):
    del train, mask
    return x


class _ScaleBias(nn.Module):
  """Shared gain/bias handling: gain and bias over ``feature_axes``."""

  use_scale: bool = True
  use_bias: bool = True
  scale_init: Initializer = nn.initializers.ones
  bias_init: Initializer = nn.initializers.zeros

  def scale_bias(self, x, feature_axes):
    shape = _param_shape(x.shape, feature_axes)
    squeezed = tuple(x.shape[a] for a in feature_axes)
    scale = bias = None
    if self.use_scale:
      scale = self.param("scale", self.scale_init, squeezed, jnp.float32).reshape(shape)
    if self.use_bias:
      bias = self.param("bias", self.bias_init, squeezed, jnp.float32).reshape(shape)
    return scale, bias


class LayerNorm(_ScaleBias):
  """LN (LN paper eq. 3-4): statistics per example over ``axes``. eps as in the
  reference code (1e-5), not flax's 1e-6."""

  axes: int | Sequence[int] = -1
  eps: float = 1e-5

  @nn.compact
  def __call__(self, x, *, train: bool = False, mask=None):
    del train  # Same computation at training and test time.
    axes = _axes(self.axes, x.ndim)
    scale, bias = self.scale_bias(x, axes)
    return F.layer_norm(x, scale, bias, axes=axes, eps=self.eps, mask=mask)


class RMSNorm(_ScaleBias):
  """RMSNorm (Zhang & Sennrich 2019): ``g * a / RMS(a) + b`` per example over
  ``axes``, with ``RMS(a) = sqrt(mean(a^2) + eps)``; LN without the re-centering.
  ``partial < 1`` is pRMSNorm, the RMS estimated from the first ``partial`` of the
  normalized entries (the paper's 6.25% is 0.0625). Same computation at training and
  test time. The bias is the layer's b added after the normalization (the paper's
  ``f(a / RMS(a) g + b)``); ``use_bias=False`` drops it."""

  axes: int | Sequence[int] = -1
  eps: float = 1e-5
  partial: float = 1.0

  @nn.compact
  def __call__(self, x, *, train: bool = False, mask=None):
    del train
    axes = _axes(self.axes, x.ndim)
    scale, bias = self.scale_bias(x, axes)
    return F.rms_norm(x, scale, bias, axes=axes, eps=self.eps, mask=mask,
                      partial=self.partial)


class ScaleNorm(nn.Module):
  """ScaleNorm (Nguyen & Salazar 2019): ``g * x / sqrt(sum(x^2) + eps)`` per example
  over ``axes``, one learnable scalar ``g``, initialised to ``sqrt(d)`` for d
  normalized entries (the paper's choice, which makes it RMSNorm at init up to eps)
  unless ``scale_init`` is given. No bias. Same computation at train and test."""

  axes: int | Sequence[int] = -1
  eps: float = 1e-5
  scale_init: float | None = None

  @nn.compact
  def __call__(self, x, *, train: bool = False, mask=None):
    del train
    axes = _axes(self.axes, x.ndim)
    g = self.param("scale", nn.initializers.constant(
        scale_norm_init(self.scale_init, math.prod(x.shape[a] for a in axes))), (),
                   jnp.float32)
    return F.scale_norm(x, g, axes=axes, eps=self.eps, mask=mask)


def scale_norm_init(scale_init: float | None, d: int) -> float:
  """ScaleNorm's initial gain: ``scale_init``, or ``sqrt(d)`` for d normalized entries."""
  return math.sqrt(d) if scale_init is None else scale_init


class DynamicTanh(_ScaleBias):
  """DyT (Zhu et al. 2025): ``gamma * tanh(alpha * x) + beta``, ``alpha`` one learnable
  scalar (the paper's default init 0.5), ``gamma`` and ``beta`` over ``axes`` (ones and
  zeros). No statistics, so no mask; the same at train and test."""

  axes: int | Sequence[int] = -1
  alpha_init: float = 0.5

  @nn.compact
  def __call__(self, x, *, train: bool = False, mask=None):
    del train, mask
    alpha = self.param("alpha", nn.initializers.constant(self.alpha_init), (), jnp.float32)
    scale, bias = self.scale_bias(x, _axes(self.axes, x.ndim))
    return F.dynamic_tanh(x, alpha, scale, bias)


class BatchNorm(_ScaleBias):
  """BN: batch statistics in training, population (moving-average) statistics at
  inference. ``axes`` are the reduced axes (default: all but the last)."""

  axes: int | Sequence[int] | None = None
  eps: float = 1e-5
  momentum: float = 0.99
  unbiased: bool = False

  @nn.compact
  def __call__(self, x, *, train: bool, mask=None):
    axes = _axes(self.axes if self.axes is not None else range(x.ndim - 1), x.ndim)
    feature_axes = tuple(i for i in range(x.ndim) if i not in axes)
    stat_shape = _feature_shape(x.shape, axes)
    squeezed = tuple(x.shape[a] for a in feature_axes)
    ra_mean = self.variable("batch_stats", "mean", jnp.zeros, squeezed, jnp.float32)
    ra_var = self.variable("batch_stats", "var", jnp.ones, squeezed, jnp.float32)
    scale, bias = self.scale_bias(x, feature_axes)
    if train:
      mean, var = F.batch_moments(x, axes, mask, unbiased=self.unbiased)
      if not self.is_initializing():
        m = self.momentum
        ra_mean.value = m * ra_mean.value + (1 - m) * mean.reshape(squeezed)
        ra_var.value = m * ra_var.value + (1 - m) * var.reshape(squeezed)
    else:
      mean = ra_mean.value.reshape(stat_shape)
      var = ra_var.value.reshape(stat_shape)
    return F.batch_norm(x, scale, bias, mean=mean, var=var, eps=self.eps)


#: Population statistics that BLN keeps, in ``batch_stats``.
_BLN_STATS = ("batch_mean", "batch_var", "feature_mean", "feature_var")


class BatchLayerNorm(_ScaleBias):
  """BLN (Algorithm 1 of the BLN paper), with its 16 inference configurations.

  Axis conventions: the authors' layer takes batch statistics over the batch axis
  only (one per position and feature) and feature statistics over the last axis
  (``batch_axes=(0,)``, ``feature_axes=(-1,)``, the default). For a conv map the
  conventional choice is ``batch_axes=(0, 1, 2)`` and ``feature_axes=(1, 2, 3)``.

  Population statistics (eq. 18-21) are, by default as in the authors' code, plain
  averages of the per-batch statistics over the last complete training epoch:
  ``finalize_epoch_statistics`` closes an epoch. ``population='moving_average'``
  uses a BN-style moving average instead. Both variances get a Bessel factor when
  accumulated: m/(m-1) for the batch variance and d/(d-1) for the feature variance,
  each skipped when its count is 1, so batch size 1 stays finite (the authors'
  m/(m-1) on both divided by zero there). Population feature statistics are one
  value per position, averaged over examples, never per batch slot.

  At inference the mixing weights use the batch size last seen in training.
  """

  batch_axes: int | Sequence[int] = 0
  feature_axes: int | Sequence[int] = -1
  eps: float = 1e-4
  mix_eps: float = 1e-4
  inference: str = "pppp"
  population: str = "epoch_mean"
  momentum: float = 0.99

  @nn.compact
  def __call__(self, x, *, train: bool, mask=None):
    if self.population not in ("epoch_mean", "moving_average"):
      raise ValueError(f"BLN population={self.population!r}: use 'epoch_mean' or "
                       "'moving_average'.")
    use_population = F.parse_bln_inference(self.inference)
    batch_axes = _axes(self.batch_axes, x.ndim)
    feature_axes = _axes(self.feature_axes, x.ndim)
    d = 1
    for a in feature_axes:
      d *= x.shape[a]
    scale, bias = self.scale_bias(x, feature_axes)

    # Per-position population statistics: batch statistics keep the non-batch axes,
    # feature statistics keep the non-feature, non-batch axes.
    shapes = {
        "batch_mean": _feature_shape(x.shape, batch_axes),
        "batch_var": _feature_shape(x.shape, batch_axes),
        "feature_mean": _feature_shape(x.shape, batch_axes + feature_axes),
        "feature_var": _feature_shape(x.shape, batch_axes + feature_axes),
    }
    init = {"batch_mean": jnp.zeros, "batch_var": jnp.ones,
            "feature_mean": jnp.zeros, "feature_var": jnp.ones}
    pop = {k: self.variable("batch_stats", k, init[k], shapes[k], jnp.float32)
           for k in _BLN_STATS}
    train_m = self.variable("batch_stats", "train_batch_size",
                            lambda: jnp.ones((), jnp.float32))
    if self.population == "epoch_mean":
      # Created at init so that the collection's structure never changes in training.
      self.variable("batch_stats", "epoch_count", lambda: jnp.zeros((), jnp.float32))
      for k in _BLN_STATS:
        self.variable("batch_stats", f"epoch_sum_{k}", jnp.zeros, shapes[k], jnp.float32)

    if train:
      stats = F.bln_statistics(x, batch_axes=batch_axes, feature_axes=feature_axes,
                               mask=mask)
      m = stats["m"]
      if not self.is_initializing():
        # An (example, position) pair counts towards the population feature statistics
        # only if it has real entries: padding must not drag them towards 0.
        real = F.count(x, feature_axes, mask) > 0
        self._update_population(pop, stats, m, d, real)
        train_m.value = jnp.max(m)
      return F.batch_layer_norm(
          x, scale, bias, batch_mean=stats["batch_mean"], batch_var=stats["batch_var"],
          feature_mean=stats["feature_mean"], feature_var=stats["feature_var"],
          m=m, feature_size=d, eps=self.eps, mix_eps=self.mix_eps)

    pop_b_mean, pop_b_var, pop_f_mean, pop_f_var = (pop[k].value for k in _BLN_STATS)
    # Eq. 19 and 21: a mini-batch std is taken around the mean in use, which may be
    # the population mean.
    stats = F.bln_statistics(
        x, batch_axes=batch_axes, feature_axes=feature_axes, mask=mask,
        batch_mean=pop_b_mean if use_population[0] else None,
        feature_mean=pop_f_mean if use_population[2] else None)
    chosen = {
        "batch_mean": pop_b_mean if use_population[0] else stats["batch_mean"],
        "batch_var": pop_b_var if use_population[1] else stats["batch_var"],
        "feature_mean": pop_f_mean if use_population[2] else stats["feature_mean"],
        "feature_var": pop_f_var if use_population[3] else stats["feature_var"],
    }
    return F.batch_layer_norm(x, scale, bias, m=train_m.value, feature_size=d,
                              eps=self.eps, mix_eps=self.mix_eps, **chosen)

  def _update_population(self, pop, stats, m, d, real):
    batch_bessel = jnp.where(m > 1, m / jnp.maximum(m - 1, 1), 1.0)
    feature_bessel = d / (d - 1) if d > 1 else 1.0
    # Average over the (real) examples so that a feature statistic is one value per
    # position, never one per batch slot.
    batch_axes = _axes(self.batch_axes, stats["feature_mean"].ndim)
    weight = real.astype(jnp.float32)
    n_real = jnp.maximum(jnp.sum(weight, axis=batch_axes, keepdims=True), 1.0)
    per_position = lambda v: jnp.sum(v * weight, axis=batch_axes, keepdims=True) / n_real
    new = {
        "batch_mean": stats["batch_mean"],
        "batch_var": stats["batch_var"] * batch_bessel,
        "feature_mean": per_position(stats["feature_mean"]),
        "feature_var": per_position(stats["feature_var"]) * feature_bessel,
    }
    if self.population == "moving_average":
      for k in _BLN_STATS:
        pop[k].value = self.momentum * pop[k].value + (1 - self.momentum) * new[k]
      return
    for k in _BLN_STATS:
      acc = self.get_variable("batch_stats", f"epoch_sum_{k}")
      self.put_variable("batch_stats", f"epoch_sum_{k}", acc + new[k])
    count = self.get_variable("batch_stats", "epoch_count")
    self.put_variable("batch_stats", "epoch_count", count + 1)


def finalize_epoch_statistics(batch_stats: Any) -> Any:
  """Closes a training epoch for every epoch-averaged population statistic.

  Any dict holding ``epoch_count`` (BLN with ``population='epoch_mean'``) gets its
  population values set to the epoch's averages and its accumulators reset. Other
  statistics pass through unchanged, so the harness can call this for every model.
  """
  if not isinstance(batch_stats, dict) and not hasattr(batch_stats, "items"):
    return batch_stats
  out = {k: finalize_epoch_statistics(v) for k, v in batch_stats.items()}
  if "epoch_count" in out:
    n = out["epoch_count"]
    for k in _BLN_STATS:
      acc_key = f"epoch_sum_{k}"
      if acc_key in out:
        out[k] = jnp.where(n > 0, out[acc_key] / jnp.maximum(n, 1), out[k])
        out[acc_key] = jnp.zeros_like(out[acc_key])
    out["epoch_count"] = jnp.zeros_like(n)
  return out


class Dense(nn.Dense):
  """``flax.linen.Dense`` that multiplies rows on CPU, and can hand out its kernel.

  On CPU, inputs with several leading axes (``[T, B, I]``) are flattened to rows
  first: the result is the same, but the gradient of the kernel is then a plain
  ``xᵀ dy`` over rows, where differentiating the 3-D product makes XLA:CPU transpose
  ``dy`` and run a matmul twice as slow (measured: 18.6 against 5.8 ms for the
  handwriting LSTM's input projection, docs/performance.md). Other backends keep the
  3-D product: merging a time axis with a sharded batch axis would make XLA move the
  activations between devices.

  The fused LSTM recurrence (:mod:`lnorm.rnn.fused`) multiplies by W_h itself, so it
  asks the cell's linear map for the matrix; :class:`WeightNormDense` answers the
  same question with its normalized kernel.
  """

  def __call__(self, inputs: jax.Array) -> jax.Array:
    if inputs.ndim <= 2 or jax.default_backend() != "cpu":
      return super().__call__(inputs)
    rows = inputs.reshape(-1, inputs.shape[-1])
    return super().__call__(rows).reshape(inputs.shape[:-1] + (self.features,))

  def kernel_matrix(self) -> jax.Array:
    """The ``[in, out]`` kernel (the module must have been initialised)."""
    return jnp.asarray(self.get_variable("params", "kernel"))


class WeightNormDense(nn.Module):
  """Dense layer with ``w = g v / ||v||`` per output unit (Salimans & Kingma 2016).

  With ``data_init`` the gain and bias are initialised from the first batch so that
  the initial pre-activations have zero mean and unit variance per unit (the paper's
  data-dependent init); flax's ``nn.WeightNorm`` sets the gain to 1 instead.
  """

  features: int
  use_bias: bool = True
  data_init: bool = False
  kernel_init: Initializer = nn.initializers.normal(0.05)
  eps: float = 1e-6

  @nn.compact
  def __call__(self, x):
    v = self.param("kernel", self.kernel_init, (x.shape[-1], self.features), jnp.float32)

    def initial_stats():
      t = x.astype(jnp.float32) @ F.weight_norm(v, jnp.ones((self.features,)))
      axes = tuple(range(t.ndim - 1))
      mean, var = F.moments(t, axes)
      inv_std = jax.lax.rsqrt(var.reshape(-1) + self.eps)
      return mean.reshape(-1), inv_std

    if self.data_init:
      g = self.param("scale", lambda _: initial_stats()[1])
    else:
      g = self.param("scale", nn.initializers.ones, (self.features,), jnp.float32)
    y = x @ F.weight_norm(v, g).astype(x.dtype)
    if self.use_bias:
      if self.data_init:
        b = self.param("bias", lambda _: -initial_stats()[0] * initial_stats()[1])
      else:
        b = self.param("bias", nn.initializers.zeros, (self.features,), jnp.float32)
      # Explicit broadcast: models run with jax_numpy_rank_promotion='raise' in tests.
      y = y + jax.lax.broadcast_to_rank(b.astype(y.dtype), y.ndim)
    return y

  def kernel_matrix(self) -> jax.Array:
    """``g v / ||v||``, the ``[in, out]`` kernel (after initialisation)."""
    return F.weight_norm(jnp.asarray(self.get_variable("params", "kernel")),
                         jnp.asarray(self.get_variable("params", "scale")))
