"""The BLN paper's IMDB sentiment RNN (sec. 4.2, Figure 5; REFERENCE.md sec. 8 [code]).

  embedding 512 -> LSTM 128 (all states) -> norm -> LSTM 64 (last state) -> norm ->
  dense 32 tanh -> norm -> 1 logit

The LSTM cells are plain: the norms sit between the layers, after each LSTM and
after the dense layer's tanh, as in the authors' Keras model. Dropout 0.2 on the
inputs of both LSTMs stands in for Keras's ``LSTM(dropout=0.2)``. Keras's IMDB
example, which the authors' model follows, also sets ``recurrent_dropout=0.2``; that is
not reproduced (our cells have no recurrent dropout, and REFERENCE.md does not list it).
"""

from __future__ import annotations

from typing import Callable

import flax.linen as nn
import jax.numpy as jnp

from lnorm.normalization import Norm
from lnorm.rnn import RecurrentLayer, make_lstm_cell


class SentimentRNN(nn.Module):
  """``(tokens [B, T], lengths [B]) -> logits [B]`` on right-padded id sequences."""

  vocab_size: int
  norm: Norm
  embed_size: int = 512
  lstm_sizes: tuple[int, int] = (128, 64)
  hidden_size: int = 32
  dropout: float = 0.2
  forget_bias: float = 1.0  # Keras's unit_forget_bias.
  activation: Callable = jnp.tanh

  @nn.compact
  def __call__(self, tokens, lengths, *, train: bool = False):
    cell = make_lstm_cell("none", forget_bias=self.forget_bias)
    drop = lambda x: nn.Dropout(self.dropout)(x, deterministic=not train)
    x = nn.Embed(self.vocab_size, self.embed_size,
                 embedding_init=nn.initializers.glorot_uniform(), name="embed")(tokens)
    first = RecurrentLayer(cell, self.lstm_sizes[0], name="lstm_0")(
        drop(x), lengths, train=train)
    # All states are normalized; padded steps are kept out of every statistic.
    mask = first.mask[..., None]
    x = self.norm.layer(name="norm_0")(first.outputs, train=train, mask=mask)
    second = RecurrentLayer(cell, self.lstm_sizes[1], name="lstm_1")(
        drop(x), lengths, train=train)
    x = self.norm.layer(name="norm_1")(second.final_hidden, train=train)
    x = self.activation(self.norm.dense(self.hidden_size, name="dense")(x))
    x = self.norm.layer(name="norm_2")(x, train=train)
    return nn.Dense(1, name="logit")(x)[:, 0]
