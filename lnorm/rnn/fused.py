"""The LSTM recurrence as one function with a hand-written backward pass.

:class:`lnorm.rnn.RecurrentLayer` runs most cells step by step under ``nn.scan`` and
lets JAX differentiate the loop. For the LSTM whose recurrent normalizers are LN,
RMSNorm or the identity (the variants ``none``, ``ln``, ``ln_cell``, ``rms``,
``prms``, ``rms_cell``, ``prms_cell`` and ``wn``) it calls :func:`lstm_recurrence`
instead, which computes the same thing faster on CPU (the GRU's counterpart is
:mod:`lnorm.rnn.fused_gru`):

* **Weight gradients after the loop.** Autodiff of a scan adds ``h_tᵀ dz_t`` into
  dW_h at every step: a matmul with K = batch (32) plus an add of a whole [H, 4H]
  array, 100 times. Here the backward loop only emits dz_t, and dW_h is one
  ``[H, T·B] @ [T·B, 4H]`` matmul afterwards. The bias and the norms' gains and
  biases are summed over the batch at every step instead, on rows in cache: a sum
  over all steps afterwards read two ``[T, B, F]`` arrays from memory again.
* **One gate per read.** XLA:CPU runs an elementwise fusion several times slower per
  element when it slices the gates out of a ``[B, 4H]`` row that it also indexes by
  the loop counter (``xs[t]`` then ``split``). Each step therefore reads every gate
  with its own ``dynamic_slice`` of the ``[T, B, 4H]`` arrays, which XLA fuses well.
* **The input norm inside the loop.** Each step normalizes its row of ``W_x x``
  while the row is in cache; the backward pass recomputes the normalized values from
  ``W_x x`` and the saved statistics. The two recurrent norms keep their normalized
  values and 1/std, so each LN's backward pass has two row reductions (an RMSNorm's
  one, and no mean to subtract).

The equations are those of :class:`lnorm.rnn.LSTMCell` (docs/experiments.md sec. 4):
``(f, i, o, g) = N_h(W_h h) + gates_x + b``, ``c = σ(f) c_prev + σ(i) tanh(g)``,
``h = σ(o) tanh(N_c(c))``, where ``gates_x`` holds ``N_x(W_x x)``. The bias is added
inside the loop, where it costs nothing, rather than in a pass over ``[T, B, 4H]``.
Padded steps keep the previous state. ``tests/test_rnn_cells.py`` checks the values
and gradients against NumPy loops of these equations, and ``tests/test_rnn_fused.py``
against ``nn.scan`` of the cell.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from lnorm.normalization import functional as F
# Defined beside the row statistics, where each normalizer's ``row_norm`` builds one.
from lnorm.normalization.functional import RowNorm  # pylint: disable=unused-import


class LSTMRecurrenceParams(NamedTuple):
  """What the recurrence differentiates: W_h, b and the three norms (None: none)."""

  hidden_kernel: jax.Array  # [H, 4H]
  gate_bias: jax.Array  # [4H], b: added to every step's gates
  input_norm: RowNorm | None  # on W_x x, over all 4H gates
  hidden_norm: RowNorm | None  # on W_h h, over all 4H gates
  cell_norm: RowNorm | None  # on c, before its tanh


def lstm_recurrence(params: LSTMRecurrenceParams, gates_x: jax.Array, carry, *,
                    step_mask: jax.Array | None = None,
                    recurrent_mask: jax.Array | None = None, unroll: int = 1):
  """Runs the LSTM over time-major ``gates_x [T, B, 4H]`` from ``carry = (c, h)``.

  ``gates_x`` is the input projection ``W_x x``, before its normalizer
  (``params.input_norm``) and the gate bias (``params.gate_bias``).

  ``step_mask [T, B]`` (true at real steps) keeps the state through padded steps;
  ``recurrent_mask [B, H]`` multiplies h before W_h at every step (the per-sequence
  recurrent dropout). Returns ``((c_T, h_T), hs [T, B, H])``, where ``hs[t]`` is the
  state after step t (the previous one at a padded step). Differentiable in
  ``params``, ``gates_x`` and ``carry``.
  """
  # The loop computes in float32; autodiff of the casts returns each cotangent in its
  # input's dtype.
  f32 = lambda tree: jax.tree.map(lambda a: a.astype(jnp.float32), tree)
  return _recurrence(int(unroll), params, f32(gates_x), f32(carry), step_mask,
                     recurrent_mask)


# --- One step, forward and backward ---------------------------------------------------


def _gate(a: jax.Array, t, k: int, width: int) -> jax.Array:
  """Gate k of step t of ``a [T, B, kH]``, as ``[B, H]``, read by its own slice."""
  return _columns(a, t, k * width, width)


def _columns(a: jax.Array, t, start: int, width: int) -> jax.Array:
  """Columns ``start:start + width`` of step t of ``a [T, B, F]``, as ``[B, width]``."""
  # One dynamic_slice for both indices: a static slice of ``a[t]`` is the slow form.
  index = (t, jnp.zeros_like(t), jnp.asarray(start, t.dtype))
  return jax.lax.dynamic_slice(a, index, (1, a.shape[1], width))[0]


def _row_norm_forward(x, norm: RowNorm):
  """(output, normalized x, 1/std), statistics in float32 (LN's with two passes)."""
  mean, rstd = F.row_statistics(x, norm.eps, norm.stats)
  xhat = F.normalize_rows(x, mean, rstd)
  return _scale_and_shift(xhat, norm), xhat, rstd


def _scale_and_shift(xhat, norm: RowNorm):
  y = xhat * norm.scale[None]
  return y if norm.bias is None else y + norm.bias[None]


def _row_norm_input_gradient(dy, xhat, rstd, norm: RowNorm):
  return F.row_norm_input_gradient(dy, xhat, rstd, norm.scale, norm.stats)


def contract_steps_and_batch(a, b):
  """``sum over t, b of a[t, b]ᵀ b[t, b]``: ``[T, B, I] x [T, B, F] -> [I, F]``, the
  weight gradient of a matrix applied at every step.

  On CPU as one matmul over merged rows: XLA:CPU ran the ``dot_general`` over two
  contracting axes 15-30% slower (34 against 49 ms for the GRU's [400, 3200] x
  [3200, 1200], docs/performance.md). Other backends keep the two axes, so that a
  batch axis sharded over devices stays where it is (see lnorm.normalization.Dense).
  The choice is made per platform at lowering (``lax.platform_dependent``), not by the
  backend of the process that traces: a step exported on a CPU host for
  ``platforms=("cuda", "tpu")`` gets the accelerators' form (``lnorm check``).
  """
  def merged_rows(a, b):
    return jnp.dot(a.reshape(-1, a.shape[-1]).T, b.reshape(-1, b.shape[-1]),
                   preferred_element_type=jnp.float32)

  def two_axes(a, b):
    return jax.lax.dot_general(a, b, (((0, 1), (0, 1)), ((), ())),
                               preferred_element_type=jnp.float32)

  return jax.lax.platform_dependent(a, b, cpu=merged_rows, default=two_axes)


def zero_gradients(norm: RowNorm | None) -> RowNorm | None:
  """Zero gain and bias gradients of ``norm`` (None: none), to accumulate step by step."""
  return None if norm is None else jax.tree.map(jnp.zeros_like, norm)


def add_step_gradients(sums: RowNorm | None, dy, xhat) -> RowNorm | None:
  """``sums`` plus one step's gain and bias gradients, summed over the batch: on
  rows that are in cache, where a sum over all steps afterwards reads two
  ``[T, B, F]`` arrays from memory again."""
  if sums is None:
    return None
  d_bias = None if sums.bias is None else sums.bias + jnp.sum(dy, axis=0)
  return sums.replace(scale=sums.scale + jnp.sum(dy * xhat, axis=0), bias=d_bias)


def _select(mask_t, new, old):
  return new if mask_t is None else jnp.where(mask_t[:, None], new, old)


def _split_params(params: LSTMRecurrenceParams):
  """Per gate (f, i, o, g): the bias plus the input norm's bias, and its gain."""
  per_gate = lambda v: [part[None] for part in jnp.split(v, 4)]
  norm = params.input_norm
  if norm is None:
    return per_gate(params.gate_bias), None
  bias = params.gate_bias if norm.bias is None else params.gate_bias + norm.bias
  return per_gate(bias), per_gate(norm.scale)


def _forward(unroll: int, params: LSTMRecurrenceParams, gates_x, carry, step_mask,
             recurrent_mask):
  """The loop over time; returns the final carry, hs and the backward's residuals."""
  c0, h0 = carry
  width = c0.shape[-1]
  w = params.hidden_kernel
  bias, input_gain = _split_params(params)

  def step(carry, t):
    c_prev, h_prev = carry
    h_in = h_prev if recurrent_mask is None else h_prev * recurrent_mask
    z = jnp.dot(h_in, w, preferred_element_type=jnp.float32)
    # What the backward pass reads besides hs: the cell state this step started from.
    saved = {"c_prev": c_prev}
    if params.hidden_norm is not None:
      z, saved["zhat"], saved["z_rstd"] = _row_norm_forward(z, params.hidden_norm)
    # z is [B, 4H] and computed in this step, so slicing it is cheap; gates_x is
    # read gate by gate (module docstring).
    z_gates = jnp.split(z, 4, axis=-1)
    x_gates = [_gate(gates_x, t, k, width) for k in range(4)]
    if params.input_norm is not None:
      # The statistics of the whole row (of its head for pRMSNorm); the normalization
      # gate by gate.
      x_mean, x_rstd = _input_statistics(gates_x, t, params.input_norm, width)
      saved.update(x_rstd=x_rstd)
      if x_mean is not None:
        saved.update(x_mean=x_mean)
      x_gates = [F.normalize_rows(x, x_mean, x_rstd * gain)
                 for x, gain in zip(x_gates, input_gain)]
    pre = [z_gates[k] + x_gates[k] + bias[k] for k in range(4)]
    f, i, o = (jax.nn.sigmoid(a) for a in pre[:3])
    g = jnp.tanh(pre[3])
    c = f * c_prev + i * g
    c_in = c
    if params.cell_norm is not None:
      c_in, saved["chat"], saved["c_rstd"] = _row_norm_forward(c, params.cell_norm)
    tanh_c = jnp.tanh(c_in)
    h = o * tanh_c
    mask_t = None if step_mask is None else step_mask[t]
    c, h = _select(mask_t, c, c_prev), _select(mask_t, h, h_prev)
    saved.update(acts=jnp.concatenate([f, i, o, g], axis=-1), tanh_c=tanh_c, h=h)
    return (c, h), saved

  steps = jnp.arange(gates_x.shape[0])
  final, saved = jax.lax.scan(step, (c0, h0), steps, unroll=unroll)
  return final, saved


def _input_statistics(gates_x, t, norm: RowNorm, width: int):
  """The input norm's statistics of step t's row of ``gates_x``; pRMSNorm reads only
  the row's head, as one slice when it lies within the first gate."""
  size = norm.stats.size
  if size is not None and size <= width:
    return F.row_statistics(_columns(gates_x, t, 0, size), norm.eps, F.rms_rows())
  return F.row_statistics(gates_x[t], norm.eps, norm.stats)


def _input_xhat(gates_x, saved):
  """The input norm's normalized values, recomputed rather than stored."""
  return F.normalize_rows(gates_x, saved.get("x_mean"), saved["x_rstd"])


def _backward(unroll: int, params: LSTMRecurrenceParams, gates_x, h0, step_mask,
              recurrent_mask, saved, d_final, d_hs):
  width = d_final[0].shape[-1]
  w_t = params.hidden_kernel.T  # Transposed once, not at every step.
  acts = saved["acts"]

  def step(carry, t):
    dc, dh, sums = carry
    dh = dh + d_hs[t]
    mask_t = None if step_mask is None else step_mask[t]
    if mask_t is not None:
      # A padded step passed its state through unchanged: its gradient too.
      keep = mask_t[:, None]
      dc_through, dh_through = jnp.where(keep, 0.0, dc), jnp.where(keep, 0.0, dh)
      dc, dh = jnp.where(keep, dc, 0.0), jnp.where(keep, dh, 0.0)
    f, i, o, g = (_gate(acts, t, k, width) for k in range(4))
    tanh_c = saved["tanh_c"][t]
    d_tanh_in = dh * o * (1.0 - tanh_c * tanh_c)
    out = {}
    sums = dict(sums)
    if params.cell_norm is not None:
      chat = saved["chat"][t]
      sums["cell_norm"] = add_step_gradients(sums["cell_norm"], d_tanh_in, chat)
      d_tanh_in = _row_norm_input_gradient(d_tanh_in, chat, saved["c_rstd"][t],
                                           params.cell_norm)
    dc = dc + d_tanh_in
    da = jnp.concatenate([dc * saved["c_prev"][t] * f * (1.0 - f),
                          dc * g * i * (1.0 - i),
                          dh * tanh_c * o * (1.0 - o),
                          dc * i * (1.0 - g * g)], axis=-1)
    out["d_gates"] = da
    sums["gate_bias"] = sums["gate_bias"] + jnp.sum(da, axis=0)
    if params.input_norm is not None:
      x_saved = {k: saved[k][t] for k in ("x_mean", "x_rstd") if k in saved}
      xhat = _input_xhat(gates_x[t], x_saved)
      sums["input_norm"] = add_step_gradients(sums["input_norm"], da, xhat)
      out["d_gates_x"] = _row_norm_input_gradient(da, xhat, x_saved["x_rstd"],
                                                  params.input_norm)
    dz = da
    if params.hidden_norm is not None:
      zhat = saved["zhat"][t]
      sums["hidden_norm"] = add_step_gradients(sums["hidden_norm"], da, zhat)
      dz = _row_norm_input_gradient(da, zhat, saved["z_rstd"][t], params.hidden_norm)
      out["dz"] = dz
    dh_prev = jnp.dot(dz, w_t, preferred_element_type=jnp.float32)
    if recurrent_mask is not None:
      dh_prev = dh_prev * recurrent_mask
    dc_prev = dc * f
    if mask_t is not None:
      dc_prev, dh_prev = dc_prev + dc_through, dh_prev + dh_through
    return (dc_prev, dh_prev, sums), out

  # The bias and the norms' gains and biases: summed over the batch at every step.
  sums = {name: zero_gradients(getattr(params, name))
          for name in ("input_norm", "hidden_norm", "cell_norm")}
  sums["gate_bias"] = jnp.zeros_like(params.gate_bias)
  steps = jnp.arange(acts.shape[0])
  (*d_carry0, sums), out = jax.lax.scan(step, (*d_final, sums), steps, reverse=True,
                                        unroll=unroll)
  d_gates = out["d_gates"]

  # The parameter gradients, each one contraction over all steps and examples.
  # What W_h multiplied at each step: the state before it (a padded step's output is
  # its predecessor's), with the sequence's recurrent dropout.
  h_in = jnp.concatenate([h0[None], saved["h"][:-1]], axis=0)
  if recurrent_mask is not None:
    h_in = h_in * recurrent_mask[None]
  d_kernel = contract_steps_and_batch(h_in, out.get("dz", d_gates))
  d_params = LSTMRecurrenceParams(d_kernel, **sums)
  return d_params, out.get("d_gates_x", d_gates), tuple(d_carry0)


# --- The custom VJP -------------------------------------------------------------------


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _recurrence(unroll, params, gates_x, carry, step_mask, recurrent_mask):
  final, saved = _forward(unroll, params, gates_x, carry, step_mask, recurrent_mask)
  return final, saved["h"]


def _recurrence_fwd(unroll, params, gates_x, carry, step_mask, recurrent_mask):
  final, saved = _forward(unroll, params, gates_x, carry, step_mask, recurrent_mask)
  # gates_x only for the input norm, whose normalized values are recomputed from it.
  kept_gates_x = gates_x if params.input_norm is not None else None
  residuals = (params, kept_gates_x, carry[1], step_mask, recurrent_mask, saved)
  return (final, saved["h"]), residuals


def _recurrence_bwd(unroll, residuals, cotangents):
  params, gates_x, h0, step_mask, recurrent_mask, saved = residuals
  d_final, d_hs = cotangents
  d_params, d_gates_x, d_carry = _backward(unroll, params, gates_x, h0, step_mask,
                                           recurrent_mask, saved, d_final, d_hs)
  return d_params, d_gates_x, d_carry, None, None


_recurrence.defvjp(_recurrence_fwd, _recurrence_bwd)
