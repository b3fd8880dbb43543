"""The train call (lnorm/training/steps.py) without a branch in its per-update path: the
norms measured after the scan, on the last step's gradient and update (issue 59: no
host round trip per update). That they are the bits the branch measured is
tests/test_golden_losses.py's."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from lnorm import config as config_lib
from lnorm.data.core import Dataset
from lnorm.training import optim, steps
from lnorm.training import task as task_lib
from lnorm.training.train_state import TrainStateInitializer

#: Sizes that divide nothing evenly; three steps per call.
BATCH, HIDDEN, CLASSES, K = 5, 7, 10, 3


@pytest.fixture(scope="module", params=["ln", "bn"])
def run(request):
  """(state, batches [2 calls][K, B, ...], train_step, jitted chunk) of a
  small perm-MNIST MLP with a global clip low enough to act, so that the overflow-safe
  norm is in every update (BN: the batch statistics are stepped too)."""
  config = config_lib.load_config(f"configs/perm_mnist.py:norm={request.param},"
                                  f"smoke=true,batch_size={BATCH}")
  config.hidden_sizes = (HIDDEN, HIDDEN)
  config.optimizer.clip_global_norm = 0.5
  task = task_lib.load_task(config)
  rng = np.random.default_rng(0)
  images = rng.integers(0, 256, (2, K, BATCH, 28, 28), dtype=np.uint8)
  labels = rng.integers(0, CLASSES, (2, K, BATCH)).astype(np.int32)
  first = {"image": images[0, 0], "label": labels[0, 0]}
  dataset = Dataset("mnist", "synthetic", "test", {"train": first},
                    info={"num_classes": CLASSES})
  model = task.build_model(dataset)
  state = TrainStateInitializer(config, task, model).from_scratch(first)
  batches = [{"image": images[i], "label": labels[i]} for i in range(2)]
  train_step = steps.make_train_step(task, model)
  return state, batches, train_step, jax.jit(steps.make_train_chunk(train_step))


def test_the_norms_are_the_last_steps_and_zero_before(run):
  state, batches, train_step, chunk = run
  rng = jax.random.key(4)
  s_chunk, out = chunk(state, batches[0], rng)
  s, step = state, jax.jit(train_step)
  for i in range(K):  # The same steps one by one, each measuring its norms.
    s, last = step(s, jax.tree.map(lambda x, i=i: x[i], batches[0]), rng)
  for k in steps.NORM_METRICS:
    assert np.asarray(out[k]).shape == (K,)
    np.testing.assert_array_equal(np.asarray(out[k])[:-1], 0.0)
    np.testing.assert_allclose(out[k][-1], last[k], rtol=1e-6)
  assert float(out["grad_norm"][-1]) > 0.5  # Before the clip, which acted.
  assert np.asarray(out["clips"]["clipped_fraction"]).sum() > 0
  np.testing.assert_allclose(out["param_norm"][-1], optim.global_norm(s_chunk.params),
                             rtol=1e-6)
  np.testing.assert_allclose(out["loss"][-1], last["loss"], rtol=1e-6)
  assert "gradient" not in out and "update" not in out  # Carried, not returned.


def test_the_train_call_does_not_branch(run):
  """No lax.cond in the per-update path: XLA:GPU reads a branch's predicate on the host,
  which makes every update wait for the gradient (issue 59)."""
  state, batches, _, chunk = run
  text = chunk.lower(state, batches[0], jax.random.key(0)).as_text()
  assert "stablehlo.while" in text  # The scan.
  assert "stablehlo.if" not in text and "stablehlo.case" not in text
  assert "stablehlo.if" not in jax.jit(optim.global_norm).lower(
      {"w": np.ones(3, np.float32)}).as_text()
