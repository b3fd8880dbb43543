"""Handwriting synthesis network of Graves (2013) sec. 5.2, as the LN paper used it.

Three stacked LSTMs read the previous pen move ``x_t``; a soft window over the
one-hot characters ``c_u`` tells them where in the text they are:

  layer 1:    h1_t = LSTM1(x_t, w_{t-1}, h1_{t-1})
  window:     (a, b, k) = W h1_t + bias;  alpha = exp(a), beta = exp(b),
              kappa_t = kappa_{t-1} + exp(k);
              phi(t, u) = sum_k alpha_k exp(-beta_k (kappa_k - u)^2);  w_t = sum_u phi(t, u) c_u
  layer n>1:  hn_t = LSTMn(x_t, w_t, h(n-1)_t, hn_{t-1})
  output:     y_t = W_y [h1_t, h2_t, h3_t] + b_y  (a mixture, see experiments.handwriting.mdn)

and ``y_t`` predicts the next move ``x_{t+1}``. Layer 1 and the window form one
recurrence (``w_{t-1}`` enters layer 1), so they run as one scanned cell; layers 2
and 3 see all windows at once and run as ordinary ``RecurrentLayer``s. Character u
sits at position u (0-based), so ``kappa`` starts before the first character.

The window's step starts at ``initial_step`` characters per move (the bias of its
``k`` units is ``log initial_step``). Graves gives no initialisation; a zero bias
would start at exp(0) = 1 character per move, about 20 times faster than IAM-OnDB's
writers (21 moves per character, median), so the window ran past the end of the text
within the first few dozen moves, where its weights and their gradients vanish: a
network trained that way never learnt to follow the text (its window stayed at
kappa ~ t).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from experiments.handwriting import mdn
from lnorm.normalization import Dense
from lnorm.rnn import RecurrentLayer, sequence_mask


def window_weights(params: jax.Array, kappa_prev: jax.Array, char_mask: jax.Array):
  """``(phi [B, U], kappa [B, K])`` from the window layer's ``[B, 3K]`` outputs.

  Characters outside ``char_mask [B, U]`` (padding) get zero weight.
  """
  log_alpha, log_beta, log_step = jnp.split(params.astype(jnp.float32), 3, axis=-1)
  kappa = kappa_prev + jnp.exp(log_step)
  u = jnp.arange(char_mask.shape[-1], dtype=jnp.float32)
  distance = (kappa[:, :, None] - u[None, None, :]) ** 2  # [B, K, U]
  phi = jnp.sum(jnp.exp(log_alpha[:, :, None] - jnp.exp(log_beta)[:, :, None] * distance),
                axis=1)
  return phi * char_mask.astype(phi.dtype), kappa


class WindowedLSTM(nn.Module):
  """One step of layer 1 and the soft window: the carry is ``(lstm carry, kappa, w)``.

  ``cell`` is a ``lnorm.rnn`` LSTM factory: its input is ``[x_t, w_{t-1}]``, so a
  normalizer of W_x x sees the window's contribution too, as in any LN-LSTM.
  """

  cell: Callable[..., nn.RNNCellBase]
  hidden_size: int
  num_gaussians: int
  initial_step: float = 1.0  # Characters per move of the untrained window.

  def setup(self):
    self.lstm = self.cell(self.hidden_size, name="lstm")
    self.window = Dense(3 * self.num_gaussians, bias_init=self._window_bias, name="window")

  def _window_bias(self, key, shape, dtype=jnp.float32):
    del key
    k = self.num_gaussians
    # (log alpha, log beta, log step): alpha = beta = 1, step = initial_step.
    return jnp.zeros(shape, dtype).at[2 * k:].set(math.log(self.initial_step))

  def __call__(self, carry, xs, chars, char_mask, *, train: bool = False):
    """``xs = (x_t [B, 3], step, mask_t [B])``; ``chars [B, U, V]`` one-hot."""
    lstm_carry, kappa, w = carry
    x, step, mask = xs
    gates_x = self.lstm.project(jnp.concatenate([x, w], axis=-1)[None], train=train)[0]
    new_lstm, h = self.lstm(lstm_carry, (gates_x, step, mask), train=train)
    phi, new_kappa = window_weights(self.window(h), kappa, char_mask)
    new_w = jnp.einsum("bu,buv->bv", phi, chars)
    # Padded steps keep the previous state, as RecurrentLayer does.
    keep = lambda new, old: jnp.where(mask[:, None], new, old)
    new_carry = jax.tree.map(keep, (new_lstm, new_kappa, new_w), carry)
    return new_carry, (h, new_w, phi)

  @nn.nowrap
  def initialize_carry(self, batch: int, num_symbols: int):
    zeros = lambda n: jnp.zeros((batch, n), jnp.float32)
    return ((zeros(self.hidden_size), zeros(self.hidden_size)), zeros(self.num_gaussians),
            zeros(num_symbols))


class HandwritingSynthesis(nn.Module):
  """``(strokes [B, T, 3], length [B], text [B, U], text_length [B])`` ->
  ``{'mixture': [B, T, 6M+1], 'phi': [B, T, U]}``; output t predicts ``strokes[:, t]``
  from the moves before it (the first step reads a zero move)."""

  cell: Callable[..., nn.RNNCellBase]
  hidden_size: int = 400
  num_layers: int = 3
  num_gaussians: int = 10
  num_components: int = 20
  num_symbols: int = 57
  window_initial_step: float = 1.0  # See the module docstring.
  unroll: int = 1

  @nn.compact
  def __call__(self, strokes, length, text, text_length, *, train: bool = False) -> dict[str, Any]:
    batch, steps = strokes.shape[:2]
    strokes = strokes.astype(jnp.float32)
    inputs = jnp.concatenate([jnp.zeros((batch, 1, 3), strokes.dtype), strokes[:, :-1]], 1)
    char_mask = sequence_mask(text_length, text.shape[1])
    chars = jax.nn.one_hot(text, self.num_symbols) * char_mask[..., None]
    mask = sequence_mask(length, steps)

    layer1 = WindowedLSTM(self.cell, self.hidden_size, self.num_gaussians,
                          self.window_initial_step, name="layer_0")
    scan = nn.scan(
        lambda module, carry, xs, consts: module(carry, xs, *consts, train=train),
        variable_broadcast="params", split_rngs={"params": False},
        in_axes=(0, nn.broadcast), out_axes=0, unroll=self.unroll)
    carry = layer1.initialize_carry(batch, self.num_symbols)
    xs = (jnp.swapaxes(inputs, 0, 1), jnp.arange(steps, dtype=jnp.int32), mask.T)
    _, (h_tm, w_tm, phi_tm) = scan(layer1, carry, xs, (chars, char_mask))
    h = jnp.swapaxes(h_tm, 0, 1) * mask[..., None]
    window = jnp.swapaxes(w_tm, 0, 1)
    hidden = [h]
    for n in range(1, self.num_layers):
      # Skip connections: every layer reads the input and the window.
      layer = RecurrentLayer(self.cell, self.hidden_size, unroll=self.unroll, name=f"layer_{n}")
      h = layer(jnp.concatenate([inputs, window, h], -1), length, train=train).outputs
      hidden.append(h)
    mixture = Dense(mdn.num_outputs(self.num_components), name="mixture")(
        jnp.concatenate(hidden, -1))
    return {"mixture": mixture, "phi": jnp.swapaxes(phi_tm, 0, 1)}


def sequence_nll(outputs: dict[str, jax.Array], strokes: jax.Array, length: jax.Array,
                 num_components: int) -> tuple[jax.Array, jax.Array]:
  """``(nats per line [B], points per line [B])``: -log p of every real move."""
  mixture = mdn.split(outputs["mixture"], num_components)
  log_p = mdn.log_likelihood(mixture, strokes)
  mask = sequence_mask(length, strokes.shape[1])
  # where, not multiply: a padded step's density may be anything, even inf.
  nll = -jnp.sum(jnp.where(mask, log_p, 0.0), axis=1)
  return nll, jnp.sum(mask, axis=1).astype(jnp.float32)


def forward_macs(c, batch_size: int, points: int, chars: int, num_symbols: int) -> int:
  """Multiply-accumulates of the matmuls in one forward pass over a batch of lines
  padded to ``points`` pen points and ``chars`` characters, for ``lnorm flops``: at
  every point, the first LSTM layer, the attention window, the upper layers (with their
  skip inputs) and the mixture density outputs."""
  h, k, v = c.hidden_size, c.num_gaussians, num_symbols
  layer1 = (3 + v) * 4 * h + h * 4 * h  # [x_t, w_{t-1}] and h1_{t-1} -> gates
  window = h * 3 * k + chars * v  # alpha, beta, kappa; then w_t = phi c
  upper = (c.num_layers - 1) * ((3 + v + h) * 4 * h + h * 4 * h)  # skip inputs + below
  output = c.num_layers * h * mdn.num_outputs(c.num_components)
  return batch_size * points * (layer1 + window + upper + output)
