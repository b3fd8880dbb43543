"""The train call (lnorm/training/steps.py) without a branch in its per-update path on a
GPU (issue 59: XLA:GPU copies a branch's predicate to the host and waits for it): the
norms measured by the call's last step only, which runs after the scan of the others,
and the overflow-safe global norm branch-free on every platform but the CPU, where a
branch costs nothing and saves the second sum (lnorm/training/optim.py)."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jaxlib.mlir import ir

from lnorm import config as config_lib
from lnorm.data.core import Dataset
from lnorm.training import optim, steps
from lnorm.training.lowering import runtime_branches
from lnorm.training import task as task_lib
from lnorm.training.train_state import TrainStateInitializer

#: Sizes that divide nothing evenly; three steps per call.
BATCH, HIDDEN, CLASSES, K = 5, 7, 10, 3


@pytest.fixture(scope="module")
def run():
  """(state, batches [K, B, ...], train_step, jitted chunk) of a small perm-MNIST MLP
  with BN (the batch statistics are stepped too) and a global clip low enough to act,
  so that the overflow-safe norm is in every update."""
  config = config_lib.load_config(f"configs/perm_mnist.py:norm=bn,"
                                  f"smoke=true,batch_size={BATCH}")
  config.hidden_sizes = (HIDDEN, HIDDEN)
  config.optimizer.clip_global_norm = 0.5
  task = task_lib.load_task(config)
  rng = np.random.default_rng(0)
  images = rng.integers(0, 256, (K, BATCH, 28, 28), dtype=np.uint8)
  labels = rng.integers(0, CLASSES, (K, BATCH)).astype(np.int32)
  first = {"image": images[0], "label": labels[0]}
  dataset = Dataset("mnist", "synthetic", "test", {"train": first},
                    info={"num_classes": CLASSES})
  model = task.build_model(dataset)
  state = TrainStateInitializer(config, task, model).from_scratch(first)
  train_step = steps.make_train_step(task, model)
  return (state, {"image": images, "label": labels}, train_step,
          jax.jit(steps.make_train_chunk(train_step)))


def test_the_norms_are_the_last_steps_and_zero_before(run):
  state, batches, train_step, chunk = run
  rng = jax.random.key(4)
  s_chunk, out = chunk(state, batches, rng)
  s, step = state, jax.jit(train_step)
  losses = []
  for i in range(K):  # The same steps one by one, each measuring its norms.
    s, last = step(s, jax.tree.map(lambda x, i=i: x[i], batches), rng)
    losses.append(float(last["loss"]))
  for k in steps.NORM_METRICS:
    assert np.asarray(out[k]).shape == (K,)
    np.testing.assert_array_equal(np.asarray(out[k])[:-1], 0.0)
    np.testing.assert_allclose(out[k][-1], last[k], rtol=1e-6)
  assert float(out["grad_norm"][-1]) > 0.5  # Before the clip, which acted.
  assert np.asarray(out["clips"]["clipped_fraction"]).shape == (K,)
  assert np.asarray(out["clips"]["clipped_fraction"]).sum() > 0
  np.testing.assert_allclose(out["param_norm"][-1], optim.global_norm(s_chunk.params),
                             rtol=1e-6)
  np.testing.assert_allclose(out["loss"], losses, rtol=1e-6)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6),
               s_chunk.params, s.params)


def test_a_call_of_one_step_measures_its_norms(run):
  state, batches, train_step, _ = run
  one = jax.tree.map(lambda x: x[:1], batches)
  _, out = jax.jit(steps.make_train_chunk(train_step))(state, one, jax.random.key(4))
  assert all(np.asarray(out[k]).shape == (1,) and float(out[k][0]) > 0
             for k in steps.NORM_METRICS)


def _lowered(run, platform: str) -> ir.Module:
  state, batches, _, chunk = run
  return chunk.trace(state, batches, jax.random.key(0)).lower(
      lowering_platforms=(platform,)).compiler_ir("stablehlo")


@pytest.mark.parametrize("platform", ["cuda", "rocm", "tpu"])
def test_the_train_call_does_not_branch_on_an_accelerator(run, platform):
  assert runtime_branches(_lowered(run, platform)) == 0


def test_on_a_cpu_the_global_norm_branches_on_overflow_only(run):
  # One branch per global norm: the clip's (in the optimizer and in clip_indicators)
  # in the scanned steps and in the last step, and the last step's three norms; none
  # chooses whether the norms are measured.
  assert runtime_branches(_lowered(run, "cpu")) == 2 + 2 + 3
