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


def _sequences(n=103, width=40, seed=0):
  """Rows whose real steps hold the row's number + 1 and whose padding is 0."""
  lengths = np.random.default_rng(seed).integers(1, width + 1, n)
  x = np.where(np.arange(width)[None] < lengths[:, None], np.arange(1, n + 1)[:, None], 0)
  return {"x": x, "x_length": lengths, "id": np.arange(n)}


def test_length_bucket_edges_are_rounded_quantiles_ending_at_the_width():
  arrays = _sequences()
  buckets = batching.LengthBuckets.from_quantiles(arrays, "x", "x_length", 4)
  quartiles = np.quantile(arrays["x_length"], [0.25, 0.5, 0.75])
  assert buckets.edges == tuple(sorted({int(-(-q // 8) * 8) for q in quartiles} | {40}))
  assert buckets.edges[-1] == 40 and list(buckets.edges) == sorted(set(buckets.edges))
  # One bucket: everything padded to the width, as without buckets.
  assert batching.LengthBuckets.from_quantiles(arrays, "x", "x_length", 1).edges == (40,)


def test_bucketed_epoch_groups_one_length_and_drops_what_unbucketed_drops():
  arrays, batch, group_steps = _sequences(), 5, 2
  buckets = batching.LengthBuckets.from_quantiles(arrays, "x", "x_length", 3, group_steps)
  orders = [buckets.epoch_order(arrays, batch, seed=1, epoch=e) for e in range(3)]
  group = batch * group_steps
  for epoch, order in enumerate(orders):
    np.testing.assert_array_equal(np.sort(order), np.arange(103))
    # The 3 examples a training epoch drops are the unbucketed epoch's.
    unbucketed = batching.epoch_order(103, 1, epoch)
    np.testing.assert_array_equal(order[100:], unbucketed[100:])
    # Each bucket fills as many groups as it can; only the leftovers share groups.
    kept_buckets = buckets.bucket_of(arrays["x_length"][unbucketed[:100]])
    expected = sum(np.sum(kept_buckets == b) // group for b in range(3))
    bucket = buckets.bucket_of(arrays["x_length"][order[:100]])
    single = sum(len(set(bucket[g:g + group])) == 1 for g in range(0, 100, group))
    assert expected >= 5 and single >= expected
  # Groups come in a different order each epoch, not sorted by length.
  assert not np.array_equal(orders[0], orders[1])
  group_buckets = [buckets.bucket_of(arrays["x_length"][o[:100:group]]) for o in orders]
  assert not all(np.all(np.diff(b) >= 0) for b in group_buckets)


def test_a_precomputed_training_order_gives_the_same_chunks():
  arrays = _sequences()
  buckets = batching.LengthBuckets.from_quantiles(arrays, "x", "x_length", 3)
  order = batching.training_order(arrays, 5, 2, 1, buckets)
  for first in (0, 3, 7):
    given = batching.train_chunk(arrays, 5, 2, 1, first, 3, buckets, order)
    computed = batching.train_chunk(arrays, 5, 2, 1, first, 3, buckets)
    for k in arrays:
      np.testing.assert_array_equal(given[k], computed[k])


def test_bucketed_training_chunks_are_trimmed_to_their_longest_example():
  arrays = _sequences()
  buckets = batching.LengthBuckets.from_quantiles(arrays, "x", "x_length", 4, group_steps=2)
  for first in range(0, 20, 2):
    chunk = batching.train_chunk(arrays, 5, 0, 0, first, 2, buckets)
    width = chunk["x"].shape[2]
    assert width in buckets.edges
    longest = chunk["x_length"].max()
    assert width >= longest and not any(longest <= e < width for e in buckets.edges)
    # Trimming removes padding only: each row keeps all of its real steps.
    full = arrays["x"][chunk["id"].reshape(-1)]
    np.testing.assert_array_equal(chunk["x"].reshape(10, width), full[:, :width])
    assert not full[:, width:].any()


def test_bucketed_eval_batches_cover_the_split_once_trimmed():
  arrays = _sequences()
  buckets = batching.LengthBuckets.from_quantiles(arrays, "x", "x_length", 4)
  batches = list(batching.eval_batches(buckets.sorted_by_length(arrays), 16,
                                       multiple_of=4, buckets=buckets))
  ids = np.concatenate([b["id"][b["mask"] > 0] for b in batches])
  np.testing.assert_array_equal(np.sort(ids), np.arange(103))
  widths = [b["x"].shape[1] for b in batches]
  assert widths == sorted(widths) and widths[0] < 40 == widths[-1]
  for b in batches:
    np.testing.assert_array_equal(b["x"], arrays["x"][b["id"]][:, :b["x"].shape[1]])


def test_length_buckets_need_a_task_with_a_variable_length_feature():
  from configs import perm_mnist  # pylint: disable=g-import-not-at-top
  from lnorm.errors import ConfigError
  from lnorm.training import steps, task as task_lib
  config = perm_mnist.get_config()
  config.length_buckets.num = 3
  with pytest.raises(ConfigError, match="length_buckets.num=1"):
    steps.length_buckets(config, task_lib.load_task(config), {})
  config.length_buckets.num = 0
  with pytest.raises(ConfigError, match=">= 1"):  # Checked once, with the other fields.
    task_lib.check_config(config)
