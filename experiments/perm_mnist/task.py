"""Permutation-invariant MNIST (LN paper sec. 6.6, Figure 6).

The model sees flat pixel vectors scaled to [0, 1]: no spatial prior, no
augmentation. The experiment is library wiring: an MLP, a norm, a cross-entropy.
"""

from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from lnorm.errors import ConfigError
from lnorm.evaluation import trivial
from lnorm.models import MLP, mlp
from lnorm.normalization import make_norm
from lnorm.training.task import ClassificationTask

ACTIVATIONS = {"relu": nn.relu, "tanh": jnp.tanh, "sigmoid": nn.sigmoid}


class Task(ClassificationTask):

  def build_model(self, dataset):
    c = self.config
    norm = make_norm(c.norm, c.norm_options.get(c.norm))
    if c.activation not in ACTIVATIONS:
      raise ConfigError(f"Unknown activation {c.activation!r}: use one of "
                       f"{', '.join(ACTIVATIONS)}.")
    position = norm.default_position if c.norm_position == "auto" else c.norm_position
    normalize_logits = (norm.normalizes_logits if c.normalize_logits == "auto"
                        else c.normalize_logits == "true")
    return MLP(hidden_sizes=tuple(c.hidden_sizes), num_outputs=dataset.info["num_classes"],
               norm=norm, position=position, normalize_logits=normalize_logits,
               activation=ACTIVATIONS[c.activation])

  def forward_macs(self, dataset, batch):
    image = batch["image"]
    return mlp.forward_macs(image.shape[0], int(np.prod(image.shape[1:])),
                            self.config.hidden_sizes, dataset.info["num_classes"])

  def model_inputs(self, batch):
    return (batch["image"].astype(jnp.float32) / 255.0,)

  def trivial_baseline(self, dataset):
    """The training split's class prior: the majority class's error."""
    return trivial.classification_record(dataset, dataset.info["num_classes"],
                                         self.train_split())
