"""Optimizers by name, with the gradient clipping the reference codes used."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import optax

from lnorm.errors import ConfigError

OPTIMIZERS = {
    "adam": lambda c: optax.adam(c.learning_rate, b1=c.get("b1", 0.9), b2=c.get("b2", 0.999),
                                 eps=c.get("eps", 1e-8)),
    "adamw": lambda c: optax.adamw(c.learning_rate, weight_decay=c.get("weight_decay", 1e-4)),
    "sgd": lambda c: optax.sgd(c.learning_rate),
    "momentum": lambda c: optax.sgd(c.learning_rate, momentum=c.get("momentum", 0.9),
                                    nesterov=c.get("nesterov", False)),
    "rmsprop": lambda c: optax.rmsprop(c.learning_rate),
}


def clip_by_tensor_norm(max_norm: float) -> optax.GradientTransformation:
  """Rescales each gradient tensor on its own to norm at most ``max_norm`` (the
  order-embeddings code clipped per tensor, not globally)."""

  def update_fn(updates, state, params=None):
    del params

    def clip(g):
      norm = jnp.sqrt(jnp.sum(jnp.square(g.astype(jnp.float32))))
      return g * jnp.minimum(1.0, max_norm / jnp.maximum(norm, 1e-12)).astype(g.dtype)

    return jax.tree.map(clip, updates), state

  return optax.GradientTransformation(lambda params: optax.EmptyState(), update_fn)


def make_optimizer(config: ml_collections.ConfigDict) -> optax.GradientTransformation:
  """``config`` is the ``optimizer`` block: name, learning_rate, clip_global_norm,
  clip_tensor_norm (0 disables a clip)."""
  if config.name not in OPTIMIZERS:
    raise ConfigError(f"Unknown optimizer {config.name!r}. Valid choices: "
                      f"{', '.join(OPTIMIZERS)}.")
  chain = []
  if config.get("clip_tensor_norm", 0.0):
    chain.append(clip_by_tensor_norm(config.clip_tensor_norm))
  if config.get("clip_global_norm", 0.0):
    chain.append(optax.clip_by_global_norm(config.clip_global_norm))
  chain.append(OPTIMIZERS[config.name](config))
  return optax.chain(*chain)
