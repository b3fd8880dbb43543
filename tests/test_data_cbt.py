"""The Children's Book Test format (lnorm.data.cloze.cbt) on fixture files the tests
write, its mapping onto the reader's arrays, and the CBT-style task built from books
(lnorm.data.cloze.books, data.source=cbt_books)."""

import os

import numpy as np
import pytest

from lnorm import data
from lnorm.data import books as data_books
from lnorm.data.cloze import books as cloze_books
from lnorm.data.cloze import cbt
from lnorm.data.core import DataError, DatasetNotFoundError, MalformedDataError
from lnorm.errors import ConfigError

NAMES = ["Anna", "Ben", "Cora", "Dan", "Eve", "Finn", "Gus", "Hal", "Ida", "Jo"]


def example(answer="Ben", query="then XXXXX smiled at Anna .", filler="it rained ."):
  """A CBT example: Anna in sentences 1 and 19, Ben in 20, Cora in 5 (the other
  sentences are filler)."""
  context = [filler.split() for _ in range(20)]
  context[0] = "Anna came home .".split()
  context[4] = "Cora waited .".split()
  context[18] = "Anna sat down .".split()
  context[19] = "Ben came in too .".split()
  return cbt.CbtExample(tuple(map(tuple, context)), tuple(query.split()), answer,
                        tuple(sorted(NAMES)))


def write(folder, word_type="NE", train=None, valid=None, test=None):
  os.makedirs(folder, exist_ok=True)
  for name, examples in (("train", train), ("valid_2000ex", valid), ("test_2500ex", test)):
    if examples is not None:
      cbt.write_file(os.path.join(folder, f"cbtest_{word_type}_{name}.txt"), examples)


def test_the_format_round_trips():
  e = example()
  text = cbt.format_example(e)
  lines = text.splitlines()
  assert len(lines) == 21 and lines[0] == "1 Anna came home ." and lines[1] == "2 it rained ."
  assert lines[20] == ("21 then XXXXX smiled at Anna .\tBen\t\t"
                       "Anna|Ben|Cora|Dan|Eve|Finn|Gus|Hal|Ida|Jo")
  assert cbt.parse(text + "\n" + text + "\n", "f.txt") == [e, e]


@pytest.mark.parametrize("edit, problem", [
    # The second example starts at line 23 (21 lines and a blank line before it).
    (lambda lines: lines[:22 + 5] + lines[22 + 6:], "example at line 23 has 20 lines"),
    (lambda lines: lines[:22 + 20] + [lines[42].replace("XXXXX", "Ben")] + lines[43:],
     "line 43 .*query holds 0 XXXXX"),
    # Two blanks, and nothing else wrong (issue 45: a query malformed one way only).
    (lambda lines: lines[:22 + 20] + [lines[42].replace("smiled", "XXXXX")] + lines[43:],
     "line 43 .*query holds 2 XXXXX, not one"),
    (lambda lines: lines[:42] + [lines[42].replace("\tBen\t", "\tZed\t")] + lines[43:],
     "line 43 .*answer 'Zed' is not among the candidates"),
    (lambda lines: lines[:42] + [lines[42].split("\t")[0]] + lines[43:],
     "line 43 .*holds 0 tabs"),
    (lambda lines: lines[:24] + ["7 it rained ."] + lines[25:],
     "line 25 .*starts with '7', not '3 '"),
])
def test_a_malformed_file_names_the_file_and_the_line(tmp_path, edit, problem):
  lines = (cbt.format_example(example()) + "\n" + cbt.format_example(example())).split("\n")
  assert lines[21] == "" and lines[22].startswith("1 ") and lines[42].startswith("21 ")
  path = tmp_path / "cbt" / "cbtest_NE_train.txt"
  write(str(tmp_path / "cbt"), valid=[example()])
  path.write_text("\n".join(edit(lines)))
  with pytest.raises(MalformedDataError, match=problem) as e:
    data.load("cloze", {"source": "cbt", "data_dir": str(tmp_path), "use_cache": False})
  assert "cbtest_NE_train.txt" in str(e.value)


def load(tmp_path, **fields):
  return data.load("cloze", {"source": "cbt", "data_dir": str(tmp_path),
                             "use_cache": False, "vocab_size": 60, **fields})


def test_candidates_become_the_entities(tmp_path):
  ben = example()
  anna = example("Anna", "then Ben smiled at XXXXX .")
  write(str(tmp_path / "cbt"), train=[ben, anna], valid=[ben], test=[anna])
  ds = load(tmp_path)
  assert ds.info["num_entities"] == 10 and ds.info["word_type"] == "NE"
  vocab, a = ds.info["vocabulary"], ds.splits["train"]
  assert vocab[:4] == ("<pad>", "<oov>", "@placeholder", "@entity0")
  assert a["candidate_mask"].shape == (2, 10) and a["candidate_mask"].all()
  for i, e in enumerate((ben, anna)):
    passage = [vocab[t] for t in a["passage"][i, :a["passage_length"][i]]]
    question = [vocab[t] for t in a["question"][i, :a["question_length"][i]]]
    names = {w: m for w, m in zip(sum(e.context, ()), passage) if w in NAMES}
    # Every occurrence of a candidate is its marker; other words are lower-cased.
    assert set(names) == {"Anna", "Ben", "Cora"}
    assert len(set(names.values())) == 3 and all(m.startswith("@entity") for m in names.values())
    assert [w for w in passage if not w.startswith("@")][:3] == ["came", "home", "."]
    assert question.count("@placeholder") == 1 and question[0] == "then"
    assert f"@entity{a['answer'][i]}" == names[e.answer]
  # Hand-computed baselines: Anna twice in each passage, Ben once: the most frequent
  # candidate answers the second question only.
  assert ds.info["baselines"]["train"] == {"most_frequent_candidate_accuracy": 0.5,
                                           "chance_accuracy": pytest.approx(0.1)}
  assert ds.info["num_questions"] == {"train": 2, "validation": 1, "test": 1}
  assert "train: 2 questions" in ds.notes and "chance 0.100" in ds.notes


PREPOSITIONS = ("at", "by", "for", "from", "in", "of", "on", "to", "up", "with")


def test_a_candidate_matches_whatever_its_case(tmp_path):
  # The context's only "in" opens a sentence: "In the morning ...". The answer "in"
  # is still in the passage, so the example is kept and "In" is its marker.
  context = [("it", "rained", ".")] * 20
  context[3] = ("In", "the", "morning", "it", "rained", ".")
  e = cbt.CbtExample(tuple(context), tuple("she sat XXXXX the garden .".split()), "in",
                     PREPOSITIONS)
  write(str(tmp_path / "cbt"), "P", train=[e], valid=[e])
  ds = load(tmp_path, word_type="P")
  a, vocab = ds.splits["validation"], ds.info["vocabulary"]
  passage = [vocab[t] for t in a["passage"][0, :a["passage_length"][0]]]
  assert ds.num_examples("validation") == 1
  assert passage[9:12] == [f"@entity{a['answer'][0]}", "the", "morning"]
  assert "In" not in vocab and "in" not in vocab
  # Candidates equal but for case are one entity: 10 listed, 9 distinct.
  twin = cbt.CbtExample(tuple(context), e.query, "in", PREPOSITIONS[:9] + ("In",))
  cloze = cbt.to_cloze(twin, 20, np.random.default_rng(0))
  assert len(cloze.candidates) == 9 and cloze.answer in cloze.candidates


def test_numbering_is_random_per_example(tmp_path):
  write(str(tmp_path / "cbt"), train=[example()] * 40, valid=[example()])
  answers = load(tmp_path).splits["train"]["answer"]
  assert len(set(answers.tolist())) > 5  # Ben's marker is not always the same number.


def test_context_sentences_keeps_the_last_ones_and_counts_the_unanswerable(tmp_path):
  ben = example()
  anna_only_early = example("Cora", "then XXXXX smiled .")  # Cora is in sentence 5.
  write(str(tmp_path / "cbt"), train=[ben, anna_only_early], valid=[ben])
  ds = load(tmp_path, context_sentences=2)
  a, vocab = ds.splits["train"], ds.info["vocabulary"]
  assert ds.num_examples("train") == 1
  words = [vocab[t] for t in a["passage"][0, :a["passage_length"][0]]]
  assert len(words) == 4 + 5 and words[1:] == ["sat", "down", ".", words[4], "came", "in",
                                                "too", "."]
  assert "1 without the answer in the passage dropped" in ds.notes
  with pytest.raises(DataError, match="context_sentences"):
    load(tmp_path, context_sentences=21)


def test_an_evaluation_split_keeps_and_counts_its_unanswerable_questions(tmp_path):
  anna = example("Anna", "then Ben smiled at XXXXX .")
  cora = example("Cora", "then XXXXX smiled .")  # Cora is only in sentence 5.
  # Its last two context sentences name no candidate: the most frequent candidate
  # (all counts 0) is the first listed, Anna, the answer, but cannot be found.
  no_names = cbt.CbtExample(anna.context[:18] + (("it", "rained", "."),) * 2, anna.query,
                            "Anna", anna.candidates)
  write(str(tmp_path / "cbt"), train=[anna, cora], valid=[anna, cora, cora],
        test=[no_names])
  ds = load(tmp_path, context_sentences=2)
  assert ds.info["num_questions"] == {"train": 1, "validation": 3, "test": 1}
  assert ds.info["unanswerable"] == {"train": 0, "validation": 2, "test": 1}
  np.testing.assert_array_equal(ds.splits["validation"]["answerable"], [True, False, False])
  np.testing.assert_array_equal(ds.splits["train"]["answerable"], [True])
  assert ds.splits["validation"]["answer"].dtype == np.int32
  # Anna (twice in sentences 19-20 against Ben once) is right on the first only.
  assert ds.info["baselines"]["validation"]["most_frequent_candidate_accuracy"] == (
      pytest.approx(1 / 3))
  assert ds.info["baselines"]["test"]["most_frequent_candidate_accuracy"] == 0.0
  assert ds.info["baselines"]["validation"]["chance_accuracy"] == pytest.approx(0.1 / 3)
  assert ("validation: 3 questions (0 over the limits, 2 without the answer in the "
          "passage kept and scored wrong)") in ds.notes
  assert "train: 1 questions (0 over the limits, 1 without the answer in the passage dropped)" in ds.notes


def test_an_evaluation_question_over_the_limits_is_cut_and_scored_wrong(tmp_path):
  long_one = example("Anna", "then Ben smiled at XXXXX .")  # 3 * 16 + 16 = 64 tokens.
  short = example(filler="it .")  # 2 * 16 + 4 + 3 + 4 + 5 tokens.
  write(str(tmp_path / "cbt"), train=[short], valid=[long_one, short])
  ds = load(tmp_path, max_passage_tokens=60)
  a = ds.splits["validation"]
  assert a["passage"].shape[1] == 60 and a["passage_length"].tolist() == [60, 48]
  assert a["answerable"].tolist() == [False, True]
  assert "validation: 2 questions (1 over the limits kept" in ds.notes
  assert ds.info["unanswerable"]["validation"] == 1


def test_question_window_keeps_the_words_around_the_blank(tmp_path):
  write(str(tmp_path / "cbt"), train=[example(query="a b then XXXXX smiled at Anna .")],
        valid=[example(query="XXXXX smiled .")])
  ds = load(tmp_path, question_window=2)
  vocab = ds.info["vocabulary"]
  for split, expected in (("train", ["b", "then", "@placeholder", "smiled", "at"]),
                          ("validation", ["@placeholder", "smiled", "."])):
    a = ds.splits[split]
    assert [vocab[t] for t in a["question"][0, :a["question_length"][0]]] == expected
  assert "questions cut to 2 tokens either side of the blank" in ds.notes


def test_word_type_picks_the_files_and_the_layouts(tmp_path):
  write(str(tmp_path / "CBTest" / "data"), "CN", train=[example()], valid=[example()])
  assert load(tmp_path, word_type="CN").info["files"] == {
      "train": "cbtest_CN_train.txt", "validation": "cbtest_CN_valid_2000ex.txt"}
  with pytest.raises(DatasetNotFoundError, match="cbtest_NE_"):
    load(tmp_path)
  with pytest.raises(DataError, match="word_type must be one of"):
    load(tmp_path, word_type="XX")


# --- the CBT-style task built from books ---------------------------------------------------


def test_cbt_examples_by_hand():
  # 20 context sentences naming Anna (twice) and Ben .. Ida, then a query naming Ben
  # twice, Anna once and Jo once: only Anna can be blanked (Jo is not in the
  # context). The 9 others, Ben .. Ida from the context and Jo from the query, are
  # all the candidates there are.
  sentences = [[n, "ran", "."] for n in NAMES[:9]] + [["Anna", "hid", "."]]
  sentences += [["it", "rained", "."]] * 10
  sentences += [["Ben", "saw", "Anna", "and", "Ben", "with", "Jo", "."]]
  (only,) = cloze_books.cbt_examples(sentences, {"NE": frozenset(NAMES)},
                                     np.random.default_rng(0))
  assert only.context == tuple(map(tuple, sentences[:20]))
  assert only.query == ("Ben", "saw", "XXXXX", "and", "Ben", "with", "Jo", ".")
  assert only.answer == "Anna" and only.candidates == tuple(sorted(NAMES))


def test_cbt_examples_draw_candidates_from_the_context_and_the_query_only():
  # Without Jo in the query, the passage offers 8 others: no question, though Jo is
  # in the book (sentence 22); a candidate from outside would have filled the list.
  sentences = [[n, "ran", "."] for n in NAMES[:9]] + [["it", "rained", "."]] * 11
  sentences += [["then", "Anna", "hid", "."], ["Jo", "hid", "."]]
  assert cloze_books.cbt_examples(sentences, {"NE": frozenset(NAMES)},
                                  np.random.default_rng(0)) == []
  # Eleven entities in the context: 9 of the 10 others, drawn at random.
  extra = NAMES + ["Kit"]
  sentences = [[n, "ran", "."] for n in extra] + [["it", "rained", "."]] * 9
  sentences += [["then", "Anna", "hid", "."]]
  drawn = {c for seed in range(20) for c in cloze_books.cbt_examples(
      sentences, {"NE": frozenset(extra)}, np.random.default_rng(seed))[0].candidates}
  assert drawn == set(extra)


def test_cbt_examples_skip_a_book_too_small_for_ten_candidates():
  sentences = [["Anna", "ran", "."]] * 20 + [["then", "Anna", "slept", "."]]
  assert cloze_books.cbt_examples(sentences, {"NE": frozenset(NAMES)},
                                  np.random.default_rng(0)) == []


def book(k, rng):
  """A book of 60 sentences, each naming two of ten characters of its own: sentence j
  names character j mod 10 and another drawn at random, so every 20 sentences name
  all ten."""
  names = [f"{n}{chr(97 + k)}" for n in NAMES]
  lines = []
  for j in range(60):
    other = (j + 1 + rng.integers(9)) % 10
    lines.append(f"then {names[j % 10]} met {names[other]} by the "
                 f"{rng.choice(['sea', 'hill'])} .")
  return "\n".join(lines) + "\n"


def write_books(folder, count=6):
  os.makedirs(folder)
  rng = np.random.default_rng(0)
  for k in range(count):
    with open(os.path.join(folder, f"book{k}.txt"), "w") as f:
      f.write(book(k, rng))


def test_cbt_books_writes_the_task_into_the_cache_and_reads_it_back(tmp_path):
  write_books(str(tmp_path / "data" / "books"))
  before = sorted(os.walk(tmp_path / "data"))
  config = {"source": "cbt_books", "data_dir": str(tmp_path / "data"),
            "cache_dir": str(tmp_path / "cache"), "vocab_size": 200,
            "validation_books": 1, "test_books": 1, "min_entity_count": 1}
  ds = data.load("cloze", config)
  assert sorted(os.walk(tmp_path / "data")) == before  # Nothing written into the data.
  (folder,) = [f for f in os.listdir(tmp_path / "cache") if f.startswith("cbt-books-")]
  files = cbt.split_files(str(tmp_path / "cache" / folder / "cbt"), "NE")
  written = {s: cbt.read_file(p) for s, p in files.items()}
  # One question per sentence after the first 20 (each names 2 entities in context).
  assert {s: len(e) for s, e in written.items()} == {"train": 160, "validation": 40,
                                                      "test": 40}
  assert os.path.basename(files["validation"]) == "cbtest_NE_valid_40ex.txt"
  assert ds.info["num_questions"] == {"train": 160, "validation": 40, "test": 40}
  for examples in written.values():
    for e in examples:
      context = {w for s in e.context for w in s}
      assert e.answer in context and e.query.count("XXXXX") == 1
      assert e.answer not in e.query and len(set(e.candidates)) == 10
      suffix = e.answer[-1]  # Every candidate is a character of the same book.
      assert all(c[-1] == suffix for c in e.candidates)
      assert all(c in context or c in e.query for c in e.candidates)
  # Splits by book.
  books_of = {s: {e.answer[-1] for e in ex_} for s, ex_ in written.items()}
  assert len(books_of["validation"]) == len(books_of["test"]) == 1
  assert not books_of["train"] & (books_of["validation"] | books_of["test"])
  # The baselines of the anonymised arrays, counted again on the written words.
  for split, examples in written.items():
    hits = []
    for e in examples:
      words = [w for s in e.context for w in s]
      count = {c: words.count(c) for c in e.candidates}
      top = max(count.values())
      hits.append(next(w for w in words if count.get(w) == top) == e.answer)
    base = ds.info["baselines"][split]
    assert base["most_frequent_candidate_accuracy"] == pytest.approx(np.mean(hits))
    assert base["chance_accuracy"] == pytest.approx(0.1)
  # A second load reads the written files again instead of rewriting them.
  stamp = os.stat(files["train"]).st_mtime_ns
  again = data.load("cloze", config)
  assert os.stat(files["train"]).st_mtime_ns == stamp
  np.testing.assert_array_equal(again.splits["train"]["passage"],
                                ds.splits["train"]["passage"])


def test_cbt_books_without_the_cache_leaves_nothing_behind(tmp_path):
  write_books(str(tmp_path / "data" / "books"), count=4)
  ds = data.load("cloze", {"source": "cbt_books", "data_dir": str(tmp_path / "data"),
                           "cache_dir": str(tmp_path / "cache"), "use_cache": False,
                           "vocab_size": 200, "validation_books": 1, "test_books": 1,
                           "min_entity_count": 1})
  assert ds.num_examples("train") == 80 and not os.path.exists(tmp_path / "cache")
  with pytest.raises(DataError, match="word_classes, not word_type="):
    data.load("cloze", {"source": "cbt_books", "data_dir": str(tmp_path / "data"),
                        "word_type": "CN"})


@pytest.mark.real_data("books", "gutenberg_tokenized.tar.gz")
def test_cbt_books_on_the_gutenberg_corpus(tmp_path):
  ds = data.load("cloze", {"source": "cbt_books", "cache_dir": str(tmp_path),
                           "vocab_size": 10000, "max_passage_tokens": 1200,
                           "max_question_tokens": 120})
  sizes = ds.info["num_questions"]
  # 17 books, one question per sentence whose context and query name 10 entities:
  # 2,024 train questions (1,948 within the limits), 557 validation, 318 test.
  assert sizes == {"train": 1948, "validation": 557, "test": 318}
  assert ds.info["unanswerable"] == {"train": 0, "validation": 23, "test": 6}
  for split, base in ds.info["baselines"].items():
    answerable = 1 - ds.info["unanswerable"][split] / sizes[split]
    assert base["chance_accuracy"] == pytest.approx(0.1 * answerable)
    assert 0.2 < base["most_frequent_candidate_accuracy"] < 0.25
  assert ds.splits["train"]["candidate_mask"].sum(1).min() == 10


# --- cbt_books' options: passage length, word classes, blanks per query -------------------

NOUNS = ["cup", "box", "hat", "pot", "jar", "mat", "pen", "rug", "fan", "net", "bag", "can"]


def noun_book(k):
  """A book of 40 sentences of 12 tokens: sentence j names the character of its own
  book and the nouns 3j .. 3j+2 (mod 12) of the book's twelve, each after "the", so
  any 4 sentences in a row name all twelve and every noun of a sentence is in the 4
  before it."""
  letter = chr(97 + k)
  nouns = [n + letter for n in NOUNS]
  lines = [f"then {NAMES[k]}{letter} saw the {nouns[3 * j % 12]} , the "
           f"{nouns[(3 * j + 1) % 12]} and the {nouns[(3 * j + 2) % 12]} ."
           for j in range(40)]
  return "\n".join(lines) + "\n"


def write_noun_books(folder, count=5):
  os.makedirs(folder)
  for k in range(count):
    with open(os.path.join(folder, f"book{k}.txt"), "w") as f:
      f.write(noun_book(k))


def noun_config(tmp_path, **options):
  return {"source": "cbt_books", "data_dir": str(tmp_path / "data"), "use_cache": False,
          "vocab_size": 200, "validation_books": 1, "test_books": 1,
          "min_entity_count": 1, "word_classes": "CN", "context_sentences": 4,
          **options}


def written_noun_task(tmp_path, **options):
  """The task's examples per split, as written, for the noun books."""
  write_noun_books(str(tmp_path / "data" / "books"))
  corpus = data_books.read_books(str(tmp_path / "data" / "books"))
  return cloze_books.cbt_splits(corpus, noun_config(tmp_path, **options))[0]


def test_common_nouns_follow_determiners_and_modifiers_do_not():
  sentences = [["the", "door", "opened", "."], ["a", "little", "door", "shut", "."],
               ["the", "little", "girl", "ran", "."], ["her", "girl", "sang", "."],
               ["she", "sang", "at", "the", "door", "."]] * 5
  assert cloze_books.common_nouns([sentences]) == {"door", "girl"}
  # Seen 4 times only: not a word the task may blank.
  assert cloze_books.common_nouns([sentences[:5]]) == frozenset()


def test_every_qualifying_word_of_a_query_is_a_question(tmp_path):
  every = written_noun_task(tmp_path, blanks_per_query="every")
  one = written_noun_task(tmp_path / "again", blanks_per_query="one")
  # 20 queries a book (sentences 21 .. 40), 3 nouns each; 3 training books.
  assert {s: len(e) for s, e in every.items()} == {"train": 180, "validation": 60,
                                                    "test": 60}
  assert {s: len(e) for s, e in one.items()} == {"train": 60, "validation": 20,
                                                  "test": 20}
  queries = {}
  for e in every["train"]:
    queries.setdefault(e.query.index("XXXXX"), []).append(e)
  assert sorted(queries) == [4, 7, 10]  # Each of the three nouns in turn.


def test_answers_and_candidates_come_from_the_last_context_sentences(tmp_path):
  for split, examples in written_noun_task(tmp_path, blanks_per_query="every").items():
    for e in examples:
      window = {w for s in e.context[-4:] for w in s}
      assert e.answer in e.candidates and len(set(e.candidates)) == 10
      assert e.answer in window
      assert all(c in window or c in e.query for c in e.candidates)
      assert all(c[:-1] in NOUNS for c in e.candidates)  # Common nouns only.
      # One book: every word of the context, the query and the candidates.
      letters = {w[-1] for s in (*e.context, e.query) for w in s if w[:-1] in NOUNS}
      assert letters == {c[-1] for c in e.candidates}
      assert len(letters) == 1


def test_no_question_straddles_two_books_or_two_splits(tmp_path):
  task = written_noun_task(tmp_path, blanks_per_query="every")
  books_of = {s: {c[-1] for e in examples for c in e.candidates}
              for s, examples in task.items()}
  assert len(books_of["validation"]) == len(books_of["test"]) == 1
  assert len(books_of["train"]) == 3
  assert not books_of["train"] & (books_of["validation"] | books_of["test"])
  # The first 20 sentences of a book are context only: 20 queries a book.
  for examples in task.values():
    for e in examples:
      assert e.context[0][:2] == ("then", e.context[0][1])
      assert len({w[-1] for s in e.context for w in s if w[:-1] in NOUNS}) == 1


def test_a_window_too_small_for_ten_candidates_makes_no_question(tmp_path):
  # 3 sentences name 9 nouns: with the query's 3 again, 8 others for each blank.
  task = written_noun_task(tmp_path, context_sentences=3)
  assert {s: len(e) for s, e in task.items()} == {"train": 0, "validation": 0,
                                                  "test": 0}


def test_the_reader_reads_exactly_the_4_sentences_before_the_query(tmp_path):
  write_noun_books(str(tmp_path / "data" / "books"))
  ds = data.load("cloze", noun_config(tmp_path, blanks_per_query="every"))
  assert ds.info["num_questions"] == {"train": 180, "validation": 60, "test": 60}
  assert ds.info["context_sentences"] == 4 and ds.info["word_type"] == "CN"
  words = np.asarray(ds.info["vocabulary"])
  for split, arrays in ds.splits.items():
    assert np.all(arrays["passage_length"] == 4 * 12)  # 4 sentences of 12 tokens.
    passages = words[arrays["passage"][:, :48]]
    # Sentence starts at 0, 12, 24, 36 and nowhere else.
    starts = [list(np.flatnonzero(p == "then")) for p in passages]
    assert all(s == [0, 12, 24, 36] for s in starts), split
    assert np.all(arrays["candidate_mask"].sum(1) == 10)
    rows = np.arange(len(arrays["answer"]))
    assert np.all(arrays["candidate_mask"][rows, arrays["answer"]])
    # Every answer is in its passage.
    answer_ids = arrays["answer"] + 3
    assert all(a in p for a, p in zip(answer_ids, arrays["passage"]))


def test_both_word_classes_blank_names_and_nouns(tmp_path):
  # Named entities need 10 in the window: with one name a sentence, only over 20
  # sentences; common nouns within 4.
  task = written_noun_task(tmp_path, word_classes="NE,CN", context_sentences=20,
                           blanks_per_query="every")
  kinds = {e.answer[0].isupper() for e in task["train"]}
  assert kinds == {False}  # One name per book: never 10 names, only nouns.
  for e in task["train"]:
    assert all(c[:-1] in NOUNS for c in e.candidates)


def top_up_examples(nouns=6, top_up=True, seed=0):
  """The examples of 20 context sentences, the first naming 7 people and the last 4
  Anna, Ben, Cora and ``nouns`` nouns, then a query naming Anna, the first noun and
  "can", a noun only the query holds."""
  context = [NAMES[3:] + ["."]] + [["it", "rained", "."]] * 15 + [
      ["Anna", "met", "Ben", "."], ["Cora", "saw", "the", NOUNS[0], "."],
      [w for n in NOUNS[1:4] for w in ("the", n)] + ["."],
      [w for n in NOUNS[4:nouns] for w in ("the", n)] + ["."]]
  query = ["then", "Anna", "shut", "the", NOUNS[0], "and", "the", "can", "."]
  classes = {"NE": frozenset(NAMES), "CN": frozenset(NOUNS)}
  return cloze_books.cbt_examples(context + [query], classes, np.random.default_rng(seed),
                                  4, every_blank=True, top_up=top_up)


def test_top_up_fills_a_short_class_from_the_other_class_of_the_passage():
  # 3 names and 7 nouns in the 4 sentences and the query: neither class offers 9
  # others; the 7 names of sentence 1 are outside the passage.
  assert top_up_examples(top_up=False) == []
  name, noun = top_up_examples()
  names, nouns = {"Anna", "Ben", "Cora"}, {*NOUNS[:6], "can"}
  # Anna: Ben and Cora, topped up with the 7 nouns; the cup: 6 nouns and 3 names.
  assert name.answer == "Anna" and set(name.candidates) == names | nouns
  assert noun.answer == NOUNS[0] and set(noun.candidates) == names | nouns
  assert name.query[1] == cbt.BLANK and noun.query[4] == cbt.BLANK


def test_top_up_makes_no_question_when_both_classes_fall_short():
  # 3 names and 6 nouns: 8 others for either blank.
  assert top_up_examples(nouns=5) == []


def test_top_up_leaves_a_blank_with_nine_of_its_class_as_the_cbt_draws_it():
  # Ten names in the 4 sentences: the name blanks draw from names only, and
  # identically with and without top_up.
  context = [["it", "rained", "."]] * 16 + [NAMES[:3] + ["."], NAMES[3:6] + ["."],
                                            NAMES[6:] + ["."], ["the", "door", "."]]
  query = ["then", "Anna", "came", "."]
  classes = {"NE": frozenset(NAMES), "CN": frozenset(["door"])}
  for seed in range(5):
    draws = [cloze_books.cbt_examples(context + [query], classes,
                                      np.random.default_rng(seed), 4, True, top_up)
             for top_up in (False, True)]
    assert draws[0] == draws[1] and len(draws[0]) == 1
    assert set(draws[0][0].candidates) == set(NAMES)


def test_top_up_draws_only_as_many_as_are_short():
  # 3 names and 11 nouns: the name blank takes 6 of the 11 nouns, varying by seed,
  # and the door blank its 10 other nouns' draw, never a name.
  context = [["it", "rained", "."]] * 16 + [
      ["Anna", "met", "Ben", "."], ["Cora", "saw", "the", NOUNS[0], "."],
      [w for n in NOUNS[1:6] for w in ("the", n)] + ["."],
      [w for n in NOUNS[6:11] for w in ("the", n)] + ["."]]
  query = ["then", "Anna", "shut", "the", NOUNS[0], "."]
  classes = {"NE": frozenset(NAMES), "CN": frozenset(NOUNS)}
  drawn = set()
  for seed in range(20):
    name, noun = cloze_books.cbt_examples(context + [query], classes,
                                          np.random.default_rng(seed), 4, True, True)
    assert len(set(name.candidates) & set(NAMES)) == 3
    assert len(set(name.candidates) & set(NOUNS)) == 7
    assert set(noun.candidates) <= set(NOUNS[:11])
    drawn |= set(name.candidates)
  assert drawn == {"Anna", "Ben", "Cora", *NOUNS[:11]}


def test_top_up_task_is_written_and_described(tmp_path):
  write_noun_books(str(tmp_path / "data" / "books"))
  options = {"word_classes": "NE,CN", "blanks_per_query": "every"}
  # Each book names one character: its name blanks have no other name, so they are
  # questions only when topped up with the window's 12 nouns (every query: 3 nouns
  # and the name).
  plain = data.load("cloze", noun_config(tmp_path, **options))
  assert plain.info["num_questions"] == {"train": 180, "validation": 60, "test": 60}
  ds = data.load("cloze", noun_config(tmp_path, candidate_pool="top_up", **options))
  assert ds.info["num_questions"] == {"train": 240, "validation": 80, "test": 80}
  assert "candidates topped up from the other word classes" in ds.notes


@pytest.mark.parametrize("options, message", [
    ({"word_classes": "NE,V"}, "word_classes='NE,V'; give NE, CN or NE,CN"),
    ({"word_classes": "CN,CN"}, "word_classes='CN,CN'"),
    ({"context_sentences": 0}, r"context_sentences=0; give an integer in \[1, 20\]"),
    ({"context_sentences": 21}, "context_sentences=21"),
    ({"blanks_per_query": "all"}, "blanks_per_query='all'; give one of one, every"),
    ({"candidate_pool": "any"}, "candidate_pool='any'; give one of class, top_up"),
    ({"candidate_pool": "top_up"}, "word_classes='CN' names one; set"),
])
def test_bad_task_options_name_the_fix(tmp_path, options, message):
  write_noun_books(str(tmp_path / "data" / "books"))
  with pytest.raises(ConfigError, match=message):
    data.load("cloze", noun_config(tmp_path, **options))
