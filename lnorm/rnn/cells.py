"""LSTM and GRU cells whose normalization is given, never tested by name.

Each cell splits its work in two, as the LN paper's reference code did:

* ``project(x, *, train, mask, dropout_mask)``: everything that does not depend on
  the state, W_x x, its normalizer and the bias, for all time steps in one matmul.
  ``x`` is time-major ``[T, B, I]``.
* ``__call__(carry, inputs, *, train, recurrent_mask)``: one step of the recurrence,
  where ``inputs = (projected_t, step, mask_t)`` is one time step of ``project``'s
  output, the integer time index (recurrent BN keeps statistics per step) and a
  ``[B]`` mask (BN keeps padded examples out of its batch statistics).

Keeping the state-independent half out of the scan is the main speed lever: the
recurrence then holds one ``[B, H] @ [H, 4H]`` matmul plus elementwise work.
:class:`lnorm.rnn.RecurrentLayer` runs a cell over padded sequences.

The variant enters through :class:`CellNorms`: which linear map (plain or weight
normalized) and which normalizer for W_x x, W_h h and c. Equations:
docs/experiments.md sec. 4 (LN paper appendix), Cooijmans et al. 2016 for recurrent
BN, Zhang & Sennrich 2019 for RMSNorm.

Dropout is Keras's ``LSTM(dropout, recurrent_dropout)``, the variational dropout of
Gal & Ghahramani 2016: in training, x is multiplied by one mask before W_x and h by
another before W_h, each drawn once per sequence (``dropout_masks``) and reused at
every step. One mask per input serves all gates, as in Keras's default
``implementation=2``, which also multiplies x and h before one concatenated matmul
(Keras's ``implementation=1`` draws one mask per gate). Inverted dropout: kept
entries are scaled by 1/(1 - rate), so evaluation needs no rescaling.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from lnorm.rnn import cudnn, gpu_recurrence, implementation, kernel_norms
from lnorm.rnn.fused import LSTMRecurrenceParams, lstm_recurrence
from lnorm.rnn.fused_gru import GRURecurrenceParams, gru_recurrence
from lnorm.rnn.norms import StepIdentity
from lnorm.rnn.pallas_steps import GRUKernelParams, GRUSteps, LSTMKernelParams, LSTMSteps

ModuleFactory = Callable[..., nn.Module]
Initializer = Callable[..., jax.Array]


@dataclasses.dataclass(frozen=True)
class CellNorms:
  """How a normalization variant enters a recurrent cell.

  ``dense(features, use_bias=..., kernel_init=..., name=...)`` builds W_x and W_h;
  ``input_norm``, ``hidden_norm`` and ``cell_norm`` (called with ``name=...``) build
  modules with the signature ``norm(x, *, train, step, mask=None)`` applied to W_x x,
  W_h h and (LSTM only) c before its tanh. For the fused recurrences the linear map
  also gives ``kernel_matrix()`` and each normalizer ``fusable`` and
  ``row_norm(features)`` (:mod:`lnorm.rnn.norms`).
  """

  name: str
  dense: ModuleFactory
  input_norm: ModuleFactory
  hidden_norm: ModuleFactory
  cell_norm: ModuleFactory
  #: Whether ``input_norm`` adds its own bias. The GRU then drops the bias of its
  #: input projection (LN-GRU eq. 26-28 have only the LN biases); the LSTM keeps its
  #: gate bias b in every variant, as the paper's LN-LSTM adds b after the LNs.
  input_norm_has_bias: bool = False


class DropoutMasks(NamedTuple):
  """One sequence's dropout masks (0 or 1/(1 - rate)); None when nothing is dropped."""

  inputs: jax.Array | None  # [*batch, I], multiplies x before W_x at every step
  state: jax.Array | None  # [*batch, H], multiplies h before W_h at every step


def _check_rates(cell) -> None:
  for field in ("dropout", "recurrent_dropout"):
    rate = getattr(cell, field)
    if not 0.0 <= rate < 1.0:
      raise ValueError(f"{type(cell).__name__}.{field}={rate}: a dropout rate must be in "
                       "[0, 1).")


def _dropout_mask(cell: nn.Module, rate: float, shape, train: bool):
  if not train or rate == 0.0:
    return None
  keep = jax.random.bernoulli(cell.make_rng("dropout"), 1.0 - rate, shape)
  return keep.astype(jnp.float32) / (1.0 - rate)


def _dropout_masks(cell, input_shape, train: bool) -> DropoutMasks:
  batch = tuple(input_shape[:-1])
  return DropoutMasks(
      _dropout_mask(cell, cell.dropout, batch + tuple(input_shape[-1:]), train),
      _dropout_mask(cell, cell.recurrent_dropout, batch + (cell.hidden_size,), train))


def _apply_mask(x, mask, rate: float, train: bool, what: str):
  """``x * mask``; an error when the cell drops ``what`` in training but got no mask
  (a per-step draw would silently become a different kind of dropout)."""
  _check_mask_given(mask, rate, train, what)
  return x if mask is None else x * mask.astype(x.dtype)


def _check_mask_given(mask, rate: float, train: bool, what: str) -> None:
  if mask is None and train and rate > 0.0:
    raise ValueError(
        f"The cell drops {what} (rate {rate}) in training but was given no mask: draw "
        "the masks once per sequence with cell.dropout_masks(...) and pass them to "
        "every step, or run the cell through RecurrentLayer, which does.")


def _time_steps(x: jax.Array) -> jax.Array:
  return jnp.arange(x.shape[0], dtype=jnp.int32)


def _over_time(mask):
  """A per-sequence mask ``[B, I]`` for time-major inputs ``[T, B, I]``."""
  return None if mask is None else mask[None]


def _check_time_major(x: jax.Array, what: str) -> None:
  if x.ndim != 3:
    raise ValueError(f"{what}.project expects time-major inputs [T, B, features], got "
                     f"shape {x.shape}; RecurrentLayer does the transposition for you.")


class _Paths:
  """How ``RecurrentLayer`` may run a cell besides ``nn.scan`` of its ``__call__``: what
  the LSTM and the GRU share (each adds ``fused_scan``, the LSTM ``cudnn_scan``)."""

  @property
  def recurrence(self) -> str:
    """How ``RecurrentLayer`` runs this cell here: 'cudnn' (``cudnn_scan``), 'pallas'
    (``pallas_scan``), 'fused' (``fused_scan``) or 'step-by-step', its ``impl``
    resolved for this process's backend (:mod:`lnorm.rnn.implementation`)."""
    return _path(type(self), self.norms, self.impl, self.recurrent_dropout, self.fusable)

  def pallas_scan(self, carry, x, *, train: bool = False, lengths=None, mask=None,
                  dropout: DropoutMasks = DropoutMasks(None, None)):
    """``project``, then the recurrence through the Pallas step kernels
    (:mod:`lnorm.rnn.gpu_recurrence`), run to the longest of ``lengths [B]`` (None: all
    T): the values and gradients of scanning ``__call__``. ``x [T, B, I]`` is
    time-major, ``mask [T, B]`` marks the real steps, ``dropout`` holds the sequence's
    masks. Returns ``(carry at each sequence's end, hs [T, B, H])``."""
    projected = self.project(x, train=train, mask=mask, dropout_mask=dropout.inputs)
    _check_mask_given(dropout.state, self.recurrent_dropout, train, "its state")
    return gpu_recurrence.recurrence(self.kernel_steps, self.kernel_params(), projected,
                                     carry, lengths=lengths, recurrent_mask=dropout.state)


class LSTMCell(_Paths, nn.RNNCellBase):
  """LSTM with gates ordered (f, i, o, g) over one concatenated 4H projection:

  ``(f, i, o, g) = N_h(W_h h) + N_x(W_x x) + b``,
  ``c = sigmoid(f) c_prev + sigmoid(i) tanh(g)``, ``h = sigmoid(o) tanh(N_c(c))``,
  carrying the un-normalized c (docs/experiments.md sec. 4). The carry is ``(c, h)``.
  With dropout, x and h are multiplied by their per-sequence masks before W_x and W_h.
  """

  hidden_size: int
  norms: CellNorms
  forget_bias: float = 0.0
  kernel_init: Initializer = nn.initializers.lecun_normal()
  recurrent_kernel_init: Initializer = nn.initializers.orthogonal()
  carry_init: Initializer = nn.initializers.zeros
  dropout: float = 0.0  # Keras's dropout: on x, in training (see the module doc).
  recurrent_dropout: float = 0.0  # Keras's recurrent_dropout: on h before W_h.
  #: How RecurrentLayer runs the recurrence: 'auto', 'scan', 'cudnn' or 'pallas'
  #: (lnorm.rnn.implementation).
  impl: str = "auto"

  def setup(self):
    _check_rates(self)
    h4 = 4 * self.hidden_size
    self.input_proj = self.norms.dense(h4, use_bias=False, kernel_init=self.kernel_init,
                                       name="input_proj")
    self.input_norm = self.norms.input_norm(name="input_norm")
    self.hidden_proj = self.norms.dense(h4, use_bias=False,
                                        kernel_init=self.recurrent_kernel_init,
                                        name="hidden_proj")
    self.hidden_norm = self.norms.hidden_norm(name="hidden_norm")
    self.cell_norm = self.norms.cell_norm(name="cell_norm")
    self.bias = self.param("bias", self._bias_init, (h4,), jnp.float32)

  def _bias_init(self, key, shape, dtype=jnp.float32):
    del key
    # Gate order (f, i, o, g): only the forget block starts at forget_bias.
    return jnp.zeros(shape, dtype).at[:self.hidden_size].set(self.forget_bias)

  def dropout_masks(self, input_shape, *, train: bool = False) -> DropoutMasks:
    """The masks of one sequence of inputs ``[*batch, I]`` (a 'dropout' rng in
    training): draw them once, pass them to ``project`` and to every step."""
    return _dropout_masks(self, input_shape, train)

  def project(self, x, *, train: bool = False, mask=None, dropout_mask=None):
    """``N_x(W_x x) + b`` for all steps: ``[T, B, I] -> [T, B, 4H]``.

    ``dropout_mask``: ``[B, I]``, the sequence's ``dropout_masks().inputs``.
    """
    wx = self.input_norm(self._input_projection(x, train=train, dropout_mask=dropout_mask),
                         train=train, step=_time_steps(x), mask=mask)
    return wx + self.bias.astype(wx.dtype)[None, None, :]

  def _input_projection(self, x, *, train: bool, dropout_mask):
    """``W_x x`` for all steps (x dropped out first in training)."""
    _check_time_major(x, "LSTMCell")
    x = _apply_mask(x, _over_time(dropout_mask), self.dropout, train, "its inputs")
    return self.input_proj(x)

  def __call__(self, carry, inputs, *, train: bool = False, recurrent_mask=None):
    """One step; ``recurrent_mask``: ``[B, H]``, the sequence's
    ``dropout_masks().state``."""
    c, h = carry
    gates_x, step, mask = inputs
    f, i, o, g = self.gate_preactivations(h, gates_x, train=train, step=step, mask=mask,
                                          recurrent_mask=recurrent_mask)
    c = nn.sigmoid(f) * c + nn.sigmoid(i) * jnp.tanh(g)
    h = nn.sigmoid(o) * jnp.tanh(self.cell_norm(c, train=train, step=step, mask=mask))
    return (c, h), h

  def gate_preactivations(self, h, gates_x, *, train: bool = False, step, mask=None,
                          recurrent_mask=None):
    """The gates ``(f, i, o, g)`` before their nonlinearities, ``N_h(W_h h) + gates_x``
    with ``gates_x`` from ``project``: one step's (``h [B, H]``), or, for a probe of a
    whole sequence, every step's at once (time-major ``h [T, B, H]`` of the states
    each step read, ``step`` the ``[T]`` time indices, as ``project`` passes them)."""
    h_in = _apply_mask(h, recurrent_mask, self.recurrent_dropout, train, "its state")
    wh = self.hidden_norm(self.hidden_proj(h_in), train=train, step=step, mask=mask)
    return jnp.split(wh + gates_x, 4, axis=-1)

  #: The CellNorms fields whose normalizers the fused recurrence must run itself.
  fused_norms = ("input_norm", "hidden_norm", "cell_norm")
  #: Where the cell normalizes something, and where in the recurrence (what the step
  #: kernels must run; the input normalizer runs in ``project``).
  norm_places = ("input_norm", "hidden_norm", "cell_norm")
  kernel_places = ("hidden_norm", "cell_norm")
  kind = "LSTM"
  kernel_steps = LSTMSteps()

  @property
  def fusable(self) -> bool:
    """Whether ``fused_scan`` can run this cell: true when every normalizer is one the
    fused recurrence knows (LN, RMSNorm, ScaleNorm, LayerNorm-simple, the identity)."""
    return _fusable(type(self), self.norms)

  def fused_scan(self, carry, x, *, train: bool = False, mask=None,
                 dropout: DropoutMasks = DropoutMasks(None, None), unroll: int = 1):
    """``project`` and every step at once, through
    :func:`lnorm.rnn.fused.lstm_recurrence`: the values and gradients of scanning
    ``__call__``, computed faster.

    ``x [T, B, I]`` is time-major, ``mask [T, B]`` marks the real steps (None: all),
    ``dropout`` holds the sequence's masks. Returns ``(final carry, hs [T, B, H])``.
    The parameters must exist (after init).
    """
    _refuse_unfusable(self)
    gates_x = self._input_projection(x, train=train, dropout_mask=dropout.inputs)
    _check_mask_given(dropout.state, self.recurrent_dropout, train, "its state")
    h = self.hidden_size
    params = LSTMRecurrenceParams(
        self.hidden_proj.kernel_matrix(), self.bias, self.input_norm.row_norm(4 * h),
        self.hidden_norm.row_norm(4 * h), self.cell_norm.row_norm(h))
    return lstm_recurrence(params, gates_x, carry, step_mask=mask,
                           recurrent_mask=dropout.state, unroll=unroll)

  def kernel_params(self) -> LSTMKernelParams:
    """What the step kernels differentiate (``pallas_scan``); after init."""
    h = self.hidden_size
    return LSTMKernelParams(self.hidden_proj.kernel_matrix(),
                            kernel_norms.of_module(self.hidden_norm, 4 * h),
                            kernel_norms.of_module(self.cell_norm, h))

  def cudnn_scan(self, carry, x, *, train: bool = False, lengths=None,
                 dropout: DropoutMasks = DropoutMasks(None, None)):
    """The whole recurrence through cuDNN (:func:`lnorm.rnn.cudnn.lstm_layer`), with
    this cell's parameters: the values and gradients of ``fused_scan``.

    ``x [T, B, I]`` is time-major, ``lengths [B]`` the sequences' true lengths (None:
    all T), ``dropout`` the sequence's masks (the input's only: a cell that drops its
    state does not run here). Returns ``(final carry, hs [T, B, H])``.
    """
    x = _apply_mask(x, _over_time(dropout.inputs), self.dropout, train, "its inputs")
    weights = cudnn.pack_weights(self.input_proj.kernel_matrix(),
                                 self.hidden_proj.kernel_matrix(), self.bias)
    return cudnn.lstm_layer(weights, x, carry, lengths)

  @nn.nowrap
  def initialize_carry(self, rng, input_shape):
    """Zero ``(c, h)`` of shape ``[*batch, H]`` for inputs ``[*batch, features]``."""
    shape = tuple(input_shape[:-1]) + (self.hidden_size,)
    k1, k2 = jax.random.split(rng)
    return self.carry_init(k1, shape, jnp.float32), self.carry_init(k2, shape, jnp.float32)

  @staticmethod
  def output(carry):
    """The hidden state h of a carry."""
    return carry[1]

  @property
  def num_feature_axes(self) -> int:
    return 1


class GRUCell(_Paths, nn.RNNCellBase):
  """GRU of docs/experiments.md sec. 4 (LN paper eq. 26-28), not flax's cuDNN-style cell:

  ``(z, r) = N1(W_h h) + N2(W_x x)`` over the concatenated 2H,
  ``h~ = tanh(N3(W x) + sigmoid(r) * N4(U h))``,
  ``h = (1 - sigmoid(z)) h_prev + sigmoid(z) h~``. The carry is h.

  W_x and W share one input matmul ([I, 3H]) and W_h and U one recurrent matmul
  ([H, 3H]); N1..N4 are four separate normalizers. Without a biased input
  normalizer the input projection carries the biases b (gates) and b_x (candidate).
  With dropout, x and h are multiplied by their per-sequence masks before the input
  and the recurrent matmul; the update ``(1 - z) h_prev`` uses the undropped h.
  """

  hidden_size: int
  norms: CellNorms
  kernel_init: Initializer = nn.initializers.lecun_normal()
  recurrent_kernel_init: Initializer = nn.initializers.orthogonal()
  carry_init: Initializer = nn.initializers.zeros
  dropout: float = 0.0  # Keras's dropout: on x, in training (see the module doc).
  recurrent_dropout: float = 0.0  # Keras's recurrent_dropout: on h before W_h, U.
  #: How RecurrentLayer runs the recurrence: 'auto', 'scan' or 'pallas'
  #: (lnorm.rnn.implementation; cuDNN runs no GRU).
  impl: str = "auto"

  def setup(self):
    _check_rates(self)
    h3 = 3 * self.hidden_size
    self.input_proj = self.norms.dense(h3, use_bias=not self.norms.input_norm_has_bias,
                                       kernel_init=self.kernel_init, name="input_proj")
    self.input_gate_norm = self.norms.input_norm(name="input_gate_norm")
    self.input_candidate_norm = self.norms.input_norm(name="input_candidate_norm")
    self.hidden_proj = self.norms.dense(h3, use_bias=False,
                                        kernel_init=self.recurrent_kernel_init,
                                        name="hidden_proj")
    self.hidden_gate_norm = self.norms.hidden_norm(name="hidden_gate_norm")
    self.hidden_candidate_norm = self.norms.hidden_norm(name="hidden_candidate_norm")

  def dropout_masks(self, input_shape, *, train: bool = False) -> DropoutMasks:
    """The masks of one sequence of inputs ``[*batch, I]`` (see LSTMCell)."""
    return _dropout_masks(self, input_shape, train)

  def project(self, x, *, train: bool = False, mask=None, dropout_mask=None):
    """``[N2(W_x x), N3(W x)]`` for all steps: ``[T, B, I] -> [T, B, 3H]``."""
    _check_time_major(x, "GRUCell")
    x = _apply_mask(x, _over_time(dropout_mask), self.dropout, train, "its inputs")
    steps = _time_steps(x)
    wx = self.input_proj(x)
    gates, candidate = jnp.split(wx, [2 * self.hidden_size], axis=-1)
    gates = self.input_gate_norm(gates, train=train, step=steps, mask=mask)
    candidate = self.input_candidate_norm(candidate, train=train, step=steps, mask=mask)
    return jnp.concatenate([gates, candidate], axis=-1)

  def __call__(self, carry, inputs, *, train: bool = False, recurrent_mask=None):
    h = carry
    projected, step, mask = inputs
    gates_x, candidate_x = jnp.split(projected, [2 * self.hidden_size], axis=-1)
    wh = self.hidden_proj(
        _apply_mask(h, recurrent_mask, self.recurrent_dropout, train, "its state"))
    gates_h, candidate_h = jnp.split(wh, [2 * self.hidden_size], axis=-1)
    gates_h = self.hidden_gate_norm(gates_h, train=train, step=step, mask=mask)
    candidate_h = self.hidden_candidate_norm(candidate_h, train=train, step=step,
                                             mask=mask)
    z, r = jnp.split(gates_h + gates_x, 2, axis=-1)
    candidate = jnp.tanh(candidate_x + nn.sigmoid(r) * candidate_h)
    z = nn.sigmoid(z)
    h = (1.0 - z) * h + z * candidate
    return h, h

  #: The CellNorms fields whose normalizers the fused recurrence must run itself (the
  #: input normalizers run in ``project``, outside it).
  fused_norms = ("hidden_norm",)
  #: Where the cell normalizes something, and where in the recurrence (what the step
  #: kernels must run).
  norm_places = ("input_norm", "hidden_norm")
  kernel_places = ("hidden_norm",)
  kind = "GRU"
  kernel_steps = GRUSteps()

  @property
  def fusable(self) -> bool:
    """Whether ``fused_scan`` can run this cell: true when its recurrent normalizers
    are ones the fused recurrence knows (as ``LSTMCell.fusable``)."""
    return _fusable(type(self), self.norms)

  def fused_scan(self, carry, x, *, train: bool = False, mask=None,
                 dropout: DropoutMasks = DropoutMasks(None, None), unroll: int = 1):
    """``project`` and every step at once, through
    :func:`lnorm.rnn.fused_gru.gru_recurrence`: the values and gradients of scanning
    ``__call__``, computed faster. Arguments and result as ``LSTMCell.fused_scan``."""
    _refuse_unfusable(self)
    projected = self.project(x, train=train, mask=mask, dropout_mask=dropout.inputs)
    _check_mask_given(dropout.state, self.recurrent_dropout, train, "its state")
    h = self.hidden_size
    params = GRURecurrenceParams(self.hidden_proj.kernel_matrix(),
                                 self.hidden_gate_norm.row_norm(2 * h),
                                 self.hidden_candidate_norm.row_norm(h))
    return gru_recurrence(params, projected, carry, step_mask=mask,
                          recurrent_mask=dropout.state, unroll=unroll)

  def kernel_params(self) -> GRUKernelParams:
    """What the step kernels differentiate (``pallas_scan``); after init."""
    h = self.hidden_size
    return GRUKernelParams(self.hidden_proj.kernel_matrix(),
                           kernel_norms.of_module(self.hidden_gate_norm, 2 * h),
                           kernel_norms.of_module(self.hidden_candidate_norm, h))

  @nn.nowrap
  def initialize_carry(self, rng, input_shape):
    shape = tuple(input_shape[:-1]) + (self.hidden_size,)
    return self.carry_init(rng, shape, jnp.float32)

  @staticmethod
  def output(carry):
    return carry

  @property
  def num_feature_axes(self) -> int:
    return 1


CellFactory = Callable[..., Any]


def _module_class(factory):
  """The class a module factory (a class or a ``functools.partial`` of one) builds."""
  while isinstance(factory, functools.partial):
    factory = factory.func
  return factory


def _fusable(cell_cls, norms: CellNorms) -> bool:
  # A class attribute, so that the answer is known before any module is built; a
  # normalizer that does not declare it (DyT, a user's) is not fusable.
  return all(getattr(_module_class(getattr(norms, field)), "fusable", False)
             for field in cell_cls.fused_norms)


def _refuse_unfusable(cell) -> None:
  if not cell.fusable:
    names = ", ".join(sorted({_module_class(getattr(cell.norms, f)).__name__
                              for f in type(cell).fused_norms}))
    raise ValueError(
        f"{type(cell).__name__}.fused_scan runs LN, RMSNorm and their special cases "
        f"ScaleNorm and LayerNorm-simple, or no normalizer, not "
        f"variant {cell.norms.name!r} ({names}): run the cell step by step "
        "(RecurrentLayer does so by itself for such a cell).")


def _resolve(cell_cls, norms: CellNorms, impl: str, recurrent_dropout: float) -> str:
  """'cudnn', 'pallas' or 'scan': how a cell with these options runs here."""
  place_class = lambda place: _module_class(getattr(norms, place))
  normalized = [p for p in cell_cls.norm_places if place_class(p) is not StepIdentity]
  unrunnable = [f"{p} ({place_class(p).__name__})" for p in cell_cls.kernel_places
                if not kernel_norms.runs_in_kernels(place_class(p))]
  return implementation.resolve(cell_cls.kind, impl, norms.name, normalized, unrunnable,
                                recurrent_dropout)


def _path(cell_cls, norms: CellNorms, impl: str, recurrent_dropout: float,
          fusable: bool) -> str:
  resolved = _resolve(cell_cls, norms, impl, recurrent_dropout)
  if resolved == "pallas" or (resolved == "cudnn" and fusable):
    return resolved
  return "fused" if fusable else "step-by-step"


def recurrence_path(cell_factory: CellFactory) -> str:
  """'cudnn', 'pallas', 'fused' or 'step-by-step': how :class:`lnorm.rnn.RecurrentLayer`
  (with its default ``fused=True``) runs the cells ``cell_factory`` builds, in this
  process (:mod:`lnorm.rnn.implementation`); an ``impl`` that cannot run them is
  refused in one line."""
  cell_cls = _module_class(cell_factory)
  options = cell_factory.keywords
  norms = options["norms"]
  return _path(cell_cls, norms, options.get("impl", cell_cls.impl),
               options.get("recurrent_dropout", cell_cls.recurrent_dropout),
               _fusable(cell_cls, norms))


def bind_norms(cell_cls, norms: CellNorms, **options) -> CellFactory:
  """``cell_factory(hidden_size, name=...)`` for ``cell_cls`` with ``norms``."""
  return functools.partial(cell_cls, norms=norms, **options)
