"""config.loss_reduction (Task.reduce_loss): the summed loss against the mean under
global-norm clipping, on a hand-computed case, and the experiments that offer it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from configs import perm_mnist as perm_mnist_config
from experiments.perm_mnist import task as perm_mnist
from lnorm.errors import ConfigError
from lnorm.training import optim
from lnorm.training.task import LOSS_REDUCTIONS, Task

# Two examples whose losses are linear in w: l_i = a_i . w, so the gradient of their
# sum is a_1 + a_2 = (3, 4) (norm 5) and of their mean (1.5, 2) (norm 2.5).
A = np.array([[3.0, 0.0], [0.0, 4.0]], np.float32)


class LinearTask(Task):
  loss_reductions = LOSS_REDUCTIONS


def _clipped_sgd_update(reduction: str, clip: float) -> np.ndarray:
  task = LinearTask(ml_collections.ConfigDict(
      {"experiment": "linear", "loss_reduction": reduction}))
  grad = jax.grad(lambda w: task.reduce_loss(jnp.asarray(A) @ w))(jnp.zeros(2, jnp.float32))
  tx = optim.make_optimizer(ml_collections.ConfigDict(
      {"name": "sgd", "learning_rate": 1.0, "clip_global_norm": clip}))
  update, _ = tx.update(grad, tx.init(jnp.zeros(2)))
  return np.asarray(update)


def test_reduce_loss_sums_or_averages():
  for reduction, expected in (("sum", 10.0), ("mean", 2.5)):
    task = LinearTask(ml_collections.ConfigDict(
        {"experiment": "linear", "loss_reduction": reduction}))
    assert float(task.reduce_loss(jnp.asarray([1.0, 2.0, 3.0, 4.0]))) == expected


def test_summed_loss_is_clipped_where_the_mean_is_not():
  # Clip 4: the sum's gradient (norm 5) is scaled to 4 / 5, the mean's (2.5) passes.
  np.testing.assert_allclose(_clipped_sgd_update("sum", 4.0), [-2.4, -3.2], rtol=1e-6)
  np.testing.assert_allclose(_clipped_sgd_update("mean", 4.0), [-1.5, -2.0], rtol=1e-6)


def test_clipped_sum_equals_batch_size_times_mean_clipped_at_clip_over_batch_size():
  # clip_c(B g) = B clip_{c/B}(g): the summed loss's clip of c is as tight as a clip of
  # c / B on the mean (B = 2: the mean's gradient clipped at 2 is (1.2, 1.6)).
  batch = len(A)
  for clip in (1.0, 4.0, 6.0):
    np.testing.assert_allclose(_clipped_sgd_update("sum", clip),
                               batch * _clipped_sgd_update("mean", clip / batch), rtol=1e-6)
  np.testing.assert_allclose(_clipped_sgd_update("mean", 2.0), [-1.2, -1.6], rtol=1e-6)


def test_an_experiment_without_the_option_refuses_a_sum():
  config = perm_mnist_config.get_config("smoke=true")
  assert config.loss_reduction == "mean"
  perm_mnist.Task(config)
  config.loss_reduction = "sum"
  with pytest.raises(ConfigError, match="loss_reduction='sum' is not available for "
                     "experiment 'perm_mnist'. Valid choices: mean"):
    perm_mnist.Task(config)


def test_an_unknown_reduction_is_an_error():
  with pytest.raises(ConfigError, match="loss_reduction='median'.*Valid choices: mean, sum"):
    LinearTask(ml_collections.ConfigDict({"experiment": "linear",
                                          "loss_reduction": "median"}))
