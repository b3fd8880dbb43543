"""Mixture density output: M bivariate Gaussians plus a Bernoulli (Graves 2013 sec. 4).

A network emits ``6 M + 1`` raw numbers per step (121 for M = 20):

  ``eos_logit`` (1) | ``pi`` logits (M) | ``mu`` (2M: x then y) | ``log sigma`` (2M) |
  ``rho`` before its tanh (M)

and this module turns them into the density of a pen move ``(dx, dy, end_of_stroke)``:

  ``p = sum_m pi_m N(dx, dy | mu_m, sigma_m, rho_m) * Bernoulli(eos | sigmoid(eos_logit))``

with ``pi = softmax``, ``sigma = exp`` and ``rho = tanh`` (Graves eq. 18-22; his
``e = 1 / (1 + exp(e_hat))`` is ``sigmoid(-e_hat)``, the same family with the sign
of the logit flipped). Everything is computed in log space: the mixture with
``logsumexp``, and ``log(1 - rho^2)`` from the pre-tanh value, so a correlation near
+-1 (where float32 ``tanh`` rounds to 1) still gives a finite loss and gradient.

**Accuracy near rho = +-1.** The textbook density divides the quadratic form
``z1^2 + z2^2 - 2 rho z1 z2`` by ``1 - rho^2``; near |rho| = 1, on the ridge where the
density is large (z2 close to rho z1), that form is a small difference of terms of
size z^2, so float32 leaves it with a relative error of about eps / (1 - |rho|), which
the division then turns into an absolute error of the log-density (6% of the form at
|rho| = 1 - 1e-6). :func:`log_gaussians` instead writes the density as the marginal of
x1 times the conditional of x2 given x1,

  ``N(x1 | mu1, s1) * N(x2 | mu2 + rho s2 z1, s2 sqrt(1 - rho^2))``,

whose only difference, ``z2 - rho z1``, is taken as ``(z2 - sign z1) + sign (1 - |rho|)
z1`` with ``1 - |rho| = 2 sigmoid(-2 |r|)`` computed from the pre-tanh value r: no
term is lost to the rounding of rho, and nothing cancels that the inputs did not
already fix.

Sampling can be biased towards the likelier strokes (Graves eq. 61-62): the logits
of ``pi`` multiplied by ``1 + b`` and the standard deviations divided by ``exp(b)``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

_LOG_2PI = math.log(2.0 * math.pi)


class Mixture(NamedTuple):
  """The parameters of one mixture per leading index (shapes for ``[..., M]``)."""

  eos_logit: jax.Array  # [...]
  log_pi: jax.Array  # [..., M], normalised: logsumexp over M is 0.
  mu: jax.Array  # [..., M, 2]
  log_sigma: jax.Array  # [..., M, 2]
  rho_logit: jax.Array  # [..., M], rho = tanh(rho_logit)


def num_outputs(num_components: int) -> int:
  """Raw outputs the network must emit for ``num_components`` Gaussians."""
  return 6 * num_components + 1


def split(raw: jax.Array, num_components: int, bias: float | jax.Array = 0.0) -> Mixture:
  """Raw network outputs ``[..., 6M + 1]`` -> :class:`Mixture`.

  ``bias`` (0 for training and likelihoods) sharpens the mixture for sampling.
  """
  m = num_components
  if raw.shape[-1] != num_outputs(m):
    raise ValueError(f"A mixture of {m} components needs {num_outputs(m)} raw outputs, got "
                     f"shape {raw.shape}.")
  raw = raw.astype(jnp.float32)
  eos_logit, pi_logits, mu, log_sigma, rho_logit = jnp.split(
      raw, [1, 1 + m, 1 + 3 * m, 1 + 5 * m], axis=-1)
  lead = raw.shape[:-1]
  # [..., 2M] laid out as (x_1..x_M, y_1..y_M) -> [..., M, 2].
  pair = lambda v: jnp.stack([v[..., :m], v[..., m:]], axis=-1).reshape(lead + (m, 2))
  return Mixture(eos_logit=eos_logit[..., 0],
                 log_pi=jax.nn.log_softmax(pi_logits * (1.0 + bias), axis=-1),
                 mu=pair(mu), log_sigma=pair(log_sigma) - bias, rho_logit=rho_logit)


def log_one_minus_tanh_squared(r: jax.Array) -> jax.Array:
  """``log(1 - tanh(r)^2) = 2 log 2 - 2 logaddexp(r, -r)``, finite for every r."""
  a = jnp.abs(r)
  return 2.0 * (math.log(2.0) - a - jax.nn.softplus(-2.0 * a))


def conditional_residual(z1: jax.Array, z2: jax.Array, rho_logit: jax.Array) -> jax.Array:
  """``z2 - tanh(rho_logit) z1``, accurate when |rho| is near 1.

  With s = +-1 the sign of rho and ``1 - |rho| = 2 sigmoid(-2 |r|)`` (exact in float32
  where ``1 - tanh`` would be rounding noise), it is ``(z2 - s z1) + s (1 - |rho|) z1``.
  ``s r`` stands for |r| so that the gradient at r = 0 is tanh's, not abs's zero.
  """
  sign = jnp.where(rho_logit >= 0, 1.0, -1.0)
  one_minus_abs_rho = 2.0 * jax.nn.sigmoid(-2.0 * sign * rho_logit)
  return (z2 - sign * z1) + sign * one_minus_abs_rho * z1


def log_gaussians(mixture: Mixture, xy: jax.Array) -> jax.Array:
  """``[..., M]`` log densities of the points ``xy [..., 2]`` under each component:
  the marginal of x1 plus the conditional of x2 given x1 (module docstring),

    ``-log 2 pi - log s1 - log s2 - 1/2 log(1 - rho^2) - 1/2 z1^2
    - 1/2 ((z2 - rho z1) / sqrt(1 - rho^2))^2``.
  """
  z = (xy[..., None, :] - mixture.mu) * jnp.exp(-mixture.log_sigma)
  z1, z2 = z[..., 0], z[..., 1]
  log_1mr2 = log_one_minus_tanh_squared(mixture.rho_logit)
  # exp(-log/2), not 1/sqrt(1 - rho^2): finite up to |r| of about 88, not 44.
  w = conditional_residual(z1, z2, mixture.rho_logit) * jnp.exp(-0.5 * log_1mr2)
  return (-_LOG_2PI - jnp.sum(mixture.log_sigma, axis=-1) - 0.5 * log_1mr2
          - 0.5 * jnp.square(z1) - 0.5 * jnp.square(w))


def log_likelihood(mixture: Mixture, target: jax.Array) -> jax.Array:
  """``log p(dx, dy, eos)`` of ``target [..., 3]``: ``[...]`` in nats."""
  target = target.astype(jnp.float32)
  log_xy = jax.nn.logsumexp(mixture.log_pi + log_gaussians(mixture, target[..., :2]), axis=-1)
  eos = target[..., 2]
  # log sigmoid(l) for a lifted pen, log sigmoid(-l) otherwise.
  log_eos = -(eos * jax.nn.softplus(-mixture.eos_logit)
              + (1.0 - eos) * jax.nn.softplus(mixture.eos_logit))
  return log_xy + log_eos


def sample(mixture: Mixture, key: jax.Array) -> jax.Array:
  """One ``(dx, dy, eos)`` draw per leading index: ``[..., 3]``."""
  k_component, k_normal, k_eos = jax.random.split(key, 3)
  component = jax.random.categorical(k_component, mixture.log_pi, axis=-1)
  take = lambda v: jnp.take_along_axis(
      v, component.reshape(component.shape + (1,) * (v.ndim - component.ndim)), axis=component.ndim)
  mu = take(mixture.mu)[..., 0, :]
  sigma = jnp.exp(take(mixture.log_sigma)[..., 0, :])
  rho_logit = take(mixture.rho_logit)[..., 0]
  rho = jnp.tanh(rho_logit)
  n = jax.random.normal(k_normal, mu.shape)
  # Correlated normals: y = rho n1 + sqrt(1 - rho^2) n2.
  root = jnp.exp(0.5 * log_one_minus_tanh_squared(rho_logit))
  dx = mu[..., 0] + sigma[..., 0] * n[..., 0]
  dy = mu[..., 1] + sigma[..., 1] * (rho * n[..., 0] + root * n[..., 1])
  eos = jax.random.bernoulli(k_eos, jax.nn.sigmoid(mixture.eos_logit)).astype(jnp.float32)
  return jnp.stack([dx, dy, eos], axis=-1)
