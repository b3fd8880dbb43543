"""Every experiment's loss and metrics against NumPy (tests/references.py), and the
evaluation mean over padded batches against the plain mean over the split."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from configs import bln_cifar as bln_cifar_config
from configs import bln_imdb as bln_imdb_config
from configs import perm_mnist as perm_mnist_config
from experiments.bln_cifar import task as bln_cifar
from experiments.bln_imdb import task as bln_imdb
from experiments.draw.task import bound_metrics
from experiments.perm_mnist import task as perm_mnist
from lnorm.data import batching
from lnorm.training import parallel, steps
from lnorm.training.task import classification_metrics
from tests import references as ref

pytestmark = pytest.mark.usefixtures("precise_jax")


def _task(module, config_module, norm):
  return module.Task(config_module.get_config(f"norm={norm}"))


def test_classification_nll_and_error():
  rng = np.random.default_rng(0)
  # Large logits: a log-softmax computed as log(softmax) would give -inf here.
  logits = (rng.normal(size=(64, 10)) * 30).astype(np.float32)
  labels = rng.integers(0, 10, size=64).astype(np.int32)
  metrics = classification_metrics(jnp.asarray(logits), jnp.asarray(labels))
  nll = -ref.log_softmax(logits)[np.arange(64), labels]
  np.testing.assert_allclose(metrics["nll"], nll, rtol=1e-5, atol=1e-4)
  np.testing.assert_array_equal(metrics["error"], logits.argmax(-1) != labels)
  assert 0 < float(np.mean(metrics["error"])) < 1
  # The classifiers' training loss is the batch mean of that NLL.
  for task in (_task(perm_mnist, perm_mnist_config, "ln"),
               _task(bln_cifar, bln_cifar_config, "bln")):
    loss, _ = task.loss_and_metrics(jnp.asarray(logits), {"label": jnp.asarray(labels)},
                                 model=None)
    np.testing.assert_allclose(loss, nll.mean(), rtol=1e-5)


def test_imdb_binary_loss_and_error():
  rng = np.random.default_rng(1)
  logits = (rng.normal(size=50) * 8).astype(np.float32)
  labels = rng.integers(0, 2, size=50).astype(np.int32)
  loss, metrics = _task(bln_imdb, bln_imdb_config, "bln").loss_and_metrics(
      jnp.asarray(logits), {"label": jnp.asarray(labels)}, model=None)
  nll = ref.bernoulli_nll(logits, labels)
  np.testing.assert_allclose(metrics["nll"], nll, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(loss, nll.mean(), rtol=1e-5)
  np.testing.assert_array_equal(metrics["error"], (logits > 0) != labels)


def test_draw_bound_with_nonzero_logits():
  """-sum_pixels [x log sigma(l) + (1 - x) log(1 - sigma(l))] + KL, per image. At
  logits far from 0, x and 1 - x cost very different amounts."""
  rng = np.random.default_rng(2)
  logits = (rng.normal(size=(5, 8, 6)) * 4).astype(np.float32)
  images = (rng.random((5, 8, 6)) < 0.3).astype(np.float32)
  kl = rng.random(5).astype(np.float32) * 20
  loss, metrics = bound_metrics({"logits": jnp.asarray(logits), "kl": jnp.asarray(kl)},
                                jnp.asarray(images))
  reconstruction = ref.bernoulli_nll(logits, images).sum(axis=(1, 2))
  np.testing.assert_allclose(metrics["reconstruction"], reconstruction, rtol=1e-5)
  np.testing.assert_allclose(metrics["kl"], kl, rtol=1e-6)
  np.testing.assert_allclose(metrics["nll_bound"], reconstruction + kl, rtol=1e-5)
  np.testing.assert_allclose(loss, np.mean(reconstruction + kl), rtol=1e-5)
  flipped = ref.bernoulli_nll(logits, 1 - images).sum(axis=(1, 2))
  assert np.min(np.abs(flipped - reconstruction)) > 1.0


# --- the evaluation mean --------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_classifier():
  config = perm_mnist_config.get_config("norm=ln")
  config.hidden_sizes = (8,)
  task = perm_mnist.Task(config)
  model = task.build_model(types.SimpleNamespace(info={"num_classes": 3}))
  rng = np.random.default_rng(3)
  arrays = {"image": rng.integers(0, 256, size=(23, 12), dtype=np.uint8),
            "label": rng.integers(0, 3, size=23).astype(np.int32)}
  params = model.init(jax.random.key(0), *task.model_inputs(arrays))["params"]
  state = steps.TrainState.create(apply_fn=model.apply, params=params, tx=optax.sgd(0.1),
                                 batch_stats={})
  logits = model.apply({"params": params}, *task.model_inputs(arrays))
  labels = arrays["label"]
  plain = {"nll": np.mean(-ref.log_softmax(logits)[np.arange(23), labels]),
           "error": np.mean(np.argmax(logits, -1) != labels)}
  return task, model, state, arrays, plain


def test_evaluation_mean_over_batches_with_a_remainder(tiny_classifier):
  task, model, state, arrays, plain = tiny_classifier
  eval_step = jax.jit(steps.make_eval_step(task, model))
  # 23 examples in batches of 5: the last batch holds 3.
  means = steps.evaluate(eval_step, state, arrays, 5, parallel.make_mesh())
  assert set(means) == {"nll", "error"}
  np.testing.assert_allclose(means["nll"], plain["nll"], rtol=1e-5)
  np.testing.assert_allclose(means["error"], plain["error"], rtol=1e-6)


def test_evaluation_mean_ignores_padding_to_a_device_multiple(tiny_classifier):
  task, model, state, arrays, plain = tiny_classifier
  eval_step = jax.jit(steps.make_eval_step(task, model))
  totals, count = {}, 0.0
  # As on 4 devices: every batch is padded (5 -> 8, 3 -> 4) with copies of its last row.
  for batch in batching.eval_batches(arrays, 5, multiple_of=4):
    sums, n = eval_step(state, batch)
    for k, v in sums.items():
      totals[k] = totals.get(k, 0.0) + float(v)
    count += float(n)
  assert count == 23
  np.testing.assert_allclose(totals["nll"] / count, plain["nll"], rtol=1e-5)
  np.testing.assert_allclose(totals["error"] / count, plain["error"], rtol=1e-6)
