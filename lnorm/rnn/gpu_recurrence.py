"""The normalized LSTM and GRU recurrences built for a GPU: a loop that holds only what
depends on the previous state, run to the batch's longest sequence.

:class:`lnorm.rnn.RecurrentLayer` runs a cell here when its ``impl`` resolves to
``pallas`` (:mod:`lnorm.rnn.implementation`). Each iteration of the loop over time is
two launches forward and two backward:

* the recurrent matmul ``h W_h`` (``dz W_hᵀ`` backward), XLA's;
* one step kernel for everything after it (:mod:`lnorm.rnn.pallas_steps`): the
  recurrent term's normalizer, the gates, the LSTM's cell normalizer, the new state,
  and the writes of what the backward pass reads; backward, the gradients of all of
  that, written as the per-step gradients of the projected inputs.

Everything else is outside the loop, each one pass over all time steps: the input
projection ``W_x x``, its normalizer and the bias (the cell's ``project``, before the
loop, whose backward JAX runs after it), the weight gradient ``dW_h`` (one contraction
over steps and examples) and the recurrent normalizers' gain, bias and alpha gradients
(sums of the saved per-step values, :func:`lnorm.rnn.kernel_norms.parameter_gradients`).
On a CPU, :mod:`lnorm.rnn.fused` keeps the input normalizer and those sums inside its
loop instead, on rows that are in cache; this is the layout for a device whose time
goes to launches, not to memory traffic.

**The loop runs to the longest sequence.** Its trip count is ``max(lengths)``, a traced
value (``lax.fori_loop`` with a dynamic bound is a while loop), forward and backward: a
batch of passages padded to 500 steps whose longest holds 36 runs 36 steps. The outputs
past each sequence's end are what the padded recurrence gives (the state at its last
step), and their gradients reach that state.

The equations are :class:`lnorm.rnn.LSTMCell`'s and :class:`lnorm.rnn.GRUCell`'s;
``tests/test_rnn_gpu.py`` holds the values and gradients equal to ``nn.scan`` of the
cells, with the kernels in Pallas's interpreter.
"""

from __future__ import annotations

import functools
from typing import Any, Protocol

import jax
import jax.numpy as jnp


class StepKernels(Protocol):
  """A cell's steps as the loop calls them (:mod:`lnorm.rnn.pallas_steps`).

  The state is a tuple of ``[B, H]`` arrays whose last is h (the LSTM's ``(c, h)``, the
  GRU's ``(h,)``); its cotangent in the backward loop the same, with the last holding
  the part of dh that does not pass through ``W_h`` (a padded step's, or the GRU's
  ``(1 - z) dh``). ``params`` is a NamedTuple whose ``hidden_kernel`` is W_h.

  ``forward_step`` takes ``z = h_in W_h`` and returns the new state, the next matmul's
  ``h_in`` (h, times the recurrent dropout mask) and ``saved`` (``[T, B, ...]`` arrays
  of ``saved_shapes``, ``hs`` among them) with its step written. ``backward_step``
  takes ``dh_recurrent``, the previous iteration's ``dz W_hᵀ``, and returns the state's
  cotangent, its own ``dz`` for the next matmul and ``gradients`` (of
  ``gradient_shapes``, ``d_projected`` among them) with its step written.
  ``parameter_gradients`` gives ``params``' cotangent after the loop, from what was
  saved and ``h_in [T, B, H]``, what W_h multiplied at each step.
  """

  def state(self, carry) -> tuple: ...
  def carry(self, state: tuple) -> Any: ...
  def saved_shapes(self, params, steps: int, batch: int, width: int) -> dict: ...
  def forward_step(self, params, z, projected, step, lengths, state, recurrent_mask,
                   saved: dict) -> tuple[tuple, jax.Array, dict]: ...
  def gradient_shapes(self, params, steps: int, batch: int, width: int) -> dict: ...
  def backward_step(self, params, dh_recurrent, step, lengths, d_state, d_hs,
                    recurrent_mask, saved: dict, h_prev: jax.Array,
                    gradients: dict) -> tuple[tuple, jax.Array, dict]: ...
  def parameter_gradients(self, params, saved: dict, gradients: dict,
                          h_in: jax.Array): ...


def recurrence(steps: StepKernels, params, projected: jax.Array, carry, *,
               lengths: jax.Array | None = None,
               recurrent_mask: jax.Array | None = None):
  """Runs a cell's recurrence over time-major ``projected [T, B, kH]`` (the cell's
  ``project``: W_x x normalized, with its biases) from ``carry``.

  ``lengths [B]`` are the sequences' true lengths (None: all T); ``recurrent_mask
  [B, H]`` multiplies h before W_h at every step (the per-sequence recurrent dropout).
  Returns ``(carry at each sequence's end, hs [T, B, H])``, where ``hs[t]`` past a
  sequence's end holds its last state. Differentiable in ``params``, ``projected`` and
  ``carry``.
  """
  f32 = lambda tree: jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), tree)
  if lengths is not None:
    lengths = jnp.asarray(lengths, jnp.int32)
  return _recurrence(steps, params, f32(projected), f32(carry), lengths, recurrent_mask)


def _trip_count(lengths, steps: int):
  """The steps the loop runs: the longest sequence's, or all of them (a static count)."""
  if lengths is None:
    return steps
  return jnp.clip(jnp.max(lengths), 0, steps)


def _lengths_or_all(lengths, batch: int, steps: int) -> jax.Array:
  return jnp.full((batch,), steps, jnp.int32) if lengths is None else lengths


def _zeros(shapes: dict) -> dict:
  return {name: jnp.zeros(shape, jnp.float32) for name, shape in shapes.items()}


def _forward(steps: StepKernels, params, projected, carry, lengths, recurrent_mask):
  """The loop over time: ``(final state, hs, saved, trip count)``."""
  n_steps, batch = projected.shape[:2]
  state = steps.state(carry)
  width = state[-1].shape[-1]
  n = _trip_count(lengths, n_steps)
  all_lengths = _lengths_or_all(lengths, batch, n_steps)
  w = params.hidden_kernel

  def step(t, loop):
    state, h_in, saved = loop
    z = jnp.dot(h_in, w, preferred_element_type=jnp.float32)
    return steps.forward_step(params, z, projected, t, all_lengths, state,
                              recurrent_mask, saved)

  h0 = state[-1]
  h_in = h0 if recurrent_mask is None else h0 * recurrent_mask
  saved = _zeros(steps.saved_shapes(params, n_steps, batch, width))
  state, _, saved = jax.lax.fori_loop(0, n, step, (state, h_in, saved))
  hs = saved["hs"]
  if lengths is not None:
    # Past the longest sequence every sequence holds its last state.
    hs = jnp.where(jnp.arange(n_steps)[:, None, None] < n, hs, state[-1][None])
  return state, hs, saved, n


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _recurrence(steps, params, projected, carry, lengths, recurrent_mask):
  state, hs, _, _ = _forward(steps, params, projected, carry, lengths, recurrent_mask)
  return steps.carry(state), hs


def _recurrence_fwd(steps, params, projected, carry, lengths, recurrent_mask):
  state, hs, saved, n = _forward(steps, params, projected, carry, lengths,
                                 recurrent_mask)
  h0 = steps.state(carry)[-1]
  residuals = (params, h0, lengths, recurrent_mask, saved, n)
  return (steps.carry(state), hs), residuals


def _recurrence_bwd(steps, residuals, cotangents):
  params, h0, lengths, recurrent_mask, saved, n = residuals
  d_carry, d_hs = cotangents
  n_steps, batch, width = d_hs.shape
  d_state = steps.state(d_carry)
  if lengths is not None:
    # The outputs past the longest sequence are its final state: their gradients too.
    past = jnp.arange(n_steps)[:, None, None] >= n
    d_state = (*d_state[:-1], d_state[-1] + jnp.sum(jnp.where(past, d_hs, 0.0), axis=0))
  # The state each step started from (a padded step's output is its predecessor's).
  h_prev = jnp.concatenate([h0[None], saved["hs"][:-1]], axis=0)
  all_lengths = _lengths_or_all(lengths, batch, n_steps)
  w_t = params.hidden_kernel.T  # Transposed once, not at every step.

  def step(i, loop):
    d_state, dh_recurrent, gradients = loop
    d_state, dz, gradients = steps.backward_step(
        params, dh_recurrent, n - 1 - i, all_lengths, d_state, d_hs, recurrent_mask,
        saved, h_prev, gradients)
    return d_state, jnp.dot(dz, w_t, preferred_element_type=jnp.float32), gradients

  gradients = _zeros(steps.gradient_shapes(params, n_steps, batch, width))
  d_state, dh_recurrent, gradients = jax.lax.fori_loop(
      0, n, step, (d_state, jnp.zeros_like(h0), gradients))
  # The first step's matmul term, which the loop leaves for a step that is not there.
  if recurrent_mask is not None:
    dh_recurrent = dh_recurrent * recurrent_mask
  d_state = (*d_state[:-1], d_state[-1] + dh_recurrent)

  h_in = h_prev if recurrent_mask is None else h_prev * recurrent_mask[None]
  d_params = steps.parameter_gradients(params, saved, gradients, h_in)
  return d_params, gradients["d_projected"], steps.carry(d_state), None, None


_recurrence.defvjp(_recurrence_fwd, _recurrence_bwd)
