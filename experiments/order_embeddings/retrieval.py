"""Image-caption retrieval metrics (Kiros et al. 2014; Vendrov et al. 2016; LN paper
sec. 6.1, Table 2).

Layout: ``images [N, D]`` and ``captions [N * K, D]``, caption ``c`` describing image
``c // K`` (K = 5 for COCO and Flickr). A score function maps ``(captions [m, D],
images [n, D])`` to ``[m, n]``, higher meaning a better match:
:func:`order_violation_scores` (order-embeddings) or :func:`cosine_scores` (the
symmetric model).

* caption retrieval: each image queries the N * K captions; its rank is that of its
  best-placed true caption;
* image retrieval: each caption queries the N images; its rank is that of its image.

**Ranks and ties.** A query's rank is 1 plus the number of false candidates that
score *at least* as high as its best true candidate: 1 means a true candidate comes
first. A false candidate tied with the best true one is counted as ahead of it, so a
collapsed model whose scores are all equal gets the worst rank, never the best (the
authors' argsort left ties to the sort order). Other true captions of the same image
never push a query back, tied or not: only the best of them counts.

**Summary** (:func:`summarize`): R@K = percentage of queries with rank <= K; the
median rank is ``floor(median(rank))`` and the mean rank ``mean(rank)``, which is what
the authors' code computes from its 0-based ranks (``floor(median(r0)) + 1``,
``mean(r0) + 1``). :func:`evaluate` averages these over folds of ``fold_size`` images
(Table 2: five folds of 1,000 images and 5,000 captions of COCO's 5k test images).

**Model selection** (:func:`selection_score`): the score a validation run keeps its
best model by, one of :data:`SELECTION_METRICS` averaged over the first folds.
Vendrov et al.'s ``train.py`` kept the model with the best image-retrieval R@1 + R@5 +
R@10 (``image_rsum``) on the first 1,000 validation images (one fold); ``rsum``, the
sum of all six recalls, is this project's earlier choice, not the authors'.

**Memory.** Scores are computed in blocks of ``query_block`` queries by
``candidate_block`` candidates, so at most ``query_block * candidate_block * D``
intermediate values (the order-violation penalty needs every coordinate) and
``query_block * candidates`` scores exist at once; neither the ``[N*K, N, D]`` tensor
nor the full score matrix is ever built. Each direction computes its own scores (twice
the arithmetic of one score matrix), so that a rank only ever compares numbers of one
computation: exact ties (a collapsed model) stay ties.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

ScoreFn = Callable[[jax.Array, jax.Array], jax.Array]

#: The recall levels of Table 2.
RECALL_AT = (1, 5, 10)


def order_violation_scores(captions: jax.Array, images: jax.Array) -> jax.Array:
  """``-E(s, im) = -||max(0, s - im)||^2`` for every caption-image pair: ``[m, n]``.

  Captions sit above images in the order (a caption is more general than the images it
  describes): an image embedding should dominate its captions' coordinates.
  """
  violation = jnp.maximum(0.0, captions[:, None, :] - images[None, :, :])
  return -jnp.sum(jnp.square(violation), axis=-1)


def cosine_scores(captions: jax.Array, images: jax.Array) -> jax.Array:
  """Dot products of unit-length embeddings, the symmetric model's score: ``[m, n]``."""
  return jnp.dot(captions, images.T)


SCORES: dict[str, ScoreFn] = {"order": order_violation_scores, "cosine": cosine_scores}


def score_function(score: str | ScoreFn) -> ScoreFn:
  if callable(score):
    return score
  if score not in SCORES:
    raise ValueError(f"Unknown retrieval score {score!r}; valid: {', '.join(SCORES)}.")
  return SCORES[score]


def _pad_rows(x: jax.Array, multiple: int, value) -> jax.Array:
  extra = -x.shape[0] % multiple
  if not extra:
    return x
  pad = [(0, extra)] + [(0, 0)] * (x.ndim - 1)
  return jnp.pad(x, pad, constant_values=value)


def query_ranks(pair_scores: ScoreFn, queries: jax.Array, candidates: jax.Array,
                query_owner: jax.Array, candidate_owner: jax.Array,
                candidate_valid: jax.Array, *, query_block: int,
                candidate_block: int) -> jax.Array:
  """Rank of each query (see the module docstring): ``[len(queries)]`` int32.

  ``pair_scores(queries [q, D], candidates [c, D]) -> [q, c]``. A candidate is true
  for a query when their owners are equal; candidates with ``candidate_valid`` false
  (padding) are ignored. A query without a valid true candidate gets rank
  ``1 + sum(candidate_valid)``.
  """
  num_queries, num_candidates = queries.shape[0], candidates.shape[0]
  query_block = max(1, min(query_block, num_queries))
  candidate_block = max(1, min(candidate_block, num_candidates))
  q = _pad_rows(queries, query_block, 0)
  q_owner = _pad_rows(query_owner, query_block, -1)
  c = _pad_rows(candidates, candidate_block, 0)
  c_owner = _pad_rows(candidate_owner, candidate_block, -2)
  c_valid = _pad_rows(candidate_valid, candidate_block, False)
  c_blocks = c.reshape((-1, candidate_block) + c.shape[1:])

  def one_query_block(args):
    block, owner = args
    scores = jax.lax.map(lambda cands: pair_scores(block, cands), c_blocks)
    scores = jnp.moveaxis(scores, 0, 1).reshape(block.shape[0], -1)  # [q, all candidates]
    is_true = (owner[:, None] == c_owner[None, :]) & c_valid[None, :]
    best_true = jnp.max(jnp.where(is_true, scores, -jnp.inf), axis=1, keepdims=True)
    ahead = (scores >= best_true) & c_valid[None, :] & ~is_true
    return 1 + jnp.sum(ahead, axis=1, dtype=jnp.int32)

  ranks = jax.lax.map(one_query_block,
                      (q.reshape((-1, query_block) + q.shape[1:]),
                       q_owner.reshape(-1, query_block)))
  return ranks.reshape(-1)[:num_queries]


def retrieval_ranks(images: jax.Array, captions: jax.Array,
                    score: str | ScoreFn = "order", *, image_valid: jax.Array | None = None,
                    query_block: int = 16,
                    candidate_block: int = 1024) -> tuple[jax.Array, jax.Array]:
  """``(caption_ranks [N], image_ranks [N * K])`` for ``images [N, D]``, ``captions
  [N * K, D]`` (caption c describes image c // K). Jittable (``score`` static).

  ``image_valid [N]`` (bool) marks real images in a padded batch: padded images and
  their captions are neither queries that count nor candidates.
  """
  num_images = images.shape[0]
  if captions.shape[0] % max(num_images, 1):
    raise ValueError(f"{captions.shape[0]} captions for {num_images} images: expected "
                     "the same number of captions for every image.")
  per_image = captions.shape[0] // num_images
  score_fn = score_function(score)
  if image_valid is None:
    image_valid = jnp.ones((num_images,), bool)
  image_owner = jnp.arange(num_images, dtype=jnp.int32)
  caption_owner = jnp.repeat(image_owner, per_image)
  caption_valid = jnp.repeat(image_valid, per_image)
  blocks = {"query_block": query_block, "candidate_block": candidate_block}
  caption_ranks = query_ranks(lambda im, caps: score_fn(caps, im).T, images, captions,
                              image_owner, caption_owner, caption_valid, **blocks)
  image_ranks = query_ranks(score_fn, captions, images, caption_owner, image_owner,
                            image_valid, **blocks)
  return caption_ranks, image_ranks


def per_image_metrics(caption_ranks: jax.Array, image_ranks: jax.Array,
                      recall_at: Sequence[int] = RECALL_AT) -> dict[str, jax.Array]:
  """Per-image values ``[N]`` whose means over images are the recalls (in %), the
  mean ranks and their sum ``rsum``: every image owns the same number of captions, so
  averaging its captions' image-retrieval values first leaves the mean unchanged.
  (Medians do not decompose; :func:`summarize` gives them.) Jittable."""
  n = caption_ranks.shape[0]
  image_ranks = image_ranks.reshape(n, -1).astype(jnp.float32)
  caption_ranks = caption_ranks.astype(jnp.float32)
  out = {}
  for k in recall_at:
    out[f"caption_r{k}"] = 100.0 * (caption_ranks <= k)
    out[f"image_r{k}"] = 100.0 * jnp.mean(image_ranks <= k, axis=1)
  _add_recall_sums(out, recall_at)
  out["caption_mean_rank"] = caption_ranks
  out["image_mean_rank"] = jnp.mean(image_ranks, axis=1)
  return out


def _add_recall_sums(out: dict, recall_at: Sequence[int]) -> None:
  """``image_rsum`` (the image-retrieval recalls summed) and ``rsum`` (all six)."""
  out["image_rsum"] = sum(out[f"image_r{k}"] for k in recall_at)
  out["rsum"] = sum(out[f"{d}_r{k}"] for d in ("caption", "image") for k in recall_at)


def summarize(caption_ranks, image_ranks, recall_at: Sequence[int] = RECALL_AT
              ) -> dict[str, float]:
  """R@K (%), median and mean rank of both directions, ``image_rsum`` (the sum of the
  image-retrieval recalls, Vendrov et al.'s model-selection score) and ``rsum`` (the
  sum of the recalls of both directions)."""
  out = {}
  for direction, ranks in (("caption", caption_ranks), ("image", image_ranks)):
    ranks = np.asarray(ranks, np.float64)
    for k in recall_at:
      out[f"{direction}_r{k}"] = float(100.0 * np.mean(ranks <= k))
    out[f"{direction}_median_rank"] = float(np.floor(np.median(ranks)))
    out[f"{direction}_mean_rank"] = float(np.mean(ranks))
  _add_recall_sums(out, recall_at)
  return out


@functools.partial(jax.jit, static_argnames=("score", "query_block", "candidate_block"))
def _jitted_ranks(images, captions, score, query_block, candidate_block):
  return retrieval_ranks(images, captions, score, query_block=query_block,
                         candidate_block=candidate_block)


def evaluate_folds(images, captions, score: str | ScoreFn = "order", *,
                   fold_size: int = 1000, query_block: int = 16,
                   candidate_block: int = 1024) -> list[dict[str, float]]:
  """:func:`summarize` of each consecutive fold of ``fold_size`` images and their
  captions, in order (a last, smaller fold is a fold of its own). ``fold_size=0``
  ranks all images at once."""
  images, captions = np.asarray(images), np.asarray(captions)
  n = len(images)
  if n == 0 or len(captions) % n:
    raise ValueError(f"{len(captions)} captions for {n} images: expected the same "
                     "positive number of captions for every image.")
  per_image = len(captions) // n
  fold_size = fold_size or n
  folds = []
  for start in range(0, n, fold_size):
    stop = min(start + fold_size, n)
    ranks = _jitted_ranks(images[start:stop], captions[start * per_image:stop * per_image],
                          score, query_block, candidate_block)
    folds.append(summarize(*jax.device_get(ranks)))
  return folds


def mean_over_folds(folds: Sequence[dict[str, float]]) -> dict[str, float]:
  """Every score averaged over ``folds``, plus ``num_folds``."""
  out = {k: float(np.mean([f[k] for f in folds])) for k in folds[0]}
  out["num_folds"] = len(folds)
  return out


def evaluate(images, captions, score: str | ScoreFn = "order", *, fold_size: int = 1000,
             query_block: int = 16, candidate_block: int = 1024) -> dict[str, float]:
  """:func:`summarize` averaged over consecutive folds of ``fold_size`` images and
  their captions (a last, smaller fold counts as one fold), plus ``num_folds``.

  ``fold_size=0`` ranks all images at once.
  """
  return mean_over_folds(evaluate_folds(
      images, captions, score, fold_size=fold_size, query_block=query_block,
      candidate_block=candidate_block))


#: The scores a validation run may select its model by (see :func:`selection_score`).
SELECTION_METRICS = ("image_rsum", "rsum")


def selection_folds(select_images: int, fold_size: int) -> int | None:
  """How many leading folds the selection reads: ``select_images / fold_size``, or
  None (every fold) for ``select_images=0``. ``select_images`` must be a whole number
  of folds, so that the selection reuses the folds' ranks."""
  if not select_images:
    return None
  if not fold_size or select_images % fold_size:
    raise ValueError(f"select_images={select_images} is not a whole number of folds of "
                     f"{fold_size or 'all'} images: use 0 (every image) or a multiple of "
                     "the fold size.")
  return select_images // fold_size


def selection_score(folds: Sequence[dict[str, float]], metric: str = "image_rsum",
                    num_folds: int | None = 1) -> float:
  """``metric`` (one of :data:`SELECTION_METRICS`) averaged over the first
  ``num_folds`` of ``folds`` (None or more than there are: all of them).

  The defaults are Vendrov et al.'s rule (``train.py``): image-retrieval R@1 + R@5 +
  R@10 on the first fold of 1,000 validation images. ``metric='rsum', num_folds=None``
  is the sum of both directions' recalls over every fold.
  """
  if metric not in SELECTION_METRICS:
    raise ValueError(f"Unknown selection metric {metric!r}; valid: "
                     f"{', '.join(SELECTION_METRICS)}.")
  chosen = folds[:num_folds] if num_folds else folds
  return float(np.mean([f[metric] for f in chosen]))
