"""Initializers the papers' Theano code used that flax does not provide."""

from __future__ import annotations

from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from lnorm.errors import ConfigError

Initializer = Callable[..., jax.Array]


def symmetric_uniform(scale: float):
  """U(-scale, scale), the ``norm_weight`` of Kiros's and Vendrov's code (scale 0.1).

  ``flax.linen.initializers.uniform(scale)`` draws from [0, scale): every weight
  positive.
  """

  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, -scale, scale)

  return init


def blockwise(block_init: Initializer, num_blocks: int | None = None, *,
              same_key: bool = False) -> Initializer:
  """A ``[rows, k * n]`` matrix as k ``[rows, n]`` blocks side by side, each drawn by
  ``block_init`` on its own: the gate blocks of an RNN's concatenated projection.

  ``num_blocks=None`` makes the blocks square (k = columns / rows), as for a
  recurrent matrix ``[H, kH]``. ``same_key`` draws every block with one key, so all
  blocks come out identical: the attentive-reader code reseeded its generator before
  each block (see ``docs/experiments.md``).
  """

  def init(key, shape, dtype=jnp.float32):
    rows, cols = shape[-2], shape[-1]
    k = num_blocks if num_blocks is not None else cols // max(rows, 1)
    if k < 1 or cols % k or (num_blocks is None and cols != k * rows):
      raise ValueError(
          f"blockwise init: cannot split a {tuple(shape)} matrix into "
          f"{'square blocks' if num_blocks is None else f'{num_blocks} blocks'}.")
    keys = [key] * k if same_key else list(jax.random.split(key, k))
    block_shape = tuple(shape[:-1]) + (cols // k,)
    return jnp.concatenate([block_init(kk, block_shape, dtype) for kk in keys], axis=-1)

  return init


def scaled(init: Initializer, scale: float) -> Initializer:
  """``scale * init(...)``: the Theano code's ``0.05 * ortho_weight``, say."""
  return lambda key, shape, dtype=jnp.float32: scale * init(key, shape, dtype)


def orthogonal_if_square(scale: float = 0.05) -> Initializer:
  """``scale`` times an orthogonal matrix when the matrix is square, else
  Glorot-uniform: the ``norm_weight(nin, nout)`` of the attentive-reader Theano code
  (Cooijmans et al.), whose square matrices are ``0.05 * ortho_weight``. (Its
  Glorot bound is sqrt(6 / (nin + nout + 1)); the +1 is left out here.)"""
  orthogonal = scaled(nn.initializers.orthogonal(), scale)
  glorot = nn.initializers.glorot_uniform()

  def init(key, shape, dtype=jnp.float32):
    square = len(shape) >= 2 and shape[-1] == shape[-2]
    return (orthogonal if square else glorot)(key, shape, dtype)

  return init


def fan_in_uniform() -> Initializer:
  """U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in the second-to-last axis (the first
  of a vector): the ``norm_vec`` of the attentive-reader Theano code."""

  def init(key, shape, dtype=jnp.float32):
    bound = 1.0 / float(shape[-2] if len(shape) >= 2 else shape[0]) ** 0.5
    return jax.random.uniform(key, shape, dtype, -bound, bound)

  return init


def fixed_key(init: Initializer, seed: int = 123) -> Initializer:
  """``init`` drawn from one fixed key whatever key it is given, so that every matrix
  of the same shape comes out identical: the attentive-reader Theano code reseeds
  NumPy's generator with 123 inside every call of its initialisers."""
  return lambda key, shape, dtype=jnp.float32: init(jax.random.key(seed), shape, dtype)


#: ``recurrent_init`` config values: how a recurrent matrix ``[H, kH]`` (k gate
#: blocks) starts.
RECURRENT_INITS: dict[str, Callable[[], Initializer]] = {
    # k separate H x H orthogonal blocks, every block's singular values 1: what all of
    # the LN-paper authors' Theano code does (Kiros, Vendrov, Cooijmans).
    "orthogonal_per_gate": lambda: blockwise(nn.initializers.orthogonal()),
    # One orthogonal matrix over the whole [H, kH]: its rows are orthonormal, so each
    # gate block's singular values sit near 1/sqrt(k). Keras's and flax's default.
    "orthogonal": nn.initializers.orthogonal,
}


def recurrent_initializer(name: str) -> Initializer:
  """The initializer of a ``recurrent_init`` config value."""
  if name not in RECURRENT_INITS:
    raise ConfigError(f"Unknown recurrent_init {name!r}. Valid choices: "
                      f"{', '.join(RECURRENT_INITS)}.")
  return RECURRENT_INITS[name]()
