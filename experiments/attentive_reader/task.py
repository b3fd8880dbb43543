"""Cloze question answering with the attentive reader (LN paper sec. 6.2, Figure 2;
REFERENCE.md sec. 5).

Data: ``lnorm.data.cloze`` (the CNN/Daily Mail ``.question`` files, the cloze task
built from books, or synthetic). Loss: the cross-entropy of the answer's entity
number over the whole answer vocabulary (the authors' training cost). Per-example
metrics:

* ``nll``: that cross-entropy;
* ``error``: 0/1 error of the prediction, restricted to the entities present in the
  passage when ``model.restrict_to_passage_entities`` (the default, as in Hermann et
  al.'s evaluation); unrestricted otherwise.

Variants (``norm``): ``none``; ``bn``, recurrent BN in both LSTMs (gain init 0.1,
``norm_options.bn.scale_init``); ``bn_everywhere``, also BN on the feed-forward
pre-activations of attention and readout; ``ln``, LN-LSTMs with the gain init
``norm_options.ln.scale_init`` (the paper compares 1.0 and 0.1).
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax.numpy as jnp
import optax

from experiments.attentive_reader.model import AttentiveReader, passage_entities, restrict
from lnorm.data.cloze import ENTITY_OFFSET
from lnorm.errors import ConfigError
from lnorm.normalization import BatchNorm, Identity
from lnorm.rnn import cell_options, make_lstm_cell
from lnorm.training.task import Task as BaseTask

#: ``norm`` -> (LSTM variant of lnorm.rnn, whether the feed-forward layers get BN).
VARIANTS = {"none": ("none", False), "bn": ("bn", False),
            "bn_everywhere": ("bn", True), "ln": ("ln", False), "rms": ("rms", False),
            "prms": ("prms", False)}


class Task(BaseTask):

  norms = tuple(VARIANTS)
  rng_streams = ("dropout", "entities")
  length_feature = ("passage", "passage_length")

  def __init__(self, config):
    super().__init__(config)
    if not 0.0 <= config.model.dropout < 1.0:
      raise ConfigError(f"model.dropout={config.model.dropout}: a dropout rate must be "
                        "in [0, 1).")

  def build_model(self, dataset):
    info = dataset.info
    if info["entity_offset"] != ENTITY_OFFSET:
      raise ConfigError(f"The data numbers @entity0 as id {info['entity_offset']}, the "
                        f"model expects {ENTITY_OFFSET} (lnorm.data.cloze).")
    return self.model_for(info["vocab_size"], info["num_entities"], info["entity_offset"])

  def model_for(self, vocab_size: int, num_entities: int, entity_offset: int):
    c = self.config
    cell_variant, ff_bn = VARIANTS[c.norm]
    bn = c.norm_options.bn
    cell = make_lstm_cell(cell_variant, forget_bias=c.model.forget_bias, **cell_options(c),
                          bn_eps=bn.eps, bn_momentum=bn.momentum,
                          bn_scale_init=bn.scale_init,
                          bn_max_steps=c.data.max_passage_tokens)
    ff_norm = Identity
    if ff_bn:
      ff_norm = functools.partial(BatchNorm, eps=bn.eps, momentum=bn.momentum,
                                  scale_init=nn.initializers.constant(bn.scale_init))
    m = c.model
    return AttentiveReader(
        vocab_size=vocab_size, num_entities=num_entities, entity_offset=entity_offset,
        cell=cell, ff_norm=ff_norm, embed_size=m.embed_size, hidden_size=m.hidden_size,
        attention_size=m.attention_size, readout_size=m.readout_size,
        dropout=m.dropout, bilinear=m.bilinear,
        permute_in_training=c.data.permute_entities)

  def model_inputs(self, batch):
    return (batch["passage"], batch["passage_length"], batch["question"],
            batch["question_length"])

  def loss_and_metrics(self, logits, batch):
    logits = logits.astype(jnp.float32)
    answer = batch["answer"]
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, answer)
    if self.config.model.restrict_to_passage_entities:
      logits = restrict(logits, passage_entities(batch["passage"], logits.shape[-1],
                                                 ENTITY_OFFSET))
    error = (jnp.argmax(logits, -1) != answer).astype(jnp.float32)
    return jnp.mean(nll), {"nll": nll, "error": error}
