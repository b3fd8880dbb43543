"""The plain LSTM through cuDNN (``jax.experimental.rnn``) on an NVIDIA GPU.

XLA runs a recurrence as a loop of small kernels, one iteration per time step; cuDNN
runs a whole LSTM layer, forward and backward, in its own kernels (which is why Keras's
JAX backend sends its LSTM there). cuDNN has one LSTM: the plain one, with the state's
and the input's matmuls inside, so it can run :class:`lnorm.rnn.LSTMCell` only when
nothing sits between those matmuls and the gates: no normalizer in the recurrence
(variants ``none`` and ``wn``, whose weight-normalized kernels are passed as plain
matrices) and no recurrent dropout (the input dropout multiplies x before the call).

The choice is the cell option ``impl`` (the config field ``lstm_impl``,
:mod:`lnorm.rnn.implementation`): ``auto`` runs cuDNN where it can run the cell, on a
GPU, ``cudnn`` always, with a one-line error where it cannot (:func:`refusal` says
why). It is resolved where the model is traced, by the backend of that process
(``jax.default_backend()``), as the CPU layouts of ``Dense`` are: a step exported for
``cuda`` on a CPU host (``lnorm check``) carries lnorm's own recurrence. The run's
``config.json`` says which ran (``recurrence``).

The weights are lnorm's, mapped into cuDNN's packed layout at every call
(:func:`pack_weights`): the same parameters give the same outputs, and their gradients
flow back through the mapping. ``tests/test_rnn_cudnn.py`` checks the mapping on the
CPU against ``jax.experimental.rnn.lstm_ref``, the module's reference implementation
of the packed layout, and against lnorm's own LSTM.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp


#: cuDNN's gate order (i, f, g, o) as indices of lnorm's blocks (f, i, o, g).
_CUDNN_GATES = (1, 0, 3, 2)

#: ``jax_default_matmul_precision`` values that ask for bfloat16 passes, which cuDNN's
#: LSTM does not offer (``jax.experimental.rnn`` raises NotImplementedError).
_BFLOAT16_PRECISIONS = ("bfloat16", "fastest", "default")


def _on_gpu() -> bool:
  """Whether this process traces for a GPU (cuDNN's LSTM lowers for CUDA and ROCm)."""
  return jax.default_backend() == "gpu"


def refusal(variant: str, normalized: list[str], recurrent_dropout: float) -> str | None:
  """Why cuDNN cannot run an LSTM here; None when it can.

  ``variant`` names the cell's normalization variant and ``normalized`` the places
  (``input_norm``, ``hidden_norm``, ``cell_norm``) where it normalizes something.
  """
  if normalized:
    return (f"its normalizer ({variant!r}, on {', '.join(normalized)}) sits inside the "
            "recurrence, and cuDNN runs only the plain LSTM")
  if recurrent_dropout > 0:
    return (f"it drops the state (recurrent_dropout={recurrent_dropout}), which cuDNN's "
            "LSTM cannot")
  precision = str(jax.config.jax_default_matmul_precision)
  if precision in _BFLOAT16_PRECISIONS:
    return (f"cuDNN's LSTM has no bfloat16 matmuls (jax_default_matmul_precision="
            f"{precision})")
  if not _on_gpu():
    return f"cuDNN needs an NVIDIA GPU, and JAX runs on {jax.default_backend()}"
  return None


def _cudnn_gate_rows(m: jax.Array) -> jax.Array:
  """``[4H, ...]`` in lnorm's gate order (f, i, o, g) -> cuDNN's (i, f, g, o)."""
  blocks = jnp.split(m, 4, axis=0)
  return jnp.concatenate([blocks[k] for k in _CUDNN_GATES], axis=0)


def pack_weights(input_kernel: jax.Array, hidden_kernel: jax.Array,
                 bias: jax.Array) -> jax.Array:
  """lnorm's LSTM parameters as cuDNN's flat weight vector for one layer, one direction.

  ``input_kernel [I, 4H]`` (W_x), ``hidden_kernel [H, 4H]`` (W_h) and ``bias [4H]``
  (b), gates (f, i, o, g) along the 4H axis, become ``(W_ih, W_hh, b_ih, b_hh)``
  flattened in that order (``jax.experimental.rnn``'s layout), with W_ih ``[4H, I]``
  and W_hh ``[4H, H]`` in cuDNN's gate order (i, f, g, o). cuDNN adds two biases; b_hh
  is zero, so that their sum is b.
  """
  f32 = lambda a: jnp.asarray(a, jnp.float32)
  w_ih = _cudnn_gate_rows(f32(input_kernel).T)
  w_hh = _cudnn_gate_rows(f32(hidden_kernel).T)
  b_ih = _cudnn_gate_rows(f32(bias))
  return jnp.concatenate([w_ih.ravel(), w_hh.ravel(), b_ih, jnp.zeros_like(b_ih)])


def _jax_cudnn_lstm(*args, **kwargs):
  # Imported at the call: the module registers cuDNN lowerings, needed only here.
  from jax.experimental import rnn  # pylint: disable=g-import-not-at-top
  return rnn.lstm(*args, **kwargs)


#: ``jax.experimental.rnn.lstm``'s signature: ``(x [B, T, I], h_0, c_0 [layers, B, H],
#: weights, seq_lengths [B] int32, *, input_size, hidden_size, num_layers, dropout,
#: bidirectional) -> (y [B, T, H], h_n, c_n)``. Tests put the module's reference
#: implementation here, which runs on a CPU.
CudnnLSTM = Callable[..., tuple[jax.Array, jax.Array, jax.Array]]
_lstm: CudnnLSTM = _jax_cudnn_lstm


def lstm_layer(weights: jax.Array, x: jax.Array, carry, lengths: jax.Array | None):
  """Runs one LSTM layer through cuDNN over time-major ``x [T, B, I]`` from
  ``carry = (c, h)``; ``weights`` from :func:`pack_weights`, ``lengths [B]`` the
  sequences' true lengths (None: all T).

  Returns ``((c, h) at each sequence's true length, hs [T, B, H])``, as
  :meth:`lnorm.rnn.LSTMCell.fused_scan` does; ``hs`` past a sequence's end is
  cuDNN's (zero), which :class:`lnorm.rnn.RecurrentLayer` masks anyway.
  """
  steps, batch, features = x.shape
  c0, h0 = (jnp.asarray(a, jnp.float32) for a in carry)
  hidden = c0.shape[-1]
  if lengths is None:
    lengths = jnp.full((batch,), steps, jnp.int32)
  lengths = jnp.asarray(lengths, jnp.int32)
  # cuDNN refuses an empty sequence (Keras's JAX backend checks for one): run it for one
  # step, then keep its initial state, as lnorm's recurrences do for a length of 0.
  y, h_n, c_n = _lstm(
      jnp.swapaxes(x, 0, 1).astype(jnp.float32), h0[None], c0[None], weights,
      jnp.maximum(lengths, 1), input_size=features, hidden_size=hidden, num_layers=1,
      dropout=0.0, bidirectional=False)
  empty = (lengths == 0)[:, None]
  final = (jnp.where(empty, c0, c_n[0]), jnp.where(empty, h0, h_n[0]))
  return final, jnp.swapaxes(y, 0, 1)
