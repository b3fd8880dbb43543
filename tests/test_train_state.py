"""The one train-state initializer (lnorm/training/train_state.py): from scratch with
the seed's init key, abstractly with the same structure, from a checkpoint, and from
the variables a run kept."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from lnorm import config as config_lib
from lnorm.data.core import Dataset
from lnorm.errors import UserError
from lnorm.training import task as task_lib
from lnorm.training.best_model import BestModel
from lnorm.training.train_state import TrainStateInitializer, seed_keys

#: Sizes that divide nothing evenly.
BATCH, HIDDEN, CLASSES = 5, 7, 10


def _initializer(norm: str = "bn") -> tuple[TrainStateInitializer, dict]:
  config = config_lib.load_config(f"configs/perm_mnist.py:norm={norm},smoke=true,"
                                  f"batch_size={BATCH}")
  config.hidden_sizes = (HIDDEN,)
  config.seed = 3
  task = task_lib.load_task(config)
  rng = np.random.default_rng(0)
  batch = {"image": rng.integers(0, 256, (BATCH, 28, 28), dtype=np.uint8),
           "label": rng.integers(0, CLASSES, BATCH).astype(np.int32)}
  dataset = Dataset("mnist", "synthetic", "test", {"train": batch},
                    info={"num_classes": CLASSES})
  return TrainStateInitializer(config, task, task.build_model(dataset)), batch


def _leaves(tree) -> list:
  return [(jax.tree_util.keystr(p), x.shape, x.dtype)
          for p, x in jax.tree_util.tree_leaves_with_path(tree)]


def test_a_state_from_scratch_is_drawn_with_the_seeds_init_key():
  initializer, batch = _initializer()
  init_key, train_key = seed_keys(3)
  state = initializer.from_scratch(batch)
  same = initializer.from_scratch(batch, rng=init_key)
  other = initializer.from_scratch(batch, rng=train_key)
  kernel = lambda s: np.asarray(s.params["dense_0"]["kernel"])
  np.testing.assert_array_equal(kernel(state), kernel(same))
  assert not np.array_equal(kernel(state), kernel(other))
  assert int(state.step) == 0 and state.batch_stats  # BN's statistics are in it.


def test_the_abstract_state_is_the_states_structure_computed_from_shapes_alone():
  initializer, batch = _initializer()
  shapes = {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in batch.items()}
  abstract = initializer.abstract(shapes)
  assert all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(abstract))
  assert _leaves(abstract) == _leaves(initializer.from_scratch(batch))


def test_a_kept_model_replaces_the_collections_its_store_holds(tmp_path):
  initializer, batch = _initializer()
  state = initializer.from_scratch(batch)
  kept = initializer.from_scratch(batch, rng=seed_keys(4)[0])
  store = BestModel(str(tmp_path))
  store.offer(5, 1.0, {"params": kept.params, "batch_stats": kept.batch_stats})
  restored = TrainStateInitializer.from_kept(state, store)
  for name in ("params", "batch_stats"):
    for got, want in zip(jax.tree.leaves(getattr(restored, name)),
                         jax.tree.leaves(getattr(kept, name))):
      np.testing.assert_array_equal(got, want)
  # A store of the parameters alone (order-embeddings') restores those alone.
  params_only = BestModel(str(tmp_path), "params_only")
  params_only.offer(5, 1.0, {"params": kept.params})
  restored = TrainStateInitializer.from_kept(state, params_only, ("params",))
  np.testing.assert_array_equal(restored.params["dense_0"]["kernel"],
                                kept.params["dense_0"]["kernel"])
  assert restored.batch_stats is state.batch_stats


def test_a_run_without_a_checkpoint_is_one_line_that_says_the_fix(tmp_path):
  initializer, batch = _initializer("ln")
  with pytest.raises(UserError, match="holds no checkpoint: train it first, or not"):
    initializer.from_checkpoint(str(tmp_path), batch, "train it first, or not")
