"""lnorm.data.batching: the training order of every epoch, the partial last batch,
and the evaluation batches with their padding mask."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lnorm.data import batching


def _arrays(n):
  return {"x": np.arange(n) * 10, "y": np.arange(n * 2).reshape(n, 2)}


def test_each_epoch_is_a_permutation_that_differs_between_epochs():
  orders = [batching.epoch_order(50, seed=3, epoch=e) for e in range(4)]
  for order in orders:
    np.testing.assert_array_equal(np.sort(order), np.arange(50))
  for a, b in itertools.combinations(orders, 2):
    assert not np.array_equal(a, b)
  # Reproducible from (seed, epoch) alone, and the seed matters.
  np.testing.assert_array_equal(batching.epoch_order(50, 3, 2), orders[2])
  assert not np.array_equal(batching.epoch_order(50, 4, 0), orders[0])


def test_training_batches_drop_the_partial_last_batch():
  n, batch = 23, 5
  arrays = _arrays(n)
  steps = batching.steps_per_epoch(n, batch)
  assert steps == 4  # 23 // 5: the 3 examples left over are not trained on this epoch.
  seen_over_epochs = set()
  for epoch in range(6):
    chunk = batching.train_chunk(arrays, batch, seed=0, epoch=epoch, first_step=0,
                                 num_steps=steps)
    assert chunk["x"].shape == (steps, batch) and chunk["y"].shape == (steps, batch, 2)
    order = batching.epoch_order(n, 0, epoch)
    np.testing.assert_array_equal(chunk["x"].reshape(-1), arrays["x"][order[:steps * batch]])
    np.testing.assert_array_equal(chunk["y"].reshape(-1, 2), arrays["y"][order[:steps * batch]])
    assert len(set(chunk["x"].reshape(-1).tolist())) == steps * batch  # No repeats.
    seen_over_epochs |= set(chunk["x"].reshape(-1).tolist())
  # A different remainder each epoch: over a few epochs every example is trained on.
  assert seen_over_epochs == set(arrays["x"].tolist())


@pytest.mark.parametrize("split", [(1, 1, 1, 1), (3, 1), (2, 2), (4,)])
def test_chunks_of_any_size_give_the_same_batches(split):
  """A resumed or fused run (steps_per_call) sees the batches of a plain one."""
  arrays = _arrays(23)
  whole = batching.train_chunk(arrays, 5, seed=1, epoch=2, first_step=0, num_steps=4)
  parts, first = [], 0
  for k in split:
    parts.append(batching.train_chunk(arrays, 5, 1, 2, first, k)["x"])
    first += k
  np.testing.assert_array_equal(np.concatenate(parts), whole["x"])


@pytest.mark.parametrize("multiple_of,sizes", [(1, [5, 5, 5, 5, 3]), (4, [8, 8, 8, 8, 4]),
                                               (3, [6, 6, 6, 6, 3])])
def test_eval_batches_cover_the_split_once_with_a_padding_mask(multiple_of, sizes):
  arrays = _arrays(23)
  batches = list(batching.eval_batches(arrays, 5, multiple_of=multiple_of))
  assert [len(b["x"]) for b in batches] == sizes
  real = []
  for b, size in zip(batches, sizes):
    n_real = min(5, 23 - 5 * len(real))
    np.testing.assert_array_equal(b["mask"], [1.0] * n_real + [0.0] * (size - n_real))
    assert b["mask"].dtype == np.float32 and b["y"].shape == (size, 2)
    # Padding repeats the batch's last real example, so it is valid model input.
    assert (b["x"][n_real:] == b["x"][n_real - 1]).all()
    real.append(b["x"][:n_real])
  np.testing.assert_array_equal(np.concatenate(real), arrays["x"])  # In order, once.
