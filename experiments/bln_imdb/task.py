"""IMDB sentiment with the BLN paper's two-layer LSTM (BLN paper sec. 4.2,
REFERENCE.md sec. 8): BLN, BN, LN or no norm after each LSTM and the dense layer.

Reviews arrive tokenised (lower-cased, HTML breaks stripped, punctuation split off),
mapped to the 20,000 most frequent training words and cut to their last 80 tokens
(``lnorm.data.imdb``); padding goes after the tokens and a sequence mask keeps it
out of the LSTM states and of every normalization statistic.
"""

from __future__ import annotations

import jax.numpy as jnp
import optax

from experiments.bln_imdb.model import SentimentRNN
from lnorm.normalization import make_norm
from lnorm.training.task import Task as BaseTask


class Task(BaseTask):

  norms = ("bln", "bn", "ln", "none")
  rng_streams = ("dropout",)

  def build_model(self, dataset):
    c = self.config
    return SentimentRNN(
        vocab_size=dataset.info["vocab_size"],
        norm=make_norm(c.norm, c.norm_options.get(c.norm)),
        embed_size=c.model.embed_size, lstm_sizes=tuple(c.model.lstm_sizes),
        hidden_size=c.model.hidden_size, dropout=c.model.dropout,
        forget_bias=c.model.forget_bias)

  def model_inputs(self, batch):
    return batch["tokens"], batch["length"]

  def loss_and_metrics(self, logits, batch):
    labels = batch["label"]
    nll = optax.sigmoid_binary_cross_entropy(logits.astype(jnp.float32),
                                             labels.astype(jnp.float32))
    error = ((logits > 0).astype(jnp.int32) != labels).astype(jnp.float32)
    return jnp.mean(nll), {"nll": nll, "error": error}
