"""The book-corpus reader of lnorm.data.books on fixture books the tests write."""

import os
import tarfile
import zipfile

import numpy as np
import pytest

from lnorm.data import books
from lnorm.data import core
from lnorm.data import text

BOOK_A = [
    "Alice was tired . she had nothing to do ! ` what is the use ? '",
    "CHAPTER I. Down the Hole",
    "Mr. Smith said , `` come in . '' then he left .",
]
BOOK_B = ["one two . three four five six seven eight nine ten eleven twelve .",
          "a b . c d ."]


def write_books(folder, contents):
  os.makedirs(folder, exist_ok=True)
  for name, lines in contents.items():
    with open(os.path.join(folder, f"{name}.txt"), "w", encoding="utf-8") as f:
      f.write("\n".join(lines) + "\n\n")


def test_split_sentences_keeps_closing_quotes_and_abbreviations():
  split = books.split_sentences
  assert split("Mr. Smith said , `` come in . '' then he left .".split()) == [
      ["Mr.", "Smith", "said", ",", "``", "come", "in", ".", "''"],
      ["then", "he", "left", "."]]
  assert split("what ?! ) no ... yes".split()) == [["what", "?!", ")"], ["no", "..."],
                                                  ["yes"]]
  assert split([]) == []


def test_book_sentences_run_on_across_lines_and_lowercase():
  book = books.Book("a", tuple(BOOK_A))
  sentences = books.book_sentences(book, lowercase=True)
  assert sentences[:4] == [["alice", "was", "tired", "."], ["she", "had", "nothing", "to", "do", "!"],
                           ["`", "what", "is", "the", "use", "?", "'"],
                           ["chapter", "i.", "down", "the", "hole"]]
  assert len(sentences) == 6
  assert books.book_sentences(book, lowercase=False)[0][0] == "Alice"


def test_triple_index_drops_long_sentences_without_skipping_over_them():
  # Sentence 3 is too long: triples centred on 2, 3 and 4 all include it.
  lengths = [2, 3, 4, 30, 5, 6, 7]
  np.testing.assert_array_equal(books.triple_index(lengths, 30), [1, 5])
  np.testing.assert_array_equal(books.triple_index([1, 2], 30), [])


def test_triples_never_cross_a_book_boundary_and_end_with_eos():
  s = lambda *w: list(w)
  book1 = [s("a"), s("b", "b"), s("c")]
  book2 = [s("d"), s("e"), s("f"), s("g")]
  vocab = text.Vocabulary.from_counts(text.count_words(book1 + book2), 20, (text.EOS,))
  out = books.triples([book1, book2], vocab, max_words=4)
  decoded = [[vocab.decode(out["tokens"][i, k]) for k in range(3)] for i in range(3)]
  eos = text.EOS
  assert decoded == [[["a", eos], ["b", "b", eos], ["c", eos]],
                     [["d", eos], ["e", eos], ["f", eos]],
                     [["e", eos], ["f", eos], ["g", eos]]]
  np.testing.assert_array_equal(out["length"], [[2, 3, 2], [2, 2, 2], [2, 2, 2]])
  assert out["tokens"].shape == (3, 3, 4) and out["tokens"][0, 0, 2:].tolist() == [0, 0]
  # token_weight: 1 / the mean number of previous + next target tokens (4).
  np.testing.assert_allclose(out["token_weight"], 1 / 4)


def test_files_source_reads_a_folder_and_an_archive_alike(tmp_path):
  contents = {"b_book": BOOK_B * 3, "a_book": BOOK_A * 3, "c_book": BOOK_A + BOOK_B}
  write_books(tmp_path / "dir" / "books", contents)
  config = {"data_dir": str(tmp_path / "dir"), "validation_books": 1, "vocab_size": 12,
            "max_words": 10, "seed": 0}
  from_dir = books.load_files(config, False)
  archive = tmp_path / "tar" / "books" / "corpus.tar.gz"
  archive.parent.mkdir(parents=True)
  with tarfile.open(archive, "w:gz") as tf:
    for name in ("c_book", "a_book", "b_book"):  # Not in name order.
      tf.add(tmp_path / "dir" / "books" / f"{name}.txt", arcname=f"./{name}.txt")
  from_tar = books.load_files({**config, "data_dir": str(tmp_path / "tar")}, False)
  for split in ("train", "validation"):
    for k in from_dir.splits[split]:
      np.testing.assert_array_equal(from_dir.splits[split][k], from_tar.splits[split][k])
  info = from_dir.info
  assert info["vocab_size"] == 12 and len(info["vocabulary"]) == 12
  assert info["vocabulary"][:3] == ("<pad>", "<oov>", "<eos>") and info["eos_id"] == 2
  assert set(info["train_books"]) | set(info["validation_books"]) == set(contents)
  assert len(info["validation_books"]) == 1
  # The vocabulary counts the training books only.
  train_words = set()
  for name in info["train_books"]:
    for sentence in books.book_sentences(books.Book(name, tuple(contents[name])), True):
      train_words.update(sentence)
  assert set(info["vocabulary"][3:]) <= train_words
  # Sentences of 10 or more words ("one two ... twelve .") never enter a triple.
  assert from_dir.splits["train"]["length"].max() <= 10
  assert from_dir.source == "files" and "validation books" in from_dir.notes


def test_zip_archive(tmp_path):
  (tmp_path / "books").mkdir()
  with zipfile.ZipFile(tmp_path / "books" / "c.zip", "w") as zf:
    zf.writestr("x/one.txt", "\n".join(BOOK_A))
    zf.writestr("x/two.txt", "\n".join(BOOK_B))
    zf.writestr("x/README", "not a book")
  read = books.read_books(str(tmp_path / "books" / "c.zip"))
  assert [b.name for b in read] == ["one", "two"] and read[1].lines == tuple(BOOK_B)


def test_missing_corpus_lists_where_it_looked(tmp_path):
  with pytest.raises(core.DatasetNotFoundError, match="books") as e:
    books.load_files({"data_dir": str(tmp_path)}, False)
  assert str(tmp_path / "books") in str(e.value)


@pytest.mark.parametrize("payload, problem", [
    (b"\xff\xfe not utf-8", "not UTF-8"),
    (b"\n\n", "no non-empty"),
])
def test_malformed_books_are_named(tmp_path, payload, problem):
  (tmp_path / "books").mkdir()
  (tmp_path / "books" / "bad.txt").write_bytes(payload)
  with pytest.raises(core.MalformedDataError, match=problem):
    books.load_files({"data_dir": str(tmp_path)}, False)


def test_corrupt_archive_and_bad_validation_count(tmp_path):
  (tmp_path / "books").mkdir()
  (tmp_path / "books" / "x.tar.gz").write_bytes(b"garbage")
  with pytest.raises(core.MalformedDataError, match="not a readable"):
    books.load_files({"data_dir": str(tmp_path)}, False)
  with pytest.raises(core.DataError, match="validation_books"):
    books.build([books.Book("a", tuple(BOOK_A))], {"validation_books": 1}, "files", "x")


def test_synthetic_source_is_labelled_and_deterministic():
  a = books.load_synthetic({"vocab_size": 40, "max_words": 12}, False)
  b = books.load_synthetic({"vocab_size": 40, "max_words": 12}, False)
  assert a.source == "synthetic" and "SYNTHETIC" in a.notes
  np.testing.assert_array_equal(a.splits["train"]["tokens"], b.splits["train"]["tokens"])
  assert a.num_examples("train") > 50 and a.num_examples("validation") > 5


def test_vocabulary_specials_and_save_load_roundtrip(tmp_path):
  vocab = text.Vocabulary.from_counts({"x": 3, "y": 2, "z": 1}, 3, specials=(text.EOS,))
  assert vocab.words == ["<pad>", "<oov>", "<eos>", "x", "y"]
  vocab.save(tmp_path / "v.txt")
  assert text.Vocabulary.load(tmp_path / "v.txt").words == vocab.words
  (tmp_path / "bad.txt").write_text("x\ny\n")
  with pytest.raises(ValueError, match="not a saved vocabulary"):
    text.Vocabulary.load(tmp_path / "bad.txt")
