"""The order-embeddings model and loss against NumPy versions written from the
equations (docs/experiments.md, sec. 7), padding, parameter counts, the task's fold
evaluation, and CLI runs with resumption."""

from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.order_embeddings import retrieval
from experiments.order_embeddings.model import OrderEmbedding, contrastive_loss
from experiments.order_embeddings.task import Task
from lnorm import cli
from lnorm import config as config_lib
from lnorm.errors import ConfigError
from lnorm.rnn import make_gru_cell
from tests.helpers import epoch_records

SMOKE = "configs/order_embeddings.py:smoke=true"


# --- NumPy references --------------------------------------------------------------------


def np_sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def np_embed_caption(p, tokens, length):
  """Embedding -> GRU (docs/experiments.md, sec. 4, no norm) over the real words -> L2
  -> abs."""
  gru = p["gru"]["layer_0"]
  w, b = gru["input_proj"]["kernel"], gru["input_proj"]["bias"]
  u = gru["hidden_proj"]["kernel"]
  hidden = u.shape[0]
  h = np.zeros(hidden)
  for t in range(length):
    x = p["word_embed"]["embedding"][tokens[t]]
    wx, uh = x @ w + b, h @ u
    z, r = np.split(wx[:2 * hidden] + uh[:2 * hidden], 2)
    candidate = np.tanh(wx[2 * hidden:] + np_sigmoid(r) * uh[2 * hidden:])
    z = np_sigmoid(z)
    h = (1 - z) * h + z * candidate
  return np.abs(h / np.linalg.norm(h))


def np_embed_image(p, features):
  y = features @ p["image_proj"]["kernel"] + p["image_proj"]["bias"]
  return np.abs(y / np.linalg.norm(y))


def np_contrastive_loss(s, im, score, margin):
  """Sum over i != j of max(0, margin - S_ii + S_ij) + max(0, margin - S_jj + S_ij)."""
  def pair(a, b):
    if score == "order":
      return -np.sum(np.maximum(0.0, a - b) ** 2)
    return float(a @ b)
  n = len(s)
  total = 0.0
  for i in range(n):
    for j in range(n):
      if i != j:
        total += max(0.0, margin - pair(s[i], im[i]) + pair(s[i], im[j]))  # Image j vs caption i.
        total += max(0.0, margin - pair(s[j], im[j]) + pair(s[i], im[j]))  # Caption i vs image j.
  return total


def small_model(norm="none", **kwargs):
  return OrderEmbedding(vocab_size=13, cell=make_gru_cell(norm), word_size=4, embed_size=6,
                        **kwargs)


def small_batch(rng, batch=3, per_image=5, steps=7, features=5):
  lengths = rng.integers(1, steps + 1, size=(batch, per_image)).astype(np.int32)
  captions = rng.integers(2, 13, size=(batch, per_image, steps)).astype(np.int32)
  captions[np.arange(steps)[None, None, :] >= lengths[..., None]] = 0
  images = rng.normal(size=(batch, features)).astype(np.float32)
  return captions, lengths, images


def init(model, captions, lengths, images):
  return model.init({"params": jax.random.key(0), "caption": jax.random.key(1)},
                    captions, lengths, images, train=True)


# --- tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("score", ["order", "cosine"])
def test_contrastive_loss_matches_numpy(precise_jax, score):
  del precise_jax
  rng = np.random.default_rng(0)
  s = np.abs(rng.normal(size=(5, 4))) / 2
  im = np.abs(rng.normal(size=(5, 4))) / 2
  total, per_example = contrastive_loss(jnp.asarray(s), jnp.asarray(im), score, margin=0.05)
  want = np_contrastive_loss(s, im, score, 0.05)
  assert want > 0.1  # Some pairs violate the margin: the test can fail.
  np.testing.assert_allclose(float(total), want, rtol=1e-5)
  np.testing.assert_allclose(float(jnp.sum(per_example)), want, rtol=1e-5)
  # Perfectly separated pairs (S_ii far above every S_ij) cost nothing.
  eye = jnp.eye(5) * 10.0
  total, _ = contrastive_loss(eye, eye, score, margin=0.05)
  assert float(total) == 0.0


def test_order_loss_ignores_the_diagonal_and_uses_the_margin():
  # Two identical pairs: S is constant, each of the 2 off-diagonal entries costs the
  # margin once per direction.
  e = jnp.ones((2, 3)) / np.sqrt(3)
  total, _ = contrastive_loss(e, e, "order", margin=0.05)
  assert float(total) == pytest.approx(4 * 0.05)


def test_forward_matches_numpy(precise_jax):
  del precise_jax
  rng = np.random.default_rng(1)
  captions, lengths, images = small_batch(rng)
  model = small_model()
  variables = init(model, captions, lengths, images)
  out = model.apply(variables, captions, lengths, images, train=False)
  p = jax.tree.map(np.asarray, variables["params"])
  assert out["captions"].shape == (3, 5, 6) and out["images"].shape == (3, 6)
  for i in range(3):
    np.testing.assert_allclose(out["images"][i], np_embed_image(p, images[i]), rtol=1e-5,
                               atol=1e-6)
    for k in range(5):
      np.testing.assert_allclose(out["captions"][i, k],
                                 np_embed_caption(p, captions[i, k], lengths[i, k]),
                                 rtol=1e-5, atol=1e-6)
  # The cosine model keeps signs.
  signed = small_model(use_abs=False).apply(variables, captions, lengths, images)
  assert np.any(np.asarray(signed["images"]) < 0)


@pytest.mark.parametrize("norm", ["none", "ln"])
def test_padding_changes_nothing(norm):
  rng = np.random.default_rng(2)
  captions, lengths, images = small_batch(rng, steps=5)
  model = small_model(norm)
  variables = init(model, captions, lengths, images)
  base = model.apply(variables, captions, lengths, images)
  # Longer padding, and garbage words after each caption's end.
  longer = np.concatenate([captions, rng.integers(2, 13, size=(3, 5, 4)).astype(np.int32)], -1)
  mask = np.arange(9)[None, None, :] >= lengths[..., None]
  longer[mask] = rng.integers(2, 13, size=int(mask.sum()))
  padded = model.apply(variables, longer, lengths, images)
  np.testing.assert_allclose(padded["captions"], base["captions"], rtol=1e-6, atol=1e-7)


def test_training_embeds_one_random_caption_per_image():
  rng = np.random.default_rng(3)
  captions, lengths, images = small_batch(rng, batch=4)
  model = small_model()
  variables = init(model, captions, lengths, images)
  every = np.asarray(model.apply(variables, captions, lengths, images)["captions"])
  chosen = set()
  for seed in range(12):
    out = model.apply(variables, captions, lengths, images, train=True,
                      rngs={"caption": jax.random.key(seed)})
    assert out["captions"].shape == (4, 6)
    for i in range(4):
      distance = np.abs(every[i] - np.asarray(out["captions"][i])).max(axis=-1)
      k = int(np.argmin(distance))
      assert distance[k] < 1e-5  # It is one of the image's own captions...
      chosen.add(k)
  assert len(chosen) == 5  # ...drawn among all five.


def _count(norm, vocab, features):
  model = OrderEmbedding(vocab_size=vocab, cell=make_gru_cell(norm))
  shapes = jax.eval_shape(lambda: init(model, jnp.zeros((2, 5, 3), jnp.int32),
                                       jnp.ones((2, 5), jnp.int32), jnp.zeros((2, features))))
  return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(shapes))


def test_parameter_count_at_paper_size():
  vocab, h, w = 10000, 1024, 300
  embedding, image = vocab * w, 4096 * h + h
  gru = w * 3 * h + 3 * h + h * 3 * h  # W_x [300, 3H] with biases, U [H, 3H].
  assert _count("none", vocab, 4096) == embedding + image + gru
  # LN-GRU: no input biases; four LNs (gates 2H, candidate H, for W_x x and U h),
  # each with gain and bias.
  ln_gru = w * 3 * h + h * 3 * h + 2 * (2 * 2 * h + 2 * h)
  assert _count("ln", vocab, 4096) == embedding + image + ln_gru
  # The image encoder's input size comes from the data.
  assert _count("none", vocab, 2048) == embedding + 2048 * h + h + gru


def test_task_fold_evaluation_equals_library_evaluation():
  task = Task(config_lib.load_config(SMOKE))
  rng = np.random.default_rng(4)
  images = np.abs(rng.normal(size=(6, 8))).astype(np.float32)
  captions = np.abs(rng.normal(size=(6, 5, 8))).astype(np.float32)
  mask = np.array([1, 1, 1, 1, 0, 0], np.float32)  # The last two rows are padding.
  loss, metrics = task.loss_and_metrics({"captions": captions, "images": images},
                                        {"mask": mask}, model=None)
  del loss
  want = retrieval.evaluate(images[:4], captions[:4].reshape(-1, 8), "order", fold_size=0)
  for k, v in metrics.items():
    assert float(np.mean(np.asarray(v)[:4])) == pytest.approx(want[k], rel=1e-5), k


# --- CLI ---------------------------------------------------------------------------------


def _records(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f if line.strip()]


@pytest.mark.slow
def test_cli_smoke_run_and_resume(tmp_path):
  once, twice = str(tmp_path / "once"), str(tmp_path / "twice")
  assert cli.main(["train", "--config", SMOKE, "--workdir", once]) == 0
  # The same run in two invocations into one workdir: one epoch, then the second.
  assert cli.main(["train", "--config", SMOKE, "--workdir", twice,
                   "--config.num_epochs=1"]) == 0
  (first,) = epoch_records(twice)
  first_validations = [r for r in _records(twice) if "validation/rsum" in r]
  assert first["epoch"] == 1 and first["best/step"] == max(
      first_validations, key=lambda r: r["validation/selection_rsum"])["step"]
  assert "test/caption_r1" in first  # A finished run tests its best model.
  assert cli.main(["train", "--config", SMOKE, "--workdir", twice]) == 0

  a, b = epoch_records(once), epoch_records(twice)
  assert [r["epoch"] for r in b] == [1, 2]
  # Exact resumption: the caption draws and the data order depend on (seed, step) only.
  for key in ("train/loss", "validation/rsum", "test/caption_r1", "test/image_mean_rank"):
    assert a[-1][key] == pytest.approx(b[-1][key], rel=1e-6), key
  final = b[-1]
  for direction in ("caption", "image"):
    for name in ("r1", "r5", "r10", "median_rank", "mean_rank"):
      assert f"validation/{direction}_{name}" in final and f"test/{direction}_{name}" in final
  assert final["test/num_folds"] == 2  # 100 test images in folds of 50.
  # Validation every 5 updates inside an epoch (the epoch ends, steps 10 and 20, are
  # validated once, by end_of_epoch), and the best of all of them kept.
  mid = [r for r in _records(once) if "time/epoch_seconds" not in r and "validation/rsum" in r]
  assert [r["step"] for r in mid] == [5, 15]
  validated = [r for r in _records(twice) if "validation/rsum" in r]
  assert [r["step"] for r in validated] == [5, 10, 15, 20]
  best = max(validated, key=lambda r: r["validation/selection_rsum"])
  assert (final["best/step"], final["best/selection_rsum"]) == (
      best["step"], best["validation/selection_rsum"])
  # The smoke validation split is one fold of 50 images: the selection score is its
  # image-retrieval R@1+5+10.
  for r in validated:
    assert r["validation/selection_rsum"] == pytest.approx(r["validation/image_rsum"])
    assert r["validation/image_rsum"] == pytest.approx(
        r["validation/image_r1"] + r["validation/image_r5"] + r["validation/image_r10"])
  with open(os.path.join(once, "config.json")) as f:
    run = json.load(f)
  assert run["data"]["source"] == "synthetic" and run["data"]["synthetic"]
  assert os.path.exists(os.path.join(once, "best", "variables.msgpack"))


def test_the_loops_per_batch_folds_must_match_the_fold_size():
  config = config_lib.load_config(SMOKE)
  config.eval_splits = ("validation",)
  config.eval_batch_size = 25  # Folds of 25 through the loop, of 50 in the task's hooks.
  with pytest.raises(ConfigError, match=r"eval_batch_size \(25\) must equal "
                                        r"retrieval.fold_size \(50\)"):
    Task(config)
  config.eval_batch_size = 50
  Task(config)
  config.eval_splits, config.eval_batch_size = (), 25  # Embedding batches only.
  Task(config)


# --- the authors' setup (Vendrov et al.'s code) -------------------------------------------


@pytest.mark.parametrize("score,margin,use_abs", [("order", 0.05, True),
                                                  ("cosine", 0.2, False)])
def test_margin_and_absolute_value_follow_the_score(score, margin, use_abs):
  # driver.py: the order model 0.05 with |.|, the symmetric one 0.2 without.
  config = config_lib.load_config(f"configs/order_embeddings.py:score={score}")
  assert (config.model.margin, config.model.use_abs) == (margin, use_abs)


def test_defaults_are_the_authors():
  config = config_lib.load_config("configs/order_embeddings.py")
  assert config.optimizer.name == "adam_theano" and config.loss_reduction == "sum"
  assert (config.retrieval.select_on, config.retrieval.select_images) == ("image_rsum", 1000)
  assert config.data.append_eos


def test_training_loss_is_summed_or_averaged_over_the_batch(precise_jax):
  del precise_jax
  rng = np.random.default_rng(5)
  s = np.abs(rng.normal(size=(4, 3))).astype(np.float32)
  im = np.abs(rng.normal(size=(4, 3))).astype(np.float32)
  config = config_lib.load_config(SMOKE)
  want = np_contrastive_loss(s, im, "order", config.model.margin)
  loss, metrics = Task(config).loss_and_metrics({"captions": s, "images": im}, {}, model=None)
  np.testing.assert_allclose(float(loss), want, rtol=1e-5)
  config.loss_reduction = "mean"
  loss, _ = Task(config).loss_and_metrics({"captions": s, "images": im}, {}, model=None)
  np.testing.assert_allclose(float(loss), want / 4, rtol=1e-5)
  np.testing.assert_allclose(float(np.sum(metrics["pair_loss"])), want, rtol=1e-5)


def test_selection_settings_are_checked():
  config = config_lib.load_config(SMOKE)
  config.retrieval.select_images = 75  # Folds of 50.
  with pytest.raises(ConfigError, match="select_images=75 is not a whole number of folds"):
    Task(config)
  config.retrieval.select_images, config.retrieval.select_on = 0, "caption_rsum"
  with pytest.raises(ConfigError, match="select_on is 'caption_rsum'; valid choices: "
                                        "image_rsum, rsum"):
    Task(config)
