"""lnorm.training.optim: per-tensor and global gradient clipping against a hand
computation, the order of the chain, and the optimizers by name."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from experiments.attentive_reader import clip as reader_clip
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


# --- the Theano Adam of the skip-thoughts and order-embeddings authors -----------------


def _run(config, gradients):
  """The updates of ``config``'s optimizer for a sequence of gradients of one scalar."""
  tx = optim.make_optimizer(config)
  params = jnp.zeros((), jnp.float32)
  state = tx.init(params)
  out = []
  for g in gradients:
    update, state = tx.update(jnp.float32(g), state, params)
    out.append(float(update))
  return out


def test_adam_theano_first_steps_by_hand():
  config = ml_collections.ConfigDict({"name": "adam_theano", "learning_rate": 1.0,
                                      "eps": 0.0})
  got = _run(config, [1.0, -2.0, 0.5])
  # t = 1: m = 0.1, v = 0.001, factor sqrt(1 - 0.001) / (1 - 0.1):
  #   step = sqrt(0.999) / 0.9 * 0.1 / sqrt(0.001) = sqrt(999) / 9 = 3.51188...
  # t = 2: m = 0.09 - 0.2 = -0.11, v = 0.000999 + 0.004 = 0.004999,
  #   factor sqrt(1 - 1e-6) / 0.99
  # t = 3: m = -0.099 + 0.05 = -0.049, v = 0.004994001 + 0.00025 = 0.005244001,
  #   factor sqrt(1 - 1e-9) / 0.999
  expected = [np.sqrt(999.0) / 9.0,
              np.sqrt(1 - 1e-6) / 0.99 * -0.11 / np.sqrt(0.004999),
              np.sqrt(1 - 1e-9) / 0.999 * -0.049 / np.sqrt(0.005244001)]
  np.testing.assert_allclose(got, [-e for e in expected], rtol=1e-5)
  np.testing.assert_allclose(got[0], -3.5118846, rtol=1e-6)


def test_adam_theano_steps_are_larger_than_adams_early_and_equal_later():
  # A constant gradient: Adam's step is lr; theirs is (1 - 0.9^t) / sqrt(1 - 0.999^t)
  # times the factor of the docstring (1 from t = 4 on): 6.57 at t = 12, 1.26 at 1,000.
  steps = 3000
  theano = -np.array(_run(ml_collections.ConfigDict(
      {"name": "adam_theano", "learning_rate": 1.0}), [0.3] * steps))
  adam = -np.array(_run(ml_collections.ConfigDict(
      {"name": "adam", "learning_rate": 1.0}), [0.3] * steps))
  np.testing.assert_allclose(adam, 1.0, rtol=1e-4)
  t = np.array([12, 1000, 3000])
  np.testing.assert_allclose(theano[t - 1], (1 - 0.9 ** t) / np.sqrt(1 - 0.999 ** t),
                             rtol=1e-4)
  np.testing.assert_allclose(theano[t - 1], [6.569, 1.258, 1.026], atol=2e-3)


# --- element-wise clipping by parameter group (Graves 2013) ----------------------------

HANDWRITING_LIKE = {
    "mixture": {"kernel": np.array([[150.0, -30.0], [-250.0, 99.0]]),
                "bias": np.array([101.0, -100.5])},
    "layer_0": {"lstm": {"bias": np.array([12.0, -3.0])},
                "window": {"bias": np.array([40.0, -40.0])}},
    "layer_1": {"layer_0": {"bias": np.array([-11.0, 9.5])}},
}


def _sgd_update(config, grads):
  tx = optim.make_optimizer(config)
  params = jax.tree.map(jnp.zeros_like, grads)
  updates, _ = tx.update(jax.tree.map(jnp.float32, grads), tx.init(params), params)
  return jax.tree.map(np.asarray, updates)


def test_elementwise_clipping_by_parameter_group():
  config = _sgd()
  config.clip_elementwise = ml_collections.ConfigDict(
      {"mixture": 100.0, "layer_*/lstm": 10.0, "layer_1": 10.0})
  updates = _sgd_update(config, HANDWRITING_LIKE)
  # Each coordinate on its own, to its group's bound; the window matches no pattern.
  np.testing.assert_allclose(updates["mixture"]["kernel"], [[-100.0, 30.0], [100.0, -99.0]])
  np.testing.assert_allclose(updates["mixture"]["bias"], [-100.0, 100.0])
  np.testing.assert_allclose(updates["layer_0"]["lstm"]["bias"], [-10.0, 3.0])
  np.testing.assert_allclose(updates["layer_0"]["window"]["bias"], [-40.0, 40.0])
  np.testing.assert_allclose(updates["layer_1"]["layer_0"]["bias"], [10.0, -9.5])


def test_elementwise_clipping_takes_the_smallest_matching_bound_and_zero_is_off():
  config = _sgd()
  config.clip_elementwise = ml_collections.ConfigDict(
      {"layer_*": 20.0, "layer_0/window": 5.0, "mixture": 0.0})
  updates = _sgd_update(config, HANDWRITING_LIKE)
  np.testing.assert_allclose(updates["layer_0"]["window"]["bias"], [-5.0, 5.0])
  np.testing.assert_allclose(updates["layer_0"]["lstm"]["bias"], [-12.0, 3.0])
  np.testing.assert_allclose(updates["mixture"]["bias"], [-101.0, 100.5])


def test_elementwise_pattern_matching_nothing_is_an_error():
  config = _sgd()
  config.clip_elementwise = ml_collections.ConfigDict({"output": 100.0})
  with pytest.raises(ConfigError, match="'output' matches no parameter.*layer_0, "
                     "layer_1, mixture"):
    _sgd_update(config, HANDWRITING_LIKE)


def test_the_attentive_reader_codes_clip_leaves_norms_under_the_square_alone():
  config = ml_collections.ConfigDict({"name": "sgd", "learning_rate": 1.0,
                                      "clip_global_norm": 10.0,
                                      "clip_global_norm_rule": "attentive_reader_code"})
  tx = optim.make_optimizer(config, reader_clip.CLIP_RULES)
  small = {"w": jnp.array([30.0, 40.0])}  # norm 50 < 10**2: untouched
  update, _ = tx.update(small, tx.init(small))
  np.testing.assert_allclose(update["w"], [-30.0, -40.0])
  large = {"w": jnp.array([240.0, 320.0])}  # norm 400: times 10 / sqrt(400) = 0.5
  update, _ = tx.update(large, tx.init(large))
  np.testing.assert_allclose(update["w"], [-120.0, -160.0], rtol=1e-6)
  standard = optim.make_optimizer(ml_collections.ConfigDict(
      {"name": "sgd", "learning_rate": 1.0, "clip_global_norm": 10.0}))
  update, _ = standard.update(small, standard.init(small))
  np.testing.assert_allclose(update["w"], [-6.0, -8.0], rtol=1e-6)


def test_an_unknown_clip_rule_names_the_choices():
  config = ml_collections.ConfigDict({"name": "sgd", "learning_rate": 1.0,
                                      "clip_global_norm": 1.0, "clip_global_norm_rule": "sqrt"})
  with pytest.raises(ConfigError, match="Valid choices: standard, attentive_reader_code"):
    optim.make_optimizer(config, reader_clip.CLIP_RULES)
  # An experiment's own rule is its own: the harness alone offers the standard one.
  reader = ml_collections.ConfigDict({**config.to_dict(),
                                      "clip_global_norm_rule": "attentive_reader_code"})
  with pytest.raises(ConfigError, match="Valid choices: standard\\."):
    optim.make_optimizer(reader)


# A gradient whose norm float32 holds (1.3e31 < 3.4e38) but whose sum of squares it
# does not (1.7e62): the LN-LSTM reader's first gradient at gain 1.0 was of this size.
HUGE = {"w": np.array([5e30, -12e30], np.float32), "b": np.array([1.0], np.float32)}


def _branch_free(tree):
  return optim._branch_free([jnp.asarray(x, jnp.float32) for x in jax.tree.leaves(tree)])


#: global_norm as a CPU computes it (a branch on overflow) and as an accelerator does
#: (branch-free, lax.platform_dependent's default): both run here.
GLOBAL_NORMS = pytest.mark.parametrize("global_norm", [optim.global_norm, _branch_free],
                                       ids=["cpu", "accelerator"])


@GLOBAL_NORMS
def test_the_global_norm_of_a_gradient_whose_squares_overflow_float32(global_norm):
  norm = float(jax.jit(global_norm)(HUGE))
  assert np.isfinite(norm)
  np.testing.assert_allclose(norm, 13e30, rtol=1e-6)


@pytest.mark.parametrize("rule, expected_norm", [("standard", 10.0),
                                                 ("attentive_reader_code",
                                                  10.0 * np.sqrt(13e30))])
def test_the_clips_rescale_a_gradient_whose_squares_overflow(rule, expected_norm):
  clip = {**optim.GLOBAL_CLIP_RULES, **reader_clip.CLIP_RULES}[rule](10.0)
  clipped, acted = jax.jit(clip)({k: jnp.asarray(v) for k, v in HUGE.items()})
  assert bool(acted)
  w = np.asarray(clipped["w"], np.float64)
  np.testing.assert_allclose(w, HUGE["w"] * expected_norm / 13e30, rtol=1e-5)
  assert np.all(np.isfinite(w))


@GLOBAL_NORMS
@pytest.mark.parametrize("tree, expected", [
    # Every entry negative: the largest value is -1, the largest magnitude 1.2e31.
    ({"w": np.array([-5e30, -12e30], np.float32), "b": np.array([-1.0], np.float32)},
     13e30),
    # The large entry negative, the positive ones small.
    ({"w": np.array([-1e31, 2.0], np.float32), "b": np.array([3.0], np.float32)}, 1e31),
])
def test_the_global_norm_of_large_negative_gradients(tree, expected, global_norm):
  # The rescaling must divide by the largest magnitude, not the largest value.
  norm = float(jax.jit(global_norm)(tree))
  np.testing.assert_allclose(norm, expected, rtol=1e-6)


@GLOBAL_NORMS
def test_the_global_norm_is_optaxs_to_the_bit_when_nothing_overflows(global_norm):
  rng = np.random.default_rng(0)
  # Ordinary gradients, tiny ones and a norm (2.5e18) whose squares are near the
  # overflow (sum 6e36 against 3.4e38).
  for scale in (1e-30, 1e-3, 1.0, 1e3, 1e17):
    tree = {"a": rng.normal(size=(17, 33)).astype(np.float32) * scale,
            "b": rng.normal(size=(129,)).astype(np.float32) * scale,
            "c": np.float32(scale)}
    expected = jax.jit(lambda t: optax.tree.norm(t))(tree)
    got = jax.jit(global_norm)(tree)
    assert np.asarray(got).tobytes() == np.asarray(expected).tobytes(), scale


@GLOBAL_NORMS
def test_the_global_norm_keeps_inf_and_nan_gradients_non_finite(global_norm):
  assert float(global_norm({"w": np.array([1.0, np.inf], np.float32)})) == np.inf
  assert np.isnan(float(global_norm({"w": np.array([1e30, np.nan], np.float32)})))
  assert float(global_norm({"w": np.zeros(3, np.float32)})) == 0.0
  assert float(optim.global_norm({})) == 0.0


@GLOBAL_NORMS
@pytest.mark.parametrize("tree, expected", [
    # Near float32's largest value (3.4e38): the norm, 2.8e38, still fits.
    ({"w": np.array([2e38, -2e38], np.float32)}, 2 ** 0.5 * 2e38),
    # No entry's square overflows, their sum does (1e40): many moderate entries.
    ({"w": np.full(10_001, 1e18, np.float32), "b": np.full(7, -3e18, np.float32)},
     (10_001 * 1e36 + 7 * 9e36) ** 0.5),
])
def test_the_global_norm_overflows_only_where_the_norm_does(tree, expected, global_norm):
  np.testing.assert_allclose(float(jax.jit(global_norm)(tree)), expected, rtol=1e-6)
  assert float(global_norm({"w": np.array([3e38, 3e38], np.float32)})) == np.inf

@pytest.mark.parametrize("name", ["sgd", "momentum", "adam", "adam_theano"])
def test_linear_warmup_scales_the_learning_rate_then_leaves_it(name):
  """Over warmup_steps = 3 updates the rate is lr/3, 2lr/3, lr, then lr: each update
  is the un-warmed optimizer's update (from the same state) times that fraction."""
  config = ml_collections.ConfigDict({"name": name, "learning_rate": 0.5,
                                      "warmup_steps": 3})
  plain = ml_collections.ConfigDict({"name": name, "learning_rate": 0.5})
  warm_tx, plain_tx = optim.make_optimizer(config), optim.make_optimizer(plain)
  params = {k: jnp.zeros_like(v) for k, v in GRADS.items()}
  warm_state, plain_state = warm_tx.init(params), plain_tx.init(params)
  rng = np.random.default_rng(0)
  for t, fraction in enumerate([1 / 3, 2 / 3, 1.0, 1.0, 1.0]):
    grads = {k: jnp.asarray(rng.normal(size=v.shape), jnp.float32) for k, v in GRADS.items()}
    warm, warm_state = warm_tx.update(grads, warm_state, params)
    plain, plain_state = plain_tx.update(grads, plain_state, params)
    for k in GRADS:
      np.testing.assert_allclose(warm[k], fraction * np.asarray(plain[k]), rtol=1e-6,
                                 err_msg=f"update {t}")


def test_no_warmup_is_the_plain_optimizer():
  """warmup_steps 0 (the default) or absent adds nothing to the chain, so that runs
  and checkpoints from before the field are unchanged."""
  with_zero = optim.make_optimizer(ml_collections.ConfigDict(
      {"name": "adam", "learning_rate": 0.1, "warmup_steps": 0}))
  without = optim.make_optimizer(ml_collections.ConfigDict(
      {"name": "adam", "learning_rate": 0.1}))
  params = {k: jnp.zeros_like(v) for k, v in GRADS.items()}
  assert (jax.tree.structure(with_zero.init(params))
          == jax.tree.structure(without.init(params)))


def test_a_negative_warmup_is_refused_before_any_data_loads():
  from lnorm.training import defaults  # pylint: disable=g-import-not-at-top
  config = defaults.base_config()
  config.optimizer.warmup_steps = -5
  with pytest.raises(ConfigError, match="optimizer.warmup_steps=-5"):
    defaults.check_values(config)
