"""CIFAR-10 with the BLN paper's modified LeNet-5 (BLN paper sec. 4.1,
docs/experiments.md, sec. 8): BLN, BN, LN or no norm after each activation-and-pooling.

Inputs are standardised per pixel and channel with the statistics of the training
split actually used (the 20% subset or the whole set), as in the authors' code.

Axis conventions for the two conv feature maps ([B, H, W, C]), chosen by the config
field ``norm_axes`` (the dense layers' norms work on [B, F], where every convention
agrees: batch statistics over axis 0, feature statistics over axis -1):

  conventional  BN per channel over (N, H, W); LN per example over (H, W, C);
                BLN batch statistics per channel over (N, H, W) and feature
                statistics per example over (H, W, C), i.e. BN's and LN's axes.
  authors       BLN as in the authors' Keras layer: batch statistics per position
                and channel over N only, feature statistics per example and position
                over C only. BN and LN keep the conventional axes.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from experiments.bln_cifar import lenet
from experiments.bln_cifar.lenet import LeNet
from lnorm.errors import ConfigError
from lnorm.evaluation import trivial
from lnorm.normalization import PER_EXAMPLE_NORMS, make_norm
from lnorm.training.task import ClassificationTask

#: norm_axes -> norm -> options for the norms of the conv feature maps (NHWC). Every
#: per-example normalizer (LN's successors, a user's) takes LN's axes.
CONV_AXES = {
    "conventional": {
        "bn": {"axes": (0, 1, 2)},
        "ln": {"axes": (1, 2, 3)},
        "bln": {"batch_axes": (0, 1, 2), "feature_axes": (1, 2, 3)},
        "none": {},
    },
    "authors": {
        "bn": {"axes": (0, 1, 2)},
        "ln": {"axes": (1, 2, 3)},
        "bln": {"batch_axes": (0,), "feature_axes": (3,)},
        "none": {},
    },
}


def conv_axes(norm_axes: str, norm: str) -> dict:
  if norm_axes not in CONV_AXES:
    raise ConfigError(f"norm_axes={norm_axes!r}: use one of {', '.join(CONV_AXES)}.")
  axes = CONV_AXES[norm_axes]
  return axes.get(norm, axes["ln"])


class Task(ClassificationTask):

  norms = ("bln", "bn") + PER_EXAMPLE_NORMS + ("none",)

  def load_data(self):
    """The data, its info holding the training images' statistics per pixel and
    channel (``pixel_mean``, ``pixel_std``), with which the model standardizes its
    inputs: computed once per load, whatever number of models is built on it."""
    dataset = super().load_data()
    images = dataset.splits[self.train_split()]["image"].astype(np.float64)
    return dataclasses.replace(dataset, info={
        **dataset.info, "pixel_mean": images.mean(axis=0).astype(np.float32),
        "pixel_std": np.maximum(images.std(axis=0), 1e-3).astype(np.float32)})

  def build_model(self, dataset):
    c = self.config
    options = dict(c.norm_options.get(c.norm) or {})
    conv_norm = make_norm(c.norm, {**options, **conv_axes(c.norm_axes, c.norm)})
    return LeNet(num_classes=dataset.info["num_classes"], conv_norm=conv_norm,
                 dense_norm=make_norm(c.norm, options),
                 input_mean=dataset.info["pixel_mean"],
                 input_std=dataset.info["pixel_std"])

  def forward_macs(self, dataset, batch):
    image = batch["image"]
    return lenet.forward_macs(image.shape[0], image.shape[1:], dataset.info["num_classes"],
                              LeNet.conv_features, LeNet.hidden_sizes)

  def model_inputs(self, batch):
    # The model standardizes them (LeNet's input_mean and input_std).
    return (batch["image"].astype(jnp.float32),)

  def trivial_baseline(self, dataset):
    """The training subset's class prior: the majority class's error."""
    return trivial.classification_record(dataset, dataset.info["num_classes"],
                                         self.train_split())
