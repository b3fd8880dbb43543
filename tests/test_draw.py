"""DRAW (experiments/draw): the attention filterbank, the KL, the untrained bound,
exact parameter counts, and a smoke run with resumption through the CLI."""

from __future__ import annotations

import json
import os
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.draw import model as draw_model
from experiments.draw.task import bound_metrics
from lnorm import cli
from lnorm import config as config_lib
from lnorm.errors import ConfigError, WorkdirConflictError
from lnorm.rnn import make_lstm_cell
from lnorm.training.workdir import check_workdir
from lnorm.training.task import load_task
from tests.helpers import epoch_records
from tests.references import draw_filterbank


@pytest.mark.parametrize("n", [1, 2, 5])
def test_filterbank_matches_numpy(n):
  rng = np.random.default_rng(n)
  p = rng.normal(size=(3, 5)).astype(np.float32)
  att = draw_model.attention_params(jnp.asarray(p), n, 28, 20)
  # The paper's mapping of the five linear outputs.
  np.testing.assert_allclose(att["gx"], 21 / 2 * (p[:, 0] + 1), rtol=1e-6)
  np.testing.assert_allclose(att["gy"], 29 / 2 * (p[:, 1] + 1), rtol=1e-6)
  np.testing.assert_allclose(att["var"], np.exp(p[:, 2]), rtol=1e-6)
  np.testing.assert_allclose(att["delta"], 27 / max(n - 1, 1) * np.exp(p[:, 3]), rtol=1e-6)
  np.testing.assert_allclose(att["gamma"], np.exp(p[:, 4]), rtol=1e-6)
  fy, fx = draw_model.filters(att, n, 28, 20)
  args = {k: np.asarray(v, np.float64) for k, v in att.items()}
  np.testing.assert_allclose(fy, draw_filterbank(args["gy"], args["delta"], args["var"], n, 28),
                             atol=1e-6)
  np.testing.assert_allclose(fx, draw_filterbank(args["gx"], args["delta"], args["var"], n, 20),
                             atol=1e-6)
  # Read and write are F_y x F_x^T and F_y^T w F_x.
  image = rng.random((3, 28, 20)).astype(np.float32)
  patch = rng.normal(size=(3, n, n)).astype(np.float32)
  np.testing.assert_allclose(draw_model.read_glimpse(image, fy, fx),
                             np.einsum("bnh,bhw,bmw->bnm", fy, image, fx), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(draw_model.write_patch(patch, fy, fx),
                             np.einsum("bnh,bnm,bmw->bhw", fy, patch, fx), rtol=1e-5, atol=1e-6)


def test_centred_unit_stride_filters_read_the_image():
  """N = 28 filters at stride 1 with a tiny variance, centred, copy the image."""
  att = {"gx": jnp.array([14.5]), "gy": jnp.array([14.5]), "delta": jnp.array([1.0]),
         "var": jnp.array([0.01])}
  fy, fx = draw_model.filters(att, 28, 28, 28)
  image = np.random.default_rng(0).random((1, 28, 28)).astype(np.float32)
  np.testing.assert_allclose(draw_model.read_glimpse(image, fy, fx), image, atol=1e-5)


def test_kl_matches_monte_carlo():
  rng = np.random.default_rng(0)
  mu = rng.normal(size=6)
  log_sigma = rng.normal(scale=0.5, size=6)
  sigma = np.exp(log_sigma)
  z = mu + sigma * rng.normal(size=(400_000, 6))
  log_q = -0.5 * ((z - mu) / sigma) ** 2 - log_sigma
  log_p = -0.5 * z ** 2
  samples = np.sum(log_q - log_p, axis=-1)
  exact = float(draw_model.gaussian_kl(jnp.asarray(mu), jnp.asarray(log_sigma)))
  stderr = samples.std() / np.sqrt(len(samples))
  assert abs(samples.mean() - exact) < 4 * stderr, (samples.mean(), exact, stderr)
  assert float(draw_model.gaussian_kl(jnp.zeros(3), jnp.zeros(3))) == 0.0


def _tiny_draw(norm="none", **kw):
  kw = {"hidden_size": 16, "latent_size": 4, "num_glimpses": 4, **kw}
  return draw_model.Draw(cell=make_lstm_cell(norm, forget_bias=1.0), **kw)


def test_untrained_bound_is_784_ln2_plus_kl():
  """An untrained canvas stays near 0, so each pixel costs about ln 2 nats."""
  x = (np.random.default_rng(0).random((16, 28, 28)) < 0.13).astype(np.float32)
  m = _tiny_draw()
  variables = m.init({"params": jax.random.key(0), "sample": jax.random.key(1)}, x, train=True)
  out = m.apply(variables, x, train=False)
  loss, metrics = bound_metrics(out, x)
  rec, kl = np.asarray(metrics["reconstruction"]), np.asarray(metrics["kl"])
  assert abs(rec.mean() - 784 * np.log(2)) < 10.0, rec.mean()
  assert (kl > 0).all() and kl.mean() < 50
  np.testing.assert_allclose(metrics["nll_bound"], rec + kl, rtol=1e-6)
  np.testing.assert_allclose(loss, (rec + kl).mean(), rtol=1e-6)
  # Evaluation without a 'sample' RNG uses fixed noise: the bound is deterministic.
  again = m.apply(variables, x, train=False)
  np.testing.assert_array_equal(out["kl"], again["kl"])


def _count(norm, attention=True, **kw):
  m = draw_model.Draw(cell=make_lstm_cell(norm, forget_bias=1.0),
                      read_n=2 if attention else 0, write_n=5 if attention else 0, **kw)
  x = jnp.zeros((2, 28, 28))
  shapes = jax.eval_shape(lambda: m.init(
      {"params": jax.random.key(0), "sample": jax.random.key(1)}, x, train=True))
  return sum(leaf.size for leaf in jax.tree.leaves(shapes["params"]))


def _expected(norm, h=256, z=100, read_in=2 * 2 * 2, write_out=25):
  def lstm(i):
    return i * 4 * h + h * 4 * h + 4 * h
  extra = {"none": 0, "ln_cell": 2 * h, "wn": 2 * 4 * h, "ln": 8 * h + 8 * h + 2 * h}[norm]
  return (lstm(read_in + h) + lstm(z) + 2 * extra  # encoder and decoder LSTMs
          + h * 2 * z + 2 * z  # posterior (mu, log sigma)
          + (2 * (h * 5 + 5) if write_out == 25 else 0)  # read and write attention maps
          + h * write_out + write_out)  # write patch


def test_parameter_count_of_the_paper_model():
  assert _count("none") == 959_467 == _expected("none")
  for norm in ("ln_cell", "wn", "ln"):
    assert _count(norm) == _expected(norm), norm
  assert _count("none", attention=False) == _expected("none", read_in=2 * 784, write_out=784)


@pytest.mark.parametrize("norm", ["none", "wn", "ln_cell"])
def test_cpu_scale_keeps_draws_structure(norm):
  """scale=cpu reaches the model as a smaller DRAW with both attentions: the exact
  parameter count of 16 glimpses of 128-unit LSTMs, latent 16, 2x2 read, 5x5 write."""
  config = config_lib.load_config(f"configs/draw.py:norm={norm},scale=cpu")
  assert config.scale == "cpu" and config.attention
  assert (config.read_n, config.write_n) == (2, 5)
  model = load_task(config).build_model(types.SimpleNamespace(info={}))
  assert (model.num_glimpses, model.hidden_size, model.latent_size) == (16, 128, 16)
  assert (model.read_n, model.write_n) == (2, 5)
  x = jnp.zeros((2, 28, 28))
  shapes = jax.eval_shape(lambda: model.init(
      {"params": jax.random.key(0), "sample": jax.random.key(1)}, x, train=True))
  count = sum(leaf.size for leaf in jax.tree.leaves(shapes["params"]))
  assert count == _expected(norm, h=128, z=16)
  if norm == "none":
    assert count == 218_563
  # It trains for a fixed number of updates and evaluates along the way.
  assert config.max_steps > 0 and 0 < config.eval_every_steps < config.max_steps


def test_workdir_from_before_scale_existed_resumes(tmp_path):
  """``scale`` only names a setting: a run recorded without it resumes, while a
  different scale conflicts through the fields it changes."""
  paper = config_lib.load_config("configs/draw.py:norm=none")
  flat = config_lib.to_flat_dict(paper)
  del flat["scale"]
  with open(tmp_path / "config.json", "w") as f:
    json.dump({"config": flat}, f, default=str)
  check_workdir(str(tmp_path), paper)
  cpu = config_lib.load_config("configs/draw.py:norm=none,scale=cpu")
  with pytest.raises(WorkdirConflictError, match="hidden_size: 256 in the workdir, 128 now"):
    check_workdir(str(tmp_path), cpu)


def test_unknown_scale_is_refused():
  with pytest.raises(ConfigError, match="Unknown scale 'gpu'"):
    config_lib.load_config("configs/draw.py:scale=gpu")


SMOKE = ["--config", "configs/draw.py:norm=ln_cell,smoke=true", "--config.num_glimpses=4"]


def _train(workdir, *extra):
  return cli.main(["train", *SMOKE, "--workdir", workdir, *extra])


@pytest.fixture
def compilation_cache(tmp_path):
  """The three runs below compile the same programs: share them through XLA's
  persistent cache (restored afterwards), which cuts the test's time by half."""
  old = {k: getattr(jax.config, k) for k in (
      "jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")}
  jax.config.update("jax_compilation_cache_dir", str(tmp_path / "xla_cache"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
  yield
  for k, v in old.items():
    jax.config.update(k, v)


def test_smoke_train_pictures_and_resume(tmp_path, compilation_cache):
  del compilation_cache
  straight = str(tmp_path / "straight")
  assert _train(straight, "--config.num_epochs=2") == 0
  resumed = str(tmp_path / "resumed")
  assert _train(resumed) == 0  # one epoch, then resume for a second
  (first,) = epoch_records(resumed)
  for key in ("train/nll_bound", "train/kl", "train/reconstruction", "validation/nll_bound",
              "test/nll_bound", "test/kl", "test/reconstruction", "train/examples_per_sec"):
    assert key in first, key
  assert first["test/nll_bound"] == pytest.approx(
      first["test/reconstruction"] + first["test/kl"], rel=1e-5)
  with open(os.path.join(resumed, "config.json")) as f:
    run = json.load(f)
  assert run["data"]["source"] == "derived" and run["config"]["data.source"] == "derived"
  assert "seeded Bernoulli binarization" in run["data"]["notes"]
  assert run["config"]["norm"] == "ln_cell"
  pngs = sorted(os.listdir(os.path.join(resumed, "images")))
  assert pngs == [f"canvas_strip_{first['step']:08d}.png", f"samples_{first['step']:08d}.png"]
  assert _train(resumed, "--config.num_epochs=2") == 0
  a, b = epoch_records(resumed), epoch_records(straight)
  assert [r["step"] for r in a] == [r["step"] for r in b]
  for key in ("train/nll_bound", "test/nll_bound", "validation/nll_bound"):
    assert a[-1][key] == pytest.approx(b[-1][key], rel=1e-5), key
