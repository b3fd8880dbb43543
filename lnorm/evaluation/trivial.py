"""Trivial baselines: what a model that learned nothing about its inputs scores.

Each experiment declares one (``Task.trivial_baseline``): a model fit to the training
split alone that ignores the inputs (the class prior, a unigram model, an
independent-pixel model, a single Gaussian for the pen moves) or a random ranking.
The training loop writes its held-out scores into ``config.json`` as ``"trivial"``,
so that an analysis can tell a task that was learned from one that was not: a
normalizer whose best validation value does not clearly beat its experiment's trivial
value did not learn the task at that scale.

Every probability is estimated from training counts with add-one (Laplace)
smoothing, so that a symbol, class or pixel value the training split never shows
still has a finite log-likelihood on held-out data. Values are in the units the
runs log; the functions here are NumPy only.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from lnorm.data.core import Dataset


def record(model: str, values: Mapping[str, float]) -> dict:
  """The ``"trivial"`` record of config.json: what the model is and its score for each
  held-out metric, named as the run logs it (``validation/error``)."""
  return {"model": model, "values": {k: float(v) for k, v in values.items()}}


def held_out_splits(dataset: Dataset, train_split: str = "train") -> list[str]:
  """Every split of ``dataset`` but the one training reads, in the dataset's order."""
  return [s for s in dataset.splits if s != train_split]


def smoothed_log_probs(counts: np.ndarray) -> np.ndarray:
  """``log((count + 1) / (total + n))`` for each of the ``n`` outcomes counted."""
  counts = np.asarray(counts, np.float64)
  return np.log(counts + 1.0) - np.log(counts.sum() + len(counts))


# --- classes -------------------------------------------------------------------------------


def class_prior(train_labels: np.ndarray, num_classes: int) -> np.ndarray:
  """The training split's class frequencies as log-probabilities ``[num_classes]``."""
  return smoothed_log_probs(np.bincount(np.asarray(train_labels).reshape(-1),
                                        minlength=num_classes))


def class_prior_scores(log_prior: np.ndarray, labels: np.ndarray) -> dict[str, float]:
  """``error`` and ``nll`` of predicting ``log_prior`` for every example: the error is
  the majority class's (ties go to the lowest class id, as an argmax takes them), the
  NLL the cross-entropy of the labels with the prior, in nats per example."""
  labels = np.asarray(labels).reshape(-1)
  majority = int(np.argmax(log_prior))
  return {"error": float(np.mean(labels != majority)),
          "nll": float(-np.mean(log_prior[labels]))}


def classification_record(dataset: Dataset, num_classes: int,
                          train_split: str = "train", label: str = "label") -> dict:
  """The class prior's ``<split>/error`` and ``<split>/nll`` on every held-out split."""
  log_prior = class_prior(dataset.splits[train_split][label], num_classes)
  values = {}
  for split in held_out_splits(dataset, train_split):
    for k, v in class_prior_scores(log_prior, dataset.splits[split][label]).items():
      values[f"{split}/{k}"] = v
  return record("class prior (majority class)", values)


# --- binary pixels -------------------------------------------------------------------------


def independent_bernoulli(train_images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """``(log p(1), log p(0))`` of each pixel, from the training images' pixel means
  (add-one smoothed: ``(ones + 1) / (n + 2)``): the model that draws every pixel on
  its own."""
  images = np.asarray(train_images).reshape(len(train_images), -1)
  ones = images.sum(axis=0, dtype=np.float64)
  zeros = len(images) - ones
  total = np.log(len(images) + 2.0)
  return np.log(ones + 1.0) - total, np.log(zeros + 1.0) - total


def independent_bernoulli_nll(log_probs: tuple[np.ndarray, np.ndarray],
                              images: np.ndarray) -> np.ndarray:
  """``-log p(x)`` of each binary image under :func:`independent_bernoulli`: nats per
  image, summed over the pixels ``[N]``."""
  log_one, log_zero = log_probs
  x = np.asarray(images).reshape(len(images), -1).astype(np.float64)
  return -(x @ log_one + (1.0 - x) @ log_zero)


# --- tokens --------------------------------------------------------------------------------


def unigram(train_tokens: np.ndarray, vocab_size: int) -> np.ndarray:
  """A unigram model's log-probabilities ``[vocab_size]`` of the training tokens
  ``train_tokens`` (ids, any shape), add-one smoothed over all ``vocab_size`` ids."""
  return smoothed_log_probs(np.bincount(np.asarray(train_tokens).reshape(-1),
                                        minlength=vocab_size))


# --- pen moves -----------------------------------------------------------------------------


def gaussian_and_bernoulli(train_moves: np.ndarray) -> dict[str, np.ndarray | float]:
  """The simplest density of pen moves ``[M, 3]`` (dx, dy, end_of_stroke): one
  bivariate Gaussian for the offsets (maximum likelihood: the moves' mean and
  covariance) and one Bernoulli for the end-of-stroke bit (add-one smoothed)."""
  moves = np.asarray(train_moves, np.float64)
  offsets = moves[:, :2]
  ends = float(np.sum(moves[:, 2] > 0.5))
  return {"mean": offsets.mean(axis=0),
          "covariance": np.cov(offsets, rowvar=False, bias=True),
          "log_end": math.log((ends + 1.0) / (len(moves) + 2.0)),
          "log_no_end": math.log((len(moves) - ends + 1.0) / (len(moves) + 2.0))}


def gaussian_and_bernoulli_log_density(model: Mapping[str, np.ndarray | float],
                                       moves: np.ndarray) -> np.ndarray:
  """``log p(dx, dy, end_of_stroke)`` of each move ``[..., 3]`` under
  :func:`gaussian_and_bernoulli`: ``[...]`` in nats."""
  moves = np.asarray(moves, np.float64)
  centred = moves[..., :2] - model["mean"]
  covariance = np.asarray(model["covariance"])
  quadratic = np.einsum("...i,ij,...j->...", centred, np.linalg.inv(covariance), centred)
  log_xy = -math.log(2.0 * math.pi) - 0.5 * math.log(np.linalg.det(covariance)) - 0.5 * quadratic
  log_end = np.where(moves[..., 2] > 0.5, model["log_end"], model["log_no_end"])
  return log_xy + log_end


# --- rankings ------------------------------------------------------------------------------


def random_ranking_scores(num_images: int, captions_per_image: int, fold_size: int,
                          recall_at: Sequence[int] = (1, 5, 10)) -> dict[str, float]:
  """Expected retrieval scores of a model whose scores are random (independent and
  continuous), computed as ``experiments.order_embeddings.retrieval.evaluate`` does: per fold of
  ``fold_size`` images (a last, smaller fold is a fold of its own; 0: one fold of
  all), then averaged over folds.

  In a fold of N images and K captions each, image retrieval ranks one true image
  among N: R@k = k / N. Caption retrieval counts the false captions ahead of the
  image's best true one among N K, K of them true: R@k is the chance that the first k
  of a random order hold a true caption, ``1 - C(NK - K, k) / C(NK, k)``. Mean ranks:
  ``(N + 1) / 2`` and ``1 + (NK - K) / (K + 1)``. Recalls are in percent; medians are
  left out (they do not follow from an expectation).
  """
  fold_size = fold_size or num_images
  folds = [min(fold_size, num_images - start) for start in range(0, num_images, fold_size)]
  per_fold = [_random_fold(n, captions_per_image, recall_at) for n in folds]
  out = {k: float(np.mean([f[k] for f in per_fold])) for k in per_fold[0]}
  out["image_rsum"] = sum(out[f"image_r{k}"] for k in recall_at)
  out["rsum"] = out["image_rsum"] + sum(out[f"caption_r{k}"] for k in recall_at)
  return out


def _random_fold(n: int, k_true: int, recall_at: Sequence[int]) -> dict[str, float]:
  candidates = n * k_true
  false = candidates - k_true
  out = {}
  for k in recall_at:
    # P(the first k candidates are all false) = prod_{i < k} (false - i) / (candidates - i).
    all_false = math.prod(max(false - i, 0) / (candidates - i) for i in range(min(k, candidates)))
    out[f"caption_r{k}"] = 100.0 * (1.0 - all_false)
    out[f"image_r{k}"] = 100.0 * min(k, n) / n
  out["caption_mean_rank"] = 1.0 + false / (k_true + 1.0)
  out["image_mean_rank"] = (n + 1.0) / 2.0
  return out
