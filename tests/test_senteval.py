"""SentEval / SICK readers (lnorm.data.senteval) on fixture files the tests write, and
the evaluation protocols (experiments.skip_thoughts.sentence_eval) on features with known answers."""

import numpy as np
import pytest
from scipy import stats

from experiments.skip_thoughts import linear_models
from experiments.skip_thoughts import sentence_eval as se
from lnorm.data import core
from lnorm.data import senteval
from lnorm.errors import UserError

SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"


def write(path, text, encoding="utf-8"):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(text.encode(encoding))


def test_binary_task_reads_both_files_label_one_first_latin1_and_blank_lines(tmp_path):
  write(tmp_path / "senteval" / "rt-polarity.pos", "A Good film .\n\ncaf\xe9 \x85 fine\n",
        "latin-1")
  write(tmp_path / "senteval" / "rt-polarity.neg", "bad one\n")
  data = senteval.read_binary(str(tmp_path), "mr", senteval_rows=False)
  # Latin-1 \x85 does not break the line (it separates words); blank lines are skipped.
  assert data.sentences == [["a", "good", "film", "."], ["caf\xe9", "fine"], ["bad", "one"]]
  np.testing.assert_array_equal(data.labels, [1, 1, 0])
  # SentEval's rows: Latin-1 split by splitlines(), so \x85 ends a row, and the
  # blank line is a row of no words; UTF-8 "\xe9" is read as two Latin-1 letters,
  # lower-cased ("\xc3" -> "\xe3").
  write(tmp_path / "senteval" / "rt-polarity.neg", "bad caf\xe9\x0cone\r\n")
  data = senteval.read_binary(str(tmp_path), "mr")
  assert data.sentences == [["a", "good", "film", "."], [], ["caf\xe9"], ["fine"],
                            ["bad", "caf\xe3\xa9"], ["one"]]
  np.testing.assert_array_equal(data.labels, [1, 1, 1, 1, 0, 0])


@pytest.mark.real_data("senteval", "rt-polarity.pos")
def test_senteval_rows_of_the_public_files_are_senteval_s():
  rows = {t: len(senteval.read_binary(None, t).labels) for t in senteval.BINARY_FILES}
  assert rows == {"mr": 10685, "cr": 3775, "subj": 10021, "mpqa": 10606}
  lines = {t: len(senteval.read_binary(None, t, senteval_rows=False).labels)
           for t in senteval.BINARY_FILES}
  assert lines == {"mr": 10662, "cr": 3771, "subj": 10000, "mpqa": 10603}


def test_trec_coarse_labels_and_malformed_line(tmp_path):
  write(tmp_path / "TREC.train", "DESC:manner How did it go ?\nNUM:date When was it ?\n")
  write(tmp_path / "TREC.test", "LOC:city Where is Paris ?\n")
  data = senteval.read_trec(str(tmp_path))
  assert data["train"].sentences[0] == ["how", "did", "it", "go", "?"]
  np.testing.assert_array_equal(data["train"].labels, [1, 5])
  np.testing.assert_array_equal(data["test"].labels, [4])
  write(tmp_path / "TREC.test", "LOC:city Where is Paris ?\nnonsense line\n")
  with pytest.raises(core.MalformedDataError, match="line 2"):
    senteval.read_trec(str(tmp_path))


def test_sick_reader_and_its_errors(tmp_path):
  folder = tmp_path / "sick"
  for name in senteval.SICK_FILES.values():
    write(folder / name, SICK_HEADER + "1\tA man is here\tA man is there\t4.5\tNEUTRAL\n"
          "2\tNo one\tSomeone\t1\tCONTRADICTION\n")
  data = senteval.read_sick(str(tmp_path))
  assert data["trial"].first == [["a", "man", "is", "here"], ["no", "one"]]
  np.testing.assert_array_equal(data["test"].scores, [4.5, 1.0])
  write(folder / "SICK_trial.txt", SICK_HEADER + "1\ta\tb\tsix\tNEUTRAL\n")
  with pytest.raises(core.MalformedDataError, match="SICK_trial.txt.*line 2"):
    senteval.read_sick(str(tmp_path))
  write(folder / "SICK_trial.txt", "id\ta\tb\n")
  with pytest.raises(core.MalformedDataError, match="header"):
    senteval.read_sick(str(tmp_path))


def test_kiros_tokenizer_by_hand():
  tokenize = senteval.kiros_tokenizer(split_sentences=lambda line: [line])
  # Treebank rules: contractions, quotes, currency; lower-cased after.
  assert tokenize('The movie wasn\'t "good" , I cannot say it costs $5.50...') == [
      "the", "movie", "was", "n't", "``", "good", "''", ",", "i", "can", "not", "say",
      "it", "costs", "$", "5.50", "..."]
  # punkt's trained model keeps "Mr." whole (here: a splitter that does not split).
  assert tokenize("Mr. Smith can't go.") == ["mr.", "smith", "ca", "n't", "go", "."]


def test_kiros_tokenizer_without_punkt_s_model(monkeypatch, caplog):
  import nltk  # pylint: disable=g-import-not-at-top

  def missing(name):
    raise LookupError(name)

  monkeypatch.setattr(nltk.data, "find", missing)
  fallback = senteval.kiros_tokenizer()
  assert "punkt model (tokenizers/punkt_tab/english/) is not installed" in caplog.text
  # The untrained splitter ends a sentence at "Mr.": "mr ." instead of "mr.".
  assert fallback("Mr. Smith can't go. He left !") == [
      "mr", ".", "smith", "ca", "n't", "go", ".", "he", "left", "!"]
  # Already tokenised text (the benchmark files) keeps its tokens.
  assert fallback("it was n't good . it was great !") == [
      "it", "was", "n't", "good", ".", "it", "was", "great", "!"]


def test_missing_files_say_where_lnorm_looked(tmp_path):
  with pytest.raises(core.DatasetNotFoundError, match="custrev.pos") as e:
    senteval.read_binary(str(tmp_path), "cr")
  assert str(tmp_path / "senteval") in str(e.value)


def test_soft_targets_have_the_score_as_expected_class():
  scores = np.array([1.0, 2.3, 4.5, 5.0])
  p = se.soft_targets(scores)
  np.testing.assert_allclose(p[1], [0, 0.7, 0.3, 0, 0])
  np.testing.assert_allclose(p[3], [0, 0, 0, 0, 1])
  np.testing.assert_allclose(p.sum(1), 1)
  np.testing.assert_allclose(p @ np.arange(1, 6), scores)


def test_pair_features_are_the_absolute_difference_and_the_product_by_value():
  u = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]])
  v = np.array([[3.0, 1.0, 0.5], [-2.0, 3.0, 4.0]])
  np.testing.assert_array_equal(se.pair_features(u, v), [[2.0, 3.0, 0.0, 3.0, -2.0, 0.25],
                                                         [2.0, 0.0, 5.0, -0.0, 9.0, -4.0]])
  # Symmetric in u and v, for signs of u - v that vary within and across pairs (u - v
  # in place of |u - v| would flip the first half).
  rng = np.random.default_rng(0)
  u, v = rng.normal(size=(20, 8)), rng.normal(size=(20, 8))
  np.testing.assert_array_equal(se.pair_features(u, v), se.pair_features(v, u))


def test_task_names_are_case_insensitive_and_an_unknown_one_lists_the_valid_ones():
  assert se.task_names(["SICK", " Mr ", "trec", "sick"]) == ["sick", "mr", "trec"]
  with pytest.raises(UserError, match=r"MQPA.*valid \(any case\): mr, cr, subj, mpqa, trec, sick"):
    se.task_names(["sick", "MQPA"])
  with pytest.raises(UserError, match="none given"):
    se.task_names(["", " "])


def _separable(n=120, d=6, seed=0):
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, 2, n)
  features = rng.normal(size=(n, d))
  features[:, 0] = np.where(labels == 1, 3.0, -3.0) + 0.1 * features[:, 0]
  return features, labels


def test_classifier_protocols_on_separable_and_random_features():
  features, labels = _separable()
  assert se.cross_validated_accuracy(features, labels, folds=3, inner_folds=3) == 100.0
  assert se.train_test_accuracy(features[:80], labels[:80], features[80:], labels[80:],
                                inner_folds=3) == 100.0
  noise = np.random.default_rng(1).normal(size=(400, 6))
  chance = se.cross_validated_accuracy(noise, np.arange(400) % 2, folds=3, inner_folds=3)
  assert 38.0 < chance < 62.0


def test_relatedness_recovers_a_linear_score_and_not_noise():
  rng = np.random.default_rng(0)

  def split(n):
    scores = rng.uniform(1, 5, n)
    u = rng.normal(size=(n, 4))
    v = u.copy()
    v[:, 0] = u[:, 0] + (5 - scores)  # |u - v| in the first feature is 5 - score.
    return u, v, scores

  result = se.relatedness(split(300), split(100), split(200))
  # SentEval's slow regression (lr 1e-3, 5 batches an epoch) reaches its 21-round cap.
  assert result["pearson"] > 0.93 and result["spearman"] > 0.93 and result["mse"] < 0.25
  assert result["epochs"] == 1050.0
  noise = lambda n: (rng.normal(size=(n, 4)), rng.normal(size=(n, 4)), rng.uniform(1, 5, n))
  assert abs(se.relatedness(noise(300), noise(100), noise(300))["pearson"]) < 0.2


def test_relatedness_metrics_are_scipy_s(monkeypatch):
  rng = np.random.default_rng(3)
  u, v = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
  scores = rng.uniform(1, 5, 50)
  w, b = rng.normal(size=(6, 5)), rng.normal(size=5)
  monkeypatch.setattr(linear_models, "softmax_mse_rounds", lambda *a, **k: iter([(w, b)]))
  result = se.relatedness((u, v, scores), (u, v, scores), (u, v, scores))
  logits = se.pair_features(u, v) @ w + b
  p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
  predicted = p @ np.arange(1, 6)
  assert np.all((predicted >= 1) & (predicted <= 5))
  np.testing.assert_allclose(result["pearson"], stats.pearsonr(predicted, scores)[0])
  np.testing.assert_allclose(result["spearman"], stats.spearmanr(predicted, scores)[0])
  np.testing.assert_allclose(result["mse"], np.mean((predicted - scores) ** 2))
  assert result["epochs"] == 50.0


def test_evaluate_encoder_on_fixture_files_with_a_perfect_encoder(tmp_path):
  # Sentences that say "good" are label 1: an encoder that sees the word is perfect.
  pos = "".join(f"good film number {i} .\n" for i in range(30))
  neg = "".join(f"bad film number {i} .\n" for i in range(30))
  write(tmp_path / "senteval" / "mpqa.pos", pos)
  write(tmp_path / "senteval" / "mpqa.neg", neg)
  encode = lambda sentences, append_eos: np.array([[float("good" in s), len(s)]
                                                  for s in sentences])
  logged = []
  results = se.evaluate_encoder(encode, ["MPQA"], str(tmp_path), folds=3, inner_folds=3,
                                log=logged.append)
  assert results == {"mpqa_accuracy": 100.0}
  with pytest.raises(UserError, match="Unknown evaluation task"):
    se.evaluate_encoder(encode, ["mqpa"], str(tmp_path))
  # Progress: which task, which stage or fold, the time since the task began.
  assert logged[0].startswith("mpqa: encoding 60 sentences (")
  assert [line.split(":")[1].strip() for line in logged[1:4]] == ["fold 1/3", "fold 2/3",
                                                                  "fold 3/3"]
  assert all(line.endswith(" s)") for line in logged)
  assert logged[-1].startswith("mpqa: done: mpqa_accuracy=100")
