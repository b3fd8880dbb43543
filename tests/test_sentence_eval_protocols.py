"""Both evaluation protocols of experiments.skip_thoughts.sentence_eval (batched JAX solver) against
direct scikit-learn implementations of them (one LogisticRegression per fold and C,
solved to tol 1e-10), on small fixed features: the same C in every fold, the same
accuracies (exactly: every prediction agrees), SICK's metrics to 1e-4."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold, StratifiedKFold
from sklearn.multiclass import OneVsRestClassifier
from sklearn.utils import shuffle as sklearn_shuffle

from experiments.skip_thoughts import linear_models
from experiments.skip_thoughts import sentence_eval as se
from lnorm.errors import UserError


def _classes(n=160, d=5, classes=2, noise=1.5, seed=0):
  """Overlapping classes, so that the accuracies depend on C; unevenly scaled,
  shifted features."""
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, classes, n)
  centres = rng.normal(size=(classes, d))
  x = (centres[labels] + noise * rng.normal(size=(n, d))) * np.geomspace(0.3, 3, d) + 1.0
  return x, labels


def _sklearn(c, x, y, kiros=False):
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    if kiros:  # The scikit-learn of 2015: liblinear, one-vs-rest.
      model = LogisticRegression(C=c, solver="liblinear", tol=1e-10, max_iter=100_000)
      return (OneVsRestClassifier(model) if len(np.unique(y)) > 2 else model).fit(x, y)
    return LogisticRegression(C=c, tol=1e-10, max_iter=100_000).fit(x, y)


def _choose(x, y, splits, grid, kiros=False):
  scores = [np.mean([_sklearn(c, x[a], y[a], kiros).score(x[b], y[b]) for a, b in splits])
            for c in grid]
  if not kiros:  # SentEval: round(100 * mean, 2) before the argmax.
    scores = [round(100 * s, 2) for s in scores]
  return grid[int(np.argmax(scores))]


def _senteval_reference(x, y, folds, inner_folds):
  """SentEval's InnerKFoldClassifier with scikit-learn."""
  results = []
  split = lambda k, y: StratifiedKFold(k, shuffle=True, random_state=1111).split(y, y)
  for train, test in split(folds, y):
    c = _choose(x[train], y[train], list(split(inner_folds, y[train])), se.CLASSIFIER_C)
    results.append((c, _sklearn(c, x[train], y[train]).score(x[test], y[test])))
  return results


def _kiros_reference(pos, neg, folds):
  """eval_classification.py on L2-normalised vectors: their shuffle, their folds."""
  x = np.concatenate([pos, neg])
  x = x / np.linalg.norm(x, axis=1, keepdims=True)
  y = np.concatenate([np.ones(len(pos), int), np.zeros(len(neg), int)])
  order = np.arange(len(y))
  np.random.RandomState(1234).shuffle(order)
  x, y = x[order], y[order]
  results = []
  for train, test in KFold(folds).split(x):
    c = _choose(x[train], y[train], list(KFold(folds).split(train)), se.KIROS_C, kiros=True)
    results.append((c, _sklearn(c, x[train], y[train], kiros=True).score(x[test], y[test])))
  return results


def _as_tuples(folds):
  return [(f.c, f.accuracy) for f in folds]


def test_senteval_nested_cross_validation_is_scikit_learns():
  x, y = _classes()
  ours = se.nested_cross_validation(x, y, folds=3, inner_folds=4)
  assert _as_tuples(ours) == _senteval_reference(x, y, 3, 4)
  # Not a degenerate case: C matters here.
  assert len({f.c for f in ours}) > 1 or len({round(f.accuracy, 6) for f in ours}) > 1


def test_kiros_nested_cross_validation_is_their_scripts_with_scikit_learn():
  x, y = _classes(seed=1)
  ours = se.nested_cross_validation(3 * x, y, folds=3, inner_folds=3, protocol_name="kiros")
  # Their lists put the positive (label 1) sentences first; folds=3 for both loops.
  expected = _kiros_reference(x[y == 1], x[y == 0], 3)
  assert _as_tuples(ours) == expected
  # SUBJ's first list is the objective one (label 0 here): another shuffle.
  subj = se.nested_cross_validation(x, y, folds=3, inner_folds=3, protocol_name="kiros",
                                    first_class=0)
  assert _as_tuples(subj) == [(c, a) for c, a in _kiros_reference(x[y == 0], x[y == 1], 3)]


def test_trec_in_both_protocols_is_scikit_learns():
  x, y = _classes(n=200, classes=3, noise=1.0, seed=2)
  test_x, test_y = _classes(n=60, classes=3, noise=1.0, seed=2)
  test_x, test_y = x[:60] + 0.3 * test_x, y[:60]
  train_x, train_y = x[60:], y[60:]
  # SentEval: multinomial, stratified shuffled folds.
  splits = list(StratifiedKFold(4, shuffle=True, random_state=1111).split(train_y, train_y))
  c = _choose(train_x, train_y, splits, se.TREC_C)
  ours = se.train_test(train_x, train_y, test_x, test_y, inner_folds=4)
  assert (ours.c, ours.accuracy) == (c, _sklearn(c, train_x, train_y).score(test_x, test_y))
  # Kiros: normalised, the training set shuffled, contiguous folds, one-vs-rest liblinear.
  norm = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)
  shuffled_x, shuffled_y = sklearn_shuffle(norm(train_x), train_y, random_state=1234)
  c = _choose(shuffled_x, shuffled_y, list(KFold(4).split(shuffled_x)), se.KIROS_C, kiros=True)
  ours = se.train_test(train_x, train_y, test_x, test_y, inner_folds=4, protocol_name="kiros")
  expected = _sklearn(c, shuffled_x, shuffled_y, kiros=True).score(norm(test_x), test_y)
  assert (ours.c, ours.accuracy) == (c, expected)


def _sick_split(rng, n, d=4):
  u, v = rng.normal(size=(n, d)), rng.normal(size=(n, d))
  scores = np.clip(3 + np.abs(u - v)[:, 0] - np.abs(u - v)[:, 1] + (u * v)[:, 2]
                   + 0.5 * rng.normal(size=n), 1, 5)
  return u, v, scores


def test_senteval_s_stopping_rule_by_hand():
  # Trial r per round. Rounds 2, 4, 5 and 7 do not beat the best so far (round 7's
  # 0.65 only equals it): the 4th of them, round 7, ends training; round 6 is kept.
  r = [0.5, 0.4, 0.6, 0.3, 0.2, 0.65, 0.65, 0.9]
  kept = se.best_round(iter(range(len(r))), lambda k: r[k], patience=4)
  assert (kept.params, kept.round, kept.rounds_run, kept.trial_pearson) == (5, 6, 7, 0.65)
  # Kiros et al.'s rule: the first round that does not improve ends it.
  kept = se.best_round(iter(range(len(r))), lambda k: r[k], patience=1)
  assert (kept.round, kept.rounds_run) == (1, 2)
  # A NaN r (constant predictions) counts as 0.
  kept = se.best_round(iter(range(3)), lambda k: [np.nan, -0.1, 0.2][k], patience=2)
  assert (kept.round, kept.rounds_run, kept.trial_pearson) == (3, 3, 0.2)


def test_senteval_relatedness_runs_at_most_21_rounds(monkeypatch):
  # SentEval's `while nepoch <= 1000` with 50-epoch rounds: round 21 ends at 1,050.
  rng = np.random.default_rng(9)
  train, trial, test = _sick_split(rng, 30), _sick_split(rng, 30), _sick_split(rng, 30)
  good = np.zeros((8, 5))
  yielded = []

  def rounds(x, targets, **kwargs):
    assert kwargs == {"seed": 1111, "learning_rate": 1e-3, "batch_size": 64,
                      "epochs_per_round": 50}
    for k in range(100):  # Every round better than the last on the trial pairs.
      w = good.copy()
      w[:, 4] = (k + 1) * np.linalg.lstsq(se.pair_features(trial[0], trial[1]), trial[2],
                                          rcond=None)[0]
      yielded.append(k)
      yield w / 100, np.zeros(5)

  monkeypatch.setattr(linear_models, "softmax_mse_rounds", rounds)
  result = se.relatedness(train, trial, test)
  assert len(yielded) == 21 and result["epochs"] == 1050.0


def test_softmax_mse_rounds_are_senteval_s_training_by_hand():
  """A NumPy Adam on the summed squared error of softmax probabilities, minibatches
  of 3 over 7 rows (the last one short) in the order of RandomState(seed)."""
  rng = np.random.default_rng(10)
  x = rng.normal(size=(7, 3)).astype(np.float32)
  targets = se.soft_targets(rng.uniform(1, 5, 7)).astype(np.float32)
  seed = 4
  rounds = linear_models.softmax_mse_rounds(x, targets, seed=seed, learning_rate=0.01,
                                            batch_size=3, epochs_per_round=2)
  # The same start: U(+-1/sqrt(3)) from the same JAX keys.
  w_key, b_key = jax.random.split(jax.random.key(seed))
  bound = 1 / np.sqrt(3)
  w = np.asarray(jax.random.uniform(w_key, (3, 5), jnp.float32, -bound, bound), np.float64)
  b = np.asarray(jax.random.uniform(b_key, (5,), jnp.float32, -bound, bound), np.float64)
  params, m, v, t = [w, b], [0 * w, 0 * b], [0 * w, 0 * b], 0
  order = np.random.RandomState(seed)
  for number in range(2):
    for _ in range(2):
      perm = order.permutation(7)
      for start in range(0, 7, 3):
        rows = perm[start:start + 3]
        z = x[rows] @ params[0] + params[1]
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        dp = 2 * (p - targets[rows])  # d/dp of the summed squared error
        dz = p * (dp - np.sum(dp * p, axis=1, keepdims=True))
        grads = [x[rows].T @ dz, dz.sum(0)]
        t += 1
        for i in range(2):
          m[i] = 0.9 * m[i] + 0.1 * grads[i]
          v[i] = 0.999 * v[i] + 0.001 * grads[i] ** 2
          step = (m[i] / (1 - 0.9 ** t)) / (np.sqrt(v[i] / (1 - 0.999 ** t)) + 1e-8)
          params[i] = params[i] - 0.01 * step
    got = next(rounds)
    np.testing.assert_allclose(got[0], params[0], atol=2e-5)
    np.testing.assert_allclose(got[1], params[1], atol=2e-5)
  assert t == 12  # 3 batches an epoch, 2 epochs a round, 2 rounds.


def test_kiros_relatedness_keeps_the_best_round_and_stops_at_the_first_worse(monkeypatch):
  rng = np.random.default_rng(4)
  train, trial, test = _sick_split(rng, 50), _sick_split(rng, 40), _sick_split(rng, 40)
  normalised = lambda split: se.pair_features(
      *(a / np.linalg.norm(a, axis=1, keepdims=True) for a in split[:2]))
  trial_x, test_x = normalised(trial), normalised(test)
  # Rounds that mix a good direction (least squares on the trial pairs) with noise.
  good = np.linalg.lstsq(np.c_[trial_x, np.ones(40)], trial[2], rcond=None)[0][:-1]
  noise = rng.normal(size=good.shape)
  params = []
  for q in (0.1, 0.5, 0.9, 0.2, 1.0):
    w = np.zeros((len(good), 5))
    w[:, 4] = q * good / np.linalg.norm(good) + (1 - q) * noise / np.linalg.norm(noise)
    params.append((w, np.zeros(5)))
  r = [stats.pearsonr(se.expected_class(linear_models.softmax_logits(p, trial_x)), trial[2])[0]
       for p in params]
  assert r[0] < r[1] < r[2] > r[3]  # What this test needs of its rounds.
  yielded = []

  def rounds(x, targets, **kwargs):
    assert kwargs["batch_size"] == 128 and kwargs["epochs_per_round"] == 100
    for p in params:
      yielded.append(p)
      yield p

  monkeypatch.setattr(linear_models, "adam_softmax_rounds", rounds)
  result = se.relatedness_kiros(train, trial, test)
  assert len(yielded) == 4  # Round 4 is worse than round 3: no round 5.
  assert result["epochs"] == 300.0
  expected = se.expected_class(linear_models.softmax_logits(params[2], test_x))
  np.testing.assert_allclose(result["pearson"], stats.pearsonr(expected, test[2])[0])


def test_kiros_relatedness_has_no_cap_on_its_rounds(monkeypatch):
  rng = np.random.default_rng(11)
  train, trial, test = _sick_split(rng, 30), _sick_split(rng, 30), _sick_split(rng, 30)
  # Rounds whose trial r rises for 150 rounds, then falls: eval_sick.py runs all 151.
  direction = np.linalg.lstsq(se.pair_features(
      *(a / np.linalg.norm(a, axis=1, keepdims=True) for a in trial[:2])), trial[2],
      rcond=None)[0]
  noise = rng.normal(size=direction.shape)
  yielded = []

  def rounds(x, targets, **kwargs):
    for k in range(200):
      q = min(k, 150 - (k - 150)) / 150  # Up to round 151, then down.
      w = np.zeros((len(direction), 5))
      w[:, 4] = q * direction / np.linalg.norm(direction) + (1 - q) * noise / np.linalg.norm(noise)
      yielded.append(k)
      yield w, np.zeros(5)

  monkeypatch.setattr(linear_models, "adam_softmax_rounds", rounds)
  result = se.relatedness_kiros(train, trial, test)
  assert len(yielded) == 152 and result["epochs"] == 15100.0


def test_kiros_relatedness_trains_and_ends():
  rng = np.random.default_rng(5)
  train, trial, test = _sick_split(rng, 300), _sick_split(rng, 100), _sick_split(rng, 100)
  result = se.relatedness_kiros(train, trial, test, max_rounds=5)
  assert result["pearson"] > 0.3 and 100 <= result["epochs"] <= 500


def test_evaluate_encoder_appends_eos_and_normalises_as_each_protocol_does(tmp_path):
  pos = "".join(f"good film number {i} .\n" for i in range(30))
  neg = "".join(f"bad film number {i} .\n" for i in range(30))
  (tmp_path / "senteval").mkdir()
  (tmp_path / "senteval" / "mpqa.pos").write_text(pos)
  (tmp_path / "senteval" / "mpqa.neg").write_text(neg)
  sick = tmp_path / "sick"
  sick.mkdir()
  lines = "".join(f"{i}\ta good film {i}\ta {'good' if i % 2 else 'bad'} film\t"
                  f"{(4 if i % 2 else 2) + (i % 3) / 10}\tX\n" for i in range(40))
  for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt"):
    (sick / name).write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tx\n" + lines)
  calls = []

  def encode(sentences, append_eos):
    calls.append(append_eos)
    # Vector lengths vary: only the normalised protocol removes that.
    return np.array([[float("good" in s), 1.0, len(s[-1])] for s in sentences]) * 7.0

  for protocol, eos in (("senteval", [True, True]), ("kiros", [False, True])):
    calls.clear()
    results = se.evaluate_encoder(encode, ["MPQA", "Sick"], str(tmp_path), folds=3,
                                  inner_folds=3, protocol_name=protocol)
    assert results["mpqa_accuracy"] == 100.0
    assert calls[0] == eos[0] and set(calls[1:]) == {eos[1]}
  with pytest.raises(UserError, match="senteval, kiros"):
    se.evaluate_encoder(encode, ["mpqa"], str(tmp_path), protocol_name="authors")


def test_trec_searches_senteval_s_kfold_grid(monkeypatch):
  # KFoldClassifier's 2^-1 .. 2^5, not InnerKFoldClassifier's 2^-2 .. 2^3.
  assert se.TREC_C == (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)
  assert se.CLASSIFIER_C == (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
  searched = []
  monkeypatch.setattr(se, "_choose_c", lambda p, l, i, grid, rounded: searched.append(
      (grid, rounded)) or len(grid) - 1)
  x, y = _classes(n=90, classes=3, seed=8)
  assert se.train_test(x[:60], y[:60], x[60:], y[60:], inner_folds=3).c == 32.0
  assert se.nested_cross_validation(x, y % 2, folds=2, inner_folds=2)[0].c == 8.0
  assert searched[0] == (se.TREC_C, True) and searched[1] == (se.CLASSIFIER_C, True)


def test_senteval_rows_are_sorted_by_length_then_label():
  sentences = [["a", "b"], ["c"], ["d"], ["e", "f"], [], ["g"]]
  labels = np.array([1, 1, 0, 0, 0, 1])
  # Keys (2,1) (1,1) (1,0) (2,0) (0,0) (1,1): ties (1,1) keep their file order.
  np.testing.assert_array_equal(se.sorted_rows(sentences, labels), [4, 2, 1, 5, 3, 0])


def test_senteval_rounds_the_inner_means_before_choosing_c():
  # One inner fold of 40,000 rows: C0 right on 20,000 (50.00%), C1 on 20,001
  # (50.0025%). Rounded to two decimals they tie and the first C wins.
  labels = np.zeros(40_000, np.int64)
  predicted = np.ones((40_000, 1, 2), np.int64)
  predicted[:20_000, 0, 0] = 0
  predicted[:20_001, 0, 1] = 0
  inner = [(np.arange(0), np.arange(40_000))]
  assert se._choose_c(predicted, labels, inner, (1.0, 2.0), rounded=True) == 0
  assert se._choose_c(predicted, labels, inner, (1.0, 2.0), rounded=False) == 1


def test_kiros_features_are_l2_normalised():
  x, y = _classes(seed=6)
  scaled = x * np.random.default_rng(6).uniform(0.5, 5, size=(len(x), 1))
  kiros = lambda f: _as_tuples(se.nested_cross_validation(f, y, folds=3, inner_folds=3,
                                                          protocol_name="kiros"))
  assert kiros(scaled) == kiros(x)


def test_a_fit_stopped_short_is_reported(monkeypatch, caplog):
  x, y = _classes(seed=7)
  fit = linear_models.fit
  monkeypatch.setattr(linear_models, "fit",
                      lambda *a, **k: fit(*a, **{**k, "max_iterations": 1}))
  se.nested_cross_validation(x, y, folds=2, inner_folds=2)
  assert "logistic regressions stopped at a relative gradient" in caplog.text
