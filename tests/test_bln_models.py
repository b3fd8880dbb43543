"""The BLN experiments' networks: exact parameter counts, the norm axes, and the IMDB
model's dropout and padding conventions."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import bln_imdb as imdb_config
from experiments.bln_cifar.lenet import LeNet
from experiments.bln_cifar.task import conv_axes
from experiments.bln_imdb.model import SentimentRNN
from experiments.bln_imdb.task import Task as ImdbTask
from lnorm.data import imdb
from lnorm.errors import ConfigError
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
  # Jitted, as training runs it: op by op, the two LSTMs' steps took 3x as long.
  variables = jax.jit(lambda rngs: model.init(rngs, tokens, lengths, train=True))(rngs)

  def loss(params):
    out, _ = model.apply({**variables, "params": params}, tokens, lengths, train=True,
                         rngs={"dropout": jax.random.key(2)}, mutable=["batch_stats"])
    return jnp.sum(out)

  grads = jax.jit(jax.grad(loss))(variables["params"])
  assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))


# --- IMDB: the authors' dropout and padding conventions -------------------------------

TINY = dict(vocab_size=30, embed_size=6, lstm_sizes=(5, 3), hidden_size=4)


def tiny_rnn(norm="bln", **kw):
  return SentimentRNN(norm=make_norm(norm, {}), **{**TINY, **kw})


def init_tiny(model, tokens, lengths):
  return jax.jit(lambda rngs: model.init(rngs, tokens, lengths, train=True))(
      {"params": jax.random.key(0), "dropout": jax.random.key(1)})


@functools.cache
def _compiled_train_logits(model):
  """One compiled training forward per model: op by op, the LSTMs' steps took longer
  than compiling them."""
  return jax.jit(lambda variables, tokens, lengths, key: model.apply(
      variables, tokens, lengths, train=True, mutable=["batch_stats"],
      rngs={"dropout": jax.random.key(key)})[0])


def train_logits(model, variables, tokens, lengths, key=2):
  return _compiled_train_logits(model)(variables, tokens, lengths, key)


def test_authors_dropout_is_in_both_lstms_and_only_in_training():
  tokens = jnp.array([[3, 4, 5, 6, 7], [8, 9, 2, 0, 0]], jnp.int32)
  lengths = jnp.array([5, 3])
  model = tiny_rnn()
  assert (model.dropout, model.recurrent_dropout, model.dropout_mask) == (
      0.2, 0.2, "per_sequence")
  variables = init_tiny(model, tokens, lengths)
  no_dropout = model.clone(dropout=0.0, recurrent_dropout=0.0)
  plain = train_logits(no_dropout, variables, tokens, lengths)
  assert not np.allclose(train_logits(model, variables, tokens, lengths), plain)
  # Each rate on its own changes the training output ...
  for rates in ({"dropout": 0.0}, {"recurrent_dropout": 0.0}):
    one = model.clone(**rates)
    assert not np.allclose(train_logits(one, variables, tokens, lengths), plain)
  # ... and in evaluation nothing is dropped.
  np.testing.assert_array_equal(model.apply(variables, tokens, lengths),
                                no_dropout.apply(variables, tokens, lengths))


def test_left_padding_puts_the_tokens_at_the_end():
  config = {"synthetic_size": 8, "vocab_size": 50, "max_length": 12, "seed": 0}
  post = imdb.load_synthetic({**config, "padding": "post"}, False).splits["train"]
  pre = imdb.load_synthetic({**config, "padding": "pre"}, False).splits["train"]
  np.testing.assert_array_equal(pre["length"], post["length"])
  assert np.any(post["length"] < 12)
  for p, q, n in zip(pre["tokens"], post["tokens"], post["length"]):
    np.testing.assert_array_equal(p[12 - n:], q[:n])     # the same tokens, at the end
    np.testing.assert_array_equal(p[:12 - n], 0)        # the padding in front
    assert np.all(p[12 - n:] != 0)


@pytest.mark.parametrize("norm", ["bln", "bn"])
def test_unmasked_padding_runs_through_the_lstms_and_norms(norm):
  # Three reviews: a norm over a batch of two maps any pair to about (+1, -1).
  reviews = [[3, 4, 5], [6, 7, 8, 9, 2, 3], [10, 11, 12, 13]]
  right = jnp.array([r + [0] * (6 - len(r)) for r in reviews], jnp.int32)
  left = jnp.array([[0] * (6 - len(r)) + r for r in reviews], jnp.int32)
  lengths = jnp.array([len(r) for r in reviews])
  masked = tiny_rnn(norm, dropout=0.0, recurrent_dropout=0.0)
  unmasked = masked.clone(mask_padding=False)
  variables = init_tiny(masked, right, lengths)
  # Unmasked, the lengths are ignored: every step is a real step, padding included.
  np.testing.assert_allclose(
      train_logits(unmasked, variables, left, lengths),
      train_logits(masked, variables, left, jnp.array([6, 6, 6])), rtol=1e-5, atol=1e-6)
  # The padding reaches the LSTM states and the norms' statistics: the logits differ
  # from the masked model's for every review (the second has no padding, but the batch
  # statistics mixed in the others' padded steps).
  want = train_logits(masked, variables, right, lengths)
  got = train_logits(unmasked, variables, left, lengths)
  assert np.all(np.abs(np.asarray(got) - np.asarray(want)) > 1e-4)
  # Masked, the padded steps are ignored: other tokens there leave the logits as they
  # were; unmasked, they change them.
  garbage = jnp.where(right == 0, 17, right)
  np.testing.assert_allclose(train_logits(masked, variables, garbage, lengths), want,
                             rtol=1e-5, atol=1e-6)
  assert not np.allclose(train_logits(unmasked, variables, garbage, lengths),
                         train_logits(unmasked, variables, right, lengths))


def test_imdb_config_conventions():
  keras = imdb_config.get_config("padding=keras")
  assert (keras.data.padding, keras.model.mask_padding) == ("pre", False)
  masked = imdb_config.get_config()
  assert (masked.data.padding, masked.model.mask_padding) == ("post", True)
  assert (masked.model.dropout, masked.model.recurrent_dropout,
          masked.model.dropout_mask) == (0.2, 0.2, "per_sequence")
  with pytest.raises(ConfigError, match="padding='pre'.*mask_padding=False"):
    bad = imdb_config.get_config()
    bad.data.padding = "pre"
    ImdbTask(bad)
  with pytest.raises(ConfigError, match="per_sequence, per_step"):
    bad = imdb_config.get_config()
    bad.model.dropout_mask = "per_review"
    ImdbTask(bad)
  with pytest.raises(ConfigError, match="padding='left'"):
    imdb_config.get_config("padding=left")


def test_imdb_runs_from_before_recurrent_dropout_rebuild_their_model():
  # config.json of the earlier runs has none of the new model fields.
  old = imdb_config.get_config("smoke=True")
  for name in ("recurrent_dropout", "dropout_mask", "mask_padding"):
    del old.model[name]

  class Data:
    info = {"vocab_size": 100}

  model = ImdbTask(old).build_model(Data())
  assert (model.dropout, model.recurrent_dropout, model.dropout_mask,
          model.mask_padding) == (0.2, 0.0, "per_step", True)
