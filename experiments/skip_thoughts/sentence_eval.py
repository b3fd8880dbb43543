"""Linear evaluations of fixed sentence vectors, in two published protocols:
SentEval's (Conneau & Kiela 2018; the default) and the one of the skip-thoughts
authors' own ``eval_*.py`` scripts (Kiros et al. 2015, ``protocol="kiros"``).

``senteval`` (SentEval's scikit-learn settings, ``senteval/tools/validation.py``,
``relatedness.py`` and the task readers):

* The rows: MR, CR, SUBJ, MPQA as SentEval reads them (Latin-1, ``splitlines()``,
  empty rows kept: lnorm.data.senteval), every task's rows sorted by (length, label)
  (SICK's pairs by the lengths of both sentences, then the score) before folds or
  epochs are drawn over them, as SentEval sorts them to batch its encoder.
* MR, CR, SUBJ, MPQA (:func:`cross_validated_accuracy`): 10-fold cross-validation;
  in each fold the L2 strength C in {2^-2, ..., 2^3} is chosen by an inner 10-fold
  cross-validation on the training folds, then the classifier is refit on all of
  them. Folds are stratified and shuffled with seed 1111, outer and inner; the
  classifier is scikit-learn's ``LogisticRegression`` (L2 penalty, unpenalised
  intercept, multinomial for more than two classes). As in SentEval, the inner
  means are rounded to two decimals (in percent) before the first best C is taken,
  and so are each fold's test accuracy and their mean, the result.
* TREC (:func:`train_test_accuracy`): SentEval's ``KFoldClassifier``: C in
  {2^-1, ..., 2^5} chosen by the same (rounded) cross-validation on the training
  file, refit on all of it, accuracy on the test file.
* SICK relatedness (:func:`relatedness`): features ``[|u - v|, u * v]``; the target
  score y in [1, 5] becomes Tai et al.'s (2015) distribution over the classes
  1..5 (p_floor(y) = floor(y) - y + 1, p_floor(y)+1 = y - floor(y)); SentEval's
  ``RelatednessPytorch``: a linear layer and a softmax fit to those distributions
  by the squared error, Adam (lr 1e-3) on minibatches of 64 in 50-epoch rounds
  (:func:`experiments.skip_thoughts.linear_models.softmax_mse_rounds`); the round with the
  best trial Pearson r is kept, and the 4th round that does not beat it (counted
  over the run) ends training, as does passing 1,000 epochs. The prediction is the
  expected class; Pearson r, Spearman rho and MSE on the test pairs.
* Sentences are encoded as in training, each followed by EOS.

What is exact and what is not. The logistic regressions are solved to their
minimiser (below), which SentEval's scikit-learn does not reach: its defaults stop
``lbfgs`` at 100 iterations, short of it on sentence vectors. The folds, the grid,
the rounding and the choice rule are SentEval's, so with the minimiser the chosen C
and accuracies are those of SentEval run to convergence; against SentEval as it
runs (``LogisticRegression(C)``, 100 iterations) they differ. Measured on the MR
vectors of a skip-thoughts encoder after 100 updates (docs/results.md), with the
same rows and folds: C differed in 7 of the 10 folds, the mean accuracy by 0.01
points (57.03 here, 57.02 there); issue 34 reports 8 of 10 folds and 0.27 points on
other vectors. A difference of a few tenths is within what SentEval's own early
stop produces, so compare with published SentEval numbers to about that. SICK's
regression is stochastic in both: the epoch order is SentEval's NumPy permutations
exactly, the starting weights are drawn by JAX, not by PyTorch's generator, so its
scores match SentEval's in distribution, not digit for digit (PyTorch's own runs
differ between seeds by a similar amount).

``kiros`` (``eval_classification.py``, ``eval_trec.py``, ``eval_sick.py`` and
``tools.encode`` of ryankiros/skip-thoughts):

* Sentences are tokenised as their encoder's ``preprocess`` does: NLTK's punkt
  sentence splitter and ``word_tokenize`` (lnorm.data.senteval.kiros_tokenizer,
  which says what a user without punkt's model gets), then lower-cased.
* Sentence vectors are L2-normalised; EOS is appended for SICK only.
* MR, CR, SUBJ, MPQA: the sentences (the first file of theirs first: positive, or
  for SUBJ the objective plot summaries) are shuffled with NumPy seed 1234, then
  split into 10 contiguous folds; C in {2^0, ..., 2^8} is chosen in each by an inner
  10-fold split, contiguous too. TREC: the training file shuffled (seed 1234), C by
  10 contiguous folds, then the test file.
* The classifier is the scikit-learn of 2015's default, liblinear: the intercept is
  the weight of a constant feature 1 and is penalised like the others; TREC's 6
  classes are one-vs-rest.
* SICK: the training pairs are shuffled (seed 1234); a softmax regression on the
  soft targets is trained by Adam (Keras's defaults then: lr 1e-3, batch 128, the
  pairs in order) in rounds of 100 epochs; after each round the trial set's
  Pearson r decides: training stops at the first round that does not improve it
  (no cap on the rounds) and the best round's model is kept.
* Not reproduced: their vocabulary expansion (words outside the encoder's
  vocabulary mapped in through a linear map from word2vec vectors), which needs the
  GoogleNews word2vec vectors; here such words are the encoder's OOV token. MSRP
  (``eval_msrp.py``) is not among the tasks: its data is not in the benchmark files.

Both protocols' logistic regressions are solved by :mod:`experiments.skip_thoughts.linear_models`: all
inner folds and C values of one outer fold, with the refits for every C, in one
batched solve. They reach scikit-learn's minimiser (to 1e-6 of the largest possible
gradient, 100 times tighter than scikit-learn's default), so they choose the same C
and score the same accuracies as scikit-learn solved to convergence
(tests/test_sentence_eval_protocols.py checks that, fold by fold). They do not
reproduce a solver stopped short, as SentEval's 100 ``lbfgs`` iterations stop it
(above).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Callable, Sequence

import numpy as np
from scipy import stats
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.utils import shuffle as sklearn_shuffle

from experiments.skip_thoughts import linear_models
from lnorm.data import senteval
from lnorm.errors import UserError

#: SentEval's grids of C for scikit-learn (tools/validation.py): InnerKFoldClassifier's
#: for MR, CR, SUBJ, MPQA; KFoldClassifier's for TREC.
CLASSIFIER_C = tuple(2.0 ** t for t in range(-2, 4))
TREC_C = tuple(2.0 ** t for t in range(-1, 6))
SEED = 1111  # SentEval's fold seed.
#: SentEval's SICK regression (tools/relatedness.py): Adam with PyTorch's defaults,
#: batch 64, 50-epoch rounds; the 4th round that does not beat the best trial r
#: stops it, and so does the epoch count passing 1,000 (``while nepoch <= 1000``:
#: at most 21 rounds).
SENTEVAL_SICK = {"learning_rate": 1e-3, "batch_size": 64, "epochs_per_round": 50}
SENTEVAL_SICK_PATIENCE = 4
SENTEVAL_SICK_MAX_ROUNDS = 21
#: Kiros et al.'s grid of C (``scan`` in eval_classification.py and eval_trec.py).
KIROS_C = tuple(2.0 ** t for t in range(0, 9))
KIROS_SEED = 1234
#: Keras's defaults in 2015 and eval_sick.py's rounds.
KIROS_SICK_ADAM = {"learning_rate": 1e-3, "batch_size": 128, "epochs_per_round": 100}
#: The label of the file eval_classification.py's loaders read first (1: the
#: positive file; SUBJ's is the objective ``plot`` file, label 0 here).
KIROS_FIRST_CLASS = {"subj": 0}

Log = Callable[[str], None]


def _quiet(_: str) -> None:
  pass


@dataclasses.dataclass(frozen=True)
class Protocol:
  """What differs between the two published evaluation protocols."""
  name: str
  grid: tuple[float, ...]  # C of MR, CR, SUBJ, MPQA.
  trec_grid: tuple[float, ...]  # C of TREC.
  normalize: bool  # L2-normalise the sentence vectors.
  penalize_intercept: bool  # liblinear's intercept, penalised like a weight.
  multiclass: str  # linear_models loss for TREC: multinomial or one-vs-rest (binary).
  shuffled_folds: bool  # Stratified, shuffled folds (SentEval) or contiguous ones.
  seed: int
  #: SentEval's habits: rows sorted by (length, label) before the folds are drawn
  #: (``sorted_rows``), and accuracies in percent rounded to two decimals, the
  #: inner-fold means before C is chosen (``rounded``).
  sorted_rows: bool = False
  rounded: bool = False

  def append_eos(self, task: str) -> bool:
    return self.name == "senteval" or task == "sick"


PROTOCOLS = {
    "senteval": Protocol("senteval", CLASSIFIER_C, TREC_C, normalize=False,
                         penalize_intercept=False, multiclass="multinomial",
                         shuffled_folds=True, seed=SEED, sorted_rows=True, rounded=True),
    "kiros": Protocol("kiros", KIROS_C, KIROS_C, normalize=True, penalize_intercept=True,
                      multiclass="binary", shuffled_folds=False, seed=KIROS_SEED),
}


def protocol(name: str) -> Protocol:
  key = name.strip().lower()
  if key not in PROTOCOLS:
    raise UserError(f"Unknown evaluation protocol {name!r}; valid: {', '.join(PROTOCOLS)}.")
  return PROTOCOLS[key]


def task_names(tasks: Sequence[str]) -> list[str]:
  """``tasks`` lower-cased (``SICK`` is ``sick``), or UserError naming the valid ones."""
  given = [t.strip() for t in tasks if t.strip()]
  unknown = [t for t in given if t.lower() not in senteval.TASKS]
  if unknown or not given:
    raise UserError(f"Unknown evaluation task(s) {', '.join(unknown) or '(none given)'}; "
                    f"valid (any case): {', '.join(senteval.TASKS)}.")
  return list(dict.fromkeys(t.lower() for t in given))


class _Progress:
  """Log lines ``<task>: <message> (<elapsed> s)``: what runs, and for how long."""

  def __init__(self, task: str, log: Log):
    self.task, self.log, self.start = task, log, time.perf_counter()

  def __call__(self, message: str) -> None:
    self.log(f"{self.task}: {message} ({time.perf_counter() - self.start:.0f} s)")


# --- classification -----------------------------------------------------------------------


def _splits(proto: Protocol, labels: np.ndarray, folds: int) -> list[tuple[np.ndarray, np.ndarray]]:
  if proto.shuffled_folds:
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=proto.seed)
    return list(splitter.split(np.zeros(len(labels)), labels))
  return list(KFold(n_splits=folds).split(labels))


def _fit_groups(proto: Protocol, design: linear_models.Design, labels: np.ndarray,
                num_classes: int, groups: Sequence[np.ndarray], grid) -> np.ndarray:
  """Predicted classes [n, G, C] of every row, by the classifier trained on each of
  ``groups`` (row indices) with each C of ``grid``."""
  weights = np.zeros((len(labels), len(groups)), np.float32)
  for g, rows in enumerate(groups):
    weights[rows, g] = 1.0
  if num_classes == 2:
    targets, loss = labels[:, None].astype(np.float32), "binary"
  else:
    targets, loss = np.eye(num_classes, dtype=np.float32)[labels], proto.multiclass
  solution = linear_models.fit(design, targets, weights, 1.0 / np.asarray(grid), loss=loss)
  _warn_unless_converged(solution)
  logits = solution.logits
  return (logits[..., 0] > 0).astype(np.int64) if logits.shape[-1] == 1 else logits.argmax(-1)


def _warn_unless_converged(solution: linear_models.Solution) -> None:
  """A warning, not an error: an evaluation inside a training run should not end it,
  and a fit short of 1e-5 is still closer than scikit-learn's default tolerance."""
  if not solution.converged.all():
    logging.warning("%d of %d logistic regressions stopped at a relative gradient of up to "
                    "%.1e (converged: %.0e) after %d iterations; their scores may differ "
                    "slightly from the exact minimiser's.", np.sum(~solution.converged),
                    solution.converged.size, np.max(solution.relative_gradient),
                    linear_models.ACCEPTABLE, solution.iterations)


def _accuracy(predicted: np.ndarray, labels: np.ndarray) -> float:
  return float(np.mean(predicted == labels))


def sorted_rows(sentences: Sequence[Sequence[str]], labels) -> np.ndarray:
  """The row order SentEval evaluates in: by (length, label), ties in file order
  (Python's stable ``sorted``). Its folds are drawn over this order."""
  labels = np.asarray(labels)
  return np.asarray(sorted(range(len(labels)),
                           key=lambda i: (len(sentences[i]), int(labels[i]))), np.int64)


def _choose_c(predicted: np.ndarray, labels: np.ndarray, inner, grid,
              rounded: bool = False) -> int:
  """Index of the C with the best mean inner-fold accuracy (the first of equals, as
  numpy's argmax in both protocols' code); ``predicted`` [n, G, C], fit i trained
  without ``inner[i][1]``. ``rounded``: SentEval's ``round(100 * mean, 2)`` first,
  so means within 0.005 points tie and the smaller C wins."""
  scores = [np.mean(np.array([_accuracy(predicted[test, i, c], labels[test])
                              for i, (_, test) in enumerate(inner)]))
            for c in range(len(grid))]
  if rounded:
    scores = [round(100 * s, 2) for s in scores]
  return int(np.argmax(scores))


def _percent(accuracy: float, proto: Protocol) -> float:
  """An accuracy in percent, rounded to two decimals as SentEval reports it."""
  return round(100 * accuracy, 2) if proto.rounded else 100 * accuracy


@dataclasses.dataclass(frozen=True)
class Fold:
  """A test split's result: the C the inner cross-validation chose, the accuracy."""
  c: float
  accuracy: float  # A fraction.


def _search_and_refit(proto, design, labels, num_classes, train, test, inner_folds, grid) -> Fold:
  """The classifier with C chosen by an inner cross-validation on the rows ``train``,
  on the rows ``test``; every inner fit and the refits in one solve."""
  inner = [(train[a], train[b]) for a, b in _splits(proto, labels[train], inner_folds)]
  predicted = _fit_groups(proto, design, labels, num_classes, [a for a, _ in inner] + [train],
                          grid)
  c = _choose_c(predicted, labels, inner, grid, proto.rounded)
  return Fold(grid[c], _accuracy(predicted[test, len(inner), c], labels[test]))


def _prepare(features, proto: Protocol) -> np.ndarray:
  x = np.asarray(features, np.float64)
  if proto.normalize:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x = x / np.where(norms > 0, norms, 1.0)
  return x


def cross_validated_accuracy(features, labels, **kwargs) -> float:
  """Mean test accuracy (percent) of :func:`nested_cross_validation`; under SentEval's
  protocol each fold's and the mean rounded to two decimals, as SentEval does."""
  proto = protocol(kwargs.get("protocol_name", "senteval"))
  mean = float(np.mean([_percent(f.accuracy, proto) for f in nested_cross_validation(
      features, labels, **kwargs)]))
  return round(mean, 2) if proto.rounded else mean


def nested_cross_validation(features, labels, *, folds: int = 10, inner_folds: int = 10,
                            protocol_name: str = "senteval",
                            grid: Sequence[float] | None = None, first_class: int = 1,
                            log: Log = _quiet) -> list[Fold]:
  """Each outer fold's chosen C and test accuracy. ``first_class``: the label whose
  sentences Kiros et al.'s lists put first (their order decides their shuffle)."""
  proto = protocol(protocol_name)
  grid = tuple(grid or proto.grid)
  x, y = _prepare(features, proto), np.asarray(labels).astype(np.int64)
  if not proto.shuffled_folds:  # Their order: one class's sentences, then the other's.
    listed = np.concatenate([np.flatnonzero(y == first_class), np.flatnonzero(y != first_class)])
    order = np.arange(len(y))
    np.random.RandomState(proto.seed).shuffle(order)
    x, y = x[listed[order]], y[listed[order]]
  design = linear_models.design(x, penalize_intercept=proto.penalize_intercept)
  results = []
  for number, (train, test) in enumerate(_splits(proto, y, folds), start=1):
    results.append(_search_and_refit(proto, design, y, 2, train, test, inner_folds, grid))
    log(f"fold {number}/{folds}: C={results[-1].c:g}, "
        f"test accuracy {100 * results[-1].accuracy:.2f}")
  return results


def train_test_accuracy(train_x, train_y, test_x, test_y, **kwargs) -> float:
  """Test accuracy (percent) of :func:`train_test` (rounded as SentEval under its
  protocol)."""
  proto = protocol(kwargs.get("protocol_name", "senteval"))
  return _percent(train_test(train_x, train_y, test_x, test_y, **kwargs).accuracy, proto)


def train_test(train_x, train_y, test_x, test_y, *, inner_folds: int = 10,
               protocol_name: str = "senteval", grid: Sequence[float] | None = None,
               log: Log = _quiet) -> Fold:
  """The C chosen by cross-validation on the training set, and the test accuracy of
  the classifier refit on all of it (TREC: C from the protocol's ``trec_grid``)."""
  proto = protocol(protocol_name)
  grid = tuple(grid or proto.trec_grid)
  train_x, test_x = _prepare(train_x, proto), _prepare(test_x, proto)
  train_y, test_y = np.asarray(train_y).astype(np.int64), np.asarray(test_y).astype(np.int64)
  if not proto.shuffled_folds:  # eval_trec.py shuffles the training questions.
    order = sklearn_shuffle(np.arange(len(train_y)), random_state=proto.seed)
    train_x, train_y = train_x[order], train_y[order]
  x, y = np.concatenate([train_x, test_x]), np.concatenate([train_y, test_y])
  design = linear_models.design(x, penalize_intercept=proto.penalize_intercept)
  train, test = np.arange(len(train_y)), np.arange(len(train_y), len(y))
  num_classes = int(max(y.max() + 1, 2))
  result = _search_and_refit(proto, design, y, num_classes, train, test, inner_folds, grid)
  log(f"C={result.c:g} by {inner_folds}-fold cross-validation, "
      f"test accuracy {100 * result.accuracy:.2f}")
  return result


# --- relatedness --------------------------------------------------------------------------


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


def expected_class(logits) -> np.ndarray:
  """[..., K] logits -> the expected class (1-based) of their softmax."""
  logits = np.asarray(logits, np.float64)
  p = np.exp(logits - logits.max(-1, keepdims=True))
  return (p / p.sum(-1, keepdims=True)) @ np.arange(1, logits.shape[-1] + 1)


def _scores(predicted, target) -> dict[str, float]:
  return {"pearson": float(stats.pearsonr(predicted, target)[0]),
          "spearman": float(stats.spearmanr(predicted, target)[0]),
          "mse": float(np.mean((predicted - target) ** 2))}


@dataclasses.dataclass(frozen=True)
class EarlyStop:
  """Which round of a regression trained in rounds the trial set keeps."""
  params: object  # The kept round's model.
  round: int  # Its number, from 1.
  trial_pearson: float
  rounds_run: int


def best_round(rounds, trial_pearson: Callable[[object], float], *, patience: int,
               max_rounds: int | None = None, log: Log = _quiet) -> EarlyStop:
  """Runs ``rounds`` (an iterator of models) until the ``patience``-th round that
  does not beat the best trial Pearson r so far (counted over the whole run, never
  reset: SentEval's ``early_stop_count``), or ``max_rounds``. A NaN r counts as 0,
  as SentEval's. Kiros et al.'s rule is ``patience=1`` without a cap."""
  best, misses, number = None, 0, 0
  for number, params in enumerate(rounds, start=1):
    r = float(trial_pearson(params))
    r = 0.0 if np.isnan(r) else r
    log(f"round {number}: trial Pearson r {r:.4f}")
    if best is None or r > best.trial_pearson:
      best = EarlyStop(params, number, r, number)
    else:
      misses += 1
      if misses >= patience:
        break
    if max_rounds is not None and number >= max_rounds:
      break
  return dataclasses.replace(best, rounds_run=number)


def relatedness(train: tuple, trial: tuple, test: tuple, *, seed: int = SEED,
                log: Log = _quiet) -> dict[str, float]:
  """SentEval's protocol (``RelatednessPytorch``). Each argument is ``(u, v,
  scores)``, the pairs in SentEval's order (sorted by the lengths of both sentences,
  then the score). Returns test ``pearson``, ``spearman``, ``mse``, and the
  ``epochs`` of the kept model."""
  features = lambda split: pair_features(split[0], split[1])
  train_x, trial_x, test_x = features(train), features(trial), features(test)
  log(f"linear softmax by squared error on {len(train[2])} pairs, "
      f"{SENTEVAL_SICK['epochs_per_round']}-epoch rounds")
  rounds = linear_models.softmax_mse_rounds(train_x, soft_targets(train[2]), seed=seed,
                                            **SENTEVAL_SICK)
  predict = lambda params, x: linear_models.softmax_probabilities(params, x) @ np.arange(1, 6)
  kept = best_round(rounds, lambda params: stats.pearsonr(predict(params, trial_x), trial[2])[0],
                    patience=SENTEVAL_SICK_PATIENCE, max_rounds=SENTEVAL_SICK_MAX_ROUNDS,
                    log=log)
  epochs = kept.round * SENTEVAL_SICK["epochs_per_round"]
  log(f"kept round {kept.round} of {kept.rounds_run} ({epochs} epochs): trial Pearson r "
      f"{kept.trial_pearson:.4f}")
  return {**_scores(predict(kept.params, test_x), test[2]), "epochs": float(epochs)}


def relatedness_kiros(train: tuple, trial: tuple, test: tuple, *, seed: int = KIROS_SEED,
                      max_rounds: int | None = None, log: Log = _quiet
                      ) -> dict[str, float]:
  """eval_sick.py's protocol on (u, v, scores) triples; u and v are L2-normalised
  here. Rounds go on until one does not improve the trial Pearson r, without a cap,
  as in the script (``max_rounds``: a cap for tests only). Returns test ``pearson``,
  ``spearman``, ``mse`` and the number of ``epochs``."""
  proto = PROTOCOLS["kiros"]
  features = lambda split: pair_features(_prepare(split[0], proto), _prepare(split[1], proto))
  order = sklearn_shuffle(np.arange(len(train[2])), random_state=seed)
  train_x, trial_x, test_x = features(train)[order], features(trial), features(test)
  rounds = linear_models.adam_softmax_rounds(
      train_x, soft_targets(train[2][order]), seed=seed, **KIROS_SICK_ADAM)
  trial_r = lambda params: stats.pearsonr(
      expected_class(linear_models.softmax_logits(params, trial_x)), trial[2])[0]
  kept = best_round(rounds, trial_r, patience=1, max_rounds=max_rounds, log=log)
  best, epochs = kept.params, kept.round * KIROS_SICK_ADAM["epochs_per_round"]
  predicted = expected_class(linear_models.softmax_logits(best, test_x))
  return {**_scores(predicted, test[2]), "epochs": float(epochs)}


# --- a sentence encoder on the benchmark files ------------------------------------------

#: ``encode(token lists, append_eos=...) -> [N, D]`` sentence vectors.
Encoder = Callable[..., np.ndarray]


def _encoded(encode: Encoder, sentences, proto: Protocol, task: str, progress) -> np.ndarray:
  progress(f"encoding {len(sentences)} sentences")
  return np.asarray(encode(sentences, append_eos=proto.append_eos(task)))


def _in_protocol_order(data: senteval.Classification,
                       proto: Protocol) -> senteval.Classification:
  if not proto.sorted_rows:
    return data
  order = sorted_rows(data.sentences, data.labels)
  return senteval.Classification([data.sentences[i] for i in order], data.labels[order])


def _pairs_in_protocol_order(data: senteval.Relatedness,
                             proto: Protocol) -> senteval.Relatedness:
  """SICK's pairs; SentEval's sorted by (length of A, length of B, score): the
  order its training epochs permute."""
  if not proto.sorted_rows:
    return data
  order = sorted(range(len(data.scores)), key=lambda i: (
      len(data.first[i]), len(data.second[i]), float(data.scores[i])))
  return senteval.Relatedness([data.first[i] for i in order], [data.second[i] for i in order],
                              data.scores[order])


def evaluate_encoder(encode: Encoder, tasks: Sequence[str], data_dir: str | None, *,
                     protocol_name: str = "senteval", folds: int = 10, inner_folds: int = 10,
                     log: Log = _quiet) -> dict[str, float]:
  """Encodes each task's sentences with ``encode`` and scores them in the protocol
  ``protocol_name``. Keys: ``sick_pearson``, ``sick_spearman``, ``sick_mse``,
  ``<task>_accuracy`` (percent) for mr, cr, subj, mpqa and trec."""
  tasks, proto = task_names(tasks), protocol(protocol_name)
  tokenize = senteval.kiros_tokenizer() if proto.name == "kiros" else senteval.tokens
  results = {}
  for task in tasks:
    progress = _Progress(task, log)
    if task == "sick":
      data = {s: _pairs_in_protocol_order(d, proto)
              for s, d in senteval.read_sick(data_dir, tokenize=tokenize).items()}
      splits = {s: (_encoded(encode, d.first, proto, task, progress),
                    _encoded(encode, d.second, proto, task, progress), d.scores)
                for s, d in data.items()}
      score = relatedness_kiros if proto.name == "kiros" else relatedness
      scores = score(splits["train"], splits["trial"], splits["test"], log=progress)
      results.update({f"sick_{k}": scores[k] for k in ("pearson", "spearman", "mse")})
    elif task == "trec":
      data = {s: _in_protocol_order(d, proto)
              for s, d in senteval.read_trec(data_dir, tokenize=tokenize).items()}
      results["trec_accuracy"] = train_test_accuracy(
          _encoded(encode, data["train"].sentences, proto, task, progress), data["train"].labels,
          _encoded(encode, data["test"].sentences, proto, task, progress), data["test"].labels,
          inner_folds=inner_folds, protocol_name=proto.name, log=progress)
    else:
      data = _in_protocol_order(senteval.read_binary(
          data_dir, task, senteval_rows=proto.name == "senteval", tokenize=tokenize), proto)
      results[f"{task}_accuracy"] = cross_validated_accuracy(
          _encoded(encode, data.sentences, proto, task, progress), data.labels, folds=folds,
          inner_folds=inner_folds, protocol_name=proto.name,
          first_class=KIROS_FIRST_CLASS.get(task, 1), log=progress)
    progress("done: " + ", ".join(f"{k}={v:.4g}" for k, v in results.items()
                                  if k.startswith(task)))
  return results
