"""The BLN paper's IMDB sentiment RNN (sec. 4.2, Figure 5; docs/experiments.md,
sec. 8 [code]).

  embedding 512 -> LSTM 128 (all states) -> norm -> LSTM 64 (last state) -> norm ->
  dense 32 tanh -> norm -> 1 logit

The LSTM cells are plain: the norms sit between the layers, after each LSTM and
after the dense layer's tanh, as in the authors' Keras model. Both LSTMs are the
authors' ``LSTM(units, dropout=0.2, recurrent_dropout=0.2)``: one mask per review on
the LSTM's inputs and one on its h, reused at every step (``lnorm.rnn`` cells'
dropout). ``dropout_mask='per_step'`` instead draws the input mask afresh at every
step, the model of the results before recurrent dropout existed.
"""

from __future__ import annotations

from typing import Callable

import flax.linen as nn
import jax.numpy as jnp

from lnorm.normalization import Norm
from lnorm.rnn import RecurrentLayer, make_lstm_cell

#: How ``dropout`` draws its masks on the LSTMs' inputs.
DROPOUT_MASKS = ("per_sequence", "per_step")


class SentimentRNN(nn.Module):
  """``(tokens [B, T], lengths [B]) -> logits [B]`` on id sequences.

  ``mask_padding=True`` expects padding after the tokens and keeps it out of the LSTM
  states and of every normalization statistic. ``False`` runs all T steps, padding
  included, through the LSTMs and the norms, as the authors' Keras model does with
  left-padded reviews and an unmasked ``Embedding``.
  """

  vocab_size: int
  norm: Norm
  embed_size: int = 512
  lstm_sizes: tuple[int, int] = (128, 64)
  hidden_size: int = 32
  dropout: float = 0.2  # Keras LSTM(dropout=): on both LSTMs' inputs.
  recurrent_dropout: float = 0.2  # Keras LSTM(recurrent_dropout=): on both LSTMs' h.
  dropout_mask: str = "per_sequence"  # One of DROPOUT_MASKS.
  mask_padding: bool = True
  forget_bias: float = 1.0  # Keras's unit_forget_bias.
  activation: Callable = jnp.tanh

  @nn.compact
  def __call__(self, tokens, lengths, *, train: bool = False):
    if self.dropout_mask not in DROPOUT_MASKS:
      raise ValueError(f"dropout_mask={self.dropout_mask!r}: use one of "
                       f"{', '.join(DROPOUT_MASKS)}.")
    per_sequence = self.dropout_mask == "per_sequence"
    cell = make_lstm_cell("none", forget_bias=self.forget_bias,
                          dropout=self.dropout if per_sequence else 0.0,
                          recurrent_dropout=self.recurrent_dropout)

    def lstm_inputs(x):
      if per_sequence:
        return x  # The cell drops them.
      return nn.Dropout(self.dropout)(x, deterministic=not train)

    lengths = lengths if self.mask_padding else None
    x = nn.Embed(self.vocab_size, self.embed_size,
                 embedding_init=nn.initializers.glorot_uniform(), name="embed")(tokens)
    first = RecurrentLayer(cell, self.lstm_sizes[0], name="lstm_0")(
        lstm_inputs(x), lengths, train=train)
    # All states are normalized; masked padding is kept out of every statistic.
    mask = first.mask[..., None] if self.mask_padding else None
    x = self.norm.layer(name="norm_0")(first.outputs, train=train, mask=mask)
    second = RecurrentLayer(cell, self.lstm_sizes[1], name="lstm_1")(
        lstm_inputs(x), lengths, train=train)
    x = self.norm.layer(name="norm_1")(second.final_hidden, train=train)
    x = self.activation(self.norm.dense(self.hidden_size, name="dense")(x))
    x = self.norm.layer(name="norm_2")(x, train=train)
    return nn.Dense(1, name="logit")(x)[:, 0]


def forward_macs(c, batch_size: int, tokens: int) -> int:
  """Multiply-accumulates of the matmuls in one forward pass over a batch of reviews
  padded to ``tokens``, for ``lnorm flops``: both LSTMs at every padded step (masked
  steps are computed too), then the dense layer and the logit. The embedding is a
  lookup, not a matmul."""
  e, (h0, h1), d = c.model.embed_size, c.model.lstm_sizes, c.model.hidden_size
  lstms = tokens * ((e + h0) * 4 * h0 + (h0 + h1) * 4 * h1)
  return batch_size * (lstms + h1 * d + d * 1)
