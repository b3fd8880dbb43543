"""DyT, ScaleNorm and LayerNorm-simple against float64 NumPy references written from
their papers' equations (tests/references.py), in the feed-forward modules the
registry builds, in the recurrent cells' step modules and in the perm-MNIST MLP."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import perm_mnist as perm_mnist_config
from configs import skip_thoughts as skip_thoughts_config
from experiments.perm_mnist import task as perm_mnist
from lnorm.normalization import (
    NORMS, PER_EXAMPLE_NORMS, DynamicTanh, ScaleNorm, make_norm)
from lnorm.normalization import functional as F
from lnorm.rnn import (
    RecurrentLayer, StepDynamicTanh, StepLayerNormSimple, StepScaleNorm, cell_options,
    make_gru_cell, make_lstm_cell, recurrence_path)
from tests import references as ref
from tests.references import dyt_ref, ln_ref, scalenorm_ref
from tests.test_forward_models import TOL, _apply_train, _dataset, _init, mlp_ref

# Full-precision matmuls and no silent rank promotion (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("precise_jax")

NEW_NORMS = ("dyt", "scalenorm", "ln_simple")


def _x(shape, seed=0, shift=0.0):
  return (np.random.default_rng(seed).normal(size=shape) + shift).astype(np.float32)


def _perturbed(variables, seed=1):
  """Parameters away from their initial values (ones, zeros, sqrt(d), 0.5)."""
  rng = np.random.default_rng(seed)
  return jax.tree.map(lambda p: jnp.asarray(np.asarray(p) + rng.normal(size=p.shape) * 0.3
                                            + 0.2, jnp.float32), variables)


def _apply(name, x, options=None, mask=None, perturb=True):
  module = make_norm(name, options).layer()
  variables = module.init(jax.random.key(0), x)
  if perturb:
    variables = _perturbed(variables)
  y = module.apply(variables, x, mask=mask)
  params = jax.tree.map(lambda p: np.asarray(p, np.float64), variables.get("params", {}))
  return np.asarray(y), params


def test_registered_like_rmsnorm():
  for name in NEW_NORMS:
    assert name in NORMS and name in PER_EXAMPLE_NORMS
  # DyT's beta is the layer's bias, as LN's; ScaleNorm and LN-simple add none.
  assert [make_norm(n).has_bias for n in NEW_NORMS] == [True, False, False]
  assert {make_norm(n).default_position for n in NEW_NORMS} == {"pre"}
  assert not any(make_norm(n).normalizes_logits for n in NEW_NORMS)


# --- DyT -----------------------------------------------------------------------------


def test_dyt_initial_parameters_follow_the_paper():
  x = _x((4, 7))
  params = DynamicTanh().init(jax.random.key(0), x)["params"]
  assert params["alpha"].shape == () and float(params["alpha"]) == 0.5
  np.testing.assert_array_equal(params["scale"], np.ones(7))
  np.testing.assert_array_equal(params["bias"], np.zeros(7))


def test_dyt_matches_reference_odd_width():
  x = _x((5, 7), shift=0.4) * 3
  y, p = _apply("dyt", x)
  np.testing.assert_allclose(y, dyt_ref(x, p["alpha"], p["scale"], p["bias"]),
                             rtol=1e-5, atol=1e-6)


def test_dyt_alpha_init_option_changes_the_output_by_value():
  x = _x((3, 9)) * 2
  y_default, _ = _apply("dyt", x, perturb=False)
  y, params = _apply("dyt", x, {"alpha_init": 1.7}, perturb=False)
  assert float(params["alpha"]) == pytest.approx(1.7)
  np.testing.assert_allclose(y, np.tanh(1.7 * x.astype(np.float64)), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(y_default, np.tanh(0.5 * x.astype(np.float64)), rtol=1e-5,
                             atol=1e-6)


def test_dyt_over_a_conv_map_has_a_gain_per_entry_of_its_axes():
  x = _x((2, 3, 5, 4))
  y, p = _apply("dyt", x, {"axes": (1, 2, 3)})
  assert p["scale"].shape == (3, 5, 4)
  np.testing.assert_allclose(y, dyt_ref(x, p["alpha"], p["scale"], p["bias"]), rtol=1e-5,
                             atol=1e-6)


# --- ScaleNorm -----------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 7, 13])
def test_scalenorm_gain_starts_at_sqrt_d(d):
  params = ScaleNorm().init(jax.random.key(0), _x((2, d)))["params"]
  assert params["scale"].shape == ()
  assert float(params["scale"]) == pytest.approx(math.sqrt(d))


def test_scalenorm_at_init_is_rmsnorm_without_gain():
  # g = sqrt(d): g x / ||x|| = x / sqrt(mean(x^2)), up to eps.
  x = _x((4, 11), shift=1.0)
  y, _ = _apply("scalenorm", x, perturb=False)
  x64 = x.astype(np.float64)
  np.testing.assert_allclose(y, x64 / np.sqrt(np.mean(x64 ** 2, -1, keepdims=True)),
                             rtol=1e-5)


def test_scalenorm_matches_reference_with_learned_gain():
  x = _x((6, 7), shift=-0.3)
  y, p = _apply("scalenorm", x)
  np.testing.assert_allclose(y, scalenorm_ref(x, p["scale"]), rtol=1e-5, atol=1e-6)


def test_scalenorm_options_scale_init_and_eps():
  x = _x((3, 5)) * 1e-3  # ||x|| ~ 2e-3, so eps = 1e-4 under the root shows.
  y, p = _apply("scalenorm", x, {"scale_init": 2.0, "eps": 1e-4}, perturb=False)
  assert float(p["scale"]) == 2.0
  np.testing.assert_allclose(y, scalenorm_ref(x, 2.0, eps=1e-4), rtol=1e-5)
  assert np.max(np.abs(y - scalenorm_ref(x, 2.0, eps=1e-5))) > 1e-2


def test_scalenorm_mask_leaves_padding_out_of_the_norm():
  x = _x((4, 7), shift=0.5)
  mask = np.ones((4, 7), bool)
  mask[1, 4:] = False
  mask[3, 1:] = False
  x_padded = np.where(mask, x, np.nan).astype(np.float32)  # padding may hold anything
  y, p = _apply("scalenorm", x_padded, mask=jnp.asarray(mask))
  want = scalenorm_ref(np.where(mask, x, 0.0), p["scale"], mask=mask)
  np.testing.assert_allclose(y[mask], want[mask], rtol=1e-5, atol=1e-6)
  # The padded row's real entry alone sets its norm: g * sign(x).
  np.testing.assert_allclose(y[3, 0], p["scale"] * np.sign(x[3, 0]), rtol=1e-4)


def test_scalenorm_over_several_axes():
  x = _x((2, 3, 5, 4))
  y, p = _apply("scalenorm", x, {"axes": (1, 2, 3)})
  np.testing.assert_allclose(y, scalenorm_ref(x, p["scale"], axes=(1, 2, 3)), rtol=1e-5,
                             atol=1e-6)


# --- LayerNorm-simple ----------------------------------------------------------------


def test_ln_simple_has_no_parameters_and_is_ln_without_gain_and_bias():
  x = _x((5, 7), shift=3.0)
  module = make_norm("ln_simple").layer()
  assert module.init(jax.random.key(0), x) == {}
  y = np.asarray(module.apply({}, x))
  np.testing.assert_allclose(y, ln_ref(x), rtol=1e-4, atol=1e-5)


def test_ln_simple_mask_and_eps():
  x = _x((3, 9)) * 3e-3 + 0.2  # a spread of 3e-3: eps 1e-4 against 1e-5 shows
  mask = np.ones((3, 9), bool)
  mask[0, 5:] = False
  x_padded = np.where(mask, x, np.inf).astype(np.float32)
  y, _ = _apply("ln_simple", x_padded, {"eps": 1e-4}, mask=jnp.asarray(mask))
  want = ln_ref(np.where(mask, x, 0.0), eps=1e-4, mask=mask)
  np.testing.assert_allclose(y[mask], want[mask], rtol=1e-4, atol=1e-4)
  assert np.max(np.abs(y[mask] - ln_ref(np.where(mask, x, 0.0), mask=mask)[mask])) > 1e-2


# --- Precision and gradients ---------------------------------------------------------


@pytest.mark.parametrize("name", NEW_NORMS)
def test_bfloat16_input_computes_in_float32(name):
  x32 = _x((8, 33), shift=4.0)
  x16 = jnp.asarray(x32, jnp.bfloat16)
  module = make_norm(name).layer()
  variables = module.init(jax.random.key(0), x16)
  y16 = module.apply(variables, x16)
  assert y16.dtype == jnp.bfloat16
  y32 = module.apply(variables, x16.astype(jnp.float32))
  scale = float(jnp.max(jnp.abs(y32)))
  np.testing.assert_allclose(np.asarray(y16, np.float32), y32, atol=scale * 2 ** -7)


def test_scalar_gains_get_their_analytic_gradients():
  # The one learnable scalar of each: d/dg sum(w * g x/||x||) = sum(w * x/||x||);
  # d/dalpha sum(w * tanh(alpha x)) = sum(w * x * (1 - tanh(alpha x)^2)).
  x = _x((3, 5), shift=0.2)
  w = np.random.default_rng(4).normal(size=x.shape)
  x64 = x.astype(np.float64)
  g_grad = jax.grad(lambda g: jnp.sum(F.scale_norm(jnp.asarray(x), g, eps=1e-5) * w))(1.7)
  want = np.sum(w * x64 / np.sqrt(np.sum(x64 ** 2, -1, keepdims=True) + 1e-5))
  np.testing.assert_allclose(g_grad, want, rtol=1e-5)
  a_grad = jax.grad(lambda a: jnp.sum(F.dynamic_tanh(jnp.asarray(x), a, None, None) * w))(0.8)
  want = np.sum(w * x64 * (1 - np.tanh(0.8 * x64) ** 2))
  np.testing.assert_allclose(a_grad, want, rtol=1e-5)


# --- In the recurrent cells ----------------------------------------------------------


def test_step_modules_match_the_feed_forward_ones():
  x = _x((3, 11), shift=0.7)
  for step_cls, name in ((StepDynamicTanh, "dyt"), (StepScaleNorm, "scalenorm"),
                         (StepLayerNormSimple, "ln_simple")):
    ff = make_norm(name).layer()
    variables = _perturbed(ff.init(jax.random.key(0), x))
    got = step_cls().apply(variables, x, step=jnp.int32(3), mask=jnp.ones((3,), bool))
    np.testing.assert_allclose(got, ff.apply(variables, x), rtol=1e-6)


def test_cell_options_reach_the_step_modules():
  x = jnp.asarray(_x((2, 4, 3)))
  layer = RecurrentLayer(make_lstm_cell("dyt", dyt_alpha_init=0.9), 5)
  params = layer.init(jax.random.key(0), x)["params"]["layer_0"]
  for place in ("input_norm", "hidden_norm", "cell_norm"):
    assert float(params[place]["alpha"]) == pytest.approx(0.9)
  layer = RecurrentLayer(make_gru_cell("scalenorm"), 5)
  params = layer.init(jax.random.key(0), x)["params"]["layer_0"]
  # sqrt of each normalized width: the gates (2H) and the candidate (H).
  assert float(params["hidden_gate_norm"]["scale"]) == pytest.approx(math.sqrt(10))
  assert float(params["input_candidate_norm"]["scale"]) == pytest.approx(math.sqrt(5))


@pytest.mark.parametrize("variant,path", [
    ("ln", "fused"), ("rms", "fused"), ("ln_cell", "fused"), ("dyt", "step-by-step"),
    ("scalenorm", "fused"), ("ln_simple", "fused"), ("scalenorm_cell", "fused"),
    ("dyt_cell", "step-by-step")])
def test_recurrence_path_of_each_lstm_variant(variant, path):
  assert recurrence_path(make_lstm_cell(variant)) == path
  assert recurrence_path(make_gru_cell(variant.replace("_cell", ""))) == path


def test_fused_scan_refuses_a_normalizer_it_cannot_run():
  cell = make_lstm_cell("dyt")(4, name="cell")
  x = jnp.asarray(_x((3, 2, 5)))
  with pytest.raises(ValueError, match="not variant 'dyt'.*step by step"):
    cell.init(jax.random.key(0), x, method=lambda c, x: c.fused_scan(
        c.initialize_carry(jax.random.key(0), x.shape[1:]), x))


# --- Through the experiments' configs and tasks --------------------------------------


@pytest.mark.parametrize("norm", NEW_NORMS)
def test_perm_mnist_mlp_matches_the_equations(norm):
  config = perm_mnist_config.get_config(f"norm={norm}")
  config.hidden_sizes = (9, 7)
  task = perm_mnist.Task(config)
  model = task.build_model(_dataset(num_classes=4))
  images = np.random.default_rng(0).integers(0, 256, size=(6, 20), dtype=np.uint8)
  (x,) = task.model_inputs({"image": images})
  variables = _perturbed(_init(model, x, train=True))
  y = _apply_train(model, variables, x)
  p = ref.f64(variables["params"])
  np.testing.assert_allclose(y, mlp_ref(p, images / 255.0, norm, "pre", False), **TOL)
  ref.assert_differs(y, mlp_ref(p, images / 255.0, "none", "pre", False),
                     atol=TOL["atol"], what="the MLP without its norm")


def test_config_options_reach_the_cells():
  config = skip_thoughts_config.get_config("norm=dyt,smoke=true")
  config.norm_options.dyt.alpha_init = 1.25
  config.norm_options.scalenorm.eps = 1e-3
  config.norm_options.ln_simple.eps = 1e-4
  options = cell_options(config)
  assert (options["dyt_alpha_init"], options["scalenorm_eps"],
          options["ln_simple_eps"]) == (1.25, 1e-3, 1e-4)
  layer = RecurrentLayer(make_gru_cell("dyt", **options), 4)
  params = jax.eval_shape(layer.init, jax.random.key(0), _x((2, 3, 5)))
  assert set(params["params"]["layer_0"]["hidden_gate_norm"]) == {"alpha", "scale", "bias"}
  params = jax.jit(layer.init)(jax.random.key(0), _x((2, 3, 5)))["params"]["layer_0"]
  assert float(params["input_candidate_norm"]["alpha"]) == 1.25
