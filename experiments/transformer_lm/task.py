"""A character-level Transformer language model on the books corpus, with every
per-example normalizer in the post-LN or pre-LN place (docs/experiments.md, sec. 12).

Examples are windows of ``context + 1`` characters of one book
(``lnorm.data.book_chars``); the model reads the first ``context`` and predicts each
next character. Per-example metrics, means over the window's ``context`` targets:

* ``nll``: cross-entropy in nats per character (the training loss is its batch mean);
* ``bits_per_char``: the same in bits, the unit character-level language models report.

Every window is full, so no target is padding and each example weighs the same.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
import optax

from experiments.transformer_lm import model as model_lib
from lnorm.errors import ConfigError
from lnorm.evaluation import trivial
from lnorm.normalization import PER_EXAMPLE_NORMS, Norm, make_norm
from lnorm.training.task import Task as BaseTask


def block_norms(config) -> tuple[Norm, Norm]:
  """``(attention_norm, norm)``: the normalizer before (pre) or after (post) the
  attention, and the one of the MLP and the final normalization. They differ only in
  DyT's registered ``alpha_init_attention`` option (see configs/transformer_lm.py),
  which, when set, becomes the attention normalizer's ``alpha_init``."""
  if config.placement == "none":
    return make_norm("none"), make_norm("none")
  options = dict(config.norm_options.get(config.norm) or {})
  attention_alpha = options.get("alpha_init_attention")
  attention_options = (options if attention_alpha is None
                       else {**options, "alpha_init": attention_alpha})
  return make_norm(config.norm, attention_options), make_norm(config.norm, options)


class Task(BaseTask):

  norms = ("none",) + PER_EXAMPLE_NORMS

  def __init__(self, config):
    super().__init__(config)
    c = config
    if c.placement not in model_lib.PLACEMENTS:
      raise ConfigError(f"placement={c.placement!r}; valid choices: "
                        f"{', '.join(model_lib.PLACEMENTS)}.")
    if c.placement == "none" and c.norm != "none":
      raise ConfigError(f"placement=none builds no normalizer, but norm={c.norm!r}: set "
                        "norm=none, or placement=pre or post.")
    if c.model.positions not in model_lib.POSITIONS:
      raise ConfigError(f"model.positions={c.model.positions!r}; valid choices: "
                        f"{', '.join(model_lib.POSITIONS)}.")
    if c.model.width % c.model.num_heads:
      raise ConfigError(f"model.width={c.model.width} is not a multiple of "
                        f"model.num_heads={c.model.num_heads}: each head takes an equal "
                        "share of the width. Change either.")

  def build_model(self, dataset):
    return self.model_for(dataset.info["vocab_size"], dataset.info["context"])

  def model_for(self, vocab_size: int, context: int) -> model_lib.TransformerLM:
    c = self.config
    attention_norm, norm = block_norms(c)
    return model_lib.TransformerLM(
        vocab_size=vocab_size, num_layers=c.model.num_layers, width=c.model.width,
        num_heads=c.model.num_heads, mlp_size=c.model.mlp_size, context=context,
        placement=c.placement, attention_norm=attention_norm, norm=norm,
        positions=c.model.positions, tie_embeddings=c.model.tie_embeddings)

  def forward_macs(self, dataset, batch):
    m = self.config.model
    batch_size, window = batch["tokens"].shape
    return model_lib.forward_macs(
        batch_size=batch_size, length=window - 1, vocab_size=dataset.info["vocab_size"],
        num_layers=m.num_layers, width=m.width, mlp_size=m.mlp_size)

  def model_inputs(self, batch):
    return (batch["tokens"][:, :-1],)

  def loss_and_metrics(self, logits, batch, model):
    del model  # Unused.
    nll = token_nll(logits, batch["tokens"][:, 1:]).mean(axis=-1)
    return jnp.mean(nll), {"nll": nll, "bits_per_char": nll / math.log(2)}

  def trivial_baseline(self, dataset):
    """A unigram model of the training split's target characters, add-one smoothed
    over the vocabulary: ``nll`` and ``bits_per_char`` as the run logs them."""
    train = dataset.splits[self.train_split()]["tokens"][:, 1:]
    log_p = trivial.unigram(train, dataset.info["vocab_size"])
    values = {}
    for split in trivial.held_out_splits(dataset, self.train_split()):
      nll = float(-np.mean(log_p[dataset.splits[split]["tokens"][:, 1:]]))
      values[f"{split}/nll"] = nll
      values[f"{split}/bits_per_char"] = nll / math.log(2)
    return trivial.record("unigram (training characters, add-one)", values)


def token_nll(logits, targets):
  """``[B, T]`` cross-entropy of each target under its position's logits."""
  return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), targets)
