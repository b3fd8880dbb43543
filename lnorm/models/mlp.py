"""A multilayer perceptron whose layers take a normalizer (LN paper sec. 6.6)."""

from __future__ import annotations

from typing import Callable, Sequence

import flax.linen as nn

from lnorm.normalization import Norm

POSITIONS = ("pre", "post")


class MLP(nn.Module):
  """``hidden_sizes`` normalized hidden layers, then a linear output layer.

  ``position`` puts the norm before ('pre', g(N(Wx))) or after ('post', N(g(Wx + b)))
  the nonlinearity. The output layer is normalized only if ``normalize_logits``
  (the LN paper's BN network normalized every layer; its LN network did not).
  """

  hidden_sizes: Sequence[int]
  num_outputs: int
  norm: Norm
  position: str = "pre"
  normalize_logits: bool = False
  activation: Callable = nn.relu

  @nn.compact
  def __call__(self, x, *, train: bool = False):
    if self.position not in POSITIONS:
      raise ValueError(f"norm position {self.position!r}: use one of {POSITIONS}.")
    x = x.reshape(x.shape[0], -1)
    for i, size in enumerate(self.hidden_sizes):
      # A bias in front of a normalizer that re-centres and adds its own is dead weight.
      redundant_bias = self.position == "pre" and self.norm.has_bias
      x = self.norm.dense(size, use_bias=not redundant_bias, name=f"dense_{i}")(x)
      normalize = self.norm.layer(name=f"norm_{i}")
      if self.position == "pre":
        x = self.activation(normalize(x, train=train))
      else:
        x = normalize(self.activation(x), train=train)
    if self.normalize_logits:
      x = self.norm.dense(self.num_outputs, use_bias=not self.norm.has_bias,
                          name="logits")(x)
      return self.norm.layer(name="norm_logits")(x, train=train)
    return nn.Dense(self.num_outputs, name="logits")(x)


def forward_macs(batch_size: int, input_size: int, hidden_sizes: Sequence[int],
                 num_outputs: int) -> int:
  """Multiply-accumulates of an MLP's matmuls in one forward pass over a batch."""
  sizes = [input_size, *hidden_sizes, num_outputs]
  return batch_size * sum(a * b for a, b in zip(sizes, sizes[1:]))
