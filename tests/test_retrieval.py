"""Retrieval ranks and metrics (experiments.order_embeddings.retrieval) against brute-force NumPy versions
written from the definitions, and on score matrices whose ranks are known by hand."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.order_embeddings import retrieval

pytestmark = pytest.mark.usefixtures("precise_jax")


def table_score(table: np.ndarray):
  """A score function that looks the score up in ``table[caption, image]``: the
  'embeddings' are one-column arrays of caption and image indices."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  t = jnp.asarray(table, jnp.float32)

  def score(captions, images):
    return t[captions[:, 0].astype(jnp.int32)][:, images[:, 0].astype(jnp.int32)]
  return score


def ranks_from_table(table, **kwargs):
  m, n = table.shape
  captions = np.arange(m, dtype=np.float32)[:, None]
  images = np.arange(n, dtype=np.float32)[:, None]
  caption_ranks, image_ranks = retrieval.retrieval_ranks(images, captions, table_score(table),
                                                         **kwargs)
  return np.asarray(caption_ranks), np.asarray(image_ranks)


def numpy_ranks(scores: np.ndarray, per_image: int):
  """From the definition: a query's rank is 1 + the number of false candidates
  scoring at least as high as its best true candidate."""
  m, n = scores.shape
  owner = np.arange(m) // per_image
  caption_ranks = np.array([
      1 + np.sum(scores[owner != i, i] >= scores[owner == i, i].max()) for i in range(n)])
  image_ranks = np.array([
      1 + np.sum(np.delete(scores[c], owner[c]) >= scores[c, owner[c]]) for c in range(m)])
  return caption_ranks, image_ranks


def test_ranks_of_a_hand_made_score_matrix_with_ties():
  # 2 images, 2 captions each (captions 0, 1 -> image 0; 2, 3 -> image 1).
  table = np.array([[0.9, 0.2],
                    [0.1, 0.3],
                    [0.5, 0.4],
                    [0.9, 0.1]])
  caption_ranks, image_ranks = ranks_from_table(table)
  # Image 0: its best caption (0, score 0.9) ties with the false caption 3: the tie
  # counts against it, rank 2. Image 1: caption 2 (0.4) comes first, rank 1.
  np.testing.assert_array_equal(caption_ranks, [2, 1])
  # Caption 0: 0.9 > 0.2, rank 1. Caption 1: its image scores 0.1 < 0.3, rank 2.
  # Caption 2: 0.4 < 0.5, rank 2. Caption 3: 0.1 < 0.9, rank 2.
  np.testing.assert_array_equal(image_ranks, [1, 2, 2, 2])
  summary = retrieval.summarize(caption_ranks, image_ranks, recall_at=(1, 2))
  assert summary["caption_r1"] == 50.0 and summary["caption_r2"] == 100.0
  assert summary["caption_median_rank"] == 1.0  # floor(median(2, 1)) = floor(1.5)
  assert summary["caption_mean_rank"] == 1.5
  assert summary["image_r1"] == 25.0 and summary["image_r2"] == 100.0
  assert summary["image_median_rank"] == 2.0 and summary["image_mean_rank"] == 1.75
  assert summary["rsum"] == 50.0 + 100.0 + 25.0 + 100.0
  assert summary["image_rsum"] == 25.0 + 100.0  # Image retrieval only: the authors' selection.


def test_a_collapsed_model_gets_the_worst_ranks():
  # Every score equal: ties count against the query, so no retrieval looks good:
  # each image's captions come after the 10 others, each caption's image after 2.
  caption_ranks, image_ranks = ranks_from_table(np.zeros((15, 3)))
  np.testing.assert_array_equal(caption_ranks, [11, 11, 11])
  np.testing.assert_array_equal(image_ranks, np.full(15, 3))


def test_other_true_captions_do_not_push_an_image_back():
  # Image 0's five captions all outscore the others: rank 1, not 5. Image 1's five
  # tie with each other: still rank 1.
  table = np.zeros((10, 2))
  table[:5, 0] = [5, 4, 3, 2, 1]
  table[5:, 1] = 1.0
  caption_ranks, _ = ranks_from_table(table)
  np.testing.assert_array_equal(caption_ranks, [1, 1])


@pytest.mark.parametrize("blocks", [(1, 1), (3, 7), (16, 1024), (64, 5)])
def test_blockwise_ranks_equal_brute_force_on_random_data(blocks):
  rng = np.random.default_rng(0)
  n, per_image = 23, 5
  table = rng.normal(size=(n * per_image, n)).round(1)  # Rounded: many ties.
  caption_ranks, image_ranks = ranks_from_table(
      table, query_block=blocks[0], candidate_block=blocks[1])
  want_caption, want_image = numpy_ranks(table, per_image)
  np.testing.assert_array_equal(caption_ranks, want_caption)
  np.testing.assert_array_equal(image_ranks, want_image)


def test_without_ties_ranks_equal_the_authors_argsort():
  # The authors' i2t/t2i: sort by score, 0-based position of the (best) true item + 1.
  rng = np.random.default_rng(1)
  n, per_image = 12, 5
  table = rng.normal(size=(n * per_image, n))
  caption_ranks, image_ranks = ranks_from_table(table)
  order = np.argsort(-table, axis=0)  # Per image, captions from best to worst.
  want_caption = [min(np.flatnonzero(order[:, i] // per_image == i)) + 1 for i in range(n)]
  order = np.argsort(-table, axis=1)
  want_image = [np.flatnonzero(order[c] == c // per_image)[0] + 1 for c in range(n * per_image)]
  np.testing.assert_array_equal(caption_ranks, want_caption)
  np.testing.assert_array_equal(image_ranks, want_image)


def test_score_functions_match_numpy():
  rng = np.random.default_rng(2)
  s, im = rng.normal(size=(6, 4)), rng.normal(size=(3, 4))
  want_order = -np.array([[np.sum(np.maximum(0, s[i] - im[j]) ** 2) for j in range(3)]
                          for i in range(6)])
  np.testing.assert_allclose(retrieval.order_violation_scores(s, im), want_order, rtol=1e-5)
  np.testing.assert_allclose(retrieval.cosine_scores(s, im), s @ im.T, rtol=1e-5)


@pytest.mark.parametrize("score", ["order", "cosine"])
def test_embeddings_padding_and_per_image_means(score):
  rng = np.random.default_rng(3)
  n, per_image, dim = 9, 5, 6
  images = np.abs(rng.normal(size=(n, dim))).astype(np.float32)
  captions = np.abs(rng.normal(size=(n * per_image, dim))).astype(np.float32)
  scores = np.asarray(retrieval.score_function(score)(captions, images))
  want_caption, want_image = numpy_ranks(scores, per_image)
  caption_ranks, image_ranks = retrieval.retrieval_ranks(images, captions, score,
                                                         query_block=4, candidate_block=7)
  np.testing.assert_array_equal(caption_ranks, want_caption)
  np.testing.assert_array_equal(image_ranks, want_image)

  # Padded rows (a last evaluation batch filled up) change nothing for the real ones.
  pad = 3
  padded_images = np.concatenate([images, np.repeat(images[-1:], pad, 0)])
  padded_captions = np.concatenate([captions, np.repeat(captions[-per_image:], pad, 0)])
  valid = np.arange(n + pad) < n
  caption_ranks_p, image_ranks_p = retrieval.retrieval_ranks(
      padded_images, padded_captions, score, image_valid=valid)
  np.testing.assert_array_equal(np.asarray(caption_ranks_p)[:n], want_caption)
  np.testing.assert_array_equal(np.asarray(image_ranks_p)[:n * per_image], want_image)

  # Per-image values average to the recalls and mean ranks of the summary.
  per_image_values = retrieval.per_image_metrics(caption_ranks, image_ranks)
  summary = retrieval.summarize(want_caption, want_image)
  for k, v in per_image_values.items():
    np.testing.assert_allclose(float(np.mean(v)), summary[k], rtol=1e-5, err_msg=k)


def test_evaluate_averages_over_folds():
  rng = np.random.default_rng(4)
  n, per_image, dim, fold = 12, 5, 4, 5  # Folds of 5, 5 and 2 images.
  images = rng.normal(size=(n, dim)).astype(np.float32)
  captions = rng.normal(size=(n * per_image, dim)).astype(np.float32)
  got = retrieval.evaluate(images, captions, "cosine", fold_size=fold)
  folds = []
  for start in range(0, n, fold):
    stop = min(start + fold, n)
    scores = captions[start * per_image:stop * per_image] @ images[start:stop].T
    folds.append(retrieval.summarize(*numpy_ranks(scores, per_image)))
  assert got["num_folds"] == 3
  for k in folds[0]:
    assert got[k] == pytest.approx(np.mean([f[k] for f in folds])), k
  whole = retrieval.evaluate(images, captions, "cosine", fold_size=0)
  assert whole["num_folds"] == 1
  assert whole["caption_mean_rank"] == pytest.approx(
      np.mean(numpy_ranks(captions @ images.T, per_image)[0]))


def test_evaluate_folds_lists_what_evaluate_averages():
  rng = np.random.default_rng(5)
  images = rng.normal(size=(7, 3)).astype(np.float32)
  captions = rng.normal(size=(35, 3)).astype(np.float32)
  folds = retrieval.evaluate_folds(images, captions, "cosine", fold_size=4)
  assert len(folds) == 2
  first = retrieval.summarize(*numpy_ranks(captions[:20] @ images[:4].T, 5))
  assert folds[0] == pytest.approx(first)
  assert retrieval.mean_over_folds(folds) == pytest.approx(
      retrieval.evaluate(images, captions, "cosine", fold_size=4))
  # The first fold's image recalls: the default selection score.
  assert retrieval.selection_score(folds) == pytest.approx(
      first["image_r1"] + first["image_r5"] + first["image_r10"])


def test_mismatched_counts_are_refused():
  with pytest.raises(ValueError, match="captions for 3 images"):
    retrieval.evaluate(np.zeros((3, 2)), np.zeros((7, 2)))
