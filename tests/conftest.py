"""Test-wide settings: no wandb traffic; a fixture for exact NumPy comparisons."""

import os

import jax
import pytest

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("WANDB_SILENT", "true")


@pytest.fixture(scope="module")
def precise_jax():
  """For comparisons with NumPy: full-precision matmuls, no silent rank promotion."""
  saved = (jax.config.jax_default_matmul_precision, jax.config.jax_numpy_rank_promotion)
  jax.config.update("jax_default_matmul_precision", "highest")
  jax.config.update("jax_numpy_rank_promotion", "raise")
  yield
  jax.config.update("jax_default_matmul_precision", saved[0])
  jax.config.update("jax_numpy_rank_promotion", saved[1])
