"""Normalizers in the recurrent signature ``norm(x, *, train, step, mask=None)``.

A recurrent cell normalizes three things: the input projection W_x x (all time steps
at once, outside the recurrence, ``x`` time-major ``[T, B, F]`` with ``step`` of
shape ``[T]``), the recurrent projection W_h h and the cell state c (one step inside
the recurrence, ``x`` of shape ``[B, F]`` with a scalar ``step``). Only recurrent BN
looks at ``step``; the per-example normalizers and the identity ignore it. The
arithmetic is the pure functions of :mod:`lnorm.normalization.functional`.

``mask`` (``[B]`` or ``[T, B]``, true for real steps) keeps padded steps out of BN's
batch statistics; the per-example normalizers' statistics (LN, RMSNorm, ScaleNorm;
DyT has none) are per example and need no mask.

``fusable`` says whether the fused recurrences (:mod:`lnorm.rnn.fused`,
:mod:`lnorm.rnn.fused_gru`) can run the normalizer; if so, ``row_norm()`` gives its
parameters in their terms (None for the identity), given the number of features it
normalizes. LN, RMSNorm, ScaleNorm, LayerNorm-simple and the identity can; a
normalizer without ``fusable`` (recurrent BN with its per-step statistics, DyT, a
user's) runs step by step.
"""

from __future__ import annotations

import math
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from lnorm.normalization import functional as F
from lnorm.normalization.modules import scale_norm_init
from lnorm.rnn.fused import RowNorm

Initializer = Callable[..., jax.Array]


class StepIdentity(nn.Module):
  """The un-normalized variant: same signature, no computation."""

  fusable = True

  @nn.compact
  def __call__(self, x, *, train: bool = False, step=None, mask=None):
    del train, step, mask
    return x

  def row_norm(self, features: int | None = None) -> None:
    del features
    return None


class StepLayerNorm(nn.Module):
  """LN over the last axis (for a gate projection: all gates concatenated, as in
  the reference code). Same computation at every step and at train and test."""

  eps: float = 1e-5
  scale_init: Initializer = nn.initializers.ones
  bias_init: Initializer = nn.initializers.zeros
  use_bias: bool = True

  fusable = True

  @nn.compact
  def __call__(self, x, *, train: bool = False, step=None, mask=None):
    del train, step, mask
    scale, bias = _declare_gain_and_bias(self, x.shape[-1])
    return F.layer_norm(x, scale, bias, axes=-1, eps=self.eps)

  def row_norm(self, features: int | None = None) -> RowNorm:
    """The gain, bias and eps (after initialisation)."""
    del features
    return RowNorm(*_gain_and_bias(self), self.eps)


class StepRMSNorm(nn.Module):
  """RMSNorm over the last axis (Zhang & Sennrich 2019): ``g * x / sqrt(mean(x^2) +
  eps)``, over all gates concatenated like :class:`StepLayerNorm`. ``partial < 1`` is
  pRMSNorm, the mean square from the first ``partial`` of the entries.

  No bias by default, as in the authors' RMS-LSTM and RMS-GRU: the cell's own biases
  shift the gates, and RMSNorm does not re-centre. Same computation at every step
  and at train and test.
  """

  eps: float = 1e-5
  partial: float = 1.0
  scale_init: Initializer = nn.initializers.ones
  bias_init: Initializer = nn.initializers.zeros
  use_bias: bool = False

  fusable = True

  @nn.compact
  def __call__(self, x, *, train: bool = False, step=None, mask=None):
    del train, step, mask
    scale, bias = _declare_gain_and_bias(self, x.shape[-1])
    return F.rms_norm(x, scale, bias, axes=-1, eps=self.eps, partial=self.partial)

  def row_norm(self, features: int | None = None) -> RowNorm:
    """The gain, bias (None without), eps and the entries its statistic reads."""
    del features
    scale, bias = _gain_and_bias(self)
    size = None if self.partial == 1.0 else F.partial_size(scale.shape[-1], self.partial)
    return RowNorm(scale, bias, self.eps, F.rms_rows(size))


class StepLayerNormSimple(nn.Module):
  """LayerNorm-simple (Xu et al. 2019): LN over the last axis without its gain and
  bias. The fused recurrences run it as LN with a constant gain of 1 and no bias."""

  eps: float = 1e-5

  fusable = True

  @nn.compact
  def __call__(self, x, *, train: bool = False, step=None, mask=None):
    del train, step, mask
    return F.layer_norm(x, None, None, axes=-1, eps=self.eps)

  def row_norm(self, features: int | None = None) -> RowNorm:
    """LN's row statistics with a constant gain over the ``features`` it normalizes."""
    return RowNorm(jnp.ones((_required(features, self),), jnp.float32), None, self.eps)


class StepScaleNorm(nn.Module):
  """ScaleNorm (Nguyen & Salazar 2019) over the last axis: ``g * x / sqrt(sum(x^2) +
  eps)``, one scalar gain from ``sqrt(F)`` (or ``scale_init``), no bias.

  Over F entries that is ``(g / sqrt(F)) * x / sqrt(mean(x^2) + eps / F)``: RMSNorm's
  row statistic with the scalar gain spread over the row, which is how the fused
  recurrences run it (the gain's gradient is the sum of the row's).
  """

  eps: float = 1e-5
  scale_init: float | None = None

  fusable = True

  @nn.compact
  def __call__(self, x, *, train: bool = False, step=None, mask=None):
    del train, step, mask
    init = scale_norm_init(self.scale_init, x.shape[-1])
    g = self.param("scale", nn.initializers.constant(init), (), jnp.float32)
    return F.scale_norm(x, g, axes=-1, eps=self.eps)

  def row_norm(self, features: int | None = None) -> RowNorm:
    """The scalar gain over ``features`` as RMSNorm's row gain, and eps / features."""
    features = _required(features, self)
    g = jnp.asarray(self.get_variable("params", "scale"), jnp.float32)
    return RowNorm(jnp.broadcast_to(g / math.sqrt(features), (features,)), None,
                   self.eps / features, F.rms_rows())


def _required(features: int | None, norm: nn.Module) -> int:
  if features is None:
    raise ValueError(f"{type(norm).__name__}.row_norm needs the number of features it "
                     "normalizes: it has no per-feature parameter to read it from.")
  return features


class StepDynamicTanh(nn.Module):
  """DyT (Zhu et al. 2025) over the last axis: ``gamma * tanh(alpha * x) + beta``, one
  scalar ``alpha`` from ``alpha_init``, ``gamma`` and ``beta`` per feature (a bias, as
  LN's, by default). Step by step: the fused recurrences do not run it."""

  alpha_init: float = 0.5
  scale_init: Initializer = nn.initializers.ones
  bias_init: Initializer = nn.initializers.zeros
  use_bias: bool = True

  @nn.compact
  def __call__(self, x, *, train: bool = False, step=None, mask=None):
    del train, step, mask
    alpha = self.param("alpha", nn.initializers.constant(self.alpha_init), (), jnp.float32)
    scale, bias = _declare_gain_and_bias(self, x.shape[-1])
    return F.dynamic_tanh(x, alpha, scale, bias)


def _declare_gain_and_bias(norm: nn.Module, features: int):
  """A row norm's ``scale`` and ``bias`` parameters (no bias without ``use_bias``),
  declared from inside its compact ``__call__``."""
  scale = norm.param("scale", norm.scale_init, (features,), jnp.float32)
  bias = (norm.param("bias", norm.bias_init, (features,), jnp.float32)
          if norm.use_bias else None)
  return scale, bias


def _gain_and_bias(norm: nn.Module):
  """A row norm's gain and bias (None without) after initialisation."""
  scale = jnp.asarray(norm.get_variable("params", "scale"))
  bias = jnp.asarray(norm.get_variable("params", "bias")) if norm.use_bias else None
  return scale, bias


class StepBatchNorm(nn.Module):
  """Recurrent BN (Cooijmans et al. 2016) with population statistics per time step.

  ``batch_stats`` holds ``mean`` and ``var`` of shape ``[max_steps, F]`` and
  ``trained_steps``, the longest training sequence seen. At inference step t uses
  row ``min(t, trained_steps - 1)``: sequences longer than every training sequence
  reuse the last trained step's statistics, as Cooijmans et al. do. A training step
  whose batch is all padding leaves its row unchanged.

  The batch axis is ``-2`` (``x`` is ``[B, F]`` or time-major ``[T, B, F]``).
  """

  max_steps: int = 256
  eps: float = 1e-5
  momentum: float = 0.99
  unbiased: bool = False
  scale_init: Initializer = nn.initializers.constant(0.1)
  bias_init: Initializer = nn.initializers.zeros
  use_bias: bool = True

  fusable = False

  @nn.compact
  def __call__(self, x, *, train: bool, step, mask=None):
    features = x.shape[-1]
    step = jnp.asarray(step, jnp.int32)
    if x.ndim != step.ndim + 2:
      raise ValueError(
          f"StepBatchNorm got x of shape {x.shape} with step of shape {step.shape}: "
          "pass x [B, F] with a scalar step, or time-major x [T, B, F] with step [T].")
    if step.ndim == 1 and train and x.shape[0] > self.max_steps:
      raise ValueError(
          f"Recurrent BN keeps statistics for max_steps={self.max_steps} time steps "
          f"but a training sequence has {x.shape[0]}: raise the cell's bn max_steps.")
    pop_mean = self.variable("batch_stats", "mean", jnp.zeros,
                             (self.max_steps, features), jnp.float32)
    pop_var = self.variable("batch_stats", "var", jnp.ones,
                            (self.max_steps, features), jnp.float32)
    trained = self.variable("batch_stats", "trained_steps",
                            lambda: jnp.zeros((), jnp.int32))
    scale = self.param("scale", self.scale_init, (features,), jnp.float32)
    bias = (self.param("bias", self.bias_init, (features,), jnp.float32)
            if self.use_bias else None)
    # Statistics of shape [..., 1, F]: one per time step, reduced over the batch.
    stat_mask = None if mask is None else mask[..., None]
    if train:
      mean, var = F.batch_moments(x, axes=-2, mask=stat_mask, unbiased=self.unbiased)
      if not self.is_initializing():
        n = F.count(x, -2, stat_mask)[..., 0, 0]  # real examples per step
        self._update(pop_mean, pop_var, trained, mean[..., 0, :], var[..., 0, :], n,
                     step)
    else:
      last = jnp.maximum(trained.value - 1, 0)
      row = jnp.clip(jnp.minimum(step, last), 0, self.max_steps - 1)
      # jnp.asarray: statistics restored as NumPy arrays cannot take a traced index.
      mean = jnp.asarray(pop_mean.value)[row][..., None, :]
      var = jnp.asarray(pop_var.value)[row][..., None, :]
    return F.batch_norm(x, scale, bias, mean=mean, var=var, eps=self.eps)

  def _update(self, pop_mean, pop_var, trained, mean, var, n, step):
    # Scatter the batch statistics into their time-step rows; an all-padding step
    # keeps its row, so an early-ending batch does not drag later statistics to 0.
    m = self.momentum
    seen = (n > 0)[..., None]
    row = jnp.clip(step, 0, self.max_steps - 1)
    old_mean, old_var = pop_mean.value[row], pop_var.value[row]
    new_mean = jnp.where(seen, m * old_mean + (1 - m) * mean, old_mean)
    new_var = jnp.where(seen, m * old_var + (1 - m) * var, old_var)
    pop_mean.value = pop_mean.value.at[row].set(new_mean)
    pop_var.value = pop_var.value.at[row].set(new_var)
    longest = jnp.max(jnp.where(n > 0, step + 1, 0))
    trained.value = jnp.maximum(trained.value, longest)
