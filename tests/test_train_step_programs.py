"""The train call's two programs (lnorm/training/steps.py): the per-update one without
the gradient and parameter norms, and the one that measures them at its last step.
Neither branches; both take every step to the bit alike; the loop calls the second
where a record reads the norms (issue 59: no host round trip per update)."""

from __future__ import annotations

import types

import jax
import numpy as np
import pytest

from lnorm import config as config_lib
from lnorm.data.core import Dataset
from lnorm.training import loop, optim, steps
from lnorm.training import task as task_lib
from lnorm.training.eval_schedule import EvalSchedule
from lnorm.training.train_state import TrainStateInitializer

#: Sizes that divide nothing evenly; three steps per call.
BATCH, HIDDEN, CLASSES, K = 5, 7, 10, 3


@pytest.fixture(scope="module", params=["ln", "bn"])
def run(request):
  """(state, batches [2 calls][K, B, ...], train_step, {measure: jitted chunk}) of a
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
  chunks = {measure: jax.jit(steps.make_train_chunk(train_step, measure_norms=measure))
            for measure in (False, True)}
  return state, batches, train_step, chunks


def _bits(tree) -> list[bytes]:
  return [np.asarray(x).tobytes() for x in jax.tree.leaves(jax.device_get(tree))]


def test_measuring_the_norms_changes_no_step(run):
  state, batches, _, chunks = run
  rng = jax.random.key(4)
  ends = {}
  for measure, chunk in chunks.items():
    s, outs = state, []
    for batch in batches:
      s, out = chunk(s, batch, rng)
      outs.append({k: out[k] for k in ("loss", "clips", "sums")})
    ends[measure] = (s, outs)
  # The clip acted: the global norm ran in the per-update path of both.
  assert np.asarray(ends[False][1][0]["clips"]["clipped_fraction"]).sum() > 0
  assert _bits(ends[True]) == _bits(ends[False])


def test_the_measured_norms_are_the_last_steps(run):
  state, batches, train_step, chunks = run
  rng = jax.random.key(4)
  _, out = chunks[True](state, batches[0], rng)
  s, step = state, jax.jit(train_step)
  for i in range(K):
    s, last = step(s, jax.tree.map(lambda x, i=i: x[i], batches[0]), rng)
  assert {k: np.asarray(out[k]).shape for k in steps.NORM_METRICS} == {
      k: () for k in steps.NORM_METRICS}
  for k in steps.NORM_METRICS:
    np.testing.assert_allclose(out[k], last[k], rtol=1e-6)
  assert float(out["grad_norm"]) > 0.5  # Before the clip.
  np.testing.assert_allclose(out["param_norm"], optim.global_norm(s.params), rtol=1e-6)


def test_neither_program_branches(run):
  """No lax.cond in the per-update path: XLA:GPU reads a branch's predicate on the host,
  which makes every update wait for the gradient (issue 59)."""
  state, batches, _, chunks = run
  for measure, chunk in chunks.items():
    text = chunk.lower(state, batches[0], jax.random.key(0)).as_text()
    assert "stablehlo.if" not in text and "stablehlo.case" not in text, measure
  assert "stablehlo.if" not in jax.jit(optim.global_norm).lower(
      {"w": np.ones(3, np.float32)}).as_text()


def _training(log_every_steps: int, eval_every_steps: int) -> loop._Training:
  """A _Training holding only what ``_measures`` reads."""
  training = object.__new__(loop._Training)
  training.config = types.SimpleNamespace(log_every_steps=log_every_steps)
  training.run = types.SimpleNamespace(schedule=EvalSchedule(eval_every_steps, 0, 100))
  return training


@pytest.mark.parametrize("log_every, eval_every, before, after, ends_epoch, measures", [
    (0, 0, 0, 3, False, False),  # Nothing reads this call's norms.
    (0, 0, 3, 6, True, True),  # The epoch record does.
    (4, 0, 0, 3, False, False),
    (4, 0, 3, 6, False, True),  # A running record at step 4, inside the call.
    (4, 0, 4, 7, False, False),  # Step 4's record was the previous call's.
    (0, 5, 3, 6, False, True),  # A mid-epoch evaluation's window at step 5.
    (0, 5, 5, 8, False, False),
])
def test_the_loop_measures_where_a_record_reads_the_norms(log_every, eval_every, before,
                                                         after, ends_epoch, measures):
  assert _training(log_every, eval_every)._measures(before, after, ends_epoch) is measures
