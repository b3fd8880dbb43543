"""Linear evaluations of fixed sentence vectors, in the protocols skip-thoughts and
SentEval publish (Kiros et al. 2015; Conneau & Kiela 2018), with scikit-learn's
logistic regression.

* MR, CR, SUBJ, MPQA (:func:`cross_validated_accuracy`): 10-fold cross-validation;
  in each fold the L2 strength C in {2^-2, ..., 2^3} is chosen by an inner 10-fold
  cross-validation on the training folds, then the classifier is refit on all of
  them; the result is the mean test-fold accuracy, in percent. SentEval's
  ``InnerKFoldClassifier`` with its scikit-learn settings, stratified folds with
  seed 1111.
* TREC (:func:`train_test_accuracy`): C chosen by the same inner cross-validation on
  the training file, refit on all of it, accuracy on the test file.
* SICK relatedness (:func:`relatedness`): features ``[|u - v|, u * v]``; the target
  score y in [1, 5] becomes Tai et al.'s (2015) distribution over the classes
  1..5 (p_floor(y) = floor(y) - y + 1, p_floor(y)+1 = y - floor(y)); a multinomial
  logistic regression fits those soft targets (cross-entropy with soft targets is a
  weighted cross-entropy over each pair written once per class it has mass on);
  the prediction is the expected class. Kiros et al. stopped training early on the
  trial set's Pearson r; here the trial set chooses the L2 strength instead, the
  same role (how far the fit goes) with a deterministic solver. Pearson r, Spearman
  rho and MSE on the test pairs.
"""

from __future__ import annotations

import time
import warnings
from typing import Callable, Sequence

import numpy as np
from scipy import stats
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from lnorm.data import senteval
from lnorm.errors import UserError

#: SentEval's grid of C for scikit-learn (tools/validation.py).
CLASSIFIER_C = tuple(2.0 ** t for t in range(-2, 4))
#: The L2 strengths the SICK trial set chooses from.
RELATEDNESS_C = tuple(2.0 ** t for t in range(-4, 7))
SEED = 1111  # SentEval's fold seed.
MAX_ITER = 500


def _fit(x, y, c: float, seed: int, sample_weight=None) -> LogisticRegression:
  clf = LogisticRegression(C=c, max_iter=MAX_ITER, random_state=seed)
  with warnings.catch_warnings():
    # Like SentEval, take the solver's iterate when it stops short of convergence.
    warnings.simplefilter("ignore", ConvergenceWarning)
    clf.fit(x, y, sample_weight=sample_weight)
  return clf


def choose_c(x, y, *, folds: int, seed: int, grid: Sequence[float] = CLASSIFIER_C) -> float:
  """The C of ``grid`` with the best mean accuracy over ``folds`` stratified folds
  (ties: the smallest C, i.e. the strongest regularisation)."""
  splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
  scores = []
  for c in grid:
    scores.append(np.mean([_fit(x[tr], y[tr], c, seed).score(x[te], y[te])
                           for tr, te in splitter.split(x, y)]))
  return grid[int(np.argmax(scores))]


def cross_validated_accuracy(features, labels, *, folds: int = 10, inner_folds: int = 10,
                             seed: int = SEED, grid: Sequence[float] = CLASSIFIER_C) -> float:
  """Mean test accuracy (percent) of nested cross-validation, as SentEval."""
  x, y = np.asarray(features, np.float64), np.asarray(labels)
  accuracies = []
  for train, test in StratifiedKFold(n_splits=folds, shuffle=True,
                                     random_state=seed).split(x, y):
    c = choose_c(x[train], y[train], folds=inner_folds, seed=seed, grid=grid)
    accuracies.append(_fit(x[train], y[train], c, seed).score(x[test], y[test]))
  return 100.0 * float(np.mean(accuracies))


def train_test_accuracy(train_x, train_y, test_x, test_y, *, inner_folds: int = 10,
                        seed: int = SEED, grid: Sequence[float] = CLASSIFIER_C) -> float:
  """Test accuracy (percent) after choosing C by cross-validation on the training set."""
  train_x, test_x = np.asarray(train_x, np.float64), np.asarray(test_x, np.float64)
  c = choose_c(train_x, np.asarray(train_y), folds=inner_folds, seed=seed, grid=grid)
  return 100.0 * _fit(train_x, train_y, c, seed).score(test_x, np.asarray(test_y))


def pair_features(u, v) -> np.ndarray:
  """Tai et al.'s features of a sentence pair: ``[|u - v|, u * v]``."""
  u, v = np.asarray(u, np.float64), np.asarray(v, np.float64)
  return np.concatenate([np.abs(u - v), u * v], axis=-1)


def soft_targets(scores, num_classes: int = 5) -> np.ndarray:
  """[N] scores in [1, num_classes] -> [N, num_classes] distributions whose expected
  class (1-based) is the score."""
  scores = np.asarray(scores, np.float64)
  floor = np.clip(np.floor(scores), 1, num_classes)
  upper = scores - floor
  p = np.zeros((len(scores), num_classes + 1))
  rows = np.arange(len(scores))
  p[rows, floor.astype(int) - 1] = 1.0 - upper
  p[rows, floor.astype(int)] += upper
  return p[:, :num_classes]


class SoftTargetRegression:
  """Multinomial logistic regression on soft targets over classes 1..K, predicting
  the expected class."""

  def __init__(self, c: float, seed: int = SEED):
    self.c, self.seed = c, seed

  def fit(self, x, scores) -> "SoftTargetRegression":
    p = soft_targets(scores)
    rows, classes = np.nonzero(p > 0)
    self._clf = _fit(np.asarray(x)[rows], classes + 1, self.c, self.seed,
                     sample_weight=p[rows, classes])
    return self

  def predict(self, x) -> np.ndarray:
    return self._clf.predict_proba(x) @ self._clf.classes_.astype(np.float64)


def relatedness(train: tuple, trial: tuple, test: tuple, *,
                grid: Sequence[float] = RELATEDNESS_C, seed: int = SEED) -> dict[str, float]:
  """Each argument is ``(u, v, scores)``. Returns test ``pearson``, ``spearman``,
  ``mse`` and the chosen ``c``."""
  fx = lambda split: pair_features(split[0], split[1])
  train_x, trial_x, test_x = fx(train), fx(trial), fx(test)
  best = None
  for c in grid:
    model = SoftTargetRegression(c, seed).fit(train_x, train[2])
    r = stats.pearsonr(model.predict(trial_x), trial[2])[0]
    if best is None or r > best[0]:
      best = (r, c, model)
  _, c, model = best
  predicted = model.predict(test_x)
  return {"pearson": float(stats.pearsonr(predicted, test[2])[0]),
          "spearman": float(stats.spearmanr(predicted, test[2])[0]),
          "mse": float(np.mean((predicted - test[2]) ** 2)), "c": c}


# --- a sentence encoder on the benchmark files ------------------------------------------

Encoder = Callable[[Sequence[Sequence[str]]], np.ndarray]


def evaluate_encoder(encode: Encoder, tasks: Sequence[str], data_dir: str | None, *,
                     folds: int = 10, inner_folds: int = 10,
                     log: Callable[[str], None] = lambda _: None) -> dict[str, float]:
  """Encodes each task's sentences with ``encode`` (token lists -> [N, D] features)
  and scores them. Keys: ``sick_pearson``, ``sick_spearman``, ``sick_mse``,
  ``<task>_accuracy`` (percent) for mr, cr, subj, mpqa and trec."""
  unknown = [t for t in tasks if t not in senteval.TASKS]
  if unknown:
    raise UserError(f"Unknown evaluation task(s) {', '.join(unknown)}; valid: "
                    f"{', '.join(senteval.TASKS)}.")
  results = {}
  for task in tasks:
    start = time.perf_counter()
    if task == "sick":
      data = senteval.read_sick(data_dir)
      splits = {s: (encode(d.first), encode(d.second), d.scores) for s, d in data.items()}
      scores = relatedness(splits["train"], splits["trial"], splits["test"])
      results.update({f"sick_{k}": scores[k] for k in ("pearson", "spearman", "mse")})
    elif task == "trec":
      data = senteval.read_trec(data_dir)
      results["trec_accuracy"] = train_test_accuracy(
          encode(data["train"].sentences), data["train"].labels,
          encode(data["test"].sentences), data["test"].labels, inner_folds=inner_folds)
    else:
      data = senteval.read_binary(data_dir, task)
      results[f"{task}_accuracy"] = cross_validated_accuracy(
          encode(data.sentences), data.labels, folds=folds, inner_folds=inner_folds)
    log(f"{task}: " + ", ".join(f"{k}={v:.4g}" for k, v in results.items()
                                if k.startswith(task)) +
        f" ({time.perf_counter() - start:.0f} s)")
  return results
