"""The LSTM's and the GRU's step kernels, forward and backward, written with Pallas.

Each kernel does everything of one time step that follows the recurrent matmul
(:mod:`lnorm.rnn.gpu_recurrence` runs the loop): forward, the recurrent term's
normalizer, the gates, the LSTM's cell normalizer and the new state, and the writes of
what the backward pass reads; backward, the gradients of all of that (the backward
pass is written out, not derived from the kernel). A program holds a block of rows
(:class:`lnorm.rnn.kernel_launch.Block`), each row as one tile per gate, so that a
normalizer over the LSTM's 4H gates sums its statistics over four tiles
(:mod:`lnorm.rnn.kernel_norms`).

The equations are :class:`lnorm.rnn.LSTMCell`'s, gates (f, i, o, g),

  ``(f, i, o, g) = N_h(W_h h) + projected``, ``c = σ(f) c_prev + σ(i) tanh(g)``,
  ``h = σ(o) tanh(N_c(c))``,

and :class:`lnorm.rnn.GRUCell`'s (LN paper eq. 26-28),

  ``(z, r) = N1(W_h h) + projected_zr``, ``h~ = tanh(projected_h + σ(r) N4(U h))``,
  ``h = (1 - σ(z)) h_prev + σ(z) h~``,

where ``projected`` is the cell's ``project`` (the input projection normalized, with the
biases). A step past a sequence's end keeps the state, and passes its gradient through.

What a forward step saves (``[T, B, ...]``, written at its step): the outputs ``hs``,
the gates' activations, the LSTM's c_prev and tanh of its normalized c, and for each
recurrent normalizer what its backward pass reads (:func:`lnorm.rnn.kernel_norms.
forward`). A backward step writes the gradients of the projected inputs
(``d_projected``), of the recurrent matmul's output (``dz``, for dW_h after the loop,
when it differs from ``d_projected``) and of each normalizer's output (for its gain
sums after the loop).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp

from lnorm.rnn import kernel_norms as kn
from lnorm.rnn.fused import contract_steps_and_batch
from lnorm.rnn.kernel_launch import Block, Launch, launch


def _tiles(block: Block, parts: int) -> kn.Tiles:
  """A row of ``parts`` tiles of H features (the LSTM's 4 gates, the GRU's 2)."""
  width = block.width
  return kn.Tiles(parts * width, tuple(k * width for k in range(parts)), block.valid,
                  block.columns)


def _norm_parameters(block: Block, norm, tiles: kn.Tiles) -> kn.TileParameters:
  return kn.tile_parameters(norm, block.load_vector, tiles.offsets)


def _steps_running(block: Block, step, lengths_ref) -> jax.Array:
  """``[rows, 1]``: true at the rows whose sequence has not ended before ``step``."""
  return jnp.logical_and(block.real_rows, step < block.load_per_row(lengths_ref))


def _keep(running, new, old):
  return jnp.where(running, new, old)


def _save_norm(block: Block, outs, name: str, norm, saved, rstd, step) -> None:
  """Writes what ``norm``'s backward pass reads, tile by tile, at ``step``."""
  if norm is None:
    return
  for k, value in enumerate(saved):
    block.store(outs[f"{name}_saved"], value, k * block.width, step=step)
  if rstd is not None:
    block.store_per_row(outs[f"{name}_rstd"], rstd, step=step)


def _load_norm(block: Block, ins, name: str, norm, parts: int, step):
  """``(saved tiles, rstd)`` of ``norm`` at ``step``, as :func:`_save_norm` wrote them."""
  saved = [block.load(ins[f"{name}_saved"], k * block.width, step=step)
           for k in range(parts)]
  rstd = (block.load_per_row(ins[f"{name}_rstd"], step=step)
          if kn.has_statistics(norm) else None)
  return saved, rstd


def _norm_shapes(name: str, norm, steps: int, batch: int, features: int) -> dict:
  if norm is None:
    return {}
  shapes = {f"{name}_saved": (steps, batch, features)}
  if kn.has_statistics(norm):
    shapes[f"{name}_rstd"] = (steps, batch)
  return shapes


def _out(shape) -> jax.ShapeDtypeStruct:
  return jax.ShapeDtypeStruct(shape, jnp.float32)


def _read_backward(saved: dict) -> dict:
  """What a backward step reads of what the forward steps saved: all but the outputs
  (``hs``: the GRU reads them shifted by a step, as ``h_prev``)."""
  return {k: v for k, v in saved.items() if k != "hs"}


# --- The LSTM ---------------------------------------------------------------------------


class LSTMKernelParams(NamedTuple):
  """What the LSTM's recurrence differentiates: W_h and the two recurrent norms."""

  hidden_kernel: jax.Array  # [H, 4H]
  hidden_norm: kn.KernelNorm  # on W_h h, over all 4H gates
  cell_norm: kn.KernelNorm  # on c, before its tanh


def _lstm_forward_body(block: Block, ins, outs):
  width, step = block.width, ins["step"][0]
  running = _steps_running(block, step, ins["lengths"])
  hidden_norm, cell_norm = ins["hidden_norm"], ins["cell_norm"]
  gates = _tiles(block, 4)
  z = [block.load(ins["z"], k * width) for k in range(4)]
  z, z_saved, z_rstd = kn.forward(hidden_norm, z, _norm_parameters(block, hidden_norm, gates),
                                  gates)
  pre = [z[k] + block.load(ins["projected"], k * width, step=step) for k in range(4)]
  f, i, o = (jax.nn.sigmoid(a) for a in pre[:3])
  g = jnp.tanh(pre[3])
  c_prev, h_prev = block.load(ins["c"]), block.load(ins["h"])
  c = f * c_prev + i * g
  one = _tiles(block, 1)
  (c_in,), c_saved, c_rstd = kn.forward(cell_norm, [c], _norm_parameters(block, cell_norm, one),
                                        one)
  tanh_c = jnp.tanh(c_in)
  c, h = _keep(running, c, c_prev), _keep(running, o * tanh_c, h_prev)

  block.store(outs["c"], c)
  block.store(outs["h"], h)
  if ins["recurrent_mask"] is not None:
    block.store(outs["h_in"], h * block.load(ins["recurrent_mask"]))
  block.store(outs["hs"], h, step=step)
  block.store(outs["c_prev"], c_prev, step=step)
  block.store(outs["tanh_c"], tanh_c, step=step)
  for k, a in enumerate((f, i, o, g)):
    block.store(outs["acts"], a, k * width, step=step)
  _save_norm(block, outs, "hidden", hidden_norm, z_saved, z_rstd, step)
  _save_norm(block, outs, "cell", cell_norm, c_saved, c_rstd, step)


def _lstm_backward_body(block: Block, ins, outs):
  width, step = block.width, ins["step"][0]
  running = _steps_running(block, step, ins["lengths"])
  hidden_norm, cell_norm = ins["hidden_norm"], ins["cell_norm"]
  dh_recurrent = block.load(ins["dh_recurrent"])
  if ins["recurrent_mask"] is not None:
    dh_recurrent = dh_recurrent * block.load(ins["recurrent_mask"])
  dh = block.load(ins["dh"]) + dh_recurrent + block.load(ins["d_hs"], step=step)
  dc = block.load(ins["dc"])
  f, i, o, g = (block.load(ins["acts"], k * width, step=step) for k in range(4))
  tanh_c = block.load(ins["tanh_c"], step=step)

  d_tanh_in = jnp.where(running, dh * o * (1.0 - tanh_c * tanh_c), 0.0)
  if cell_norm is not None:
    one = _tiles(block, 1)
    saved, rstd = _load_norm(block, ins, "cell", cell_norm, 1, step)
    block.store(outs["cell_dy"], d_tanh_in, step=step)
    (d_tanh_in,) = kn.backward(cell_norm, [d_tanh_in], saved, rstd,
                               _norm_parameters(block, cell_norm, one), one)
  dc_step = dc + d_tanh_in
  c_prev = block.load(ins["c_prev"], step=step)
  da = [dc_step * c_prev * f * (1.0 - f), dc_step * g * i * (1.0 - i),
        dh * tanh_c * o * (1.0 - o), dc_step * i * (1.0 - g * g)]
  da = [jnp.where(running, a, 0.0) for a in da]
  for k, a in enumerate(da):
    block.store(outs["d_projected"], a, k * width, step=step)

  gates = _tiles(block, 4)
  dz = da
  if hidden_norm is not None:
    saved, rstd = _load_norm(block, ins, "hidden", hidden_norm, 4, step)
    dz = kn.backward(hidden_norm, da, saved, rstd,
                     _norm_parameters(block, hidden_norm, gates), gates)
    for k, a in enumerate(dz):
      block.store(outs["dz_all"], a, k * width, step=step)
  for k, a in enumerate(dz):
    block.store(outs["dz"], a, k * width)
  block.store(outs["dc"], _keep(running, dc_step * f, dc))
  block.store(outs["dh"], _keep(running, 0.0, dh))


@dataclasses.dataclass(frozen=True)
class LSTMSteps:
  """The LSTM's step kernels, as :func:`lnorm.rnn.gpu_recurrence.recurrence` runs them."""

  def state(self, carry):
    return tuple(carry)

  def carry(self, state):
    return tuple(state)

  def saved_shapes(self, params: LSTMKernelParams, steps, batch, width):
    state = (steps, batch, width)
    return {"hs": state, "c_prev": state, "tanh_c": state, "acts": (steps, batch, 4 * width),
            **_norm_shapes("hidden", params.hidden_norm, steps, batch, 4 * width),
            **_norm_shapes("cell", params.cell_norm, steps, batch, width)}

  def forward_step(self, params: LSTMKernelParams, z, projected, step, lengths, state,
                   recurrent_mask, saved):
    c, h = state
    batch, width = h.shape
    outputs = {"c": _out(h.shape), "h": _out(h.shape)}
    if recurrent_mask is not None:
      outputs["h_in"] = _out(h.shape)
    new, saved = launch(
        _lstm_forward_body, Launch(batch, width), name="lstm_step_forward",
        inputs={"step": step, "lengths": lengths, "z": z, "projected": projected, "c": c,
                "h": h, "recurrent_mask": recurrent_mask,
                "hidden_norm": params.hidden_norm, "cell_norm": params.cell_norm},
        outputs=outputs, updated=saved)
    return (new["c"], new["h"]), new.get("h_in", new["h"]), saved

  def gradient_shapes(self, params: LSTMKernelParams, steps, batch, width):
    shapes = {"d_projected": (steps, batch, 4 * width)}
    if params.hidden_norm is not None:
      shapes["dz_all"] = (steps, batch, 4 * width)
    if params.cell_norm is not None:
      shapes["cell_dy"] = (steps, batch, width)
    return shapes

  def backward_step(self, params: LSTMKernelParams, dh_recurrent, step, lengths, d_state,
                    d_hs, recurrent_mask, saved, h_prev, gradients):
    del h_prev  # The LSTM's backward pass reads c_prev, which it saved.
    dc, dh = d_state
    batch, width = dh.shape
    new, gradients = launch(
        _lstm_backward_body, Launch(batch, width), name="lstm_step_backward",
        inputs={"step": step, "lengths": lengths, "dh_recurrent": dh_recurrent, "dh": dh,
                "dc": dc, "d_hs": d_hs, "recurrent_mask": recurrent_mask,
                "hidden_norm": params.hidden_norm, "cell_norm": params.cell_norm,
                **_read_backward(saved)},
        outputs={"dc": _out(dc.shape), "dh": _out(dh.shape), "dz": _out((batch, 4 * width))},
        updated=gradients)
    return (new["dc"], new["dh"]), new["dz"], gradients

  def parameter_gradients(self, params: LSTMKernelParams, saved, gradients, h_in):
    d_gates = gradients["d_projected"]
    dz = gradients.get("dz_all", d_gates)
    return LSTMKernelParams(
        contract_steps_and_batch(h_in, dz),
        kn.parameter_gradients(params.hidden_norm, d_gates, saved.get("hidden_saved")),
        kn.parameter_gradients(params.cell_norm, gradients.get("cell_dy"),
                               saved.get("cell_saved")))


# --- The GRU ----------------------------------------------------------------------------


class GRUKernelParams(NamedTuple):
  """What the GRU's recurrence differentiates: ``[W_h, U]`` and the two recurrent norms."""

  hidden_kernel: jax.Array  # [H, 3H]: W_h (z, r), then U (candidate)
  gate_norm: kn.KernelNorm  # N1, on W_h h over the 2H of (z, r)
  candidate_norm: kn.KernelNorm  # N4, on U h


def _gru_forward_body(block: Block, ins, outs):
  width, step = block.width, ins["step"][0]
  running = _steps_running(block, step, ins["lengths"])
  gate_norm, candidate_norm = ins["gate_norm"], ins["candidate_norm"]
  gates, one = _tiles(block, 2), _tiles(block, 1)
  wh = [block.load(ins["z"], k * width) for k in range(3)]
  gates_h, g_saved, g_rstd = kn.forward(gate_norm, wh[:2],
                                        _norm_parameters(block, gate_norm, gates), gates)
  (candidate_h,), c_saved, c_rstd = kn.forward(
      candidate_norm, wh[2:], _norm_parameters(block, candidate_norm, one), one)
  x = [block.load(ins["projected"], k * width, step=step) for k in range(3)]
  z = jax.nn.sigmoid(gates_h[0] + x[0])
  r = jax.nn.sigmoid(gates_h[1] + x[1])
  candidate = jnp.tanh(x[2] + r * candidate_h)
  h_prev = block.load(ins["h"])
  h = _keep(running, (1.0 - z) * h_prev + z * candidate, h_prev)

  block.store(outs["h"], h)
  if ins["recurrent_mask"] is not None:
    block.store(outs["h_in"], h * block.load(ins["recurrent_mask"]))
  block.store(outs["hs"], h, step=step)
  for k, a in enumerate((z, r, candidate)):
    block.store(outs["acts"], a, k * width, step=step)
  _save_norm(block, outs, "gate", gate_norm, g_saved, g_rstd, step)
  if candidate_norm is None:
    block.store(outs["candidate_h"], candidate_h, step=step)  # What the reset gate multiplied.
  _save_norm(block, outs, "candidate", candidate_norm, c_saved, c_rstd, step)


def _gru_backward_body(block: Block, ins, outs):
  width, step = block.width, ins["step"][0]
  running = _steps_running(block, step, ins["lengths"])
  gate_norm, candidate_norm = ins["gate_norm"], ins["candidate_norm"]
  gates, one = _tiles(block, 2), _tiles(block, 1)
  dh_recurrent = block.load(ins["dh_recurrent"])
  if ins["recurrent_mask"] is not None:
    dh_recurrent = dh_recurrent * block.load(ins["recurrent_mask"])
  dh = block.load(ins["dh"]) + dh_recurrent + block.load(ins["d_hs"], step=step)
  z, r, candidate = (block.load(ins["acts"], k * width, step=step) for k in range(3))
  h_prev = block.load(ins["h_prev"], step=step)

  if candidate_norm is None:
    candidate_h = block.load(ins["candidate_h"], step=step)
  else:
    c_saved, c_rstd = _load_norm(block, ins, "candidate", candidate_norm, 1, step)
    c_params = _norm_parameters(block, candidate_norm, one)
    (candidate_h,) = kn.output_from_saved(candidate_norm, c_saved, c_params)
  d_candidate_in = dh * z * (1.0 - candidate * candidate)
  d_gates = [dh * (candidate - h_prev) * z * (1.0 - z),
             d_candidate_in * candidate_h * r * (1.0 - r)]
  d_gates = [jnp.where(running, a, 0.0) for a in d_gates]
  d_candidate_in = jnp.where(running, d_candidate_in, 0.0)
  for k, a in enumerate((*d_gates, d_candidate_in)):
    block.store(outs["d_projected"], a, k * width, step=step)

  if gate_norm is not None:
    g_saved, g_rstd = _load_norm(block, ins, "gate", gate_norm, 2, step)
    d_gates = kn.backward(gate_norm, d_gates, g_saved, g_rstd,
                          _norm_parameters(block, gate_norm, gates), gates)
  d_candidate_h = d_candidate_in * r
  if candidate_norm is not None:
    block.store(outs["candidate_dy"], d_candidate_h, step=step)
    (d_candidate_h,) = kn.backward(candidate_norm, [d_candidate_h], c_saved, c_rstd,
                                   c_params, one)
  for k, a in enumerate((*d_gates, d_candidate_h)):
    block.store(outs["dz_all"], a, k * width, step=step)
    block.store(outs["dz"], a, k * width)
  block.store(outs["dh"], _keep(running, dh * (1.0 - z), dh))


@dataclasses.dataclass(frozen=True)
class GRUSteps:
  """The GRU's step kernels, as :func:`lnorm.rnn.gpu_recurrence.recurrence` runs them."""

  def state(self, carry):
    return (carry,)

  def carry(self, state):
    return state[0]

  def saved_shapes(self, params: GRUKernelParams, steps, batch, width):
    state = (steps, batch, width)
    shapes = {"hs": state, "acts": (steps, batch, 3 * width),
              **_norm_shapes("gate", params.gate_norm, steps, batch, 2 * width),
              **_norm_shapes("candidate", params.candidate_norm, steps, batch, width)}
    if params.candidate_norm is None:
      shapes["candidate_h"] = state
    return shapes

  def forward_step(self, params: GRUKernelParams, z, projected, step, lengths, state,
                   recurrent_mask, saved):
    (h,) = state
    batch, width = h.shape
    outputs = {"h": _out(h.shape)}
    if recurrent_mask is not None:
      outputs["h_in"] = _out(h.shape)
    new, saved = launch(
        _gru_forward_body, Launch(batch, width), name="gru_step_forward",
        inputs={"step": step, "lengths": lengths, "z": z, "projected": projected, "h": h,
                "recurrent_mask": recurrent_mask, "gate_norm": params.gate_norm,
                "candidate_norm": params.candidate_norm},
        outputs=outputs, updated=saved)
    return (new["h"],), new.get("h_in", new["h"]), saved

  def gradient_shapes(self, params: GRUKernelParams, steps, batch, width):
    shapes = {"d_projected": (steps, batch, 3 * width), "dz_all": (steps, batch, 3 * width)}
    if params.candidate_norm is not None:
      shapes["candidate_dy"] = (steps, batch, width)
    return shapes

  def backward_step(self, params: GRUKernelParams, dh_recurrent, step, lengths, d_state,
                    d_hs, recurrent_mask, saved, h_prev, gradients):
    (dh,) = d_state
    batch, width = dh.shape
    new, gradients = launch(
        _gru_backward_body, Launch(batch, width), name="gru_step_backward",
        inputs={"step": step, "lengths": lengths, "dh_recurrent": dh_recurrent, "dh": dh,
                "d_hs": d_hs, "h_prev": h_prev, "recurrent_mask": recurrent_mask,
                "gate_norm": params.gate_norm, "candidate_norm": params.candidate_norm,
                **_read_backward(saved)},
        outputs={"dh": _out(dh.shape), "dz": _out((batch, 3 * width))},
        updated=gradients)
    return (new["dh"],), new["dz"], gradients

  def parameter_gradients(self, params: GRUKernelParams, saved, gradients, h_in):
    width = h_in.shape[-1]
    d_gates = gradients["d_projected"][..., :2 * width]
    return GRUKernelParams(
        contract_steps_and_batch(h_in, gradients["dz_all"]),
        kn.parameter_gradients(params.gate_norm, d_gates, saved.get("gate_saved")),
        kn.parameter_gradients(params.candidate_norm, gradients.get("candidate_dy"),
                               saved.get("candidate_saved")))
