"""The BLN experiments' networks: exact parameter counts and the norm axes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.bln_cifar.task import conv_axes
from experiments.bln_imdb.model import SentimentRNN
from lnorm.models import LeNet
from lnorm.normalization import make_norm

# Modified LeNet-5 without norms: conv 5*5*3*6+6, conv 5*5*6*16+16, dense 576*120+120,
# dense 120*84+84, dense 84*10+10.
LENET_BASE = 456 + 2416 + 69240 + 10164 + 850
# Gain and bias of the two dense-layer norms (120 and 84 features).
DENSE_NORMS = 2 * (120 + 84)


def _count(tree) -> int:
  return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(tree))


def lenet(norm: str, norm_axes: str = "conventional") -> LeNet:
  return LeNet(num_classes=10, conv_norm=make_norm(norm, conv_axes(norm_axes, norm)),
               dense_norm=make_norm(norm, {}))


@pytest.mark.parametrize("norm,norm_axes,expected", [
    ("none", "conventional", LENET_BASE),
    # BN: a gain and a bias per channel (6 and 16).
    ("bn", "conventional", LENET_BASE + 2 * (6 + 16) + DENSE_NORMS),
    # LN over (H, W, C): a gain and a bias per element of the 16x16x6 and 6x6x16 maps.
    ("ln", "conventional", LENET_BASE + 2 * (16 * 16 * 6 + 6 * 6 * 16) + DENSE_NORMS),
    # BLN's gain covers its feature axes: (H, W, C), or C alone in the authors' layer.
    ("bln", "conventional", LENET_BASE + 2 * (16 * 16 * 6 + 6 * 6 * 16) + DENSE_NORMS),
    ("bln", "authors", LENET_BASE + 2 * (6 + 16) + DENSE_NORMS),
])
def test_lenet_parameter_count(norm, norm_axes, expected):
  x = jnp.zeros((2, 32, 32, 3))
  variables = jax.eval_shape(lambda: lenet(norm, norm_axes).init(
      jax.random.key(0), x, train=True))
  assert _count(variables["params"]) == expected


def test_lenet_statistics_follow_the_axis_convention():
  x = jnp.zeros((2, 32, 32, 3))
  stats = {}
  for norm_axes in ("conventional", "authors"):
    variables = jax.eval_shape(lambda: lenet("bln", norm_axes).init(
        jax.random.key(0), x, train=True))
    stats[norm_axes] = variables["batch_stats"]["conv_norm_0"]
  # Conventional: batch statistics per channel; authors: per position and channel.
  assert stats["conventional"]["batch_mean"].shape == (1, 1, 1, 6)
  assert stats["authors"]["batch_mean"].shape == (1, 16, 16, 6)
  # Feature statistics: one per example over (H, W, C), or per position over C.
  assert stats["conventional"]["feature_mean"].shape == (1, 1, 1, 1)
  assert stats["authors"]["feature_mean"].shape == (1, 16, 16, 1)
  bn = jax.eval_shape(lambda: lenet("bn").init(jax.random.key(0), x, train=True))
  assert bn["batch_stats"]["conv_norm_1"]["mean"].shape == (16,)


def _rnn_count(vocab, embed, h1, h2, dense, norm_features):
  lstm = lambda i, h: i * 4 * h + h * 4 * h + 4 * h  # W_x, W_h (no biases), b.
  return (vocab * embed + lstm(embed, h1) + lstm(h1, h2) + h2 * dense + dense
          + dense + 1 + norm_features)


@pytest.mark.parametrize("norm", ["none", "ln", "bn", "bln"])
def test_sentiment_rnn_parameter_count(norm):
  model = SentimentRNN(vocab_size=50, norm=make_norm(norm, {}), embed_size=6,
                       lstm_sizes=(5, 3), hidden_size=4)
  tokens = jnp.ones((2, 7), jnp.int32)
  variables = jax.eval_shape(lambda: model.init(
      {"params": jax.random.key(0), "dropout": jax.random.key(1)}, tokens,
      jnp.array([7, 3]), train=True))
  norms = 0 if norm == "none" else 2 * (5 + 3 + 4)
  assert _count(variables["params"]) == _rnn_count(50, 6, 5, 3, 4, norms)


def test_sentiment_rnn_paper_size():
  # 20,000 words + the pad and OOV ids; embedding 512, LSTMs 128 and 64, dense 32.
  model = SentimentRNN(vocab_size=20002, norm=make_norm("bln", {}))
  variables = jax.eval_shape(lambda: model.init(
      {"params": jax.random.key(0), "dropout": jax.random.key(1)},
      jnp.ones((2, 80), jnp.int32), jnp.array([80, 5]), train=True))
  assert _count(variables["params"]) == 10_621_185 == _rnn_count(
      20002, 512, 128, 64, 32, 2 * (128 + 64 + 32))


def test_sentiment_rnn_is_finite_at_batch_size_one_with_padding():
  # At batch size 1 every padded step has no real example: BLN's 1/m must not
  # produce NaN there, in the outputs or in the gradients.
  model = SentimentRNN(vocab_size=30, norm=make_norm("bln", {}), embed_size=6,
                       lstm_sizes=(5, 3), hidden_size=4)
  tokens = jnp.array([[3, 4, 5, 0, 0, 0]], jnp.int32)
  lengths = jnp.array([3])
  rngs = {"params": jax.random.key(0), "dropout": jax.random.key(1)}
  variables = model.init(rngs, tokens, lengths, train=True)

  def loss(params):
    out, _ = model.apply({**variables, "params": params}, tokens, lengths, train=True,
                         rngs={"dropout": jax.random.key(2)}, mutable=["batch_stats"])
    return jnp.sum(out)

  grads = jax.grad(loss)(variables["params"])
  assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))
