"""Run a recurrent cell over a batch of right-padded sequences.

:class:`RecurrentLayer` takes batch-major ``x [B, T, I]`` and ``lengths [B]`` and
works time-major inside. Per layer and direction it calls the cell's ``project``
once for all time steps (one matmul outside the recurrence) and scans only the
recurrent half: through the cell's own ``fused_scan`` when it has one (the LSTM and
the GRU without recurrent BN, :mod:`lnorm.rnn.fused` and :mod:`lnorm.rnn.fused_gru`),
else ``__call__`` under ``nn.scan``. On an NVIDIA GPU the plain LSTM runs through cuDNN
instead (``cudnn_scan``, :mod:`lnorm.rnn.cudnn`), projection and recurrence at once,
and the normalized cells through the Pallas step kernels (``pallas_scan``,
:mod:`lnorm.rnn.gpu_recurrence`), to the batch's longest sequence; the cell's ``impl``
chooses (:mod:`lnorm.rnn.implementation`).
Padded steps keep the previous state, so the scan's final carry is the state at
each sequence's true length; padded outputs are zero. A cell with
``dropout``/``recurrent_dropout`` gets its two masks drawn once per sequence, here,
outside the scan: every step reuses them.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp


def sequence_mask(lengths: jax.Array, max_len: int) -> jax.Array:
  """``[B, max_len]`` bool, true at the real (unpadded) steps of each sequence.

  Use it for losses (``sum(loss * mask) / sum(mask)``), attention (set masked
  logits to a large negative number) and mean pooling.
  """
  lengths = jnp.asarray(lengths)
  if lengths.ndim != 1:
    raise ValueError(f"lengths must have shape [batch], got {lengths.shape}.")
  return jnp.arange(max_len)[None, :] < lengths[:, None]


def masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
  """Mean of ``x [B, T, F]`` over the real steps of ``mask [B, T]``: ``[B, F]``."""
  m = mask.astype(x.dtype)[..., None]
  return jnp.sum(x * m, axis=1) / jnp.maximum(jnp.sum(m, axis=1), 1)


def flip_sequences(x_tm: jax.Array, lengths: jax.Array) -> jax.Array:
  """Reverses each sequence of time-major ``x [T, B, ...]`` within its length.

  Padding stays at the end: ``[a, b, c, pad] -> [c, b, a, pad]``. Its own inverse.
  """
  t = jnp.arange(x_tm.shape[0])[:, None]
  idx = jnp.where(t < lengths[None, :], lengths[None, :] - 1 - t, t)  # [T, B]
  idx = idx.reshape(idx.shape + (1,) * (x_tm.ndim - 2))
  return jnp.take_along_axis(x_tm, idx, axis=0)


class RNNOutput(NamedTuple):
  #: ``[B, T, H * directions]``: the last layer's hidden states, zero at padding
  #: (forward and backward states concatenated when bidirectional).
  outputs: jax.Array
  #: ``[B, H * directions]``: the last layer's h at each sequence's true length
  #: (for the backward direction: after reading the whole sequence backwards).
  final_hidden: jax.Array
  #: Per layer, per direction, the cell's full carry at the true length
  #: (``(c, h)`` for an LSTM, ``h`` for a GRU).
  final_carries: tuple
  #: ``[B, T]`` bool sequence mask (see :func:`sequence_mask`).
  mask: jax.Array


def _scan_step(cell, carry, xs, *, train: bool, keep_padded_state: bool,
               recurrent_mask):
  projected, step, mask = xs
  new_carry, y = cell(carry, (projected, step, mask), train=train,
                      recurrent_mask=recurrent_mask)
  if keep_padded_state:
    keep = mask[:, None]
    new_carry = jax.tree.map(lambda new, old: jnp.where(keep, new, old), new_carry, carry)
  return new_carry, y


class RecurrentLayer(nn.Module):
  """One or more recurrent layers over padded sequences.

  Attributes:
    cell: ``factory(hidden_size, name=...)``, e.g. ``make_lstm_cell('ln')``.
    hidden_size: H, per direction.
    reverse: read the sequences right to left (within their lengths).
    bidirectional: a forward and a backward cell per layer, outputs concatenated.
    learned_init: learn the initial carry (one vector per carry leaf, shared by
      the batch) instead of starting from zeros.
    num_layers: stacked layers; layer l+1 reads layer l's outputs.
    dropout: dropout rate on the outputs of every layer but the last, in training
      (needs a 'dropout' rng), a fresh mask per step. The per-sequence dropout of
      the inputs and states is the cell's (``make_lstm_cell(..., dropout=,
      recurrent_dropout=)``).
    unroll: time steps per scan iteration (``lax.scan(unroll=...)``).
    fused: run a cell the way its ``cell.recurrence`` says: through its
      ``fused_scan`` (the LSTM and the GRU with LN, RMSNorm, ScaleNorm,
      LayerNorm-simple or no recurrent normalizer), whose hand-written backward pass
      is faster than differentiating ``nn.scan``, or, where its ``impl`` resolves to
      them, ``cudnn_scan`` or ``pallas_scan``. False always scans ``__call__``; all
      give the same values and gradients.
  """

  cell: Callable[..., nn.RNNCellBase]
  hidden_size: int
  reverse: bool = False
  bidirectional: bool = False
  learned_init: bool = False
  num_layers: int = 1
  dropout: float = 0.0
  unroll: int = 1
  fused: bool = True

  @nn.compact
  def __call__(self, x, lengths=None, *, train: bool = False,
               initial_carry: Any = None) -> RNNOutput:
    """``x [B, T, I]``, ``lengths [B]`` (default: all T) -> :class:`RNNOutput`.

    ``initial_carry`` (one carry for every layer and direction, e.g. a decoder
    conditioned on an encoder state) overrides the zero or learned initial state.
    """
    if x.ndim != 3:
      raise ValueError(f"RecurrentLayer expects x of shape [batch, time, features], "
                       f"got {x.shape}; add a batch axis with x[None].")
    batch, steps = x.shape[:2]
    padded = lengths is not None
    if padded:
      lengths = jnp.asarray(lengths, jnp.int32)
      if lengths.shape != (batch,):
        raise ValueError(f"lengths must have shape [batch]=({batch},), got "
                         f"{lengths.shape}.")
    else:
      lengths = jnp.full((batch,), steps, jnp.int32)
    mask = sequence_mask(lengths, steps)
    mask_tm = mask.T
    stats_mutable = self.is_mutable_collection("batch_stats")
    directions = (False, True) if self.bidirectional else (self.reverse,)

    h_tm = jnp.swapaxes(x, 0, 1)
    finals = []
    for layer in range(self.num_layers):
      if layer > 0 and self.dropout > 0:
        h_tm = nn.Dropout(self.dropout, name=f"dropout_{layer}")(
            h_tm, deterministic=not train)
      outs, layer_finals = [], []
      for backward in directions:
        name = f"layer_{layer}" + ("_bwd" if backward else "")
        cell = self.cell(self.hidden_size, name=name)
        inputs = flip_sequences(h_tm, lengths) if backward and padded else (
            h_tm[::-1] if backward else h_tm)
        carry = self._initial_carry(cell, name, inputs.shape[1:], initial_carry)
        dropout = cell.dropout_masks(inputs.shape[1:], train=train)
        # Initialization scans: it creates the parameters the other paths read.
        path = (cell.recurrence if self.fused and not self.is_initializing()
                else "step-by-step")
        if path == "cudnn":
          carry, ys = cell.cudnn_scan(carry, inputs, train=train,
                                      lengths=lengths if padded else None,
                                      dropout=dropout)
        elif path == "pallas":
          carry, ys = cell.pallas_scan(carry, inputs, train=train,
                                       lengths=lengths if padded else None,
                                       mask=mask_tm if padded else None, dropout=dropout)
        elif path == "fused":
          carry, ys = cell.fused_scan(carry, inputs, train=train,
                                      mask=mask_tm if padded else None, dropout=dropout,
                                      unroll=self.unroll)
        else:
          carry, ys = self._scan(cell, carry, inputs, mask_tm if padded else None,
                                 dropout, train=train, stats_mutable=stats_mutable)
        if backward:
          ys = flip_sequences(ys, lengths) if padded else ys[::-1]
        outs.append(ys)
        layer_finals.append(carry)
      h_tm = outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=-1)
      if padded:
        h_tm = jnp.where(mask_tm[..., None], h_tm, jnp.zeros((), h_tm.dtype))
      finals.append(tuple(layer_finals))

    final_hidden = jnp.concatenate(
        [type(cell).output(c) for c in finals[-1]], axis=-1)
    return RNNOutput(jnp.swapaxes(h_tm, 0, 1), final_hidden, tuple(finals), mask)

  def _scan(self, cell, carry, inputs, mask, dropout, *, train: bool,
            stats_mutable: bool):
    """``cell.project``, then ``cell.__call__`` step by step under ``nn.scan``: any
    cell, any normalizer. ``mask [T, B]``: the real steps (None: all)."""
    padded = mask is not None
    projected = cell.project(inputs, train=train, mask=mask, dropout_mask=dropout.inputs)
    steps, batch = projected.shape[:2]
    step_mask = mask if padded else jnp.ones((steps, batch), bool)
    if self.is_initializing():
      # Variables carried through the scan (recurrent BN statistics) must exist
      # before it starts: create them with one step outside the loop.
      cell(carry, (projected[0], jnp.int32(0), step_mask[0]), train=train,
           recurrent_mask=dropout.state)
    recurrent_mask = dropout.state
    scan = nn.scan(
        # The state mask is closed over: one per sequence, the same at every step.
        lambda c, carry, xs: _scan_step(c, carry, xs, train=train,
                                        keep_padded_state=padded,
                                        recurrent_mask=recurrent_mask),
        # Statistics being updated travel with the carry; read-only ones
        # (inference) are broadcast like the parameters.
        variable_broadcast=["params"] + ([] if stats_mutable else ["batch_stats"]),
        variable_carry="batch_stats" if stats_mutable else False,
        split_rngs={"params": False}, in_axes=0, out_axes=0, unroll=self.unroll)
    return scan(cell, carry, (projected, jnp.arange(steps, dtype=jnp.int32), step_mask))

  def _initial_carry(self, cell, name, input_shape, given):
    if given is not None:
      return given
    carry = cell.initialize_carry(jax.random.key(0), input_shape)
    if not self.learned_init:
      return carry
    leaves, treedef = jax.tree.flatten(carry)
    learned = [
        jnp.broadcast_to(
            self.param(f"{name}_init_{i}", nn.initializers.zeros, leaf.shape[-1:],
                       jnp.float32), leaf.shape)
        for i, leaf in enumerate(leaves)]
    return jax.tree.unflatten(treedef, learned)
