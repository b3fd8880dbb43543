"""restore_latest: the latest checkpoint and its step, or an error that says what to do."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from lnorm.errors import UserError
from lnorm.training.checkpoint import Checkpointer, abstract_like, restore_latest


def test_an_empty_workdir_says_how_to_fix_it(tmp_path):
  like = abstract_like({"w": jnp.zeros((2,))})
  with pytest.raises(UserError, match="holds no checkpoint: evaluate --encoder random"):
    restore_latest(str(tmp_path), like, "evaluate --encoder random")


def test_restores_the_latest_state_and_its_step(tmp_path):
  checkpointer = Checkpointer(str(tmp_path))
  for step in (3, 7):
    checkpointer.save(step, {"w": jnp.full((2,), float(step))}, {"epoch": step})
  checkpointer.close()
  state, step = restore_latest(str(tmp_path), abstract_like({"w": jnp.zeros((2,))}))
  assert step == 7 and jax.device_get(state["w"]).tolist() == [7.0, 7.0]
