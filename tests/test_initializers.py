"""The recurrent initialisations: per-gate orthogonal blocks against one orthogonal
matrix, read off the singular values of every gate block of a real cell."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from lnorm.errors import ConfigError
from lnorm.models import initializers
from lnorm.rnn import RecurrentLayer, cell_options, make_gru_cell, make_lstm_cell
from lnorm.training.defaults import norm_options

H = 32


def recurrent_blocks(make, gates: int, recurrent_init: str, seed: int = 0):
  """The gate blocks [H, H] of the recurrent matrix of a cell built from a config."""
  config = ml_collections.ConfigDict(
      {"norm_options": norm_options(), "recurrent_init": recurrent_init})
  layer = RecurrentLayer(make("none", **cell_options(config)), H)
  x = jnp.zeros((2, 3, 5))
  params = layer.init(jax.random.key(seed), x, np.array([3, 2]))["params"]
  kernels = [leaf for path, leaf in jax.tree_util.tree_leaves_with_path(params)
             if "hidden_proj" in jax.tree_util.keystr(path)]
  (kernel,) = kernels
  assert kernel.shape == (H, gates * H)
  return np.split(np.asarray(kernel), gates, axis=1)


@pytest.mark.parametrize("make,gates", [(make_lstm_cell, 4), (make_gru_cell, 3)])
def test_per_gate_blocks_are_orthogonal(make, gates):
  blocks = recurrent_blocks(make, gates, "orthogonal_per_gate")
  for block in blocks:
    np.testing.assert_allclose(np.linalg.svd(block, compute_uv=False), 1.0, atol=1e-5)
  # Independent draws, not one block repeated.
  assert not np.allclose(blocks[0], blocks[1])


@pytest.mark.parametrize("make,gates", [(make_lstm_cell, 4), (make_gru_cell, 3)])
def test_one_orthogonal_matrix_leaves_blocks_contracting(make, gates):
  # Rows of the whole [H, kH] are orthonormal, so the blocks' squared singular values
  # sum to 1 over the k blocks: each block is a contraction, typically near 1/sqrt(k).
  blocks = recurrent_blocks(make, gates, "orthogonal")
  singular = [np.linalg.svd(b, compute_uv=False) for b in blocks]
  np.testing.assert_allclose(sum(b @ b.T for b in blocks), np.eye(H), atol=1e-5)
  assert all(s.max() < 1.0 for s in singular)
  assert np.median(np.concatenate(singular)) == pytest.approx(1 / np.sqrt(gates), abs=0.15)


def test_blockwise_with_one_key_repeats_the_block():
  init = initializers.blockwise(
      initializers.scaled(jax.nn.initializers.orthogonal(), 0.05), same_key=True)
  w = np.asarray(init(jax.random.key(0), (6, 24)))
  blocks = np.split(w, 4, axis=1)
  for b in blocks:
    np.testing.assert_allclose(b, blocks[0])
    np.testing.assert_allclose(np.linalg.svd(b, compute_uv=False), 0.05, atol=1e-6)


def test_blockwise_with_a_block_count_allows_rectangular_blocks():
  init = initializers.blockwise(jax.nn.initializers.orthogonal(), num_blocks=2)
  w = np.asarray(init(jax.random.key(0), (3, 10)))
  for b in np.split(w, 2, axis=1):  # [3, 5]: orthonormal rows.
    np.testing.assert_allclose(b @ b.T, np.eye(3), atol=1e-6)


def test_blockwise_refuses_a_shape_it_cannot_split():
  with pytest.raises(ValueError, match="cannot split"):
    initializers.blockwise(jax.nn.initializers.orthogonal())(jax.random.key(0), (4, 10))


def test_unknown_recurrent_init_names_the_choices():
  with pytest.raises(ConfigError, match="orthogonal_per_gate"):
    initializers.recurrent_initializer("orthgonal")
