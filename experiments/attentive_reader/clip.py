"""The attentive reader's gradient clip as the authors' Theano code computes it: a
clip rule of its own (``optimizer.clip_global_norm_rule="attentive_reader_code"``),
which the task hands the harness's optimizer (``Task.clip_rules``)."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp

from lnorm.training.optim import global_norm


def clip_like_attentive_reader_code(max_norm: float):
  """The global clip as the attentive reader's Theano code computes it
  (``Attentive_reader``, branch ``bn``): its norm helper returns the norm where the
  caller expects the squared norm, so a gradient of norm n is left alone while
  ``n <= max_norm**2`` and otherwise rescaled by ``max_norm / sqrt(n)``, to norm
  ``max_norm * sqrt(n)``. At their clip of 10 nothing under 100 is clipped, and a
  norm of 228 becomes 151, where the clip the paper states would make it 10."""

  def apply(grads):
    norm = global_norm(grads)
    acted = norm > max_norm**2
    scale = jnp.where(acted, max_norm / jnp.sqrt(jnp.maximum(norm, 1e-12)), 1.0)
    return jax.tree.map(lambda g: g * scale.astype(g.dtype), grads), acted

  return apply


#: ``optimizer.clip_global_norm_rule`` values the reader adds to the harness's.
CLIP_RULES = types.MappingProxyType(
    {"attentive_reader_code": clip_like_attentive_reader_code})
