"""Every normalizer, defined once: its module (statistics through the pure transforms
in ``functional``, its parameters and their initialisation) followed by its
:class:`~lnorm.normalization.registry.NormDefinition` (its options with their
defaults and checks, and how it enters a feed-forward layer and a recurrent cell).

Activation normalizers share one call signature, ``norm(x, *, train, mask=None)``, so
models can swap them without knowing which one they hold. The per-example ones (LN
and its successors) also run in the recurrent cells, which call them as ``norm(x, *,
train, step, mask)``: there ``mask`` is a per-row mask ``[T, B]`` or ``[B]`` that only
recurrent BN's batch statistics need, and a per-example statistic ignores it (a padded
row is normalized on its own and masked downstream). The fused recurrences
(:mod:`lnorm.rnn.fused`) run those with ``fusable`` set through ``row_norm``.
Population statistics live in the ``batch_stats`` collection.

Each normalizer's options (``norm_options.<name>``) are declared once, above its
module: its definition registers them, and the module's fields take their defaults
from them, so that a module built without arguments is the registered normalizer at
its defaults (tests/test_norm_definitions.py holds the two together).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from lnorm.errors import ConfigError
from lnorm.normalization import functional as F
from lnorm.normalization.functional import RowNorm
from lnorm.normalization.registry import (
    PER_EXAMPLE_PLACEMENT, InCells, Norm, NormDefinition, axes_option, constant,
    options, per_example, register)

Initializer = Callable[..., jax.Array]


def _feature_shape(x_shape: Sequence[int], reduced_axes: tuple[int, ...]) -> tuple[int, ...]:
  """Shape of a statistic reduced over ``reduced_axes`` (kept as size-1 dims)."""
  return tuple(1 if i in reduced_axes else s for i, s in enumerate(x_shape))


def _param_shape(x_shape: Sequence[int], feature_axes: tuple[int, ...]) -> tuple[int, ...]:
  """Gain and bias cover the feature axes and broadcast over the rest."""
  return tuple(s if i in feature_axes else 1 for i, s in enumerate(x_shape))


def _axes(axes: int | Sequence[int], ndim: int) -> tuple[int, ...]:
  return F._normalize_axes(axes, ndim)


def _entry_mask(step, mask):
  """The mask a per-example statistic uses: the feed-forward layers' (broadcastable to
  x); none in a recurrent cell (called with ``step``), whose mask marks whole rows."""
  return None if step is not None else mask


def _required(features: int | None, norm: nn.Module) -> int:
  if features is None:
    raise ValueError(f"{type(norm).__name__}.row_norm needs the number of features it "
                     "normalizes: it has no per-feature parameter to read it from.")
  return features


class Identity(nn.Module):
  """The 'none' normalizer: same signature, no computation."""

  fusable = True

  @nn.compact
  def __call__(self, x, *, train: bool = False, step=None, mask=None):
    del train, step, mask
    return x

  def row_norm(self, features: int | None = None) -> None:
    del features
    return None


register(NormDefinition(
    "none", options(), lambda o: Norm("none", nn.Dense, Identity),
    lambda o: InCells(Identity, Identity, Identity),
    # A conv map's axes are given to every normalizer (the BLN CIFAR LeNet's callers).
    placement=PER_EXAMPLE_PLACEMENT))


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

  def gain_and_bias(self):
    """The gain and bias (None without) after initialisation."""
    scale = jnp.asarray(self.get_variable("params", "scale")) if self.use_scale else None
    bias = jnp.asarray(self.get_variable("params", "bias")) if self.use_bias else None
    return scale, bias


#: LN's options. eps as in the reference code (1e-5, inside the sqrt), not flax's
#: 1e-6; the attentive reader compares the gain's init 1.0 with 0.1.
LN_OPTIONS = options(eps=1e-5, scale_init=1.0)


class LayerNorm(_ScaleBias):
  """LN (LN paper eq. 3-4): statistics per example over ``axes``."""

  axes: int | Sequence[int] = PER_EXAMPLE_PLACEMENT["axes"]
  eps: float = LN_OPTIONS["eps"]
  scale_init: Initializer = constant(LN_OPTIONS["scale_init"])

  fusable = True

  @nn.compact
  def __call__(self, x, *, train: bool = False, step=None, mask=None):
    del train  # Same computation at training and test time.
    axes = _axes(self.axes, x.ndim)
    scale, bias = self.scale_bias(x, axes)
    return F.layer_norm(x, scale, bias, axes=axes, eps=self.eps,
                        mask=_entry_mask(step, mask))

  def row_norm(self, features: int | None = None) -> RowNorm:
    """The gain (a constant 1 over ``features`` without one), bias and eps."""
    scale, bias = self.gain_and_bias()
    if scale is None:
      scale = jnp.ones((_required(features, self),), jnp.float32)
    return RowNorm(scale, bias, self.eps)


register(per_example(
    "ln", LayerNorm, LN_OPTIONS,
    lambda o: {"eps": o["eps"], "scale_init": constant(o["scale_init"])},
    has_bias=True))


#: RMSNorm's options: eps inside the sqrt, as LN's (the RMSNorm authors' eps in their
#: RNNs).
RMS_OPTIONS = options(eps=1e-5, scale_init=1.0)
#: pRMSNorm's: RMSNorm's, and p, the share of the summed inputs the RMS is estimated
#: from (the paper's 6.25%).
PRMS_OPTIONS = options(**RMS_OPTIONS, p=0.0625)


class RMSNorm(_ScaleBias):
  """RMSNorm (Zhang & Sennrich 2019): ``g * a / RMS(a) + b`` per example over
  ``axes``, with ``RMS(a) = sqrt(mean(a^2) + eps)``; LN without the re-centering.
  ``partial < 1`` is pRMSNorm, the RMS estimated from the first ``partial`` of the
  normalized entries (the paper's 6.25% is 0.0625). Same computation at training and
  test time. The bias is the layer's b added after the normalization (the paper's
  ``f(a / RMS(a) g + b)``); ``use_bias=False`` drops it."""

  axes: int | Sequence[int] = PER_EXAMPLE_PLACEMENT["axes"]
  eps: float = RMS_OPTIONS["eps"]
  scale_init: Initializer = constant(RMS_OPTIONS["scale_init"])
  partial: float = 1.0  # The whole row: RMSNorm; pRMSNorm's share is its option p.

  fusable = True

  @nn.compact
  def __call__(self, x, *, train: bool = False, step=None, mask=None):
    del train
    axes = _axes(self.axes, x.ndim)
    scale, bias = self.scale_bias(x, axes)
    return F.rms_norm(x, scale, bias, axes=axes, eps=self.eps, mask=_entry_mask(step, mask),
                      partial=self.partial)

  def row_norm(self, features: int | None = None) -> RowNorm:
    """The gain, bias (None without), eps and the entries its statistic reads."""
    scale, bias = self.gain_and_bias()
    if scale is None:
      scale = jnp.ones((_required(features, self),), jnp.float32)
    size = None if self.partial == 1.0 else F.partial_size(scale.shape[-1], self.partial)
    return RowNorm(scale, bias, self.eps, F.rms_rows(size))


def _rms_fields(o):
  return {"eps": o["eps"], "scale_init": constant(o["scale_init"])}


#: In the recurrent cells RMSNorm has a gain and no bias, as in the RMSNorm authors'
#: RMS-LSTM and RMS-GRU: the cell's own biases shift the gates, and RMSNorm does not
#: re-centre. In feed-forward layers its bias is the layer's b (the paper's eq. 4).
_RMS_IN_CELLS = {"use_bias": False}

register(per_example(
    "rms", RMSNorm, RMS_OPTIONS, _rms_fields, has_bias=True, in_cells=_RMS_IN_CELLS))


def _check_prms(o) -> None:
  if not 0.0 < o["p"] <= 1.0:
    raise ConfigError(f"norm_options.prms.p={o['p']}: pRMSNorm's share of the entries "
                      "must be in (0, 1]; the paper uses 0.0625 (6.25%).")


register(per_example(
    "prms", RMSNorm, PRMS_OPTIONS, lambda o: {**_rms_fields(o), "partial": o["p"]},
    has_bias=True, in_cells=_RMS_IN_CELLS, check=_check_prms))


#: DyT's options: alpha's init, the paper's default 0.5; and the Transformer's own
#: init of the alpha before its attention (Zhu et al.'s LLaMA runs set it apart from
#: the others'), None: ``alpha_init``. Its beta is the layer's bias, as LN's.
DYT_OPTIONS = options(alpha_init=0.5, alpha_init_attention=None)


class DynamicTanh(_ScaleBias):
  """DyT (Zhu et al. 2025): ``gamma * tanh(alpha * x) + beta``, ``alpha`` one learnable
  scalar, ``gamma`` and ``beta`` over ``axes`` (ones and zeros). No statistics, so no
  mask; the same at train and test."""

  axes: int | Sequence[int] = PER_EXAMPLE_PLACEMENT["axes"]
  alpha_init: float = DYT_OPTIONS["alpha_init"]

  @nn.compact
  def __call__(self, x, *, train: bool = False, step=None, mask=None):
    del train, step, mask
    alpha = self.param("alpha", nn.initializers.constant(self.alpha_init), (), jnp.float32)
    scale, bias = self.scale_bias(x, _axes(self.axes, x.ndim))
    return F.dynamic_tanh(x, alpha, scale, bias)


register(per_example(
    # No statistics to fuse: the recurrent cells run it step by step.
    "dyt", DynamicTanh, DYT_OPTIONS, lambda o: {"alpha_init": o["alpha_init"]},
    has_bias=True))


#: ScaleNorm's options: eps inside the sqrt of sum(x^2); scale_init None: sqrt(d), the
#: paper's.
SCALENORM_OPTIONS = options(eps=1e-5, scale_init=None)


class ScaleNorm(nn.Module):
  """ScaleNorm (Nguyen & Salazar 2019): ``g * x / sqrt(sum(x^2) + eps)`` per example
  over ``axes``, one learnable scalar ``g``, initialised to ``sqrt(d)`` for d
  normalized entries (the paper's choice, which makes it RMSNorm at init up to eps)
  unless ``scale_init`` is given. No bias. Same computation at train and test."""

  axes: int | Sequence[int] = PER_EXAMPLE_PLACEMENT["axes"]
  eps: float = SCALENORM_OPTIONS["eps"]
  scale_init: float | None = SCALENORM_OPTIONS["scale_init"]

  #: Over F entries ``g * x / sqrt(sum(x^2) + eps)`` is ``(g / sqrt(F)) * x /
  #: sqrt(mean(x^2) + eps / F)``: RMSNorm's row statistic with the scalar gain spread
  #: over the row, which is how the fused recurrences run it.
  fusable = True

  @nn.compact
  def __call__(self, x, *, train: bool = False, step=None, mask=None):
    del train
    axes = _axes(self.axes, x.ndim)
    g = self.param("scale", nn.initializers.constant(
        scale_norm_init(self.scale_init, math.prod(x.shape[a] for a in axes))), (),
                   jnp.float32)
    return F.scale_norm(x, g, axes=axes, eps=self.eps, mask=_entry_mask(step, mask))

  def row_norm(self, features: int | None = None) -> RowNorm:
    """The scalar gain over ``features`` as RMSNorm's row gain, and eps / features
    (the gain's gradient is then the sum of the row's)."""
    features = _required(features, self)
    g = jnp.asarray(self.get_variable("params", "scale"), jnp.float32)
    return RowNorm(jnp.broadcast_to(g / math.sqrt(features), (features,)), None,
                   self.eps / features, F.rms_rows())


def scale_norm_init(scale_init: float | None, d: int) -> float:
  """ScaleNorm's initial gain: ``scale_init``, or ``sqrt(d)`` for d normalized entries."""
  return math.sqrt(d) if scale_init is None else scale_init


register(per_example(
    "scalenorm", ScaleNorm, SCALENORM_OPTIONS,
    lambda o: {"eps": o["eps"], "scale_init": o["scale_init"]}, has_bias=False))


register(per_example(
    # LayerNorm-simple (Xu et al. 2019): LN without its gain and bias, at LN's eps.
    "ln_simple", LayerNorm, options(eps=LN_OPTIONS["eps"]),
    lambda o: {"eps": o["eps"], "use_scale": False, "use_bias": False}, has_bias=False))


#: BN's options. scale_init: the gain's init, 1.0; the attentive reader's config sets
#: Cooijmans et al.'s 0.1 for its recurrent (and feed-forward) BN. unbiased: the
#: variance of the batch statistics with m - 1 (perm-MNIST at batch 4).
BN_OPTIONS = options(eps=1e-5, momentum=0.99, unbiased=False, scale_init=1.0)
#: What the model says of BN: ``axes``, the reduced axes (None: all but the last, per
#: channel for NHWC); ``max_steps``, the time steps recurrent BN keeps statistics for
#: (the model's longest training sequence; the attentive reader's passage length).
BN_PLACEMENT = options(axes=None, max_steps=256)


class BatchNorm(_ScaleBias):
  """BN: batch statistics in training, population (moving-average) statistics at
  inference. ``axes`` are the reduced axes (default: all but the last)."""

  axes: int | Sequence[int] | None = BN_PLACEMENT["axes"]
  eps: float = BN_OPTIONS["eps"]
  momentum: float = BN_OPTIONS["momentum"]
  unbiased: bool = BN_OPTIONS["unbiased"]
  scale_init: Initializer = constant(BN_OPTIONS["scale_init"])

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


class StepBatchNorm(nn.Module):
  """Recurrent BN (Cooijmans et al. 2016) with population statistics per time step.

  ``batch_stats`` holds ``mean`` and ``var`` of shape ``[max_steps, F]`` and
  ``trained_steps``, the longest training sequence seen. At inference step t uses
  row ``min(t, trained_steps - 1)``: sequences longer than every training sequence
  reuse the last trained step's statistics, as Cooijmans et al. do. A training step
  whose batch is all padding leaves its row unchanged.

  The batch axis is ``-2`` (``x`` is ``[B, F]`` or time-major ``[T, B, F]``).
  """

  max_steps: int = BN_PLACEMENT["max_steps"]
  eps: float = BN_OPTIONS["eps"]
  momentum: float = BN_OPTIONS["momentum"]
  unbiased: bool = BN_OPTIONS["unbiased"]
  scale_init: Initializer = constant(BN_OPTIONS["scale_init"])
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


def _check_bn(o) -> None:
  if not 0.0 <= o["momentum"] < 1.0:
    raise ConfigError(f"norm_options.bn.momentum={o['momentum']}: the moving averages' "
                      "decay must be in [0, 1) (0.99 by default).")


def _bn_cells(o) -> InCells:
  # Recurrent BN: W_h h and W_x x get gains only (the shared gate bias b shifts both;
  # Cooijmans et al. set their betas to 0); c gets a gain and a bias.
  step_bn = functools.partial(
      StepBatchNorm, max_steps=o["max_steps"], eps=o["eps"], momentum=o["momentum"],
      unbiased=o["unbiased"], scale_init=constant(o["scale_init"]))
  no_bias = functools.partial(step_bn, use_bias=False)
  return InCells(no_bias, no_bias, functools.partial(step_bn, use_bias=True))


register(NormDefinition(
    "bn", BN_OPTIONS,
    lambda o: Norm("bn", nn.Dense, functools.partial(
        BatchNorm, axes=axes_option(o["axes"]), eps=o["eps"], momentum=o["momentum"],
        unbiased=o["unbiased"], scale_init=constant(o["scale_init"])),
                   normalizes_logits=True, has_bias=True),
    _bn_cells, placement=BN_PLACEMENT, check=_check_bn))


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


#: WN's options. data_init: the gain and bias from the first batch (the paper's
#: data-dependent init). The recurrent cells' W_x and W_h always start without it (h
#: is 0 at init: W_h h would have no variance to standardize).
WN_OPTIONS = options(data_init=True)


class WeightNormDense(nn.Module):
  """Dense layer with ``w = g v / ||v||`` per output unit (Salimans & Kingma 2016).

  With ``data_init`` the gain and bias are initialised from the first batch so that
  the initial pre-activations have zero mean and unit variance per unit (the paper's
  data-dependent init); flax's ``nn.WeightNorm`` sets the gain to 1 instead.
  """

  features: int
  use_bias: bool = True
  data_init: bool = WN_OPTIONS["data_init"]
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


register(NormDefinition(
    "wn", WN_OPTIONS,
    lambda o: Norm("wn", functools.partial(WeightNormDense, data_init=o["data_init"]),
                   Identity, normalizes_logits=True),
    lambda o: InCells(Identity, Identity, Identity,
                      dense=functools.partial(WeightNormDense, data_init=False))))


#: Population statistics that BLN keeps, in ``batch_stats``.
_BLN_STATS = ("batch_mean", "batch_var", "feature_mean", "feature_var")


#: BLN's options: eps and mix_eps as in the authors' code; inference, which of the four
#: statistics come from the population at test time (functional.parse_bln_inference).
BLN_OPTIONS = options(eps=1e-4, mix_eps=1e-4, inference="pppp", population="epoch_mean",
                      momentum=0.99, batch_axes=(0,), feature_axes=(-1,))


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

  batch_axes: int | Sequence[int] = BLN_OPTIONS["batch_axes"]
  feature_axes: int | Sequence[int] = BLN_OPTIONS["feature_axes"]
  eps: float = BLN_OPTIONS["eps"]
  mix_eps: float = BLN_OPTIONS["mix_eps"]
  inference: str = BLN_OPTIONS["inference"]
  population: str = BLN_OPTIONS["population"]
  momentum: float = BLN_OPTIONS["momentum"]

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


def _check_bln(o) -> None:
  if o["population"] not in ("epoch_mean", "moving_average"):
    raise ConfigError(f"norm_options.bln.population={o['population']!r}: use "
                      "'epoch_mean' or 'moving_average'.")
  try:
    F.parse_bln_inference(o["inference"])
  except ValueError as e:
    raise ConfigError(f"norm_options.bln.inference: {e}") from None


register(NormDefinition(
    "bln", BLN_OPTIONS,
    lambda o: Norm("bln", nn.Dense, functools.partial(
        BatchLayerNorm, eps=o["eps"], mix_eps=o["mix_eps"], inference=o["inference"],
        population=o["population"], momentum=o["momentum"],
        batch_axes=tuple(o["batch_axes"]), feature_axes=tuple(o["feature_axes"])),
                   default_position="post", has_bias=True),
    check=_check_bln))


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
