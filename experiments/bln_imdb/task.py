"""IMDB sentiment with the BLN paper's two-layer LSTM (BLN paper sec. 4.2,
docs/experiments.md, sec. 8): BLN, BN, LN or no norm after each LSTM and the dense layer.

Reviews arrive tokenised (lower-cased, HTML breaks stripped, punctuation split off),
mapped to the 20,000 most frequent training words and cut to their last 80 tokens
(``lnorm.data.imdb``). By default padding goes after the tokens and a sequence mask
keeps it out of the LSTM states and of every normalization statistic; the authors'
convention (``data.padding='pre'``, ``model.mask_padding=False``) puts it in front
and runs it through the LSTMs and the norms like any token.
"""

from __future__ import annotations

import jax.numpy as jnp
import optax

from experiments.bln_imdb import model as model_lib
from experiments.bln_imdb.model import DROPOUT_MASKS, SentimentRNN
from lnorm.errors import ConfigError
from lnorm.evaluation import trivial
from lnorm.normalization import PER_EXAMPLE_NORMS, make_norm
from lnorm.training.task import Task as BaseTask

#: The model of runs written before these fields existed (their config.json lacks
#: them, and ``lnorm bln-search`` rebuilds the model from it): input dropout with a
#: fresh mask per step, no recurrent dropout, masked right padding.
_BEFORE_RECURRENT_DROPOUT = {"recurrent_dropout": 0.0, "dropout_mask": "per_step",
                             "mask_padding": True}


def _model_field(config, name):
  return config.model.get(name, _BEFORE_RECURRENT_DROPOUT[name])


class Task(BaseTask):

  norms = ("bln", "bn") + PER_EXAMPLE_NORMS + ("none",)
  rng_streams = ("dropout",)

  def __init__(self, config):
    super().__init__(config)
    rates = {"dropout": config.model.dropout,
             "recurrent_dropout": _model_field(config, "recurrent_dropout")}
    for name, rate in rates.items():
      if not 0.0 <= rate < 1.0:
        raise ConfigError(f"model.{name}={rate}: a dropout rate must be in [0, 1).")
    dropout_mask = _model_field(config, "dropout_mask")
    if dropout_mask not in DROPOUT_MASKS:
      raise ConfigError(f"model.dropout_mask={dropout_mask!r}: use one of "
                        f"{', '.join(DROPOUT_MASKS)}.")
    padding = config.data.get("padding", "post")
    if padding not in ("pre", "post"):
      raise ConfigError(f"data.padding={padding!r}: use 'post' (after the tokens) or "
                        "'pre' (in front, Keras's default).")
    if padding == "pre" and _model_field(config, "mask_padding"):
      raise ConfigError(
          "data.padding='pre' puts the padding in front of the tokens, but "
          "model.mask_padding=True masks the steps after each review's length. Set "
          "model.mask_padding=False (the authors' Keras convention, padding run through "
          "the LSTMs) or data.padding='post'.")

  def build_model(self, dataset):
    c = self.config
    return SentimentRNN(
        vocab_size=dataset.info["vocab_size"],
        norm=make_norm(c.norm, c.norm_options.get(c.norm)),
        embed_size=c.model.embed_size, lstm_sizes=tuple(c.model.lstm_sizes),
        hidden_size=c.model.hidden_size, dropout=c.model.dropout,
        recurrent_dropout=_model_field(c, "recurrent_dropout"),
        dropout_mask=_model_field(c, "dropout_mask"),
        mask_padding=_model_field(c, "mask_padding"),
        forget_bias=c.model.forget_bias)

  def forward_macs(self, dataset, batch):
    del dataset
    return model_lib.forward_macs(self.config, *batch["tokens"].shape)

  def model_inputs(self, batch):
    return batch["tokens"], batch["length"]

  def trivial_baseline(self, dataset):
    """The training subset's share of positive reviews as the probability of every
    review: the majority class's error (0.5 on balanced data; a tie predicts negative,
    as a logit of 0 does) and the binary cross-entropy of that share."""
    return trivial.classification_record(dataset, 2, self.train_split())

  def loss_and_metrics(self, logits, batch, model):
    del model  # Unused.
    labels = batch["label"]
    nll = optax.sigmoid_binary_cross_entropy(logits.astype(jnp.float32),
                                             labels.astype(jnp.float32))
    error = ((logits > 0).astype(jnp.int32) != labels).astype(jnp.float32)
    return jnp.mean(nll), {"nll": nll, "error": error}
