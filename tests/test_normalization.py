"""Every transform in lnorm.normalization against a float64 NumPy reference written
from the papers' equations (LN paper eq. 3-4, RMSNorm paper eq. 4, BN, WN, BLN paper
eq. 10-25)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lnorm.models import MLP
from lnorm.normalization import (
    BatchLayerNorm, BatchNorm, LayerNorm, RMSNorm, UnknownNormError, WeightNormDense,
    bln_inference_configurations, finalize_epoch_statistics, make_norm)
from lnorm.normalization import functional as F
from tests.references import (
    bln_inference_ref, bln_population_ref, bln_train_ref, bn_stats_ref, ln_ref, rms_ref)

#: The eps of LN, RMSNorm and BN (their registered default), passed to the pure
#: functions, which take it from their caller.
EPS = 1e-5


# Full-precision matmuls and no silent rank promotion (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("precise_jax")


def _rng(seed=0):
  return np.random.default_rng(seed)


def _with_random_affine(variables, rng):
  """Random gain and bias, so that scale and shift are checked too."""
  params = jax.tree.map(lambda p: jnp.asarray(rng.normal(size=p.shape) * 0.5 + 1.0,
                                              jnp.float32), variables["params"])
  return {**variables, "params": params}


def _train_step(module, variables, x, mask=None):
  y, updates = module.apply(variables, x, train=True, mask=mask, mutable=["batch_stats"])
  return y, {**variables, "batch_stats": updates["batch_stats"]}


# --- LN -------------------------------------------------------------------------------


def test_layer_norm_matches_reference_eps_1e5_biased_variance():
  rng = _rng(0)
  # d = 5 makes biased and unbiased variance differ by 25%; a spread of ~3e-3 makes
  # eps = 1e-5 (the reference code's) visibly different from flax's 1e-6.
  x = (rng.normal(size=(6, 5)) * 3e-3 + 0.7).astype(np.float32)
  module = LayerNorm()
  variables = _with_random_affine(module.init(jax.random.key(0), x), rng)
  g = np.asarray(variables["params"]["scale"], np.float64)
  b = np.asarray(variables["params"]["bias"], np.float64)
  y = np.asarray(module.apply(variables, x))
  np.testing.assert_allclose(y, ln_ref(x, g, b), rtol=1e-4, atol=1e-4)
  assert np.max(np.abs(y - ln_ref(x, g, b, eps=1e-6))) > 1e-2
  x64 = x.astype(np.float64)
  unbiased = g * (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(
      x64.var(-1, ddof=1, keepdims=True) + 1e-5) + b
  assert np.max(np.abs(y - unbiased)) > 1e-2
  # The functional form is the same computation, and per example.
  np.testing.assert_allclose(F.layer_norm(x, g, b, eps=EPS), y, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(F.layer_norm(x[2:3], g, b, eps=EPS)[0], y[2], rtol=1e-5, atol=1e-5)


def test_layer_norm_mask_excludes_padding():
  rng = _rng(1)
  x = rng.normal(size=(4, 10)).astype(np.float32)
  mask = np.arange(10)[None, :] < np.array([10, 7, 3, 1])[:, None]
  garbage = np.where(mask, x, np.float32(np.nan))  # Padding may hold anything.
  y = np.asarray(F.layer_norm(jnp.asarray(garbage), eps=EPS, mask=jnp.asarray(mask)))
  ref = ln_ref(x, mask=mask)
  np.testing.assert_allclose(y[mask], ref[mask], rtol=1e-5, atol=1e-5)
  # The same as normalizing each example's real entries alone.
  np.testing.assert_allclose(y[1, :7], ln_ref(x[1:2, :7])[0], rtol=1e-5, atol=1e-5)


# --- RMSNorm and pRMSNorm -------------------------------------------------------------


def test_rms_norm_matches_reference_and_does_not_centre():
  rng = _rng(30)
  x = (rng.normal(size=(6, 20)) * 0.5 + 0.8).astype(np.float32)
  module = make_norm("rms").layer()
  variables = _with_random_affine(module.init(jax.random.key(0), x), rng)
  g = np.asarray(variables["params"]["scale"], np.float64)
  b = np.asarray(variables["params"]["bias"], np.float64)
  y = np.asarray(module.apply(variables, x))
  np.testing.assert_allclose(y, rms_ref(x, g, b), rtol=1e-5, atol=1e-5)
  # With a mean of 0.8 against a spread of 0.5, LN's re-centering would show.
  assert np.max(np.abs(y - ln_ref(x, g, b))) > 0.1
  # Per example: one example alone gives the same output.
  np.testing.assert_allclose(module.apply(variables, x[3:4])[0], y[3], rtol=1e-5, atol=1e-5)


def test_rms_norm_eps_inside_the_square_root():
  # A row with mean square 1e-5 = eps: dividing by sqrt(ms + eps), not sqrt(ms) + eps.
  x = np.full((1, 4), np.sqrt(1e-5), np.float32)
  y = np.asarray(F.rms_norm(jnp.asarray(x), eps=EPS))
  np.testing.assert_allclose(y, 1 / np.sqrt(2.0), rtol=1e-5)


@pytest.mark.parametrize("d,p,size", [(32, 0.0625, 2), (1600, 0.0625, 100), (8, 0.0625, 1),
                                      (100, 0.07, 7), (100, 0.29, 29), (10, 1.0, 10)])
def test_partial_size_is_the_first_p_of_the_entries_at_least_one(d, p, size):
  assert F.partial_size(d, p) == size


@pytest.mark.parametrize("p", [0.0, -0.5, 1.5])
def test_partial_fraction_outside_0_1_is_an_error(p):
  with pytest.raises(ValueError, match="0.0625"):
    F.partial_size(10, p)


def test_prms_estimates_the_rms_from_the_first_entries_only():
  rng = _rng(31)
  x = rng.normal(size=(5, 48)).astype(np.float32)
  x[:, 3:] *= 10.0  # Entries past the head (3 of 48) would move a full RMS a lot.
  module = make_norm("prms").layer()
  variables = _with_random_affine(module.init(jax.random.key(0), x), rng)
  g = np.asarray(variables["params"]["scale"], np.float64)
  b = np.asarray(variables["params"]["bias"], np.float64)
  y = np.asarray(module.apply(variables, x))
  np.testing.assert_allclose(y, rms_ref(x, g, b, p=0.0625), rtol=1e-5, atol=1e-5)
  # By hand for one example: the head is the first 3 entries.
  x0 = x[0].astype(np.float64)
  np.testing.assert_allclose(y[0], g * x0 / np.sqrt(np.mean(x0[:3] ** 2) + 1e-5) + b,
                             rtol=1e-5, atol=1e-5)
  assert np.max(np.abs(y - rms_ref(x, g, b))) > 1.0
  # Changing an entry past the head changes only that entry's output.
  x2 = x.copy()
  x2[:, 40] += 5.0
  y2 = np.asarray(module.apply(variables, x2))
  np.testing.assert_allclose(np.delete(y2, 40, axis=1), np.delete(y, 40, axis=1), atol=1e-6)


@pytest.mark.parametrize("p", [1.0, 0.25])
def test_rms_norm_mask_excludes_padding(p):
  rng = _rng(32)
  x = rng.normal(size=(4, 12)).astype(np.float32)
  mask = np.arange(12)[None, :] < np.array([12, 7, 2, 1])[:, None]
  mask[0, 1] = False  # A hole inside the head of the partial estimate.
  garbage = np.where(mask, x, np.float32(np.nan))  # Padding may hold anything.
  y = np.asarray(F.rms_norm(jnp.asarray(garbage), eps=EPS, mask=jnp.asarray(mask), partial=p))
  ref = rms_ref(x, mask=mask, p=p)
  np.testing.assert_allclose(y[mask], ref[mask], rtol=1e-5, atol=1e-5)
  # By hand: pRMSNorm at p = 0.25 reads entries 0-2, of which example 0 has 0 and 2
  # and example 2 has 0 and 1.
  if p == 0.25:
    for n, head in ((0, [0, 2]), (2, [0, 1])):
      rms = np.sqrt(np.mean(x[n, head].astype(np.float64) ** 2) + 1e-5)
      np.testing.assert_allclose(y[n, mask[n]], x[n, mask[n]] / rms, rtol=1e-5)


def test_rms_norm_over_several_axes_reads_them_in_row_major_order():
  rng = _rng(33)
  x = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)  # a conv map, NHWC
  module = RMSNorm(axes=(1, 2, 3), partial=0.1)   # 6 of 60 entries: (0,0,:5), (0,1,0)
  variables = _with_random_affine(module.init(jax.random.key(0), x), rng)
  g = np.asarray(variables["params"]["scale"], np.float64)
  b = np.asarray(variables["params"]["bias"], np.float64)
  y = np.asarray(module.apply(variables, x))
  np.testing.assert_allclose(y, rms_ref(x, g, b, axes=(1, 2, 3), p=0.1), rtol=1e-5,
                             atol=1e-5)
  x0 = x[0].astype(np.float64)
  head = np.concatenate([x0[0, 0, :], x0[0, 1, :1]])
  np.testing.assert_allclose(y[0], g * x0 / np.sqrt(np.mean(head ** 2) + 1e-5) + b,
                             rtol=1e-5, atol=1e-5)


# --- BN -------------------------------------------------------------------------------


@pytest.mark.parametrize("unbiased", [False, True])
def test_batch_norm_training_and_population_statistics(unbiased):
  rng = _rng(2)
  momentum = 0.8
  module = BatchNorm(momentum=momentum, unbiased=unbiased)
  batches = [(rng.normal(size=(4, 6)) * (1 + i) + i).astype(np.float32) for i in range(3)]
  variables = _with_random_affine(module.init(jax.random.key(0), batches[0], train=True), rng)
  g = np.asarray(variables["params"]["scale"], np.float64)
  b = np.asarray(variables["params"]["bias"], np.float64)
  ddof = 1 if unbiased else 0
  ra_mean, ra_var = np.zeros(6), np.ones(6)
  for x in batches:
    y, variables = _train_step(module, variables, x)
    mu, var = bn_stats_ref(x, ddof=ddof)
    np.testing.assert_allclose(y, g * (x - mu) / np.sqrt(var + 1e-5) + b, rtol=1e-4, atol=1e-4)
    ra_mean = momentum * ra_mean + (1 - momentum) * mu[0]
    ra_var = momentum * ra_var + (1 - momentum) * var[0]
  np.testing.assert_allclose(variables["batch_stats"]["mean"], ra_mean, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(variables["batch_stats"]["var"], ra_var, rtol=1e-5, atol=1e-5)
  # Inference uses the population statistics, so one example is normalized alone.
  x = rng.normal(size=(1, 6)).astype(np.float32)
  y = module.apply(variables, x, train=False)
  np.testing.assert_allclose(y, g * (x - ra_mean) / np.sqrt(ra_var + 1e-5) + b,
                             rtol=1e-4, atol=1e-4)


def test_batch_norm_unbiased_variance_is_bessel_corrected():
  x = _rng(3).normal(size=(4, 3)).astype(np.float32)
  _, biased = F.batch_moments(x, 0)
  _, unbiased = F.batch_moments(x, 0, unbiased=True)
  np.testing.assert_allclose(unbiased, biased * 4 / 3, rtol=1e-5)
  np.testing.assert_allclose(unbiased, x.astype(np.float64).var(0, ddof=1, keepdims=True),
                             rtol=1e-5)


def test_batch_norm_mask_excludes_padded_examples():
  rng = _rng(4)
  x = rng.normal(size=(6, 5)).astype(np.float32)
  mask = np.array([1, 1, 0, 1, 0, 1], bool)[:, None]
  module = BatchNorm(momentum=0.5)
  variables = module.init(jax.random.key(0), x, train=True)
  y, variables = _train_step(module, variables, np.where(mask, x, 1e30).astype(np.float32),
                             mask=mask)
  mu, var = bn_stats_ref(x, mask=mask)
  real = np.broadcast_to(mask, x.shape)
  np.testing.assert_allclose(np.asarray(y)[real], ((x - mu) / np.sqrt(var + 1e-5))[real],
                             rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(variables["batch_stats"]["mean"], 0.5 * mu[0], rtol=1e-5,
                             atol=1e-6)


# --- Precision ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ln", "rms", "prms", "bn", "bln"])
def test_bfloat16_input_uses_float32_statistics(name):
  rng = _rng(5)
  x32 = (rng.normal(size=(16, 512)) + 4.0).astype(np.float32)
  x16 = jnp.asarray(x32, jnp.bfloat16)
  module = make_norm(name).layer()
  variables = module.init(jax.random.key(0), x16, train=True)
  run = lambda x: module.apply(variables, x, train=True, mutable=["batch_stats"])[0]
  y16 = run(x16)
  assert y16.dtype == jnp.bfloat16
  # The float32 computation on the same (bf16-rounded) values: bf16 output rounding only.
  y32 = run(x16.astype(jnp.float32))
  assert y32.dtype == jnp.float32
  scale = float(jnp.max(jnp.abs(y32)))
  np.testing.assert_allclose(np.asarray(y16, np.float32), y32, atol=scale * 2 ** -7, rtol=0)


def test_large_mean_small_variance_two_pass():
  noise = _rng(6).normal(size=(8, 4096))
  x = (1e4 + 1e-2 * noise).astype(np.float32)
  x64 = x.astype(np.float64)  # The reference sees exactly the float32 values.
  true_var = x64.var(-1, keepdims=True)
  _, var = F.moments(x, -1)
  np.testing.assert_allclose(var, true_var, rtol=1e-2)
  # The one-pass formula in float32 loses every significant digit here.
  xj = jnp.asarray(x)
  naive = jnp.mean(xj * xj, -1, keepdims=True) - jnp.square(jnp.mean(xj, -1, keepdims=True))
  assert np.max(np.abs(np.asarray(naive) - true_var) / true_var) > 1.0
  # The output inherits the float32 rounding of the mean (ulp(1e4) ~ 1e-3, a few
  # percent of the std), not the catastrophic loss of the one-pass variance.
  np.testing.assert_allclose(F.layer_norm(x, eps=EPS), ln_ref(x64), atol=6e-2)
  naive_ln = (xj - jnp.mean(xj, -1, keepdims=True)) * jax.lax.rsqrt(naive + 1e-5)
  assert not np.allclose(naive_ln, ln_ref(x64), atol=0.5)


# --- WN -------------------------------------------------------------------------------


def test_weight_norm_per_output_unit():
  rng = _rng(7)
  v = rng.normal(size=(9, 4)).astype(np.float32)
  g = rng.normal(size=(4,)).astype(np.float32)
  w = np.asarray(F.weight_norm(v, g))
  v64 = v.astype(np.float64)
  np.testing.assert_allclose(w, g * v64 / np.linalg.norm(v64, axis=0), rtol=1e-5)
  np.testing.assert_allclose(np.linalg.norm(w, axis=0), np.abs(g), rtol=1e-5)


def test_weight_norm_dense_data_dependent_init():
  rng = _rng(8)
  x = (rng.normal(size=(64, 20)) * 2 + 1).astype(np.float32)
  module = WeightNormDense(7, data_init=True)
  variables = module.init(jax.random.key(1), x)
  y = np.asarray(module.apply(variables, x), np.float64)
  np.testing.assert_allclose(y.mean(0), 0.0, atol=1e-4)
  np.testing.assert_allclose(y.var(0), 1.0, rtol=1e-4)
  # The computation is g v / ||v|| with the initialised g and b.
  p = {k: np.asarray(v, np.float64) for k, v in variables["params"].items()}
  w = p["scale"] * p["kernel"] / np.linalg.norm(p["kernel"], axis=0)
  np.testing.assert_allclose(y, x @ w + p["bias"], rtol=1e-5, atol=1e-5)
  # Without data_init the gain starts at 1 and the pre-activations are not standardized.
  plain_module = WeightNormDense(7, data_init=False)
  plain = plain_module.init(jax.random.key(1), x)
  np.testing.assert_array_equal(plain["params"]["scale"], np.ones(7))
  y_plain = np.asarray(plain_module.apply(plain, x), np.float64)
  assert np.max(np.abs(y_plain.var(0) - 1.0)) > 0.1


# --- BLN ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(5, 7), (4, 3, 6)])
def test_bln_training_matches_equations(shape):
  rng = _rng(9)
  x = (rng.normal(size=shape) * 2 + 0.5).astype(np.float32)
  module = BatchLayerNorm()
  variables = _with_random_affine(module.init(jax.random.key(0), x, train=True), rng)
  gamma = np.asarray(variables["params"]["scale"], np.float64)
  beta = np.asarray(variables["params"]["bias"], np.float64)
  y, _ = _train_step(module, variables, x)
  np.testing.assert_allclose(y, bln_train_ref(x, gamma, beta), rtol=1e-5, atol=1e-5)


def test_bln_mixing_weights_eq16():
  w_b, w_f = F.bln_mixing_weights(25, 1e-4)
  np.testing.assert_allclose([w_b, w_f], [1 - (1 / 25 + 1e-4), 1 / 25 - 1e-4], rtol=1e-6)


def test_bln_training_mask_excludes_padded_positions():
  rng = _rng(10)
  x = rng.normal(size=(5, 4, 6)).astype(np.float32)
  lengths = np.array([4, 2, 3, 1, 4])
  mask = (np.arange(4)[None, :] < lengths[:, None])[..., None]
  module = BatchLayerNorm()
  variables = module.init(jax.random.key(0), x, train=True)
  y, variables = _train_step(module, variables, np.where(mask, x, np.nan).astype(np.float32),
                             mask=mask)
  real = np.broadcast_to(mask, x.shape)
  np.testing.assert_allclose(np.asarray(y)[real], bln_train_ref(x, 1.0, 0.0, mask=mask)[real],
                             rtol=1e-5, atol=1e-5)
  # Population feature statistics average the real (example, position) pairs only.
  stats = finalize_epoch_statistics(variables["batch_stats"])
  x64 = x.astype(np.float64)
  fm = np.array([x64[mask[:, t, 0], t].mean(-1).mean() for t in range(4)])
  np.testing.assert_allclose(stats["feature_mean"].reshape(-1), fm, rtol=1e-5, atol=1e-6)
  assert np.all(np.isfinite(stats["batch_var"]))


def _bln_epoch(module, variables, batches):
  for x in batches:
    _, variables = _train_step(module, variables, x)
  return {**variables, "batch_stats": finalize_epoch_statistics(variables["batch_stats"])}


@pytest.mark.parametrize("shape", [(4, 6), (4, 3, 6)])
def test_bln_inference_all_16_configurations(shape):
  rng = _rng(11)
  batches = [(rng.normal(size=shape) * (1 + 0.3 * i) + i).astype(np.float32) for i in range(3)]
  train_module = BatchLayerNorm()
  variables = _with_random_affine(train_module.init(jax.random.key(0), batches[0], train=True),
                                  rng)
  gamma = np.asarray(variables["params"]["scale"], np.float64)
  beta = np.asarray(variables["params"]["bias"], np.float64)
  variables = _bln_epoch(train_module, variables, batches)
  pop = bln_population_ref(batches)
  stats = variables["batch_stats"]
  for ours, theirs in (("batch_mean", "bm"), ("batch_var", "bv"), ("feature_mean", "fm"),
                       ("feature_var", "fv")):
    np.testing.assert_allclose(stats[ours], pop[theirs], rtol=1e-5, atol=1e-6, err_msg=ours)
  # A test batch of another size, whose mean is far from the population's, so that
  # the centre of a mini-batch variance (eq. 19, 21) matters.
  x = (rng.normal(size=(3,) + shape[1:]) * 2 + 5).astype(np.float32)
  outputs = set()
  configs = bln_inference_configurations()
  assert len(configs) == 16 and configs[0] == "pppp" and configs[-1] == "bbbb"
  for config in configs:
    y = BatchLayerNorm(inference=config).apply(variables, x, train=False)
    ref = bln_inference_ref(x, gamma, beta, pop, config, m_train=shape[0])
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4, err_msg=config)
    outputs.add(np.asarray(y).round(3).tobytes())
  assert len(outputs) == 16  # Every switch changes the result.


def test_bln_population_is_last_epoch_average():
  rng = _rng(12)
  module = BatchLayerNorm()
  first = [rng.normal(size=(4, 5)).astype(np.float32) + 10 for _ in range(2)]
  second = [rng.normal(size=(4, 5)).astype(np.float32) for _ in range(3)]
  variables = module.init(jax.random.key(0), first[0], train=True)
  variables = _bln_epoch(module, variables, first)
  variables = _bln_epoch(module, variables, second)
  pop = bln_population_ref(second)
  stats = variables["batch_stats"]
  np.testing.assert_allclose(stats["batch_mean"], pop["bm"], rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(stats["batch_var"], pop["bv"], rtol=1e-5)
  np.testing.assert_allclose(stats["feature_var"], pop["fv"], rtol=1e-5)
  assert float(stats["epoch_count"]) == 0
  assert not np.any(stats["epoch_sum_batch_mean"])


def test_bln_moving_average_population():
  rng = _rng(13)
  momentum = 0.7
  module = BatchLayerNorm(population="moving_average", momentum=momentum)
  batches = [rng.normal(size=(4, 5)).astype(np.float32) + i for i in range(3)]
  variables = module.init(jax.random.key(0), batches[0], train=True)
  assert "epoch_count" not in variables["batch_stats"]
  expected = {"bm": np.zeros((1, 5)), "bv": np.ones((1, 5)), "fm": np.zeros((1, 1)),
              "fv": np.ones((1, 1))}
  for x in batches:
    _, variables = _train_step(module, variables, x)
    new = bln_population_ref([x])
    expected = {k: momentum * expected[k] + (1 - momentum) * new[k] for k in expected}
  stats = variables["batch_stats"]
  for ours, theirs in (("batch_mean", "bm"), ("batch_var", "bv"), ("feature_mean", "fm"),
                       ("feature_var", "fv")):
    np.testing.assert_allclose(stats[ours], expected[theirs], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("population", ["epoch_mean", "moving_average"])
def test_bln_batch_size_one_is_finite(population):
  rng = _rng(14)
  module = BatchLayerNorm(population=population)
  batches = [rng.normal(size=(1, 8)).astype(np.float32) for _ in range(3)]
  variables = module.init(jax.random.key(0), batches[0], train=True)
  for x in batches:
    y, variables = _train_step(module, variables, x)
    assert np.all(np.isfinite(y))
  variables = {**variables, "batch_stats": finalize_epoch_statistics(variables["batch_stats"])}
  assert all(np.all(np.isfinite(v)) for v in jax.tree.leaves(variables["batch_stats"]))
  x = rng.normal(size=(1, 8)).astype(np.float32)
  for config in bln_inference_configurations():
    y = BatchLayerNorm(inference=config, population=population).apply(variables, x, train=False)
    assert np.all(np.isfinite(y)), config
  if population == "epoch_mean":
    # No Bessel factor on the batch variance at m = 1, d/(d-1) on the feature variance.
    pop = bln_population_ref(batches)
    np.testing.assert_allclose(variables["batch_stats"]["feature_var"], pop["fv"], rtol=1e-5)
    np.testing.assert_allclose(variables["batch_stats"]["batch_var"], 0.0, atol=1e-7)


def test_bln_population_feature_statistics_per_position_not_per_slot():
  rng = _rng(15)
  module = BatchLayerNorm()
  # Each batch slot has its own spread, so per-slot statistics would be visible.
  train = [(rng.normal(size=(4, 3, 6)) * (1 + np.arange(4)[:, None, None])).astype(np.float32)
           for _ in range(2)]
  variables = _bln_epoch(module, module.init(jax.random.key(0), train[0], train=True), train)
  assert variables["batch_stats"]["feature_mean"].shape == (1, 3, 1)
  x = rng.normal(size=(5, 3, 6)).astype(np.float32)
  perm = np.array([3, 0, 4, 1, 2])
  for config in bln_inference_configurations():
    infer = BatchLayerNorm(inference=config)
    y = infer.apply(variables, x, train=False)
    y_perm = infer.apply(variables, x[perm], train=False)
    np.testing.assert_allclose(y_perm, np.asarray(y)[perm], rtol=1e-5, atol=1e-5,
                               err_msg=config)


# --- The factory and a model ----------------------------------------------------------


def test_unknown_norm_lists_valid_choices():
  with pytest.raises(UnknownNormError) as info:
    make_norm("layernorm")
  message = str(info.value)
  assert "layernorm" in message
  for name in ("none", "ln", "rms", "prms", "bn", "wn", "bln"):
    assert repr(name)[1:-1] in message


# Hand count for the 784-1000-1000-10 MLP of the LN paper's sec. 6.6:
#   none: dense W+b per layer: (784*1000 + 1000) + (1000*1000 + 1000) + (1000*10 + 10)
#   ln:   hidden dense without bias (LN adds its own), LN gain+bias 2*1000 per hidden
#         layer, plain logits with bias: 784000 + 2000 + 1000000 + 2000 + 10010
#   bn:   like ln on the hidden layers, and the logits normalized too: logits W without
#         bias + BN gain+bias 2*10: 784000 + 2000 + 1000000 + 2000 + 10000 + 20
#   wn:   every layer (logits too) has v, g and b: v + 2*units per layer:
#         (784000 + 2000) + (1000000 + 2000) + (10000 + 20)
#   bln:  placed after the activation, so the dense layers keep their bias, plus BLN
#         gain+bias: (784000 + 1000 + 2000) + (1000000 + 1000 + 2000) + 10010
#   rms, prms: as ln (a gain and the layer's bias b after the normalization)
#   dyt:  as ln, plus its scalar alpha per hidden layer
#   scalenorm: as none (the dense layers keep their bias), plus one scalar gain each
#   ln_simple: as none (no gain, no bias; the dense bias it re-centres away stays)
EXPECTED_MLP_PARAMS = {
    "dyt": 784000 + 2001 + 1000000 + 2001 + 10010,
    "scalenorm": 785000 + 1 + 1001000 + 1 + 10010,
    "ln_simple": 785000 + 1001000 + 10010,
    "none": 785000 + 1001000 + 10010,
    "ln": 784000 + 2000 + 1000000 + 2000 + 10010,
    "rms": 784000 + 2000 + 1000000 + 2000 + 10010,
    "prms": 784000 + 2000 + 1000000 + 2000 + 10010,
    "bn": 784000 + 2000 + 1000000 + 2000 + 10000 + 20,
    "wn": 786000 + 1002000 + 10020,
    "bln": 787000 + 1003000 + 10010,
}


@pytest.mark.parametrize("name", sorted(EXPECTED_MLP_PARAMS))
def test_mlp_parameter_count(name):
  norm = make_norm(name)
  model = MLP(hidden_sizes=(1000, 1000), num_outputs=10, norm=norm,
              position=norm.default_position, normalize_logits=norm.normalizes_logits)
  shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((2, 784)),
                                             train=False))
  count = sum(int(np.prod(p.shape)) for p in jax.tree.leaves(shapes["params"]))
  assert count == EXPECTED_MLP_PARAMS[name]


# --- The fused LN path against autodiff -----------------------------------------------


@pytest.mark.parametrize("shape,dtype,blocked", [
    ((6, 32), jnp.float32, False),
    ((64, 32), jnp.float32, True),
    ((4, 16, 32), jnp.float32, True),
    ((64, 32), jnp.bfloat16, True),
])
def test_fused_layer_norm_matches_autodiff(monkeypatch, shape, dtype, blocked):
  # Blocks of 4 rows, so that a small array takes the blocked (CPU) loop.
  monkeypatch.setattr(F, "_CPU_BLOCKED_BYTES", 0 if blocked else 1 << 40)
  monkeypatch.setattr(F, "_CPU_BLOCK_BYTES", 4 * 4 * shape[-1])
  rows = int(np.prod(shape[:-1]))
  expected = 4 if blocked and jax.default_backend() == "cpu" else rows
  assert F._row_block(rows, shape[-1]) == expected
  rng = _rng(16)
  x = jnp.asarray(rng.normal(size=shape) * 3 + 2, dtype)
  ct = jnp.asarray(rng.normal(size=shape), dtype)
  g = jnp.asarray(rng.normal(size=(1, shape[-1])) + 1, jnp.float32)
  b = jnp.asarray(rng.normal(size=(1, shape[-1])), jnp.float32)

  def loss(fn, x, g, b):
    return jnp.sum(fn(x, g, b).astype(jnp.float32) * ct.astype(jnp.float32))

  fused = lambda x, g, b: F.layer_norm(x, g, b, eps=EPS)
  plain = lambda x, g, b: F._layer_norm_autodiff(x, g, b, axes=(x.ndim - 1,), eps=1e-5,
                                                 mask=None)
  tol = 1e-5 if dtype == jnp.float32 else 3e-2
  y_fused, y_plain = fused(x, g, b), plain(x, g, b)
  assert y_fused.dtype == dtype
  np.testing.assert_allclose(np.asarray(y_fused, np.float32), np.asarray(y_plain, np.float32),
                             atol=tol, rtol=tol)
  grads_fused = jax.grad(functools.partial(loss, fused), argnums=(0, 1, 2))(x, g, b)
  grads_plain = jax.grad(functools.partial(loss, plain), argnums=(0, 1, 2))(x, g, b)
  for name, a, r in zip(("x", "scale", "bias"), grads_fused, grads_plain):
    assert a.shape == r.shape and a.dtype == r.dtype, name
    scale = float(jnp.max(jnp.abs(r.astype(jnp.float32))))
    np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(r, np.float32),
                               atol=tol * scale, rtol=0, err_msg=name)
  # Without gain and bias the gradient wrt x is the same computation with g = 1.
  gx = jax.grad(lambda x: loss(lambda x, g, b: F.layer_norm(x, eps=EPS), x, None, None))(x)
  gx_plain = jax.grad(lambda x: loss(lambda x, g, b: F._layer_norm_autodiff(
      x, None, None, axes=(x.ndim - 1,), eps=1e-5, mask=None), x, None, None))(x)
  np.testing.assert_allclose(np.asarray(gx, np.float32), np.asarray(gx_plain, np.float32),
                             atol=tol * float(jnp.max(jnp.abs(gx_plain.astype(jnp.float32)))))


@pytest.mark.parametrize("shape,dtype,blocked,p,with_bias", [
    ((6, 32), jnp.float32, False, 1.0, True),
    ((6, 32), jnp.float32, False, 0.0625, False),
    ((64, 32), jnp.float32, True, 1.0, False),
    ((4, 16, 32), jnp.float32, True, 0.25, True),
    ((64, 32), jnp.bfloat16, True, 1.0, True),
])
def test_fused_rms_norm_matches_autodiff(monkeypatch, shape, dtype, blocked, p, with_bias):
  monkeypatch.setattr(F, "_CPU_BLOCKED_BYTES", 0 if blocked else 1 << 40)
  monkeypatch.setattr(F, "_CPU_BLOCK_BYTES", 4 * 4 * shape[-1])
  rng = _rng(17)
  x = jnp.asarray(rng.normal(size=shape) * 3 + 2, dtype)
  ct = jnp.asarray(rng.normal(size=shape), dtype)
  g = jnp.asarray(rng.normal(size=(shape[-1],)) + 1, jnp.float32)
  b = jnp.asarray(rng.normal(size=(shape[-1],)), jnp.float32) if with_bias else None
  size = None if p == 1.0 else F.partial_size(shape[-1], p)

  def loss(fn, x, g, b):
    return jnp.sum(fn(x, g, b).astype(jnp.float32) * ct.astype(jnp.float32))

  fused = lambda x, g, b: F.rms_norm(x, g, b, eps=EPS, partial=p)
  plain = lambda x, g, b: F._rms_norm_autodiff(x, g, b, axes=(x.ndim - 1,), eps=1e-5,
                                               mask=None, size=size)
  tol = 1e-5 if dtype == jnp.float32 else 3e-2
  y_fused = fused(x, g, b)
  assert y_fused.dtype == dtype
  np.testing.assert_allclose(np.asarray(y_fused, np.float32),
                             np.asarray(plain(x, g, b), np.float32), atol=tol, rtol=tol)
  argnums = (0, 1, 2) if with_bias else (0, 1)
  grads_fused = jax.grad(functools.partial(loss, fused), argnums=argnums)(x, g, b)
  grads_plain = jax.grad(functools.partial(loss, plain), argnums=argnums)(x, g, b)
  for name, a, r in zip(("x", "scale", "bias"), grads_fused, grads_plain):
    assert a.shape == r.shape and a.dtype == r.dtype, name
    scale = float(jnp.max(jnp.abs(r.astype(jnp.float32))))
    np.testing.assert_allclose(np.asarray(a, np.float32), np.asarray(r, np.float32),
                               atol=tol * scale, rtol=0, err_msg=name)


def test_rms_norm_gradient_matches_central_differences():
  # The hand-written backward pass of pRMSNorm against float64 differences of the
  # NumPy reference: entries inside the head get the statistic's term, the rest not.
  rng = _rng(18)
  x = rng.normal(size=(3, 16))
  g = rng.normal(size=16) + 1.0
  ct = rng.normal(size=(3, 16))
  grad = np.asarray(jax.grad(lambda x: jnp.sum(
      F.rms_norm(x, jnp.asarray(g, jnp.float32), eps=EPS, partial=0.25) * ct))(
          jnp.asarray(x, jnp.float32)), np.float64)
  numeric = np.zeros_like(x)
  for idx in np.ndindex(*x.shape):
    step = np.zeros_like(x)
    step[idx] = 1e-6
    numeric[idx] = (np.sum(rms_ref(x + step, g, p=0.25) * ct)
                    - np.sum(rms_ref(x - step, g, p=0.25) * ct)) / 2e-6
  np.testing.assert_allclose(grad, numeric, rtol=1e-3, atol=1e-4)


def test_cpu_row_blocks_divide_the_rows_near_the_target(monkeypatch):
  if jax.default_backend() != "cpu":
    pytest.skip("blocks are a CPU path")
  d = 1024  # 4 KiB rows: the 1 MiB target is 256 rows.
  assert F._row_block(64, d) == 64  # 256 KiB: below the blocking threshold
  assert F._row_block(4096, d) == 256
  assert F._row_block(3000, d) == 250  # the divisor nearest to 256
  assert F._row_block(4099, d) == 4099  # prime: no divisor within 2x of the target
  monkeypatch.setattr(F, "_CPU_BLOCKED_BYTES", 0)
  assert F._row_block(300, d) == 300  # one block of 300 is not a blocked path


def test_bln_fully_masked_position_stays_finite():
  # Batch size 1 with a padded time step: that step has no real example (m = 0).
  x = jnp.asarray(np.random.default_rng(0).normal(size=(1, 3, 4)), jnp.float32)
  mask = jnp.asarray([[[1.0], [1.0], [0.0]]])
  layer = BatchLayerNorm()
  variables = layer.init(jax.random.key(0), x, train=True, mask=mask)

  def loss(v):
    y, _ = layer.apply(v, x, train=True, mask=mask, mutable=["batch_stats"])
    return jnp.sum(y * mask)

  value, grads = jax.value_and_grad(loss)(variables)
  assert np.isfinite(float(value))
  assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree.leaves(grads))



def test_prms_takes_its_eps_option():
  # A head of small entries, so that eps 1e-2 against the default 1e-5 shows.
  x = (_rng(5).normal(size=(3, 16)) * 0.05).astype(np.float32)
  layer = make_norm("prms", {"eps": 1e-2, "p": 0.25}).layer()
  y = np.asarray(layer.apply(layer.init(jax.random.key(0), x), x))
  np.testing.assert_allclose(y, rms_ref(x, eps=1e-2, p=0.25), rtol=1e-4, atol=1e-5)
  assert np.max(np.abs(y - rms_ref(x, eps=1e-5, p=0.25))) > 0.1
