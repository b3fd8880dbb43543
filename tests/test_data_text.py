"""Tokenizer, vocabulary and padding of lnorm.data.text."""

import numpy as np
import pytest

from lnorm.data import text


def test_tokenize_lowercases_strips_html_breaks_and_splits_punctuation():
  review = "This film was GREAT!<br /><br />I'd see it again...<BR>(10/10)"
  assert text.tokenize(review) == [
      "this", "film", "was", "great", "!", "i'd", "see", "it", "again", ".", ".", ".",
      "(", "10", "/", "10", ")"]
  assert text.tokenize("rock'n'roll, 'quoted'") == ["rock'n'roll", ",", "'", "quoted", "'"]
  assert "br" not in text.tokenize("a<br/>b")


def test_vocabulary_top_k_ties_alphabetical_and_reserved_ids():
  counts = {"b": 3, "a": 3, "c": 5, "d": 1, "e": 1}
  vocab = text.Vocabulary.from_counts(counts, max_words=4)
  assert vocab.words == ["<pad>", "<oov>", "c", "a", "b", "d"]
  assert len(vocab) == 6  # Embedding table size: words + pad + OOV.
  assert vocab.encode(["c", "e", "zzz", "a"]) == [2, text.OOV_ID, text.OOV_ID, 3]
  assert vocab.decode([2, 3, 0, 0]) == ["c", "a"]
  # Insertion order of the counts does not matter.
  reordered = dict(reversed(list(counts.items())))
  assert text.Vocabulary.from_counts(reordered, 4).words == vocab.words


def test_vocabulary_from_texts():
  vocab = text.Vocabulary.from_texts([["x", "y", "x"], ["y", "z", "x"]], max_words=2)
  assert vocab.words[2:] == ["x", "y"]


def test_pad_and_truncate_keeps_the_end():
  seqs = [[5, 6, 7, 8, 9], [3], []]
  ids, lengths = text.pad_and_truncate(seqs, 3, padding="post", truncating="pre")
  np.testing.assert_array_equal(ids, [[7, 8, 9], [3, 0, 0], [0, 0, 0]])
  np.testing.assert_array_equal(lengths, [3, 1, 0])
  assert ids.dtype == np.int32 and lengths.dtype == np.int32
  ids, _ = text.pad_and_truncate(seqs, 3, padding="pre", truncating="pre")
  np.testing.assert_array_equal(ids, [[7, 8, 9], [0, 0, 3], [0, 0, 0]])
  ids, _ = text.pad_and_truncate(seqs, 3, padding="post", truncating="post")
  np.testing.assert_array_equal(ids[0], [5, 6, 7])
  with pytest.raises(ValueError, match="padding"):
    text.pad_and_truncate(seqs, 3, padding="left")
