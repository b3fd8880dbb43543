"""The batched logistic regressions of experiments.skip_thoughts.linear_models against scikit-learn's
(solved to a gradient tolerance of 1e-10 in float64), and its Adam-trained softmax
regression against a NumPy transcription of Keras's 2015 Adam."""

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from experiments.skip_thoughts import linear_models as lm

GRID = (0.25, 1.0, 8.0)
#: These features are far worse conditioned than sentence vectors: the coefficients
#: match scikit-learn's to 2e-4 from a relative gradient of 1e-8 (the default, 1e-6,
#: gives the same predictions on benchmark features: test_sentence_eval_protocols.py).
TIGHT = 1e-8


def _features(n=150, d=6, seed=0):
  """Correlated, shifted, unevenly scaled features: hard for a solver on raw
  coordinates, so the rotation and preconditioning are exercised."""
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) * np.geomspace(0.1, 10, d) + 2.0
  score = x @ rng.normal(size=d) / np.sqrt(d) + rng.normal(size=n) * 2.0
  return x, score


def _groups(n):
  """Three training subsets (rows left out: i mod 3 == g) and all rows."""
  weights = np.stack([np.arange(n) % 3 != g for g in range(3)] + [np.ones(n, bool)], axis=1)
  return weights.astype(np.float32)


def _reference(x, y, c, **kwargs):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return LogisticRegression(C=c, tol=1e-10, max_iter=100_000, **kwargs).fit(x, y)


def _assert_close(coef, intercept, ref_coef, ref_intercept):
  scale = np.max(np.abs(ref_coef))
  np.testing.assert_allclose(coef, ref_coef, atol=2e-4 * scale)
  # The intercept on raw features is b - shift . coef: the features' offset of 2
  # multiplies the coefficients' error.
  np.testing.assert_allclose(intercept, ref_intercept, atol=1e-3 * max(scale, 1.0))


def test_binary_fits_are_scikit_learns_for_every_subset_and_c():
  x, score = _features()
  y = (score > np.median(score)).astype(int)
  weights = _groups(len(y))
  solution = lm.fit(lm.design(x), y[:, None], weights, 1 / np.array(GRID), loss="binary",
                    tolerance=TIGHT)
  assert solution.converged.all() and solution.iterations < 100
  for g in range(weights.shape[1]):
    rows = weights[:, g] > 0
    for c, value in enumerate(GRID):
      ref = _reference(x[rows], y[rows], value)
      _assert_close(solution.coef[g, c, :, 0], solution.intercept[g, c, 0], ref.coef_[0],
                    ref.intercept_[0])
      # Logits for every row, the held-out ones too.
      np.testing.assert_allclose(solution.logits[:, g, c, 0], ref.decision_function(x),
                                 atol=1e-3 * np.max(np.abs(ref.decision_function(x))))


def test_multinomial_fits_are_scikit_learns():
  x, score = _features(seed=1)
  y = np.digitize(score, np.quantile(score, [0.3, 0.7]))
  weights = _groups(len(y))
  solution = lm.fit(lm.design(x), np.eye(3)[y], weights, 1 / np.array(GRID), loss="multinomial",
                    tolerance=TIGHT)
  for g in range(weights.shape[1]):
    rows = weights[:, g] > 0
    for c, value in enumerate(GRID):
      ref = _reference(x[rows], y[rows], value)
      # Adding a constant to every class's intercept changes nothing: compare centred.
      _assert_close(solution.coef[g, c].T, solution.intercept[g, c] - solution.intercept[g, c].mean(),
                    ref.coef_, ref.intercept_ - ref.intercept_.mean())
      np.testing.assert_array_equal(solution.logits[:, g, c].argmax(-1), ref.predict(x))


def test_soft_targets_equal_rows_repeated_per_class_with_their_probability_as_weight():
  x, score = _features(seed=2)
  p = np.random.default_rng(2).dirichlet(np.ones(4), size=len(x))
  solution = lm.fit(lm.design(x), p, np.ones((len(x), 1)), [1.0], loss="multinomial",
                    tolerance=TIGHT)
  rows, classes = np.nonzero(p > 0)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    ref = LogisticRegression(C=1.0, tol=1e-10, max_iter=100_000).fit(
        x[rows], classes, sample_weight=p[rows, classes])
  _assert_close(solution.coef[0, 0].T, solution.intercept[0, 0] - solution.intercept[0, 0].mean(),
                ref.coef_, ref.intercept_ - ref.intercept_.mean())


def test_a_class_without_mass_is_left_out_as_scikit_learn_never_sees_it():
  x, score = _features(seed=5)
  p = np.random.default_rng(5).dirichlet(np.ones(3), size=len(x))
  targets = np.c_[np.zeros(len(x)), p]  # Class 0 never occurs.
  solution = lm.fit(lm.design(x), targets, np.ones((len(x), 1)), [1 / 4.0], loss="multinomial",
                    tolerance=TIGHT)
  assert solution.converged.all()
  assert solution.intercept[0, 0, 0] == -np.inf and np.all(solution.coef[0, 0, :, 0] == 0)
  rows, classes = np.nonzero(p > 0)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    ref = LogisticRegression(C=4.0, tol=1e-10, max_iter=100_000).fit(
        x[rows], classes, sample_weight=p[rows, classes])
  present = solution.intercept[0, 0, 1:]
  _assert_close(solution.coef[0, 0, :, 1:].T, present - present.mean(), ref.coef_,
                ref.intercept_ - ref.intercept_.mean())


def test_penalised_intercept_and_one_vs_rest_are_liblinears():
  x, score = _features(seed=3)
  y = np.digitize(score, np.quantile(score, [0.3, 0.7]))
  weights = _groups(len(y))
  design = lm.design(x, penalize_intercept=True)
  solution = lm.fit(design, np.eye(3)[y], weights, 1 / np.array(GRID), loss="binary",
                    tolerance=TIGHT)
  binary = lm.fit(design, (y == 2)[:, None], weights, 1 / np.array(GRID), loss="binary",
                    tolerance=TIGHT)
  for g in range(weights.shape[1]):
    rows = weights[:, g] > 0
    for c, value in enumerate(GRID):
      # One-vs-rest is one binary liblinear fit per class.
      for k in range(3):
        ref = _reference(x[rows], y[rows] == k, value, solver="liblinear")
        _assert_close(solution.coef[g, c, :, k], solution.intercept[g, c, k], ref.coef_[0],
                      ref.intercept_[0])
      np.testing.assert_allclose(binary.coef[g, c, :, 0], solution.coef[g, c, :, 2], rtol=1e-4,
                                 atol=1e-6)
  # The penalty does reach the intercept: unpenalised, it comes out different.
  free = lm.fit(lm.design(x), (y == 2)[:, None], weights, 1 / np.array(GRID), loss="binary",
                    tolerance=TIGHT)
  assert np.max(np.abs(free.intercept - binary.intercept)) > 1e-2


def test_bad_arguments():
  x, _ = _features()
  with pytest.raises(ValueError, match="Unknown loss"):
    lm.fit(lm.design(x), np.ones((len(x), 1)), np.ones((len(x), 1)), [1.0], loss="hinge")
  with pytest.raises(ValueError, match="rows"):
    lm.fit(lm.design(x), np.ones((3, 1)), np.ones((len(x), 1)), [1.0], loss="binary",
                    tolerance=TIGHT)


def _keras_adam_reference(x, targets, w, b, *, learning_rate, batch_size, epochs):
  """Keras 0.x's Dense + softmax, categorical cross-entropy (batch mean) and Adam."""
  m = [np.zeros_like(w), np.zeros_like(b)]
  v = [np.zeros_like(w), np.zeros_like(b)]
  t = 0
  for _ in range(epochs):
    for start in range(0, len(x), batch_size):
      xb, yb = x[start:start + batch_size], targets[start:start + batch_size]
      z = xb @ w + b
      p = np.exp(z - z.max(1, keepdims=True))
      p /= p.sum(1, keepdims=True)
      dz = (p - yb) / len(xb)
      grads = [xb.T @ dz, dz.sum(0)]
      t += 1
      rate = learning_rate * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
      for i, (param, g) in enumerate(zip((w, b), grads)):
        m[i] = 0.9 * m[i] + 0.1 * g
        v[i] = 0.999 * v[i] + 0.001 * g * g
        param -= rate * m[i] / (np.sqrt(v[i]) + 1e-8)
  return w, b


def test_adam_rounds_follow_keras_with_a_short_last_batch():
  rng = np.random.default_rng(4)
  x, targets = rng.normal(size=(7, 3)), rng.dirichlet(np.ones(5), size=7)
  rounds = lm.adam_softmax_rounds(x, targets, seed=0, learning_rate=0.1, batch_size=3,
                                  epochs_per_round=2)
  first, second = next(rounds), next(rounds)
  # The first round's start: Glorot-uniform w within sqrt(6 / (3 + 5)), zero b.
  limit = np.sqrt(6 / 8)
  import jax  # pylint: disable=g-import-not-at-top
  w0 = np.asarray(jax.random.uniform(jax.random.key(0), (3, 5), minval=-limit, maxval=limit),
                  np.float64)
  expected = _keras_adam_reference(x, targets, w0.copy(), np.zeros(5), learning_rate=0.1,
                                   batch_size=3, epochs=4)
  np.testing.assert_allclose(second[0], expected[0], atol=1e-5)
  np.testing.assert_allclose(second[1], expected[1], atol=1e-5)
  assert not np.allclose(first[0], second[0])
