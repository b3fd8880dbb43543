"""The BLN paper's modified LeNet-5 for CIFAR-10 (docs/experiments.md, sec. 8, [code]).

  conv 6@5x5 'same' tanh -> avg-pool 2 -> norm -> conv 16@5x5 'valid' tanh ->
  avg-pool 2 -> norm -> dense 120 tanh -> norm -> dense 84 tanh -> norm -> dense 10

Every norm sits after the activation (and the pooling), as in the BLN paper's eq. 27,
whichever norm it is: the comparison keeps the network fixed and swaps the norm.
"""

from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn
import jax.numpy as jnp

from lnorm.normalization import Norm


class LeNet(nn.Module):
  """Modified LeNet-5 on NHWC images.

  ``conv_norm`` normalizes the two [B, H, W, C] feature maps and ``dense_norm`` the
  two [B, F] hidden layers: they are the same normalizer, built with the axes that
  suit each shape (see the task beside it for the axis conventions).

  ``input_mean`` and ``input_std`` ([H, W, C], optional): the images are standardized
  with them, position by position, before the first convolution (the training
  images' statistics, which the model carries so that whoever applies it needs only
  the images).
  """

  num_classes: int
  conv_norm: Norm
  dense_norm: Norm
  conv_features: tuple[int, int] = (6, 16)
  hidden_sizes: tuple[int, int] = (120, 84)
  activation: Callable = jnp.tanh
  input_mean: Any = None
  input_std: Any = None

  @nn.compact
  def __call__(self, x, *, train: bool = False):
    if self.input_mean is not None:
      # [None]: explicit broadcast over the batch (tests raise on rank promotion).
      x = (x - self.input_mean[None]) / self.input_std[None]
    for i, (features, padding) in enumerate(zip(self.conv_features, ("SAME", "VALID"))):
      x = nn.Conv(features, (5, 5), padding=padding, name=f"conv_{i}")(x)
      x = nn.avg_pool(self.activation(x), (2, 2), strides=(2, 2))
      x = self.conv_norm.layer(name=f"conv_norm_{i}")(x, train=train)
    x = x.reshape(x.shape[0], -1)
    for i, size in enumerate(self.hidden_sizes):
      x = self.dense_norm.dense(size, name=f"dense_{i}")(x)
      x = self.dense_norm.layer(name=f"dense_norm_{i}")(self.activation(x), train=train)
    return nn.Dense(self.num_classes, name="logits")(x)


def forward_macs(batch_size: int, image_shape: tuple[int, int, int], num_classes: int,
                 conv_features: tuple[int, int] = (6, 16),
                 hidden_sizes: tuple[int, int] = (120, 84)) -> int:
  """Multiply-accumulates of the convolutions and dense layers in one forward pass
  over a batch of ``image_shape`` (H, W, C) images: each 5x5 convolution costs
  25 x C_in MACs per output pixel and channel ('same' keeps H x W, 'valid' loses 4),
  and each 2x2 pooling halves the sides (rounding down)."""
  height, width, channels = image_shape
  macs = 0
  for features, padding in zip(conv_features, ("SAME", "VALID")):
    if padding == "VALID":
      height, width = height - 4, width - 4
    macs += height * width * features * 25 * channels
    height, width, channels = height // 2, width // 2, features
  sizes = [height * width * channels, *hidden_sizes, num_classes]
  macs += sum(a * b for a, b in zip(sizes, sizes[1:]))
  return batch_size * macs
