"""Initializers the papers' Theano code used that flax does not provide."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def symmetric_uniform(scale: float):
  """U(-scale, scale), the ``norm_weight`` of Kiros's and Vendrov's code (scale 0.1).

  ``flax.linen.initializers.uniform(scale)`` draws from [0, scale): every weight
  positive.
  """

  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, -scale, scale)

  return init
