"""The handwriting synthesis model against NumPy versions of Graves (2013) eq. 46-51 and
the LN-LSTM of docs/experiments.md, sec. 4; padding; the parameter count; CLI smoke
runs."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import handwriting as handwriting_config
from experiments.handwriting import pictures
from experiments.handwriting import sampling
from experiments.handwriting.model import HandwritingSynthesis, sequence_nll, window_weights
from experiments.handwriting.task import build_model
from lnorm import cli
from lnorm.rnn import make_lstm_cell
from lnorm.training import optim
from tests.helpers import epoch_records, run_record
from tests.test_mdn import np_log_likelihood

H, K, M, V = 6, 2, 3, 5  # hidden, window Gaussians, mixture components, symbols


def np_window(params, kappa_prev, length):
  """phi(t, u) = sum_k alpha_k exp(-beta_k (kappa_k - u)^2), u < length."""
  alpha, beta, step = np.split(np.exp(params.astype(np.float64)), 3)
  kappa = kappa_prev + step
  phi = np.zeros(int(length))
  for u in range(int(length)):
    phi[u] = np.sum(alpha * np.exp(-beta * (kappa - u) ** 2))
  return phi, kappa


def test_window_matches_numpy_loop(precise_jax):
  rng = np.random.default_rng(0)
  steps, batch, chars = 6, 2, 7
  params = rng.normal(scale=0.7, size=(steps, batch, 3 * K)).astype(np.float32)
  lengths = np.array([7, 4])
  char_mask = np.arange(chars)[None] < lengths[:, None]
  onehot = np.eye(V)[rng.integers(0, V, (batch, chars))] * char_mask[..., None]
  kappa = jnp.zeros((batch, K))
  ref_kappa = np.zeros((batch, K))
  for t in range(steps):
    phi, kappa = window_weights(jnp.asarray(params[t]), kappa, jnp.asarray(char_mask))
    for b in range(batch):
      ref_phi, ref_kappa[b] = np_window(params[t, b], ref_kappa[b], lengths[b])
      np.testing.assert_allclose(phi[b, :lengths[b]], ref_phi, rtol=1e-5, atol=1e-7)
      assert not np.asarray(phi[b, lengths[b]:]).any()
      np.testing.assert_allclose(np.asarray(phi[b]) @ onehot[b], ref_phi @ onehot[b, :lengths[b]],
                                 rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(kappa, ref_kappa, rtol=1e-5)
  assert (np.diff(ref_kappa) != 0).any()  # kappa moved: the test exercises the increment.


# --- the whole network in NumPy -------------------------------------------------------


def sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def layer_norm(a, p, eps=1e-5):
  if p is None:
    return a
  return (a - a.mean()) / np.sqrt(a.var() + eps) * p["scale"] + p["bias"]


def np_lstm_step(p, x, c, h):
  ln = lambda name, a: layer_norm(a, p.get(name))
  gates = (ln("input_norm", x @ p["input_proj"]["kernel"])
           + ln("hidden_norm", h @ p["hidden_proj"]["kernel"]) + p["bias"])
  f, i, o, g = np.split(gates, 4)
  c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
  return c, sigmoid(o) * np.tanh(ln("cell_norm", c))


def np_forward(params, strokes, text):
  """Mixture outputs [T, 6M+1] and window weights [T, U] of one unpadded line."""
  p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
  steps = len(strokes)
  inputs = np.concatenate([np.zeros((1, 3)), strokes[:-1]])
  onehot = np.eye(V)[text]
  layer0 = p["layer_0"]
  c = h = np.zeros(H)
  kappa, w = np.zeros(K), np.zeros(V)
  h1, windows, phis = [], [], []
  for t in range(steps):
    c, h = np_lstm_step(layer0["lstm"], np.concatenate([inputs[t], w]), c, h)
    window = h @ layer0["window"]["kernel"] + layer0["window"]["bias"]
    phi, kappa = np_window(window, kappa, len(text))
    w = phi @ onehot
    h1.append(h)
    windows.append(w)
    phis.append(phi)
  hidden, below = [np.array(h1)], np.array(h1)
  for n in (1, 2):
    cell = p[f"layer_{n}"]["layer_0"]
    c = h = np.zeros(H)
    out = []
    for t in range(steps):
      c, h = np_lstm_step(cell, np.concatenate([inputs[t], windows[t], below[t]]), c, h)
      out.append(h)
    below = np.array(out)
    hidden.append(below)
  mixture = np.concatenate(hidden, -1) @ p["mixture"]["kernel"] + p["mixture"]["bias"]
  return mixture, np.array(phis)


def random_batch(rng, lengths, text_lengths, steps, chars):
  strokes = np.zeros((len(lengths), steps, 3), np.float32)
  text = np.zeros((len(lengths), chars), np.int32)
  for b, (n, u) in enumerate(zip(lengths, text_lengths)):
    strokes[b, :n, :2] = rng.normal(size=(n, 2))
    strokes[b, :n, 2] = rng.random(n) < 0.2
    text[b, :u] = rng.integers(0, V, u)
  return strokes, np.array(lengths, np.int32), text, np.array(text_lengths, np.int32)


def small_model(norm):
  return HandwritingSynthesis(make_lstm_cell(norm, forget_bias=1.0), hidden_size=H,
                              num_gaussians=K, num_components=M, num_symbols=V)


def perturbed(params, rng):
  # LN gains and biases away from 1 and 0, so that the test sees them.
  return jax.tree.map(lambda a: a + 0.1 * rng.normal(size=a.shape).astype(np.float32), params)


@pytest.mark.parametrize("norm", ["none", "ln"])
def test_forward_and_loss_match_numpy(norm, precise_jax):
  rng = np.random.default_rng(1)
  batch = random_batch(rng, [9, 5], [6, 3], steps=9, chars=6)
  model = small_model(norm)
  # Jitted, as training runs it: op by op, the steps took longer.
  params = perturbed(jax.jit(model.init)(jax.random.key(0), *batch)["params"], rng)
  outputs = jax.jit(model.apply)({"params": params}, *batch)
  nll, points = sequence_nll(outputs, jnp.asarray(batch[0]), jnp.asarray(batch[1]), M)
  strokes, lengths, text, text_lengths = batch
  for b in range(2):
    n, u = lengths[b], text_lengths[b]
    mixture, phi = np_forward(params, strokes[b, :n], text[b, :u])
    np.testing.assert_allclose(outputs["mixture"][b, :n], mixture, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(outputs["phi"][b, :n, :u], phi, rtol=2e-4, atol=1e-6)
    ref_nll = -np_log_likelihood(mixture, strokes[b, :n], M).sum()
    np.testing.assert_allclose(nll[b], ref_nll, rtol=1e-4)
    assert points[b] == n


def test_padding_changes_nothing(precise_jax):
  rng = np.random.default_rng(2)
  strokes, lengths, text, text_lengths = random_batch(rng, [8, 4], [5, 2], steps=8, chars=5)
  model = small_model("ln")
  params = perturbed(jax.jit(model.init)(jax.random.key(0), strokes, lengths, text,
                                         text_lengths)["params"], rng)
  # More steps and characters, garbage in every padded slot.
  long_strokes = rng.normal(size=(2, 15, 3)).astype(np.float32)
  long_text = rng.integers(0, V, (2, 9)).astype(np.int32)
  for b in range(2):
    long_strokes[b, :lengths[b]] = strokes[b, :lengths[b]]
    long_text[b, :text_lengths[b]] = text[b, :text_lengths[b]]
  # Jitted, as training runs it: op by op, the steps took several times as long.
  apply = jax.jit(model.apply)
  short = apply({"params": params}, strokes, lengths, text, text_lengths)
  long = apply({"params": params}, long_strokes, lengths, long_text, text_lengths)
  for b in range(2):
    n = lengths[b]
    np.testing.assert_allclose(long["mixture"][b, :n], short["mixture"][b, :n], rtol=1e-5,
                               atol=1e-6)
  nll_short, _ = sequence_nll(short, jnp.asarray(strokes), jnp.asarray(lengths), M)
  nll_long, _ = sequence_nll(long, jnp.asarray(long_strokes), jnp.asarray(lengths), M)
  np.testing.assert_allclose(nll_long, nll_short, rtol=1e-5)


@pytest.mark.parametrize("norm, expected", [("none", 3_650_151), ("ln", 3_671_751)])
def test_parameter_count_at_paper_size(norm, expected):
  # 3 x 4H(I + H) + 3 x 4H biases + window 400 x 30 + 30 + output 1200 x 121 + 121,
  # I = 3 + 57 for layer 1 and 3 + 57 + 400 above; LN adds 2 x 2 x 4H + 2H per layer.
  model = HandwritingSynthesis(make_lstm_cell(norm, forget_bias=1.0))
  shapes = jax.eval_shape(lambda: model.init(
      jax.random.key(0), jnp.zeros((1, 4, 3)), jnp.ones((1,), jnp.int32),
      jnp.zeros((1, 3), jnp.int32), jnp.ones((1,), jnp.int32)))
  assert sum(x.size for x in jax.tree.leaves(shapes)) == expected


@pytest.mark.parametrize("norm", ["none", "ln"])
def test_graves_clipping_bounds_every_output_and_lstm_gradient(norm):
  config = handwriting_config.get_config(f"norm={norm},clip=graves,smoke=true")
  assert config.optimizer.clip_global_norm == 0.0
  model = build_model(config, V)
  params = jax.eval_shape(lambda: model.init(
      jax.random.key(0), jnp.zeros((1, 4, 3)), jnp.ones((1,), jnp.int32),
      jnp.zeros((1, 3), jnp.int32), jnp.ones((1,), jnp.int32)))["params"]
  bounds = optim.elementwise_bounds(config.optimizer.clip_elementwise, params)
  paths = [optim.parameter_path(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
  assert sorted(bounds) == sorted(paths)  # Every parameter is in one of the two groups.
  assert {p: b for p, b in bounds.items() if b == 100.0} == {
      "mixture/bias": 100.0, "mixture/kernel": 100.0}
  assert {b for p, b in bounds.items() if p.startswith("layer_")} == {10.0}
  # A gradient of 50 everywhere: the output layer keeps it, the LSTMs get 10.
  tx = optim.make_optimizer(config.optimizer)
  grads = jax.tree.map(lambda x: jnp.full(x.shape, 50.0, x.dtype), params)
  clipped = optim.clip_elementwise(config.optimizer.clip_elementwise)(grads)[0]
  assert float(clipped["mixture"]["kernel"].max()) == 50.0
  assert float(clipped["layer_1"]["layer_0"]["hidden_proj"]["kernel"].max()) == 10.0
  tx.init(jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), params))
  # The default keeps the global-norm clip of 100 and no element-wise one.
  default = handwriting_config.get_config("smoke=true").optimizer
  assert default.clip_global_norm == 100.0 and not any(default.clip_elementwise.values())


def test_untrained_window_advances_at_its_initial_step(precise_jax):
  rng = np.random.default_rng(4)
  batch = random_batch(rng, [6], [5], steps=6, chars=5)
  model = HandwritingSynthesis(make_lstm_cell("none", forget_bias=1.0), hidden_size=H,
                               num_gaussians=K, num_components=M, num_symbols=V,
                               window_initial_step=0.1)
  params = model.init(jax.random.key(0), *batch)["params"]
  np.testing.assert_allclose(params["layer_0"]["window"]["bias"],
                             [0.0] * 2 * K + [np.log(0.1)] * K, rtol=1e-6)
  # Without the kernel the window moves exactly 0.1 characters per move: after t + 1
  # moves every Gaussian sits at 0.1 (t + 1), and phi(t, 0) = K exp(-(0.1 (t + 1))^2).
  params["layer_0"]["window"]["kernel"] = jnp.zeros_like(params["layer_0"]["window"]["kernel"])
  phi = model.apply({"params": params}, *batch)["phi"][0]
  kappa = 0.1 * np.arange(1, 7)
  np.testing.assert_allclose(phi[:, 0], K * np.exp(-kappa ** 2), rtol=1e-5)


# --- sampling -------------------------------------------------------------------------


def test_generator_steps_the_trained_network_and_stops_past_the_text(precise_jax):
  rng = np.random.default_rng(3)
  model = small_model("ln")
  batch = random_batch(rng, [4], [3], steps=4, chars=3)
  params = perturbed(model.init(jax.random.key(0), *batch)["params"], rng)
  text = np.array([1, 4, 2], np.int32)
  sample = sampling.write_text(sampling.make_generator(model, 12), params, text, seed=0,
                               bias=0.0)
  moves = sample["moves"]
  # Teacher-forcing the generated moves through the training network reproduces the
  # mixtures they were drawn from and the window weights.
  outputs = model.apply({"params": params}, moves[None], np.array([len(moves)]), text[None],
                        np.array([3]))
  np.testing.assert_allclose(sample["mixture"], outputs["mixture"][0], rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(sample["phi"], outputs["phi"][0], rtol=1e-4, atol=1e-6)
  # A window that jumps 7 characters per step is past a 3-character text at once.
  fast = jax.tree.map(lambda a: a, params)
  fast["layer_0"]["window"]["bias"] = jnp.zeros(3 * K).at[2 * K:].set(2.0)
  fast["layer_0"]["window"]["kernel"] = jnp.zeros_like(params["layer_0"]["window"]["kernel"])
  stopped = sampling.write_text(sampling.make_generator(model, 12), fast, text, seed=0,
                                bias=0.0)
  assert stopped["finished"] and len(stopped["moves"]) == 1


def test_pen_strokes_split_at_end_of_stroke_and_unscale(tmp_path):
  moves = np.array([[1, 0, 0], [1, 1, 1], [5, 0, 0], [0, 2, 1]], np.float32)
  strokes = pictures.pen_strokes(moves, (2.0, 3.0))
  np.testing.assert_allclose(strokes[0], [[0, 0], [2, 0], [4, 3]])
  np.testing.assert_allclose(strokes[1], [[14, 3], [14, 9]])
  svg = pictures.save_svg(strokes, str(tmp_path / "line.svg"))
  with open(svg) as f:
    assert f.read().count("<polyline") == 2


# --- the command line -----------------------------------------------------------------

SMOKE = "configs/handwriting.py:smoke=true"


@pytest.mark.slow
def test_cli_smoke_run_and_resume(tmp_path):
  workdir = str(tmp_path / "run")
  assert cli.main(["train", "--config", SMOKE, "--workdir", workdir]) == 0
  (first,) = epoch_records(workdir)
  for key in ("train/nll", "train/nll_per_point", "validation/nll_per_point",
              "test/nll", "train/examples_per_sec"):
    assert np.isfinite(first[key]), key
  run = run_record(workdir)
  assert run["data"]["synthetic"] and run["config"]["norm"] == "ln"
  with open(os.path.join(workdir, "handwriting_data.json")) as f:
    assert len(json.load(f)["offset_scale"]) == 2
  # A second epoch resumes from the first's checkpoint and goes on learning.
  assert cli.main(["train", "--config", SMOKE, "--workdir", workdir,
                   "--config.num_epochs=2"]) == 0
  records = epoch_records(workdir)
  assert [r["epoch"] for r in records] == [1, 2]
  assert records[0] == first
  assert records[1]["train/nll"] < first["train/nll"]
  # Every epoch wrote its sample and attention pictures.
  images = sorted(os.listdir(os.path.join(workdir, "images")))
  assert len([f for f in images if f.endswith("_attention.png")]) == 2
  out = str(tmp_path / "sample" / "bad")
  assert cli.main(["sample", "--workdir", workdir, "--text", "bad face", "--bias", "0.5",
                   "--seed", "3", "--out", out]) == 0
  for suffix in (".svg", ".png", "_attention.png"):
    assert os.path.getsize(out + suffix) > 0
