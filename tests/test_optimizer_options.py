"""Every optimizer option away from its default, checked by value against the update
worked out in NumPy; the clips at their edges (a norm exactly at the threshold, between
the threshold and its square for the attentive reader's rule)."""

from __future__ import annotations

import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from experiments.attentive_reader import clip as reader_clip
from lnorm.training import optim

PARAMS = np.array([1.0, 2.0, -3.0])
GRADS = [np.array([0.5, -2.0, 3.0]), np.array([-1.0, 0.25, 2.0])]


def run(config: dict, grads=GRADS, params=PARAMS) -> list[np.ndarray]:
  """The updates the configured optimizer makes for ``grads``, one per step."""
  tx = optim.make_optimizer(ml_collections.ConfigDict(config))
  p = {"w": jnp.asarray(params, jnp.float32)}
  state = tx.init(p)
  out = []
  for g in grads:
    updates, state = tx.update({"w": jnp.asarray(g, jnp.float32)}, state, p)
    p = optax.apply_updates(p, updates)
    out.append(np.asarray(updates["w"], np.float64))
  return out


def adam_by_hand(lr, b1, b2, eps, grads=GRADS, theano=False):
  m = v = np.zeros(3)
  out = []
  for t, g in enumerate(grads, 1):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    if theano:  # The complements raised to the power t: see optim.scale_by_adam_theano.
      step = np.sqrt(1 - (1 - b2) ** t) / (1 - (1 - b1) ** t) * m / (np.sqrt(v) + eps)
    else:
      step = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    out.append(-lr * step)
  return out


@pytest.mark.parametrize("name", ["adam", "adam_theano"])
@pytest.mark.parametrize("options", [{}, {"b1": 0.5}, {"b2": 0.75}, {"eps": 0.7},
                                     {"b1": 0.3, "b2": 0.6, "eps": 0.05}])
def test_adam_options_change_the_update_by_value(name, options):
  b1, b2, eps = options.get("b1", 0.9), options.get("b2", 0.999), options.get("eps", 1e-8)
  got = run({"name": name, "learning_rate": 0.1, **options})
  expected = adam_by_hand(0.1, b1, b2, eps, theano=name == "adam_theano")
  for g, e in zip(got, expected):
    np.testing.assert_allclose(g, e, rtol=2e-5, atol=1e-7)
  if options:  # The option matters: the defaults give another update.
    default = adam_by_hand(0.1, 0.9, 0.999, 1e-8, theano=name == "adam_theano")
    assert not np.allclose(got[1], default[1], rtol=1e-3)


@pytest.mark.parametrize("momentum,nesterov", [(0.9, False), (0.5, False), (0.5, True)])
def test_momentum_and_nesterov_by_value(momentum, nesterov):
  got = run({"name": "momentum", "learning_rate": 0.1, "momentum": momentum,
             "nesterov": nesterov})
  trace = np.zeros(3)
  for g, update in zip(GRADS, got):
    trace = g + momentum * trace
    direction = g + momentum * trace if nesterov else trace
    np.testing.assert_allclose(update, -0.1 * direction, rtol=1e-6)


def test_adamw_weight_decay_by_value():
  got = run({"name": "adamw", "learning_rate": 0.1, "weight_decay": 0.25}, grads=GRADS[:1])
  adam_step = -0.1 * GRADS[0] / (np.abs(GRADS[0]) + 1e-8)  # Adam's first step: sign(g).
  np.testing.assert_allclose(got[0], adam_step - 0.1 * 0.25 * PARAMS, rtol=1e-4)


def test_sgd_and_rmsprop_by_value():
  np.testing.assert_allclose(run({"name": "sgd", "learning_rate": 0.3})[0], -0.3 * GRADS[0],
                             rtol=1e-6)
  # optax's rmsprop: nu = 0.9 nu + 0.1 g^2, update -lr g / (sqrt(nu) + 1e-8).
  np.testing.assert_allclose(run({"name": "rmsprop", "learning_rate": 0.3})[0],
                             -0.3 * GRADS[0] / np.sqrt(0.1 * GRADS[0] ** 2), rtol=1e-5)


# --- the clips at their edges -----------------------------------------------------------


def grads_of_norm(norm: float) -> dict:
  # [3, 4] has norm 5: scaled to the norm asked for.
  return {"a": jnp.asarray([3.0, 4.0]) * (norm / 5.0), "b": jnp.zeros((3,))}


def global_norm(tree) -> float:
  return float(optax.tree.norm(tree))


def test_standard_global_clip_acts_at_exactly_the_threshold():
  clipped, acted = optim.clip_by_global_norm(5.0)(grads_of_norm(5.0))
  assert bool(acted)
  assert global_norm(clipped) == pytest.approx(5.0)
  clipped, acted = optim.clip_by_global_norm(5.0)(grads_of_norm(4.0))
  assert not bool(acted) and global_norm(clipped) == pytest.approx(4.0)
  clipped, acted = optim.clip_by_global_norm(5.0)(grads_of_norm(7.5))
  assert bool(acted) and global_norm(clipped) == pytest.approx(5.0)


@pytest.mark.parametrize("norm,expected,acted", [
    (3.0, 3.0, False),  # Above the clip (2), under its square (4): left alone.
    (4.0, 4.0, False),  # At the square: still alone (the code's test is strict).
    (9.0, 2.0 * 3.0, True),  # Above: rescaled by 2 / sqrt(9), to 2 sqrt(9) = 6.
])
def test_attentive_reader_rule_between_the_clip_and_its_square(norm, expected, acted):
  clipped, did = reader_clip.clip_like_attentive_reader_code(2.0)(grads_of_norm(norm))
  assert bool(did) is acted
  assert global_norm(clipped) == pytest.approx(expected, rel=1e-5)


def test_the_clip_rule_of_the_config_is_the_one_applied():
  grads = grads_of_norm(3.0)
  config = {"name": "sgd", "learning_rate": 1.0, "clip_global_norm": 2.0}
  # "standard" (and an unset rule) clips 3 to 2; the attentive reader's leaves it.
  for rule, norm in ((None, 2.0), ("standard", 2.0), ("attentive_reader_code", 3.0)):
    tx = optim.make_optimizer(ml_collections.ConfigDict({**config,
                                                         "clip_global_norm_rule": rule}),
                              reader_clip.CLIP_RULES)
    updates, _ = tx.update(grads, tx.init(grads), grads)
    assert global_norm(updates) == pytest.approx(norm, rel=1e-5), rule


def test_clips_apply_elementwise_then_per_tensor_then_globally_by_value():
  grads = {"mixture": jnp.asarray([30.0, -40.0]), "layer_0": jnp.asarray([3.0, 4.0, 12.0])}
  config = {"clip_elementwise": {"mixture": 20.0}, "clip_tensor_norm": 10.0,
            "clip_global_norm": 5.0}
  stages = optim.clip_stages(config)
  assert [s.metric for s in stages] == ["elementwise_clipped_fraction",
                                        "tensor_clipped_fraction", "clipped_fraction"]
  g = grads
  for stage in stages:
    g, acted = stage.apply(g)
    assert bool(acted)
  # [20, -20] (norm 28.28) -> norm 10; [3, 4, 12] (norm 13) -> norm 10; then both to 5
  # together: each keeps its share, 5 / sqrt(200).
  mixture = np.array([20.0, -20.0]) / np.sqrt(800) * 10
  layer = np.array([3.0, 4.0, 12.0]) / 13 * 10
  scale = 5.0 / np.sqrt(200.0)
  np.testing.assert_allclose(g["mixture"], mixture * scale, rtol=1e-5)
  np.testing.assert_allclose(g["layer_0"], layer * scale, rtol=1e-5)


def test_a_tensor_clip_at_the_norm_does_not_count_as_acting():
  # Per tensor the test is strict (>): a tensor exactly at the bound is unchanged.
  g, acted = optim.clip_by_tensor_norm(5.0)({"a": jnp.asarray([3.0, 4.0])})
  assert not bool(acted)
  np.testing.assert_allclose(g["a"], [3.0, 4.0])
