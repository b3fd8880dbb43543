"""Each experiment's trivial baseline (``Task.trivial_baseline``) on a small hand-made
dataset, against a value computed by hand from the fixture; and the estimators of
``lnorm.evaluation.trivial`` at their edges (ties, unseen outcomes, uneven folds,
correlated offsets)."""

from __future__ import annotations

import math

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from experiments.handwriting import mdn
from lnorm import config as config_lib
from lnorm.data.core import Dataset
from lnorm.evaluation import trivial
from lnorm.training import task as task_lib
from lnorm.training.task import load_task


def _task(spec: str):
  return load_task(config_lib.load_config(spec))


def _dataset(splits, info=None) -> Dataset:
  return Dataset("fixture", "synthetic", "here", splits, info=info or {})


def _labels(train, validation, test):
  return _dataset({"train": {"label": np.array(train, np.int32)},
                   "validation": {"label": np.array(validation, np.int32)},
                   "test": {"label": np.array(test, np.int32)}}, {"num_classes": 4})


# --- classifiers ---------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["configs/perm_mnist.py:smoke=true",
                                  "configs/bln_cifar.py:smoke=true"])
def test_classifiers_score_the_training_class_prior(spec):
  # Training counts of classes 0..3: 2, 1, 3, 0; add-one: 3, 2, 4, 1 out of 10. The
  # majority class is 2; class 3, never seen in training, keeps a probability of 0.1.
  ds = _labels([0, 0, 1, 2, 2, 2], [2, 0, 3], [1, 2])
  record = _task(spec).trivial_baseline(ds)
  assert record["model"] == "class prior (majority class)"
  assert record["values"] == pytest.approx({
      "validation/error": 2 / 3,
      "validation/nll": -(math.log(0.4) + math.log(0.3) + math.log(0.1)) / 3,
      "test/error": 1 / 2, "test/nll": -(math.log(0.2) + math.log(0.4)) / 2})
  assert list(record["values"]) == ["validation/error", "validation/nll", "test/error",
                                    "test/nll"]  # Never the training split.


def test_a_tie_for_the_majority_goes_to_the_lowest_class():
  log_prior = trivial.class_prior(np.array([1, 0, 2, 2, 0]), 3)
  assert trivial.class_prior_scores(log_prior, np.array([0, 2, 2, 1]))["error"] == 0.75


def test_imdb_scores_the_share_of_positive_reviews():
  task = _task("configs/bln_imdb.py:smoke=true")
  # Balanced training: a tie, which a logit of 0 predicts as negative (label 0).
  balanced = task.trivial_baseline(_labels([1, 0, 0, 1], [1, 1, 1, 0], [0]))["values"]
  assert balanced["validation/error"] == 0.75 and balanced["test/error"] == 0.0
  assert balanced["validation/nll"] == pytest.approx(math.log(2))
  # Mostly positive: p(1) = (3 + 1) / (4 + 2) predicts positive.
  positive = task.trivial_baseline(_labels([1, 1, 0, 1], [1, 0, 0], [1]))["values"]
  assert positive["validation/error"] == pytest.approx(2 / 3)
  assert positive["validation/nll"] == pytest.approx(
      -(math.log(2 / 3) + 2 * math.log(1 / 3)) / 3)


# --- DRAW ------------------------------------------------------------------------------------


def test_draw_scores_independent_pixels_with_the_training_means():
  # Pixel 0 is on in both training images: p = (2 + 1) / (2 + 2) = 3/4; pixel 1 in
  # one: 2/4; pixel 2 in none: 1/4. Held-out [0, 1, 1]: -log(1/4 * 1/2 * 1/4) = log 32.
  image = lambda rows: np.array(rows, np.uint8).reshape(len(rows), 1, 3)
  ds = _dataset({"train": {"image": image([[1, 0, 0], [1, 1, 0]])},
                 "validation": {"image": image([[0, 1, 1], [1, 0, 0]])},
                 "test": {"image": image([[1, 1, 0]])}})
  record = _task("configs/draw.py:smoke=true").trivial_baseline(ds)
  assert record["values"] == pytest.approx({
      "validation/nll_bound": (math.log(32) + math.log(32 / 9)) / 2,
      "test/nll_bound": -math.log(3 / 4 * 1 / 2 * 3 / 4)})


# --- skip-thoughts ----------------------------------------------------------------------------


def _triples(rows, lengths):
  tokens = np.array(rows, np.int32)
  lengths = np.array(lengths, np.int32)
  targets = lengths[:, 0].sum() + lengths[:, 2].sum()
  return {"tokens": tokens, "length": lengths,
          "token_weight": np.full(len(tokens), len(tokens) / targets, np.float32)}


def test_skip_thoughts_scores_a_unigram_of_the_decoders_targets():
  # Ids: 0 pad, 1 OOV, 2 EOS, 3 "a", 4 "b" (vocab_size 5). The training targets are
  # the previous [a, EOS] and next [a, b, EOS] sentences: counts 0, 0, 2, 2, 1, add-one
  # over the 5 ids: 1, 1, 3, 3, 2 out of 10. The current sentence and the padding
  # (even a non-zero id past the length) are no targets.
  train = _triples([[[3, 2, 4], [4, 4, 4], [3, 4, 2]]], [[2, 3, 3]])
  validation = _triples([[[4, 2, 3], [3, 3, 2], [1, 2, 0]]], [[2, 3, 2]])
  ds = _dataset({"train": train, "validation": validation}, {"vocab_size": 5})
  record = _task("configs/skip_thoughts.py:smoke=true").trivial_baseline(ds)
  nll = -(math.log(0.2) + math.log(0.3) + math.log(0.1) + math.log(0.3))
  assert record["values"] == pytest.approx({"validation/nll": nll,
                                            "validation/token_nll": nll / 4})


# --- handwriting ------------------------------------------------------------------------------


def _lines(moves, lengths, width=3):
  strokes = np.full((len(moves), width, 3), 9.0, np.float32)  # Padding: garbage.
  for i, line in enumerate(moves):
    strokes[i, :len(line)] = line
  return {"strokes": strokes, "length": np.array(lengths, np.int32)}


def test_handwriting_scores_one_gaussian_and_one_bernoulli():
  # Training moves (1,0), (-1,0), (0,1) with ends 0, 0, 0 and (0,-1) with end 1: mean
  # 0, covariance diag(1/2, 1/2), p(end) = (1 + 1) / (4 + 2) = 1/3.
  train = _lines([[(1, 0, 0), (-1, 0, 0), (0, 1, 0)], [(0, -1, 1)]], [3, 1])
  # (0, 0, end): -log p = log 2 pi + 1/2 log 1/4 + log 3 = log 3 pi.
  # (1, 0, no end): quadratic 2, so -log p = log pi + 1 + log 3/2.
  end_at_origin = math.log(3 * math.pi)
  step_right = math.log(1.5 * math.pi) + 1.0
  validation = _lines([[(0, 0, 1)], [(1, 0, 0), (0, 0, 1)]], [1, 2])
  test = _lines([[(1, 0, 0)]], [1])
  ds = _dataset({"train": train, "validation": validation, "test": test})
  record = _task("configs/handwriting.py:smoke=true").trivial_baseline(ds)
  assert record["values"] == pytest.approx({
      "validation/nll": (end_at_origin + end_at_origin + step_right) / 2,
      "validation/nll_per_point": (end_at_origin + (end_at_origin + step_right) / 2) / 2,
      "test/nll": step_right, "test/nll_per_point": step_right})


def test_the_gaussian_is_the_one_lnorm_mixture_density_gives_correlated_offsets():
  rng = np.random.default_rng(0)
  offsets = rng.normal(size=(200, 2)) @ np.array([[1.0, 0.8], [0.0, 0.5]]) + [0.3, -0.2]
  moves = np.concatenate([offsets, (rng.random((200, 1)) < 0.2)], axis=1)
  density = trivial.gaussian_and_bernoulli(moves)
  sigma = np.sqrt(np.diag(density["covariance"]))
  rho = density["covariance"][0, 1] / (sigma[0] * sigma[1])
  end = math.exp(density["log_end"])
  mixture = mdn.Mixture(
      eos_logit=jnp.full((5,), math.log(end / (1 - end))), log_pi=jnp.zeros((5, 1)),
      mu=jnp.tile(jnp.asarray(density["mean"])[None, None], (5, 1, 1)),
      log_sigma=jnp.tile(jnp.log(jnp.asarray(sigma))[None, None], (5, 1, 1)),
      rho_logit=jnp.full((5, 1), math.atanh(rho)))
  expected = np.asarray(mdn.log_likelihood(mixture, jnp.asarray(moves[:5], jnp.float32)))
  np.testing.assert_allclose(trivial.gaussian_and_bernoulli_log_density(density, moves[:5]),
                             expected, rtol=1e-5)


# --- order-embeddings --------------------------------------------------------------------------


def test_random_ranking_in_a_fold_of_two_images_with_two_captions_each():
  scores = trivial.random_ranking_scores(2, 2, 0)
  # Image retrieval: 1 true image of 2. Caption retrieval: 2 true captions of 4, so the
  # first is false with probability 2/4.
  assert scores == pytest.approx({
      "caption_r1": 50.0, "caption_r5": 100.0, "caption_r10": 100.0,
      "image_r1": 50.0, "image_r5": 100.0, "image_r10": 100.0,
      "caption_mean_rank": 1 + 2 / 3, "image_mean_rank": 1.5,
      "image_rsum": 250.0, "rsum": 500.0})


def test_random_ranking_averages_uneven_folds_as_retrieval_does():
  # Three images in folds of 2: a fold of 2 and a fold of 1 (where every rank is 1).
  scores = trivial.random_ranking_scores(3, 2, 2, recall_at=(1,))
  assert scores["image_r1"] == pytest.approx((50.0 + 100.0) / 2)
  assert scores["caption_r1"] == pytest.approx((50.0 + 100.0) / 2)
  assert scores["image_mean_rank"] == pytest.approx((1.5 + 1.0) / 2)
  # 1,000 images with 5 captions: R@K = K/N for an image, 1 - C(4995, K)/C(5000, K)
  # for a caption.
  coco = trivial.random_ranking_scores(1000, 5, 1000)
  assert coco["image_r10"] == pytest.approx(1.0)
  assert coco["caption_r5"] == pytest.approx(
      100 * (1 - math.comb(4995, 5) / math.comb(5000, 5)))


def test_order_embeddings_scores_a_random_ranking_per_split_and_its_selection():
  captions = lambda n: np.zeros((n, 2, 4), np.int32)
  ds = _dataset({"train": {"captions": captions(4)}, "validation": {"captions": captions(3)},
                 "test": {"captions": captions(2)}})
  config = config_lib.load_config("configs/order_embeddings.py:smoke=true")
  config.retrieval.fold_size = 2
  config.retrieval.select_images = 2  # The first fold: two images.
  values = load_task(config).trivial_baseline(ds)["values"]
  assert values["validation/image_r1"] == pytest.approx(75.0)  # Folds of 2 and 1 images.
  assert values["test/image_r1"] == pytest.approx(50.0)
  assert values["validation/selection_rsum"] == pytest.approx(250.0)  # The fold of 2.
  assert values["validation/rsum"] == pytest.approx((500.0 + 600.0) / 2)
  config.retrieval.select_on = "rsum"
  assert load_task(config).trivial_baseline(ds)["values"][
      "validation/selection_rsum"] == pytest.approx(500.0)


def test_an_experiment_declares_none_unless_it_says_otherwise():
  config = ml_collections.ConfigDict({"experiment": "anything"})
  assert task_lib.Task(config).trivial_baseline(_labels([0], [0], [0])) is None


def test_the_reader_scores_the_most_frequent_candidate_of_each_held_out_split():
  # The cloze data counts it while building the questions; the record turns each
  # held-out split's accuracy into the error the reader logs, never the training one.
  info = {"baselines": {"train": {"most_frequent_candidate_accuracy": 0.5},
                        "validation": {"most_frequent_candidate_accuracy": 0.25,
                                       "chance_accuracy": 0.1},
                        "test": {"most_frequent_candidate_accuracy": 0.125}}}
  ds = _dataset({"train": {}, "validation": {}, "test": {}}, info)
  record = _task("configs/attentive_reader.py:smoke=true").trivial_baseline(ds)
  assert record == {"model": "most frequent candidate in the passage",
                    "values": {"validation/error": 0.75, "test/error": 0.875}}
