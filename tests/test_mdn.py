"""experiments.handwriting.mdn against NumPy versions of Graves (2013) eq. 18-26."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.handwriting import mdn

M = 3


def np_log_likelihood(raw, target, m):
  """Direct transcription of the mixture density, in float64, one point at a time."""
  raw = np.asarray(raw, np.float64)
  out = np.zeros(raw.shape[:-1])
  for idx in np.ndindex(*raw.shape[:-1]):
    r = raw[idx]
    e = 1.0 / (1.0 + np.exp(-r[0]))
    pi = np.exp(r[1:1 + m]) / np.exp(r[1:1 + m]).sum()
    mu1, mu2 = r[1 + m:1 + 2 * m], r[1 + 2 * m:1 + 3 * m]
    s1, s2 = np.exp(r[1 + 3 * m:1 + 4 * m]), np.exp(r[1 + 4 * m:1 + 5 * m])
    rho = np.tanh(r[1 + 5 * m:])
    x1, x2, eos = target[idx]
    z = ((x1 - mu1) / s1) ** 2 + ((x2 - mu2) / s2) ** 2 - 2 * rho * (x1 - mu1) * (x2 - mu2) / (s1 * s2)
    n = np.exp(-z / (2 * (1 - rho ** 2))) / (2 * np.pi * s1 * s2 * np.sqrt(1 - rho ** 2))
    out[idx] = np.log(np.sum(pi * n)) + np.log(e if eos else 1 - e)
  return out


def test_num_outputs_matches_the_paper():
  assert mdn.num_outputs(20) == 121


def test_log_likelihood_matches_numpy_with_correlation(precise_jax):
  rng = np.random.default_rng(0)
  raw = rng.normal(size=(4, 5, mdn.num_outputs(M))).astype(np.float32)
  raw[..., 1 + 5 * M:] *= 2.0  # Strong correlations, so the rho term matters.
  target = np.concatenate([rng.normal(size=(4, 5, 2)), rng.integers(0, 2, (4, 5, 1))],
                          -1).astype(np.float32)
  got = mdn.log_likelihood(mdn.split(jnp.asarray(raw), M), jnp.asarray(target))
  np.testing.assert_allclose(got, np_log_likelihood(raw, target, M), rtol=1e-5, atol=1e-5)
  # Without the correlation term the values would differ: the test can fail.
  no_rho = raw.copy()
  no_rho[..., 1 + 5 * M:] = 0
  assert np.abs(np_log_likelihood(no_rho, target, M) - np.asarray(got)).max() > 0.1


def test_near_degenerate_covariance_is_finite_and_exact(precise_jax):
  # rho_logit 6: 1 - rho^2 = 2.5e-5, still exact in float64; float32 tanh is then
  # within 1e-5 of 1, so a naive log(1 - tanh^2) loses most digits.
  raw = np.zeros((1, mdn.num_outputs(1)), np.float32)
  raw[0, 1 + 5] = 6.0
  raw[0, 1 + 3:1 + 5] = -3.0  # sigma = 0.05
  target = np.array([[0.01, 0.012, 1.0]], np.float32)
  got = mdn.log_likelihood(mdn.split(jnp.asarray(raw), 1), jnp.asarray(target))
  np.testing.assert_allclose(got, np_log_likelihood(raw, target, 1), rtol=1e-5)
  # Fully degenerate in float32 (tanh(30) == 1): still finite, gradients too.
  raw[0, 1 + 5] = 30.0
  f = lambda r: mdn.log_likelihood(mdn.split(r, 1), jnp.asarray(target))[0]
  value, grad = jax.value_and_grad(f)(jnp.asarray(raw))
  assert np.isfinite(value) and np.isfinite(grad).all()
  np.testing.assert_allclose(mdn.log_one_minus_tanh_squared(jnp.float32(30.0)),
                             math.log(4) - 60.0 - 2 * math.log1p(math.exp(-60)), rtol=1e-6)


def test_bias_sharpens_mixture_and_sigmas():
  rng = np.random.default_rng(1)
  raw = jnp.asarray(rng.normal(size=(mdn.num_outputs(M),)).astype(np.float32))
  plain, biased = mdn.split(raw, M), mdn.split(raw, M, bias=0.5)
  np.testing.assert_allclose(biased.log_sigma, plain.log_sigma - 0.5, rtol=1e-6)
  pi_logits = np.asarray(raw[1:1 + M]) * 1.5
  np.testing.assert_allclose(np.exp(biased.log_pi),
                             np.exp(pi_logits) / np.exp(pi_logits).sum(), rtol=1e-5)


@pytest.mark.parametrize("bias", [0.0, 1.0])
def test_sampler_matches_moments(bias):
  # Two components with known means, sigmas and correlations.
  raw = np.zeros(mdn.num_outputs(2), np.float32)
  raw[0] = 1.0  # P(eos) = sigmoid(1)
  raw[1:3] = [0.0, math.log(3.0)]  # pi = (0.25, 0.75)
  raw[3:5], raw[5:7] = [-2.0, 1.0], [0.5, -1.0]  # mu_x, mu_y
  raw[7:9], raw[9:11] = [math.log(0.1), math.log(0.2)], [math.log(0.3), math.log(0.4)]
  raw[11:13] = [0.0, math.atanh(0.8)]
  mixture = mdn.split(jnp.broadcast_to(jnp.asarray(raw), (200_000, raw.size)), 2, bias=bias)
  draws = np.asarray(mdn.sample(mixture, jax.random.key(0)))
  logits = np.log([0.25, 0.75]) * (1 + bias)
  pi = np.exp(logits) / np.exp(logits).sum()
  s = np.exp(-bias)
  mean = pi @ np.array([[-2.0, 0.5], [1.0, -1.0]])
  np.testing.assert_allclose(draws[:, :2].mean(0), mean, atol=0.02)
  comp2 = draws[:, 0] > -0.5  # The components lie many sigmas apart in x.
  np.testing.assert_allclose(comp2.mean(), pi[1], atol=0.01)
  x, y = draws[comp2, 0], draws[comp2, 1]
  np.testing.assert_allclose([x.std(), y.std()], [0.2 * s, 0.4 * s], rtol=0.03)
  np.testing.assert_allclose(np.corrcoef(x, y)[0, 1], 0.8, atol=0.01)
  np.testing.assert_allclose(draws[:, 2].mean(), 1 / (1 + math.exp(-1)), atol=0.01)


# --- accuracy near rho = +-1: float32 against a float64 reference ----------------------

MU = np.array([0.1, -0.2], np.float32)
LOG_SIGMA = np.array([-0.5, 0.3], np.float32)


def np_log_gaussian_and_grads(mu, log_sigma, rho_logit, x):
  """One component's log-density and its gradients with respect to mu, log sigma and
  the pre-tanh rho, in float64 from the textbook form (Q the quadratic form over
  1 - rho^2): exact to many digits in float64 even at 1 - |rho| = 1e-6."""
  mu, log_sigma, x = (np.asarray(a, np.float64) for a in (mu, log_sigma, x))
  rho = np.tanh(np.float64(rho_logit))
  s = np.exp(log_sigma)
  z1, z2 = (x - mu) / s
  c = 1.0 - rho ** 2
  q = (z1 * z1 + z2 * z2 - 2 * rho * z1 * z2) / c
  value = -np.log(2 * np.pi) - log_sigma.sum() - 0.5 * np.log(c) - 0.5 * q
  d_mu = np.array([(z1 - rho * z2) / (s[0] * c), (z2 - rho * z1) / (s[1] * c)])
  d_log_sigma = np.array([-1 + z1 * (z1 - rho * z2) / c, -1 + z2 * (z2 - rho * z1) / c])
  d_rho_logit = rho + z1 * z2 - rho * q  # d/d rho times d rho / d r = 1 - rho^2.
  return value, d_mu, d_log_sigma, d_rho_logit


def _jax_log_gaussian(mu, log_sigma, rho_logit, x):
  mixture = mdn.Mixture(eos_logit=jnp.zeros(()), log_pi=jnp.zeros((1,)), mu=mu[None],
                        log_sigma=log_sigma[None], rho_logit=rho_logit[None])
  return mdn.log_gaussians(mixture, jnp.asarray(x))[0]


def _ridge_point(rho, along, across):
  """A float32 point ``along`` standard deviations out in x1 and ``across`` conditional
  standard deviations off the ridge x2 = mu2 + rho s2 z1, where the density is large
  and the textbook quadratic form cancels."""
  s = np.exp(LOG_SIGMA.astype(np.float64))
  z2 = rho * along + across * np.sqrt(1.0 - rho * rho)
  return (MU + s * np.array([along, z2])).astype(np.float32)


CORRELATIONS = [1 - 1e-4, -(1 - 1e-4), 1 - 1e-6, -(1 - 1e-6)]
POINTS = [(0.5, 0.3), (1.7, -1.0), (-2.0, 0.0), (0.9, 2.0)]


@pytest.mark.parametrize("rho", CORRELATIONS + [0.0, 0.3, -0.7])
@pytest.mark.parametrize("along,across", POINTS)
def test_log_density_matches_float64_near_unit_correlation(precise_jax, rho, along, across):
  rho_logit = np.float32(np.arctanh(rho))  # Representable: 1 - |tanh| = 1e-6 needs r ~ 7.25.
  rho64 = np.tanh(np.float64(rho_logit))
  x = _ridge_point(rho64, along, across)
  value, grads = jax.value_and_grad(_jax_log_gaussian, argnums=(0, 1, 2))(
      jnp.asarray(MU), jnp.asarray(LOG_SIGMA), jnp.asarray(rho_logit), x)
  ref_value, ref_mu, ref_log_sigma, ref_rho = np_log_gaussian_and_grads(
      MU, LOG_SIGMA, rho_logit, x)
  # The old form (quadratic form, then / (1 - rho^2)) is off by up to 9e-2 nats here at
  # 1 - |rho| = 1e-6 and by 6e-4 at 1e-4; this one by at most 1.4e-4 and 1.7e-5.
  assert abs(float(value) - ref_value) <= 1e-4 * (1 + abs(ref_value))
  # d/d rho_logit: the old form was off by 6e-2 at 1 - |rho| = 1e-6.
  assert abs(float(grads[2]) - ref_rho) <= 2e-3 * (1 + abs(ref_rho))
  # Gradients with respect to mu and log sigma: their scale off the ridge is
  # 1 / (sigma sqrt(1 - rho^2)) (707 / sigma at 1e-6); float32 inputs fix them to
  # about 1e-4 of it on the ridge itself, where they nearly vanish.
  scale = 1.0 / (np.exp(LOG_SIGMA.astype(np.float64)).min() * np.sqrt(1.0 - rho64 ** 2))
  np.testing.assert_allclose(grads[0], ref_mu, rtol=1e-4, atol=1e-4 * scale)
  np.testing.assert_allclose(grads[1], ref_log_sigma, rtol=1e-4,
                             atol=1e-4 * scale * max(1.0, abs(along)))


def test_conditional_residual_keeps_the_gradient_of_tanh_at_zero():
  # d/dr (z2 - tanh(r) z1) = -(1 - tanh(r)^2) z1 = -z1 at r = 0; with abs(r) in the
  # formula it would be 0.
  grad = jax.grad(lambda r: mdn.conditional_residual(jnp.float32(2.0), jnp.float32(0.5), r))
  np.testing.assert_allclose(grad(jnp.float32(0.0)), -2.0, rtol=1e-6)
  np.testing.assert_allclose(mdn.conditional_residual(2.0, 0.5, jnp.float32(0.0)), 0.5)
