"""lnorm.training.optim: per-tensor and global gradient clipping against a hand
computation, the order of the chain, and the optimizers by name."""

from __future__ import annotations

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from lnorm.errors import ConfigError
from lnorm.training import optim

# Norms 5 and 0.5 and, together, sqrt(25.25).
GRADS = {"w": np.array([[3.0, 0.0], [0.0, 4.0]]), "b": np.array([0.3, -0.4])}


def _sgd(**clips):
  """SGD with learning rate 1: the update is minus the processed gradient."""
  return ml_collections.ConfigDict({"name": "sgd", "learning_rate": 1.0,
                                    "clip_tensor_norm": 0.0, "clip_global_norm": 0.0,
                                    **clips})


def _update(config, grads=GRADS):
  tx = optim.make_optimizer(config)
  params = {k: jnp.zeros_like(v) for k, v in grads.items()}
  updates, _ = tx.update({k: jnp.asarray(v, jnp.float32) for k, v in grads.items()},
                         tx.init(params), params)
  return {k: np.asarray(v, np.float64) for k, v in updates.items()}


def _close(updates, expected, rtol=1e-6):
  for k in GRADS:
    np.testing.assert_allclose(updates[k], expected[k], rtol=rtol, atol=1e-7, err_msg=k)


def test_no_clipping():
  _close(_update(_sgd()), {k: -v for k, v in GRADS.items()})


def test_per_tensor_clipping_rescales_each_tensor_on_its_own():
  # w (norm 5) is scaled to norm 1; b (norm 0.5) is under the limit and unchanged.
  _close(_update(_sgd(clip_tensor_norm=1.0)), {"w": -GRADS["w"] / 5, "b": -GRADS["b"]})


def test_global_clipping_rescales_all_tensors_together():
  total = np.sqrt(25 + 0.25)
  _close(_update(_sgd(clip_global_norm=2.0)), {k: -v * 2 / total for k, v in GRADS.items()})
  _close(_update(_sgd(clip_global_norm=10.0)), {k: -v for k, v in GRADS.items()})


def test_per_tensor_then_global_clipping():
  # Per tensor first: w -> norm 1, b stays 0.5; then the global norm sqrt(1.25) -> 0.5.
  clipped = {"w": GRADS["w"] / 5, "b": GRADS["b"]}
  scale = 0.5 / np.sqrt(1.25)
  _close(_update(_sgd(clip_tensor_norm=1.0, clip_global_norm=0.5)),
         {k: -v * scale for k, v in clipped.items()})


def test_adam_first_step():
  # Bias-corrected first step: -lr * g / (|g| + eps).
  config = ml_collections.ConfigDict({"name": "adam", "learning_rate": 0.1})
  updates = _update(config)
  # float32 rounding of the second moment (1 - b2 = 1e-3) costs a few 1e-6.
  _close(updates, {k: -0.1 * v / (np.abs(v) + 1e-8) for k, v in GRADS.items()}, rtol=2e-5)


def test_unknown_optimizer_lists_the_choices():
  with pytest.raises(ConfigError, match="Unknown optimizer 'adamax'.*adam, adamw, sgd"):
    optim.make_optimizer(ml_collections.ConfigDict({"name": "adamax", "learning_rate": 1.0}))
