"""Cloze data (lnorm.data.cloze): the CNN .question parser on fixtures in the corpus's
format, the 4-sentence restriction, the arrays, the baselines, and the invariants of
the cloze questions built from books. The CBT format and the CBT-style task built
from books: tests/test_data_cbt.py."""

import numpy as np
import pytest

from lnorm import data
from lnorm.data import books
from lnorm.data.cloze import books as cloze_books
from lnorm.data.cloze import cnn
from lnorm.data.cloze import example as cloze
from lnorm.data.core import DatasetNotFoundError, MalformedDataError


def question_file(passage, question, answer, entities):
  lines = ["http://www.cnn.com/2015/04/01/example.html", "", passage, "", question, "",
           answer, ""] + [f"{k}:{v}" for k, v in entities.items()]
  return "\n".join(lines) + "\n"


GOOD = question_file(
    "@entity1 met @entity0 in @entity2 . they talked . later @entity1 left . "
    "@entity0 stayed home . it rained .",
    "@placeholder stayed home", "@entity0",
    {"@entity0": "Mary Smith", "@entity1": "John", "@entity2": "Paris"})


def write_corpus(root, files_per_split=3, bad=None):
  for split in ("training", "validation", "test"):
    folder = root / "cnn" / "questions" / split
    folder.mkdir(parents=True)
    for i in range(files_per_split):
      (folder / f"{i:04x}.question").write_text(GOOD)
  if bad is not None:
    (root / "cnn" / "questions" / "training" / "zzbad.question").write_text(bad)


def test_parses_a_question_file():
  e = cnn.parse_question_file(GOOD, "x.question")
  assert e.question == ("@placeholder", "stayed", "home") and e.answer == "@entity0"
  assert e.passage[:3] == ("@entity1", "met", "@entity0")
  assert cloze.candidates(e) == ["@entity1", "@entity0", "@entity2"]
  assert cloze.most_frequent_candidate(e) == "@entity1"  # 2 each; @entity1 comes first.


def test_baselines_count_an_unanswerable_question_as_missed():
  e = cnn.parse_question_file(GOOD, "x.question")
  right = cloze.ClozeExample(e.passage, e.question, "@entity1")  # The most frequent.
  no_entities = cloze.ClozeExample(("it", "rained", "."), e.question, "@entity0")
  base = cloze.baselines([right, right, no_entities], [True, False, False])
  # Right on the first only; chance 1/3 there, and 0 on the unanswerable ones.
  assert base == {"most_frequent_candidate_accuracy": pytest.approx(1 / 3),
                  "chance_accuracy": pytest.approx(1 / 9)}
  assert cloze.baselines([right])["most_frequent_candidate_accuracy"] == 1.0


@pytest.mark.parametrize("content, problem", [
    ("http://x\n\nonly a passage\n", "fewer than 7"),
    (GOOD.replace("@placeholder stayed", "nobody stayed"), "0 @placeholder"),
    (GOOD.replace("@placeholder stayed home", "@placeholder stayed @placeholder"),
     "holds 2 @placeholder, not one"),  # Two blanks, nothing else wrong.
    (GOOD.replace("\n@entity0\n", "\nMary\n", 1), "is not an @entityN"),
    (GOOD.replace("@entity2:Paris", "Paris is a city"), "is not @entityN:name"),
    ("http://x\nnot blank\np\n\nq @placeholder\n\n@entity0\n", "line 2 should be blank"),
])
def test_malformed_question_file_names_the_file_and_the_problem(tmp_path, content, problem):
  write_corpus(tmp_path, bad=content)
  with pytest.raises(MalformedDataError, match=problem) as e:
    data.load("cloze", {"source": "files", "data_dir": str(tmp_path), "use_cache": False})
  assert "zzbad.question" in str(e.value)


def test_missing_corpus_lists_where_it_looked(tmp_path):
  with pytest.raises(DatasetNotFoundError, match="questions"):
    data.load("cloze", {"source": "files", "data_dir": str(tmp_path)})


def test_files_source_reads_the_three_splits_into_arrays(tmp_path):
  write_corpus(tmp_path)
  ds = data.load("cloze", {"source": "files", "data_dir": str(tmp_path), "use_cache": False,
                           "num_entities": 5, "max_passage_tokens": 30,
                           "max_question_tokens": 4, "vocab_size": 40})
  assert set(ds.splits) == {"train", "validation", "test"}
  a = ds.splits["train"]
  assert a["passage"].shape == (3, 30) and a["question"].shape == (3, 4)
  assert list(a["answer"]) == [0, 0, 0]
  vocab = ds.info["vocabulary"]
  assert vocab[:3 + 5] == ("<pad>", "<oov>", "@placeholder",
                           "@entity0", "@entity1", "@entity2", "@entity3", "@entity4")
  words = [vocab[t] for t in a["passage"][0, :a["passage_length"][0]]]
  assert " ".join(words).startswith("@entity1 met @entity0 in @entity2 .")
  assert ds.info["baselines"]["train"]["most_frequent_candidate_accuracy"] == 0.0
  assert ds.info["baselines"]["train"]["chance_accuracy"] == pytest.approx(1 / 3)
  assert "most-frequent-candidate accuracy" in ds.notes


def test_four_sentence_restriction_keeps_the_answer():
  e = cnn.parse_question_file(GOOD, "x")
  first = cnn.restrict_passage(e, 2, "first")
  assert " ".join(first.passage) == "@entity1 met @entity0 in @entity2 . they talked ."
  # The question's words ('stayed', 'home') pick the 4th sentence first.
  overlap = cnn.restrict_passage(e, 1, "overlap")
  assert " ".join(overlap.passage) == "@entity0 stayed home ."
  # The first sentence lacking the answer would be replaced by one holding it.
  no_answer = cloze.ClozeExample(("a", ".", "b", "@entity3", "."), ("@placeholder",),
                                 "@entity3")
  assert cnn.restrict_passage(no_answer, 1, "first").passage == ("b", "@entity3", ".")
  assert cnn.restrict_passage(e, 0, "first") == e


def test_examples_over_the_limits_are_dropped_and_counted(tmp_path):
  write_corpus(tmp_path)
  long = GOOD.replace("it rained .", "it rained . " + "more words . " * 20)
  (tmp_path / "cnn" / "questions" / "training" / "long.question").write_text(long)
  config = {"source": "files", "data_dir": str(tmp_path), "use_cache": False,
            "num_entities": 5, "vocab_size": 40, "max_passage_tokens": 30}
  ds = data.load("cloze", config)
  assert ds.num_examples("train") == 3
  assert "train: 3 questions (1 over the limits dropped)" in ds.notes
  with pytest.raises(data.DataError, match="no training example fits"):
    data.load("cloze", {**config, "num_entities": 2})  # @entity2 is one too many


# --- the cloze task built from books -------------------------------------------------


BOOK_LINES = {
    "alpha": ["Alice went home . She saw Bob there .", "Then Alice and Bob ate .",
              "later , Bob said hello to Alice .", "The cat sat with Carol .",
              "Carol and Alice laughed .", "then Bob slept while Carol read ."],
    "beta": ["Dora met Evan . Evan smiled at Dora .", "It was late and Dora left .",
             "Evan waited for Dora .", "Soon Evan and Dora walked .",
             "then Evan saw Dora again ."],
    "gamma": ["Fred ran . Then Fred sat with Gina .", "Gina sang and Fred listened .",
              "so Gina and Fred went home .", "then Fred thanked Gina ."],
    "delta": ["Hugo read . Then Hugo wrote to Iris .", "Iris replied and Hugo smiled .",
              "so Iris and Hugo met .", "then Hugo called Iris ."],
    "epsilon": ["Jack ran . Then Jack met Kate .", "Kate waved and Jack waved .",
                "so Kate and Jack talked .", "then Jack left Kate ."],
}


def corpus():
  return [books.Book(name, tuple(lines)) for name, lines in BOOK_LINES.items()]


def test_entities_are_capitalised_words_never_seen_lower_case():
  sentences = [books.book_sentences(b, lowercase=False) for b in corpus()]
  ents = cloze_books.entity_words(sentences, min_count=1)
  assert {"Alice", "Bob", "Carol", "Dora", "Evan"} <= ents
  # Sentence-initial only (Then, The, It, Soon, She) or also seen lower-case: not names.
  assert not ents & {"Then", "The", "It", "Soon", "She", "Later"}
  assert "Mr" not in cloze_books.entity_words([[["and", "Mr", "Mr", "Mr"]]], 1)


def test_cloze_books_invariants():
  config = {"passage_sentences": 2, "validation_books": 1, "test_books": 1,
            "min_entity_count": 1, "seed": 0}
  splits, _, books_of = cloze_books.build_splits(corpus(), config)
  # No book in two splits, every book in one.
  names = [n for s in books_of.values() for n in s]
  assert sorted(names) == sorted(BOOK_LINES) and len(set(names)) == len(names)
  assert all(splits[s] for s in ("train", "validation", "test"))
  for examples in splits.values():
    for e in examples:
      assert e.answer in e.passage  # The answer occurs in the passage ...
      assert e.question.count(cloze.PLACEHOLDER) == 1  # ... and once as the blank.
      assert e.answer not in e.question
      # Anonymised: no capitalised name left; markers are @entity0..@entity{n-1}.
      tokens = e.passage + e.question
      assert not any(t[:1].isupper() for t in tokens)
      numbers = {cloze.entity_number(t) for t in tokens} - {None}
      assert numbers == set(range(len(numbers)))


def test_anonymisation_is_consistent_within_an_example():
  sentences = [s.split() for s in
               ["Alice met Bob .", "Bob left .", "then Alice waited for Bob ."]]
  examples = cloze_books.book_examples(sentences, frozenset({"Alice", "Bob"}), 2, (0, 0))
  # Both names of the question are in the passage: one example blanks each.
  assert len(examples) == 2
  for e in examples:
    alice, bob = e.passage[0], e.passage[2]
    assert alice != bob and e.passage[3:] == (".", bob, "left", ".")
    assert {alice, bob} == {"@entity0", "@entity1"}
  blank_bob, blank_alice = sorted(examples, key=lambda e: e.question[1] == "@placeholder")
  assert blank_bob.question == ("then", blank_bob.passage[0], "waited", "for",
                                "@placeholder", ".")
  assert blank_bob.answer == blank_bob.passage[2]
  assert blank_alice.question == ("then", "@placeholder", "waited", "for",
                                  blank_alice.passage[2], ".")
  assert blank_alice.answer == blank_alice.passage[0]


def test_synthetic_source_is_marked_and_solvable():
  ds = data.load("cloze", {"source": "synthetic", "num_entities": 10, "vocab_size": 60,
                           "max_passage_tokens": 40, "max_question_tokens": 6})
  assert ds.describe()["synthetic"] and "SYNTHETIC" in ds.notes
  a, vocab = ds.splits["train"], ds.info["vocabulary"]
  for i in range(20):  # The answer is the entity right after the question's cue word.
    cue = a["question"][i, 1]
    at = list(a["passage"][i]).index(cue)
    assert vocab[a["passage"][i, at + 1]] == f"@entity{a['answer'][i]}"


@pytest.mark.real_data("books", "gutenberg_tokenized.tar.gz")
def test_cloze_books_on_the_gutenberg_corpus(tmp_path):
  ds = data.load("cloze", {"source": "cloze_books", "cache_dir": str(tmp_path),
                           "num_entities": 40, "vocab_size": 10000,
                           "max_passage_tokens": 160, "max_question_tokens": 50})
  sizes = {s: ds.num_examples(s) for s in ds.splits}
  # 17 books give few questions: about 5k train, 0.9k validation, 2.7k test.
  assert sizes["train"] > 4000 and sizes["validation"] > 500 and sizes["test"] > 1000
  base = ds.info["baselines"]["validation"]
  assert base["chance_accuracy"] < base["most_frequent_candidate_accuracy"] < 0.9
  again = data.load("cloze", {"source": "cloze_books", "cache_dir": str(tmp_path),
                              "num_entities": 40, "vocab_size": 10000,
                              "max_passage_tokens": 160, "max_question_tokens": 50})
  np.testing.assert_array_equal(again.splits["train"]["passage"],
                                ds.splits["train"]["passage"])
  assert again.info["baselines"] == ds.info["baselines"]
