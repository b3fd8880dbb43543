"""Every experiment's model, as its Task builds it, against a forward composed by hand
from the layer references in tests/references.py (the recipe is in its docstring).

Each test also shows that its tolerance separates the model from the same reference
with the norm skipped, moved, or reduced over other axes.
"""

from __future__ import annotations

import types

import jax
import numpy as np
import pytest

from configs import bln_cifar as bln_cifar_config
from configs import bln_imdb as bln_imdb_config
from configs import draw as draw_config
from configs import perm_mnist as perm_mnist_config
from experiments.bln_cifar import task as bln_cifar
from experiments.bln_imdb import task as bln_imdb
from experiments.draw import model as draw_model
from experiments.draw import task as draw
from experiments.perm_mnist import task as perm_mnist
from tests import references as ref

pytestmark = pytest.mark.usefixtures("precise_jax")

TOL = {"rtol": 1e-4, "atol": 1e-5}


def _dataset(**info):
  return types.SimpleNamespace(info=info)


def _init(model, *inputs, seed=0, **kwargs):
  """Random parameters of the model's shapes (shapes only: no init to compile), and
  zero statistics, which training-mode forwards do not read."""
  rngs = {"params": jax.random.key(seed), "dropout": jax.random.key(seed + 1),
          "sample": jax.random.key(seed + 2)}
  shapes = jax.eval_shape(lambda: model.init(rngs, *inputs, **kwargs))
  variables = {"params": ref.random_params(shapes["params"], seed)}
  if "batch_stats" in shapes:
    variables["batch_stats"] = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype),
                                            shapes["batch_stats"])
  return variables


def _apply_train(model, variables, *inputs):
  """Training mode (batch statistics for BN and BLN), compiled once."""
  out, _ = jax.jit(lambda v, *xs: model.apply(
      v, *xs, train=True, mutable=["batch_stats"], rngs={"dropout": jax.random.key(9)}))(
          variables, *inputs)
  return np.asarray(out, np.float64)


# --- perm-MNIST MLP (LN paper sec. 6.6) ------------------------------------------------

#: Axes over which a norm would be wrong, for the sharpness check.
WRONG_AXES = {"ln": {"axes": 0}, "bn": {"axes": -1},
              "bln": {"batch_axes": -1, "feature_axes": 0}}


def mlp_ref(p, x, norm, position, normalize_logits, **axes):
  """hidden: g(N(x W)) ('pre', LN and BN papers) or N(g(x W + b)) ('post', BLN paper
  eq. 27); logits x W + b, normalized too when the experiment says so."""
  h = x.reshape(len(x), -1)
  i = 0
  while f"dense_{i}" in p:
    a = ref.dense(h, p[f"dense_{i}"])
    n = p.get(f"norm_{i}", {})
    if position == "pre":
      h = ref.relu(ref.norm_train_ref(norm, a, n, **axes))
    else:
      h = ref.norm_train_ref(norm, ref.relu(a), n, **axes)
    i += 1
  out = ref.dense(h, p["logits"])
  if normalize_logits:
    out = ref.norm_train_ref(norm, out, p.get("norm_logits", {}), **axes)
  return out


@pytest.mark.parametrize("norm,position", [
    ("ln", "pre"), ("ln", "post"), ("bn", "pre"), ("bln", "post"), ("wn", "pre"),
    ("none", "pre")])
def test_perm_mnist_mlp_forward(norm, position):
  config = perm_mnist_config.get_config(f"norm={norm}")
  config.hidden_sizes = (7, 5)
  config.norm_position = position
  task = perm_mnist.Task(config)
  model = task.build_model(_dataset(num_classes=4))
  images = np.random.default_rng(0).integers(0, 256, size=(6, 20), dtype=np.uint8)
  (x,) = task.model_inputs({"image": images})
  variables = _init(model, x, train=True)
  y = _apply_train(model, variables, x)

  p = ref.f64(variables["params"])
  x64 = images / 255.0
  # The paper's placement of the logits' norm: BN and WN normalize every layer, LN
  # (and BLN, whose paper normalizes hidden layers only) do not.
  normalize_logits = norm in ("bn", "wn")
  np.testing.assert_allclose(y, mlp_ref(p, x64, norm, position, normalize_logits), **TOL)

  if norm in ("none", "wn"):
    return
  assert_differs = lambda wrong, what: ref.assert_differs(y, wrong, atol=TOL["atol"],
                                                          what=what)
  assert_differs(mlp_ref(p, x64, "none", position, False), "the MLP without its norm")
  other = "post" if position == "pre" else "pre"
  assert_differs(mlp_ref(p, x64, norm, other, normalize_logits), f"the norm placed {other}")
  assert_differs(mlp_ref(p, x64, norm, position, normalize_logits, **WRONG_AXES[norm]),
                 "the norm over the wrong axes")


# --- CIFAR-10 LeNet (BLN paper sec. 4.1) ------------------------------------------------

#: The conv-map axes of experiments/bln_cifar's docstring, written out independently
#: of its table: LN normalizes, BN reduces, BLN takes batch and feature statistics.
CONV_AXES = {
    ("ln", "conventional"): {"axes": (1, 2, 3)},
    ("bn", "conventional"): {"axes": (0, 1, 2)},
    ("bln", "conventional"): {"batch_axes": (0, 1, 2), "feature_axes": (1, 2, 3)},
    ("bln", "authors"): {"batch_axes": 0, "feature_axes": 3},
    ("none", "conventional"): {},
}


def lenet_ref(p, x, norm, conv_axes, *, norm_before_activation=False):
  """conv 'same' tanh -> pool -> N -> conv 'valid' tanh -> pool -> N -> dense tanh ->
  N -> dense tanh -> N -> dense (BLN paper eq. 27: the norm after the activation)."""
  for i, padding in enumerate(("SAME", "VALID")):
    a = ref.conv2d(x, p[f"conv_{i}"], padding)
    n = p.get(f"conv_norm_{i}", {})
    if norm_before_activation:  # g(N(pool(a))), the LN paper's placement.
      x = np.tanh(ref.norm_train_ref(norm, ref.avg_pool2(a), n, **conv_axes))
    else:
      x = ref.norm_train_ref(norm, ref.avg_pool2(np.tanh(a)), n, **conv_axes)
  x = x.reshape(len(x), -1)
  for i in range(2):
    x = ref.norm_train_ref(norm, np.tanh(ref.dense(x, p[f"dense_{i}"])),
                           p.get(f"dense_norm_{i}", {}))
  return ref.dense(x, p["logits"])


@pytest.mark.parametrize("norm,norm_axes", sorted(CONV_AXES))
def test_bln_cifar_lenet_forward(norm, norm_axes):
  config = bln_cifar_config.get_config(f"norm={norm},norm_axes={norm_axes}")
  # Standardized inputs: the reference takes them as they are.
  model = bln_cifar.Task(config).build_model(_dataset(
      num_classes=10, pixel_mean=np.zeros((16, 20, 3), np.float32),
      pixel_std=np.ones((16, 20, 3), np.float32))).clone(
          conv_features=(3, 4), hidden_sizes=(7, 5))
  # 16 x 20: conv 'same' 16x20 -> pool 8x10 -> conv 'valid' 4x6 -> pool 2x3; not
  # square, so that a swapped height and width shows.
  x = np.random.default_rng(1).normal(size=(5, 16, 20, 3)).astype(np.float32)
  variables = _init(model, x, train=True)
  y = _apply_train(model, variables, x)

  p = ref.f64(variables["params"])
  axes = CONV_AXES[(norm, norm_axes)]
  np.testing.assert_allclose(y, lenet_ref(p, x.astype(np.float64), norm, axes), **TOL)

  if norm == "none":
    return
  x64 = x.astype(np.float64)
  assert_differs = lambda wrong, what: ref.assert_differs(y, wrong, atol=TOL["atol"],
                                                          what=what)
  assert_differs(lenet_ref(p, x64, "none", {}), "LeNet without its norms")
  assert_differs(lenet_ref(p, x64, norm, axes, norm_before_activation=True),
                 "the conv norms before the activation")
  wrong = {"ln": {"axes": 3}, "bn": {"axes": (0,)}}.get(norm) or CONV_AXES[
      ("bln", "authors" if norm_axes == "conventional" else "conventional")]
  assert_differs(lenet_ref(p, x64, norm, wrong), "the conv norms over other axes")


# --- IMDB SentimentRNN (BLN paper sec. 4.2) -------------------------------------------


def sentiment_ref(p, tokens, lengths, norm):
  """embed -> LSTM (all states) -> N (real steps only) -> LSTM (last state) -> N ->
  dense tanh -> N -> logit."""
  x = p["embed"]["embedding"][tokens]
  states, _, _ = ref.lstm(np, p["lstm_0"]["layer_0"], x, lengths, "none")
  real = (np.arange(tokens.shape[1])[None, :] < lengths[:, None])[..., None]
  # Padded steps may hold anything: the next LSTM must not read them, so the
  # reference zeros them (a model that read them would disagree).
  x = np.where(real, ref.norm_train_ref(norm, states, p.get("norm_0", {}), mask=real), 0.0)
  _, (_, last), _ = ref.lstm(np, p["lstm_1"]["layer_0"], x, lengths, "none")
  x = ref.norm_train_ref(norm, last, p.get("norm_1", {}))
  x = ref.norm_train_ref(norm, np.tanh(ref.dense(x, p["dense"])), p.get("norm_2", {}))
  return ref.dense(x, p["logit"])[:, 0]


@pytest.mark.parametrize("norm", ["bln", "ln", "bn", "none"])
def test_bln_imdb_sentiment_rnn_forward(norm):
  task = bln_imdb.Task(bln_imdb_config.get_config(f"norm={norm}"))
  model = task.build_model(_dataset(vocab_size=11))
  # Every dropout off (recurrent dropout too, where the model has it): training mode
  # is then deterministic and comparable.
  no_dropout = {f: 0.0 for f in ("dropout", "recurrent_dropout") if hasattr(model, f)}
  model = model.clone(embed_size=5, lstm_sizes=(4, 3), hidden_size=3, **no_dropout)
  rng = np.random.default_rng(2)
  lengths = np.array([6, 3, 5, 1, 6], np.int32)
  tokens = np.where(np.arange(6)[None, :] < lengths[:, None],
                    rng.integers(2, 11, size=(5, 6)), 0).astype(np.int32)
  inputs = task.model_inputs({"tokens": tokens, "length": lengths})
  variables = _init(model, *inputs, train=True)
  y = _apply_train(model, variables, *inputs)

  p = ref.f64(variables["params"])
  np.testing.assert_allclose(y, sentiment_ref(p, tokens, lengths, norm), **TOL)
  if norm != "none":
    ref.assert_differs(y, sentiment_ref(p, tokens, lengths, "none"), atol=TOL["atol"],
                       what="the RNN without its norms")


# --- DRAW (LN paper sec. 6.4) ---------------------------------------------------------


def draw_ref(p, images, eps, variant, read_n, write_n):
  """DRAW paper eq. 3-8 with the attention of sec. 3.2, glimpse by glimpse: returns
  the final canvas logits c_T and the KL summed over glimpses."""
  B, H, W = images.shape
  hidden = p["encoder"]["hidden_proj"]["kernel"].shape[0]
  enc = dec = (np.zeros((B, hidden)), np.zeros((B, hidden)))
  canvas = np.zeros_like(images)
  kl = np.zeros(B)
  one_step = np.ones(B, np.int32)

  def attention_filters(name, h, n):
    att = ref.draw_attention(ref.dense(h, p[name]), n, H, W)
    fy = ref.draw_filterbank(att["gy"], att["delta"], att["var"], n, H)
    fx = ref.draw_filterbank(att["gx"], att["delta"], att["var"], n, W)
    return fy, fx, att["gamma"][:, None, None]

  for t in range(len(eps)):
    h_dec = dec[1]
    x_hat = images - ref.sigmoid(np, canvas)
    if read_n:
      fy, fx, gamma = attention_filters("read_attention", h_dec, read_n)
      read = lambda img: gamma * np.einsum("bnh,bhw,bmw->bnm", fy, img, fx)
      r = np.concatenate([read(images), read(x_hat)], axis=-1).reshape(B, -1)
    else:
      r = np.concatenate([images.reshape(B, -1), x_hat.reshape(B, -1)], axis=-1)
    _, enc, _ = ref.lstm(np, p["encoder"], np.concatenate([r, h_dec], -1)[:, None],
                         one_step, variant, init=enc)
    mu, log_sigma = np.split(ref.dense(enc[1], p["posterior"]), 2, axis=-1)
    z = mu + np.exp(log_sigma) * eps[t]
    kl += ref.gaussian_kl(mu, log_sigma)
    _, dec, _ = ref.lstm(np, p["decoder"], z[:, None], one_step, variant, init=dec)
    w = ref.dense(dec[1], p["write"])
    if write_n:
      fy, fx, gamma = attention_filters("write_attention", dec[1], write_n)
      canvas = canvas + np.einsum("bnh,bnm,bmw->bhw", fy, w.reshape(B, write_n, write_n),
                                  fx) / gamma
    else:
      canvas = canvas + w.reshape(B, H, W)
  return canvas, kl


@pytest.mark.parametrize("norm,attention", [("ln", True), ("ln_cell", True),
                                            ("none", False)])
def test_draw_forward(norm, attention):
  config = draw_config.get_config(f"norm={norm}")
  config.attention = attention
  model = draw.Task(config).build_model(_dataset(image_shape=(8, 6))).clone(
      hidden_size=6, latent_size=3, num_glimpses=3)
  if attention:
    model = model.clone(read_n=2, write_n=3)
  images = (np.random.default_rng(3).random((4, 8, 6)) < 0.3).astype(np.float32)
  variables = _init(model, images, train=True)
  out = jax.jit(lambda v, x: model.apply(v, x, train=False))(variables, images)

  # Without a 'sample' RNG the model draws its noise from the fixed evaluation key.
  eps = np.asarray(jax.random.normal(jax.random.key(draw_model.EVAL_NOISE_SEED),
                                     (3, 4, 3)), np.float64)
  p = ref.f64(variables["params"]["glimpses"])
  read_n, write_n = (2, 3) if attention else (0, 0)
  logits, kl = draw_ref(p, images.astype(np.float64), eps, norm, read_n, write_n)
  np.testing.assert_allclose(out["logits"], logits, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(out["kl"], kl, rtol=1e-4, atol=1e-4)
  if norm != "none":
    ref.assert_differs(out["logits"], draw_ref(p, images, eps, "none", read_n, write_n)[0],
                       atol=1e-4, what="DRAW without its LSTM norms")
