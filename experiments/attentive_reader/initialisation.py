"""How the attentive reader's weights start: the one place that decides every kernel,
the LSTMs' included (``model.init``).

``authors`` (the default), as in Cooijmans et al.'s Theano code (``Attentive_reader``,
branch ``bn``: ``utils.norm_weight``, ``ortho_weight`` and ``norm_vec``, used by
``model.init_params`` and ``layers.param_init_lstm``):

* each LSTM matrix is built per gate block: the four H x H blocks of W_h are each
  0.05 x an orthogonal matrix, and so are the four E x H blocks of W_x when E = H
  (else Glorot-uniform blocks);
* the attention's W_d (``ff_att_ctx``) and bilinear V (``ff_att_bi_dq``): 0.05 x an
  orthogonal matrix when square, else Glorot-uniform;
* the attention's W_q (``ff_att_q``), the readout's three matrices, the answer
  logits (all built with ``ortho=False``) and the word embedding (not square):
  Glorot-uniform;
* the attention vector w (``ff_att_proj``, ``norm_vec``): U(+-1/sqrt(A));
* biases and learned initial states: 0.

So the plain LSTM starts nearly silent (its gates see 0.05 x its inputs), while LN
rescales whatever it is given. ``model.init_identical_blocks`` adds the code's
reseeding quirk: its initialisers reseed NumPy's generator with 123 on every call, so
all gate blocks of a matrix come out identical, and so does every matrix of the same
shape (the two LSTMs start equal, and every square matrix is the same 0.05 x Q).

``lnorm``: the choices lnorm made before: word embedding N(0, 0.01^2), LSTM W_x and
every other matrix LeCun-normal (flax's default), W_h as ``recurrent_init`` says.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import flax.linen as nn

from lnorm.errors import ConfigError
from lnorm.models import initializers

Initializer = Callable
INITS = ("authors", "lnorm")
#: The recurrent_init the authors' initialisation agrees with (per-gate blocks).
AUTHORS_RECURRENT_INIT = "orthogonal_per_gate"
AUTHORS_SCALE = 0.05  # ortho_weight's scale.
LSTM_GATES = 4


@dataclasses.dataclass(frozen=True)
class Initialisation:
  embed: Initializer  # [V, E]
  lstm_input: Initializer  # W_x [E, 4H]
  lstm_recurrent: Initializer  # W_h [H, 4H]
  att_passage: Initializer  # W_d [H, A]
  att_question: Initializer  # W_q [H, A]
  att_bilinear: Initializer  # V [H, H]
  att_score: Initializer  # w [A, 1]
  readout: Initializer  # W_c, W_r, W_m [H, R]
  logit: Initializer  # [R, answers]


def authors(identical: bool = False) -> Initialisation:
  """The Theano code's initialisation; ``identical``: with its reseeding quirk."""
  wrap = (lambda init: initializers.fixed_key(init)) if identical else (lambda init: init)
  square_or_glorot = wrap(initializers.orthogonal_if_square(AUTHORS_SCALE))
  glorot = wrap(nn.initializers.glorot_uniform())
  per_gate = lambda init: initializers.blockwise(init, LSTM_GATES, same_key=identical)
  return Initialisation(
      embed=glorot, lstm_input=per_gate(square_or_glorot),
      lstm_recurrent=per_gate(square_or_glorot), att_passage=square_or_glorot,
      att_question=glorot, att_bilinear=square_or_glorot,
      att_score=wrap(initializers.fan_in_uniform()), readout=glorot, logit=glorot)


def lnorm(recurrent_init: str) -> Initialisation:
  """The initialisation lnorm used before ``model.init`` existed."""
  dense = nn.initializers.lecun_normal()
  return Initialisation(
      embed=nn.initializers.normal(0.01), lstm_input=dense,
      lstm_recurrent=initializers.recurrent_initializer(recurrent_init),
      att_passage=dense, att_question=dense, att_bilinear=dense, att_score=dense,
      readout=dense, logit=dense)


def from_config(config) -> Initialisation:
  """``config.model.init`` (with ``init_identical_blocks``) and, for ``lnorm``,
  ``config.recurrent_init``."""
  m = config.model
  recurrent_init = config.get("recurrent_init") or AUTHORS_RECURRENT_INIT
  if m.init == "authors":
    if recurrent_init != AUTHORS_RECURRENT_INIT:
      raise ConfigError(
          f"recurrent_init={recurrent_init!r} applies to model.init='lnorm'; "
          "model.init='authors' builds W_h from 0.05 x orthogonal gate blocks. Set "
          "--config.model.init=lnorm to use it.")
    return authors(bool(m.get("init_identical_blocks", False)))
  if m.init == "lnorm":
    if m.get("init_identical_blocks"):
      raise ConfigError("model.init_identical_blocks is the authors' reseeding quirk; "
                        "it needs model.init='authors'.")
    return lnorm(recurrent_init)
  raise ConfigError(f"Unknown model.init {m.init!r}. Valid choices: {', '.join(INITS)}.")
