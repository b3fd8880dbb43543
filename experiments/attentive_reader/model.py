"""The unidirectional attentive reader (Hermann et al. 2015) as the LN paper trained it
(sec. 6.2, docs/experiments.md sec. 5), after Cooijmans et al.'s Theano code:

  passage, question -> one shared word embedding, dropout (``embed_dropout``)
  passage  -> LSTM, all states d_t (learned initial h0, c0 = 0)
  question -> LSTM, last state q    (learned initial h0, c0 = 0)
  attention  m_t = tanh(W_d d_t + b_d + W_q q + (V d_t) . (V q)),  s_t = w . m_t
             alpha = softmax over the real passage positions,  ctx = sum_t alpha_t d_t
  readout    r = tanh(W_c ctx + W_r q + b_r),  dropout (``dropout``)
  logits     over the answers: the entity markers @entity0..@entity{E-1}
             (``answer_vocabulary='entities'``), or every word id of the vocabulary
             (``'vocabulary'``, the authors' softmax over the whole vocabulary)

The bilinear term ``(V d_t) . (V q)`` (one scalar per position, added to every
attention unit) is the authors' ``use_dq_sims``. The readout is Cooijmans et al.'s
run script's (``use_desc_skip_c_g 0``) and only h0 is a parameter, as in their
code; ``readout_description_skip`` adds ``W_m mean_t d_t`` (the LN run's command
line, docs/experiments.md sec. 9) and ``learn_initial_cell`` learns c0 too: both on
is lnorm's earlier model. In training, the entity markers of each example are
renamed by a random permutation (the authors' code permutes them per batch); the
entity logits are mapped back to the original numbering, so labels
and candidate masks need no renaming. Every kernel starts as ``inits`` says
(experiments/attentive_reader/initialisation.py).

Normalization: ``cell`` is ``make_lstm_cell(norm, ...)`` for both LSTMs; ``ff_norm``
normalizes the feed-forward pre-activations of the attention (W_d d_t and W_q q) and
of the readout (each of its terms): BN for Cooijmans et al.'s BN-everywhere,
the identity otherwise.
"""

from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from experiments.attentive_reader.initialisation import Initialisation, authors
from lnorm.errors import ConfigError
from lnorm.normalization import Dense, Identity
from lnorm.rnn import RecurrentLayer, masked_mean

#: Logit given to masked (padded) attention positions and to non-candidate answers.
NEG_INF = -1e9
#: ``answer_vocabulary`` values: what the output softmax runs over.
ANSWER_VOCABULARIES = ("entities", "vocabulary")


def first_entity_output(answer_vocabulary: str, entity_offset: int) -> int:
  """The output index of @entity0: 0 over the entities, its word id over the whole
  vocabulary."""
  return 0 if answer_vocabulary == "entities" else entity_offset


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


def entity_outputs(entity_mask: jax.Array, num_outputs: int, first: int) -> jax.Array:
  """``[B, num_outputs]`` bool: the outputs of the entities in ``entity_mask [B, E]``
  (which start at output ``first``); false elsewhere."""
  before = jnp.zeros(entity_mask.shape[:1] + (first,), bool)
  after = jnp.zeros(entity_mask.shape[:1] + (num_outputs - first - entity_mask.shape[1],),
                    bool)
  return jnp.concatenate([before, entity_mask, after], axis=-1)


def unpermute(logits: jax.Array, perm: jax.Array, first: int) -> jax.Array:
  """Logits in the original entity numbering: the logit of original entity k is the
  logit of its new name ``perm[b, k]``; outputs that are not entities stay."""
  num = perm.shape[-1]
  block = jnp.take_along_axis(logits[:, first:first + num], perm, axis=-1)
  return jnp.concatenate([logits[:, :first], block, logits[:, first + num:]], axis=-1)


class AttentiveReader(nn.Module):
  """``(passage [B, Tp], passage_length [B], question [B, Tq], question_length [B])
  -> logits [B, num_entities]`` or ``[B, vocab_size]`` (``answer_vocabulary``),
  unrestricted (see :func:`restrict`)."""

  vocab_size: int
  num_entities: int
  entity_offset: int
  cell: Callable[..., Any]  # make_lstm_cell(norm, ...)
  ff_norm: Callable[..., nn.Module] = Identity  # norm(name=...)(x, train=, mask=)
  embed_size: int = 240
  hidden_size: int = 240
  attention_size: int = 240
  readout_size: int = 240
  dropout: float = 0.5  # On the readout.
  embed_dropout: float = 0.5  # On the passage and question word embeddings.
  bilinear: bool = True
  permute_in_training: bool = True
  answer_vocabulary: str = "entities"
  inits: Initialisation | None = None  # None: the authors' (initialisation.authors()).
  #: The readout's W_m mean_t d_t term (the authors' use_desc_skip_c_g).
  readout_description_skip: bool = False
  #: Learn the LSTMs' initial cell c0 as well as h0 (the authors keep c0 at zero).
  learn_initial_cell: bool = False

  @property
  def num_outputs(self) -> int:
    return self.num_entities if self.answer_vocabulary == "entities" else self.vocab_size

  def setup(self):
    if self.answer_vocabulary not in ANSWER_VOCABULARIES:
      raise ValueError(f"answer_vocabulary must be one of {ANSWER_VOCABULARIES}, got "
                       f"{self.answer_vocabulary!r}")
    init = self.inits or authors()
    self.embed = nn.Embed(self.vocab_size, self.embed_size, embedding_init=init.embed,
                          name="embed")
    self.embed_drop = nn.Dropout(self.embed_dropout)
    self.passage_rnn = RecurrentLayer(self.cell, self.hidden_size,
                                      learned_init=self.learn_initial_cell,
                                      name="passage_lstm")
    self.question_rnn = RecurrentLayer(self.cell, self.hidden_size,
                                       learned_init=self.learn_initial_cell,
                                       name="question_lstm")
    if not self.learn_initial_cell:
      self.initial_h = {
          n: self.param(f"{n}_lstm_initial_h", nn.initializers.zeros, (self.hidden_size,))
          for n in ("passage", "question")}
    # W_d carries the attention bias; with a biased normalizer the norm's bias does.
    self.att_passage = Dense(self.attention_size, kernel_init=init.att_passage,
                             name="att_passage")
    self.att_question = Dense(self.attention_size, use_bias=False,
                              kernel_init=init.att_question, name="att_question")
    self.att_passage_norm = self.ff_norm(name="att_passage_norm")
    self.att_question_norm = self.ff_norm(name="att_question_norm")
    if self.bilinear:
      self.att_bilinear = Dense(self.hidden_size, use_bias=False,
                                kernel_init=init.att_bilinear, name="att_bilinear")
    self.att_score = Dense(1, use_bias=False, kernel_init=init.att_score, name="att_score")
    self.out_context = Dense(self.readout_size, use_bias=False, kernel_init=init.readout,
                             name="out_context")
    self.out_question = Dense(self.readout_size, kernel_init=init.readout,
                              name="out_question")
    terms = ("context", "question")
    if self.readout_description_skip:
      self.out_mean = Dense(self.readout_size, use_bias=False, kernel_init=init.readout,
                            name="out_mean")
      terms += ("mean",)
    self.out_norms = [self.ff_norm(name=f"out_{n}_norm") for n in terms]
    self.drop = nn.Dropout(self.dropout)
    self.logit = Dense(self.num_outputs, kernel_init=init.logit, name="logit")

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

  def embed_tokens(self, tokens, *, train: bool):
    """Word embeddings ``[B, T, E]``, with dropout in training (a 'dropout' rng)."""
    return self.embed_drop(self.embed(tokens), deterministic=not train)

  def initial_carry(self, which: str, batch_size: int):
    """The LSTM ``which``'s starting (c, h): c = 0 and the learned h0; None when
    ``learn_initial_cell`` (the RecurrentLayer learns both)."""
    if self.learn_initial_cell:
      return None
    shape = (batch_size, self.hidden_size)
    return jnp.zeros(shape), jnp.broadcast_to(self.initial_h[which], shape)

  def encode(self, passage, passage_length, question, question_length, *, train: bool):
    """``(alpha [B, Tp], logits [B, outputs])`` for already (re)named entity markers."""
    batch = passage.shape[0]
    d_out = self.passage_rnn(self.embed_tokens(passage, train=train), passage_length,
                             train=train, initial_carry=self.initial_carry("passage", batch))
    q = self.question_rnn(self.embed_tokens(question, train=train), question_length,
                          train=train,
                          initial_carry=self.initial_carry("question", batch)).final_hidden
    d, mask = d_out.outputs, d_out.mask
    alpha = self.attention(d, mask, q, train=train)
    ctx = jnp.einsum("bt,bth->bh", alpha, d)
    terms = (self.out_context(ctx), self.out_question(q))
    if self.readout_description_skip:
      terms += (self.out_mean(masked_mean(d, mask)),)
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
      return unpermute(logits, perm,
                       first_entity_output(self.answer_vocabulary, self.entity_offset))
    return self.encode(passage, passage_length, question, question_length,
                       train=train)[1]


def forward_macs(config, batch_size: int, passage_tokens: int, question_tokens: int,
                 vocab_size: int, num_entities: int) -> int:
  """Multiply-accumulates of the matmuls in one forward pass over a batch padded to
  ``passage_tokens`` and ``question_tokens``, for ``lnorm flops``: both LSTMs, the
  attention, the attention-weighted sum and the readout; the answer softmax has ``num_entities``
  outputs (10 candidates for CBT-style data) or the whole vocabulary."""
  m = config.model
  e, h, a, r = m.embed_size, m.hidden_size, m.attention_size, m.readout_size
  tp, tq = passage_tokens, question_tokens
  n = vocab_size if m.answer_vocabulary == "vocabulary" else num_entities
  lstm = lambda t: t * (e * 4 * h + h * 4 * h)
  attention = tp * h * a + h * a + tp * a + (tp * h * h + h * h if m.bilinear else 0)
  pooling = tp * h  # sum_t alpha_t d_t (the mean of d_t is a sum, not a matmul)
  readout_terms = 3 if m.readout_description_skip else 2  # context, question (, mean)
  return batch_size * (lstm(tp) + lstm(tq) + attention + pooling + readout_terms * h * r
                       + r * n)


def passage_lstm_reads(model: AttentiveReader, params, passage, passage_length):
  """What the passage LSTM reads in evaluation (no dropout), for probes of its
  dynamics (``lnorm.training.dynamics.Recurrence``, scripts/reader_ln_dynamics.py):
  ``(its parameters, the embedded passage [B, T, E], passage_length, its initial
  carry: c = 0 and the learned h0)``."""
  if model.learn_initial_cell:
    raise ConfigError("The probe starts the passage LSTM from the model's c = 0 and "
                      "learned h0; with model.learn_initial_cell=True the layer holds "
                      "its own initial state: set it to False.")
  variables = {"params": params}
  inputs = model.apply(variables, passage, train=False, method=AttentiveReader.embed_tokens)
  carry = model.apply(variables, "passage", passage.shape[0],
                      method=AttentiveReader.initial_carry)
  return params["passage_lstm"], inputs, passage_length, carry
