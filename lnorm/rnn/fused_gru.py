"""The GRU recurrence as one function with a hand-written backward pass.

The GRU's counterpart of :mod:`lnorm.rnn.fused`, on the same pattern:
:class:`lnorm.rnn.RecurrentLayer` runs a GRU whose recurrent normalizers are LN,
RMSNorm or the identity (the variants ``none``, ``ln``, ``rms``, ``prms`` and ``wn``)
through :func:`gru_recurrence` instead of differentiating ``nn.scan`` of the cell:

* **The weight gradient after the loop.** The backward loop emits each step's
  gradient with respect to ``[W_h h, U h]``; dW_h and dU are one
  ``[H, T·B] @ [T·B, 3H]`` contraction afterwards, and the norms' gains and biases
  a sum over the batch at every step (on rows in cache), instead of a K = batch
  matmul and an add of a whole [H, 3H] array at every step.
* **One gate per read**: each step reads z, r and the candidate's input half of the
  ``[T, B, 3H]`` projection with their own ``dynamic_slice`` (see
  :mod:`lnorm.rnn.fused`).
* **One recurrent matmul per step each way**: W_h and U are one ``[H, 3H]`` matrix,
  transposed once per sequence for the backward pass.

The equations are those of :class:`lnorm.rnn.GRUCell` (LN paper eq. 26-28,
docs/experiments.md sec. 4), with the reset gate applied to the normalized U h:
``(z, r) = N1(W_h h) + gates_x``, ``h~ = tanh(candidate_x + σ(r) N4(U h))``,
``h = (1 - σ(z)) h_prev + σ(z) h~``, where ``[gates_x, candidate_x]`` is the cell's
``project`` (``[N2(W_x x), N3(W x)]``, biases included), computed outside the loop.
Padded steps keep the previous state. ``tests/test_rnn_fused_gru.py`` checks values
and gradients against ``nn.scan`` of the cell, and ``tests/test_rnn_cells.py``
against NumPy loops of the equations.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from lnorm.rnn.fused import (
    RowNorm, _gate, _row_norm_forward, _row_norm_input_gradient, _scale_and_shift,
    _select, add_step_gradients, contract_steps_and_batch, zero_gradients)


class GRURecurrenceParams(NamedTuple):
  """What the recurrence differentiates: ``[W_h, U]`` and two norms (None: none)."""

  hidden_kernel: jax.Array  # [H, 3H]: W_h (z, r) then U (candidate)
  gate_norm: RowNorm | None  # N1, on W_h h over the 2H of (z, r)
  candidate_norm: RowNorm | None  # N4, on U h


def gru_recurrence(params: GRURecurrenceParams, projected: jax.Array, h0: jax.Array, *,
                   step_mask: jax.Array | None = None,
                   recurrent_mask: jax.Array | None = None, unroll: int = 1):
  """Runs the GRU over time-major ``projected [T, B, 3H]`` from the state ``h0 [B, H]``.

  ``projected`` is the cell's ``project``: the input halves of (z, r) and of the
  candidate, normalized and with their biases. ``step_mask [T, B]`` (true at real
  steps) keeps the state through padded steps; ``recurrent_mask [B, H]`` multiplies h
  before W_h and U at every step (the per-sequence recurrent dropout; the update
  ``(1 - z) h_prev`` uses the undropped h). Returns ``(h_T, hs [T, B, H])``.
  Differentiable in ``params``, ``projected`` and ``h0``.
  """
  f32 = lambda tree: jax.tree.map(lambda a: a.astype(jnp.float32), tree)
  return _recurrence(int(unroll), params, f32(projected), f32(h0), step_mask,
                     recurrent_mask)


def _forward(unroll: int, params: GRURecurrenceParams, projected, h0, step_mask,
             recurrent_mask):
  """The loop over time; returns h_T and what the backward pass reads."""
  width = h0.shape[-1]
  w = params.hidden_kernel

  def step(h_prev, t):
    h_in = h_prev if recurrent_mask is None else h_prev * recurrent_mask
    wh = jnp.dot(h_in, w, preferred_element_type=jnp.float32)
    gates_h, candidate_h = wh[:, :2 * width], wh[:, 2 * width:]
    saved = {}
    if params.gate_norm is not None:
      gates_h, saved["ghat"], saved["g_rstd"] = _row_norm_forward(gates_h, params.gate_norm)
    if params.candidate_norm is not None:
      candidate_h, saved["chat"], saved["c_rstd"] = _row_norm_forward(
          candidate_h, params.candidate_norm)
    else:
      saved["candidate_h"] = candidate_h  # What the reset gate multiplied.
    z = jax.nn.sigmoid(gates_h[:, :width] + _gate(projected, t, 0, width))
    r = jax.nn.sigmoid(gates_h[:, width:] + _gate(projected, t, 1, width))
    candidate = jnp.tanh(_gate(projected, t, 2, width) + r * candidate_h)
    h = (1.0 - z) * h_prev + z * candidate
    h = _select(None if step_mask is None else step_mask[t], h, h_prev)
    saved.update(acts=jnp.concatenate([z, r, candidate], axis=-1), h=h)
    return h, saved

  return jax.lax.scan(step, h0, jnp.arange(projected.shape[0]), unroll=unroll)


def _candidate_h(params: GRURecurrenceParams, saved, t):
  """N4(U h) of step t: stored without a norm, recomputed from its normalized values."""
  if params.candidate_norm is None:
    return saved["candidate_h"][t]
  return _scale_and_shift(saved["chat"][t], params.candidate_norm)


def _backward(unroll: int, params: GRURecurrenceParams, h0, step_mask, recurrent_mask,
              saved, d_final, d_hs):
  width = h0.shape[-1]
  w_t = params.hidden_kernel.T  # Transposed once, not at every step.
  acts = saved["acts"]
  # The state each step started from (a padded step's output is its predecessor's).
  h_prev_all = jnp.concatenate([h0[None], saved["h"][:-1]], axis=0)

  def step(carry, t):
    dh, sums = carry
    dh = dh + d_hs[t]
    mask_t = None if step_mask is None else step_mask[t]
    if mask_t is not None:
      # A padded step passed its state through unchanged: its gradient too.
      keep = mask_t[:, None]
      dh_through, dh = jnp.where(keep, 0.0, dh), jnp.where(keep, dh, 0.0)
    z, r, candidate = (_gate(acts, t, k, width) for k in range(3))
    d_candidate_in = dh * z * (1.0 - candidate * candidate)
    dz = dh * (candidate - h_prev_all[t]) * z * (1.0 - z)
    dr = d_candidate_in * _candidate_h(params, saved, t) * r * (1.0 - r)
    out = {"d_projected": jnp.concatenate([dz, dr, d_candidate_in], axis=-1)}
    d_gates_h = jnp.concatenate([dz, dr], axis=-1)
    d_candidate_h = d_candidate_in * r
    if params.gate_norm is not None:
      ghat = saved["ghat"][t]
      sums = (add_step_gradients(sums[0], d_gates_h, ghat), sums[1])
      d_gates_h = _row_norm_input_gradient(d_gates_h, ghat, saved["g_rstd"][t],
                                           params.gate_norm)
    if params.candidate_norm is not None:
      chat = saved["chat"][t]
      sums = (sums[0], add_step_gradients(sums[1], d_candidate_h, chat))
      d_candidate_h = _row_norm_input_gradient(d_candidate_h, chat, saved["c_rstd"][t],
                                               params.candidate_norm)
    d_wh = jnp.concatenate([d_gates_h, d_candidate_h], axis=-1)
    out["d_wh"] = d_wh
    dh_prev = jnp.dot(d_wh, w_t, preferred_element_type=jnp.float32)
    if recurrent_mask is not None:
      dh_prev = dh_prev * recurrent_mask
    dh_prev = dh_prev + dh * (1.0 - z)
    if mask_t is not None:
      dh_prev = dh_prev + dh_through
    return (dh_prev, sums), out

  # The norms' gains and biases: summed over the batch at every step.
  sums = (zero_gradients(params.gate_norm), zero_gradients(params.candidate_norm))
  (d_h0, (d_gate_norm, d_candidate_norm)), out = jax.lax.scan(
      step, (d_final, sums), jnp.arange(acts.shape[0]), reverse=True, unroll=unroll)
  d_projected = out["d_projected"]

  # The parameter gradients, each one contraction over all steps and examples.
  h_in = h_prev_all if recurrent_mask is None else h_prev_all * recurrent_mask[None]
  d_kernel = contract_steps_and_batch(h_in, out["d_wh"])
  d_params = GRURecurrenceParams(d_kernel, d_gate_norm, d_candidate_norm)
  return d_params, d_projected, d_h0


# --- The custom VJP -------------------------------------------------------------------


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _recurrence(unroll, params, projected, h0, step_mask, recurrent_mask):
  final, saved = _forward(unroll, params, projected, h0, step_mask, recurrent_mask)
  return final, saved["h"]


def _recurrence_fwd(unroll, params, projected, h0, step_mask, recurrent_mask):
  final, saved = _forward(unroll, params, projected, h0, step_mask, recurrent_mask)
  # The backward pass reads the activations, not the projection itself.
  residuals = (params, h0, step_mask, recurrent_mask, saved)
  return (final, saved["h"]), residuals


def _recurrence_bwd(unroll, residuals, cotangents):
  params, h0, step_mask, recurrent_mask, saved = residuals
  d_final, d_hs = cotangents
  d_params, d_projected, d_h0 = _backward(unroll, params, h0, step_mask, recurrent_mask,
                                          saved, d_final, d_hs)
  return d_params, d_projected, d_h0, None, None


_recurrence.defvjp(_recurrence_fwd, _recurrence_bwd)
