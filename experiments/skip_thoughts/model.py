"""Skip-thought vectors (Kiros et al. 2015) with GRU or LN-GRU (LN paper sec. 6.3,
docs/experiments.md, sec. 6).

  sentence -> embedding -> GRU encoder -> u = the last real state
  u -> h_0 of the previous-sentence decoder, and of the next-sentence decoder
  each decoder: teacher forcing, one output layer shared by both -> word logits

The embedding is shared by the encoder and both decoders. A decoder reads the target
sentence shifted right by one step, with a zero vector at the first step (as in
Kiros et al.'s code), and predicts every word and the final EOS. It is conditioned
through its initial state only, as in Kiros et al.'s public training code
(``training/model.py`` passes u as the decoders' ``init_state``) and the LN paper's
runs; the original skip-thoughts model also fed u to the decoder at every step.

``norm`` (``make_gru_cell`` variant ``none`` or ``ln``) switches all three GRUs.
"""

from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn
import jax.numpy as jnp

from lnorm.models.initializers import symmetric_uniform
from lnorm.normalization import Dense
from lnorm.rnn import RecurrentLayer

PREVIOUS, CURRENT, NEXT = 0, 1, 2


def shift_right(x):
  """``x [B, T, F]`` -> ``[0, x_0, ..., x_{T-2}]``: a decoder's teacher-forced input."""
  return jnp.pad(x, ((0, 0), (1, 0), (0, 0)))[:, :-1]


class SkipThoughts(nn.Module):
  """``(tokens [B, 3, T], lengths [B, 3]) -> logits [B, 2, T, V]`` for the previous
  and the next sentence. ``encode(tokens [B, T], lengths [B]) -> u [B, H]``."""

  vocab_size: int
  cell: Callable[..., Any]  # make_gru_cell(norm, ...)
  embed_size: int = 620
  hidden_size: int = 2400

  def setup(self):
    self.embed = nn.Embed(self.vocab_size, self.embed_size,
                          embedding_init=symmetric_uniform(0.1), name="embed")
    self.encoder = RecurrentLayer(self.cell, self.hidden_size, name="encoder")
    self.decoders = [RecurrentLayer(self.cell, self.hidden_size, name=f"decoder_{which}")
                     for which in ("previous", "next")]
    self.output = Dense(self.vocab_size, name="output")

  def encode(self, tokens, lengths, *, train: bool = False):
    """The skip-thought vector of each sentence: the encoder's state at its end."""
    return self.encoder(self.embed(tokens), lengths, train=train).final_hidden

  def __call__(self, tokens, lengths, *, train: bool = False):
    u = self.encode(tokens[:, CURRENT], lengths[:, CURRENT], train=train)
    states = []
    for decoder, which in zip(self.decoders, (PREVIOUS, NEXT)):
      inputs = shift_right(self.embed(tokens[:, which]))
      states.append(decoder(inputs, lengths[:, which], train=train,
                            initial_carry=u).outputs)
    return self.output(jnp.stack(states, axis=1))


def forward_macs(c, batch_size: int, words: int, vocab_size: int) -> int:
  """Multiply-accumulates of the matmuls in one forward pass over a batch of
  (previous, current, next) triples padded to ``words``, for ``lnorm flops``: three
  GRUs (W_x [E, 3H] and W_h [H, 3H] per step) and the shared output layer [H, V] at
  each of the two decoders' steps."""
  e, h = c.model.embed_size, c.model.hidden_size
  grus = 3 * words * (e * 3 * h + h * 3 * h)
  output_layer = 2 * words * h * vocab_size
  return batch_size * (grus + output_layer)
