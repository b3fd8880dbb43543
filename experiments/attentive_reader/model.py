"""The unidirectional attentive reader (Hermann et al. 2015) as the LN paper trained it
(sec. 6.2, REFERENCE.md sec. 5), after Cooijmans et al.'s Theano code:

  passage, question -> one shared word embedding
  passage  -> LSTM, all states d_t (learned initial state)
  question -> LSTM, last state q    (learned initial state)
  attention  m_t = tanh(W_d d_t + b_d + W_q q + (V d_t) . (V q)),  s_t = w . m_t
             alpha = softmax over the real passage positions,  ctx = sum_t alpha_t d_t
  readout    r = tanh(W_c ctx + W_r q + b_r + W_m mean_t d_t),  dropout
  logits     over the answer vocabulary, the entity markers @entity0..@entity{E-1}

The bilinear term ``(V d_t) . (V q)`` (one scalar per position, added to every
attention unit) is the authors' ``use_dq_sims``. In training, the entity markers of
each example are renamed by a random permutation (the authors' code permutes them
per batch); the logits are mapped back to the original numbering, so labels and
candidate masks need no renaming. ``predict`` restricts the argmax to the entities
present in the passage.

Normalization: ``cell`` is ``make_lstm_cell(norm, ...)`` for both LSTMs; ``ff_norm``
normalizes the feed-forward pre-activations of the attention (W_d d_t and W_q q) and
of the readout (each of its three terms): BN for Cooijmans et al.'s BN-everywhere,
the identity otherwise.
"""

from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from lnorm.normalization import Dense, Identity
from lnorm.rnn import RecurrentLayer, masked_mean

#: Logit given to masked (padded) attention positions and to non-candidate answers.
NEG_INF = -1e9


def permute_entities(tokens: jax.Array, perm: jax.Array, offset: int) -> jax.Array:
  """Renames ``@entityk`` (id offset + k) to ``@entity{perm[b, k]}`` in each row b of
  ``tokens [B, T]``; other ids are unchanged."""
  num = perm.shape[-1]
  k = tokens - offset
  is_entity = (k >= 0) & (k < num)
  renamed = jnp.take_along_axis(perm, jnp.clip(k, 0, num - 1), axis=-1) + offset
  return jnp.where(is_entity, renamed, tokens)


def passage_entities(passage: jax.Array, num_entities: int, offset: int) -> jax.Array:
  """``[B, E]`` bool: which entity markers occur in each passage (padding is id 0)."""
  k = (passage - offset)[..., None]
  onehot = (k == jnp.arange(num_entities)[None, None, :]) & (k >= 0)
  return jnp.any(onehot, axis=1)


def restrict(logits: jax.Array, allowed: jax.Array) -> jax.Array:
  """Logits with the answers that ``allowed`` excludes pushed to NEG_INF."""
  return jnp.where(allowed, logits, NEG_INF)


class AttentiveReader(nn.Module):
  """``(passage [B, Tp], passage_length [B], question [B, Tq], question_length [B])
  -> logits [B, num_entities]`` (unrestricted; see :func:`restrict`)."""

  vocab_size: int
  num_entities: int
  entity_offset: int
  cell: Callable[..., Any]  # make_lstm_cell(norm, ...)
  ff_norm: Callable[..., nn.Module] = Identity  # norm(name=...)(x, train=, mask=)
  embed_size: int = 240
  hidden_size: int = 240
  attention_size: int = 240
  readout_size: int = 240
  dropout: float = 0.5
  bilinear: bool = True
  permute_in_training: bool = True

  def setup(self):
    self.embed = nn.Embed(self.vocab_size, self.embed_size,
                          embedding_init=nn.initializers.normal(0.01), name="embed")
    self.passage_rnn = RecurrentLayer(self.cell, self.hidden_size, learned_init=True,
                                      name="passage_lstm")
    self.question_rnn = RecurrentLayer(self.cell, self.hidden_size, learned_init=True,
                                       name="question_lstm")
    # W_d carries the attention bias; with a biased normalizer the norm's bias does.
    self.att_passage = Dense(self.attention_size, name="att_passage")
    self.att_question = Dense(self.attention_size, use_bias=False, name="att_question")
    self.att_passage_norm = self.ff_norm(name="att_passage_norm")
    self.att_question_norm = self.ff_norm(name="att_question_norm")
    if self.bilinear:
      self.att_bilinear = Dense(self.hidden_size, use_bias=False, name="att_bilinear")
    self.att_score = Dense(1, use_bias=False, name="att_score")
    self.out_context = Dense(self.readout_size, use_bias=False, name="out_context")
    self.out_question = Dense(self.readout_size, name="out_question")
    self.out_mean = Dense(self.readout_size, use_bias=False, name="out_mean")
    self.out_norms = [self.ff_norm(name=f"out_{n}_norm")
                      for n in ("context", "question", "mean")]
    self.drop = nn.Dropout(self.dropout)
    self.logit = Dense(self.num_entities, name="logit")

  def attention(self, d, mask, q, *, train: bool):
    """``alpha [B, T]`` over the passage states ``d [B, T, H]`` (zero at padding)."""
    a_d = self.att_passage_norm(self.att_passage(d), train=train, mask=mask[..., None])
    a_q = self.att_question_norm(self.att_question(q), train=train)
    pre = a_d + a_q[:, None, :]
    if self.bilinear:
      sim = jnp.sum(self.att_bilinear(d) * self.att_bilinear(q)[:, None, :], axis=-1)
      pre = pre + sim[..., None]
    scores = self.att_score(jnp.tanh(pre))[..., 0]
    alpha = jax.nn.softmax(jnp.where(mask, scores, NEG_INF), axis=-1)
    return jnp.where(mask, alpha, 0.0)

  def encode(self, passage, passage_length, question, question_length, *, train: bool):
    """``(alpha [B, Tp], logits [B, E])`` for already (re)named entity markers."""
    d_out = self.passage_rnn(self.embed(passage), passage_length, train=train)
    q = self.question_rnn(self.embed(question), question_length, train=train).final_hidden
    d, mask = d_out.outputs, d_out.mask
    alpha = self.attention(d, mask, q, train=train)
    ctx = jnp.einsum("bt,bth->bh", alpha, d)
    terms = (self.out_context(ctx), self.out_question(q), self.out_mean(masked_mean(d, mask)))
    r = jnp.tanh(sum(n(t, train=train) for n, t in zip(self.out_norms, terms)))
    return alpha, self.logit(self.drop(r, deterministic=not train))

  def entity_permutation(self, batch_size: int) -> jax.Array:
    """``[B, E]``: a random renaming of the entity numbers per example (an
    'entities' rng)."""
    keys = jax.random.split(self.make_rng("entities"), batch_size)
    return jax.vmap(lambda k: jax.random.permutation(k, self.num_entities))(keys)

  def __call__(self, passage, passage_length, question, question_length, *,
               train: bool = False):
    if train and self.permute_in_training:
      perm = self.entity_permutation(passage.shape[0])
      passage = permute_entities(passage, perm, self.entity_offset)
      question = permute_entities(question, perm, self.entity_offset)
      _, logits = self.encode(passage, passage_length, question, question_length,
                              train=train)
      # Logit of original entity k = logit of its new name perm[k].
      return jnp.take_along_axis(logits, perm, axis=-1)
    return self.encode(passage, passage_length, question, question_length,
                       train=train)[1]
