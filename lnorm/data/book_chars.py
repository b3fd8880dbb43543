"""Character-level language modelling on the books corpus of skip-thoughts.

The books are read by ``lnorm.data.books`` (the same ``files`` layout:
``<data_dir>/books/*.tar.gz`` or a folder of ``<book>.txt``) and split by whole book
as the cloze tasks split them (``lnorm.data.cloze.books.split_held_out``:
``validation_books`` and ``test_books`` books drawn with ``seed``), so that no passage
of a held-out book is seen in training.

Text: a book is its non-empty lines joined by ``\\n``, as tokenised in the files
(punctuation split off by spaces), optionally lower-cased (``lowercase``, off by
default: case is part of what a character model learns).

Vocabulary: characters, not words or subwords. A character vocabulary needs no
tokenizer library (none is in lnorm's dependencies), has no out-of-vocabulary words
on a held-out book, and keeps the softmax small enough for a CPU; it is what the
character-level language models of this line of work used (e.g. the pre-LN and
RMSNorm papers' enwik8/text8 baselines). Ids: pad and OOV (:mod:`lnorm.data.text`)
then the training books' characters by frequency, at most ``vocab_size`` ids in all;
a rarer character is OOV.

Examples: every book is cut into non-overlapping windows of ``context + 1``
characters (``tokens`` int32 [N, context + 1]): a model reads the first ``context``
and predicts the last ``context``, so every character of a book but the first of each
window is a target exactly once. The tail of a book shorter than a window is dropped
(at most ``context`` characters a book), so no example is padded.

``held_out_windows`` (0: all) keeps that many windows of each held-out split, evenly
spaced over it, so that every book contributes in proportion to its length. A CPU
run validates ten times or more; the two validation books' 5,672 windows at context
128 take longer to score than a hundred updates, while 1,024 of them estimate the
mean loss to about 0.01 nats, and every run of a comparison scores the same ones.
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any, Sequence

import numpy as np

from lnorm.data import books
from lnorm.data import core
from lnorm.data import locate
from lnorm.data import text
from lnorm.data.cloze import books as cloze_books

NAME = "book_chars"
DEFAULT_CONTEXT = 512
DEFAULT_VOCAB_SIZE = 128  # Ids, pad and OOV included.
DEFAULT_HELD_OUT_BOOKS = cloze_books.DEFAULT_HELD_OUT_BOOKS  # Validation; as many test.
SPLITS = ("train", "validation", "test")
_log = logging.getLogger(__name__)


def book_text(book: books.Book, lowercase: bool) -> str:
  joined = "\n".join(book.lines)
  return joined.lower() if lowercase else joined


def windows(ids: np.ndarray, context: int) -> np.ndarray:
  """``[N, context + 1]``: the non-overlapping windows of one book's ids, its tail
  dropped."""
  n = len(ids) // (context + 1)
  return ids[:n * (context + 1)].reshape(n, context + 1)


def evenly_spaced(rows: np.ndarray, count: int) -> np.ndarray:
  """``count`` of ``rows`` at evenly spaced indices (all of them when count is 0 or
  at least their number)."""
  if not count or count >= len(rows):
    return rows
  return rows[np.linspace(0, len(rows) - 1, count).round().astype(np.int64)]


def encode(chars: str, vocab: text.Vocabulary) -> np.ndarray:
  return np.asarray(vocab.encode(chars), np.int32)


def build(corpus: Sequence[books.Book], config: Any, source: str, location: str,
          notes: str = "") -> core.Dataset:
  """Splits, character vocabulary and windows of a list of books."""
  context = core.option(config, "context", DEFAULT_CONTEXT)
  vocab_size = core.option(config, "vocab_size", DEFAULT_VOCAB_SIZE)
  lowercase = bool(core.option(config, "lowercase", False))
  held_out_windows = core.option(config, "held_out_windows", 0)
  if held_out_windows < 0:
    raise core.DataError(f"book_chars: held_out_windows must be >= 0 (0 keeps every "
                         f"window), got {held_out_windows}; set --config.data.held_out_windows.")
  if context < 1:
    raise core.DataError(f"book_chars: context must be >= 1, got {context}; set "
                         "--config.data.context.")
  if vocab_size <= len(text.RESERVED):
    raise core.DataError(f"book_chars: vocab_size {vocab_size} leaves no room for "
                         "characters after pad and OOV; set --config.data.vocab_size.")
  parts = dict(zip(SPLITS, cloze_books.split_held_out(
      corpus, core.option(config, "validation_books", DEFAULT_HELD_OUT_BOOKS),
      core.option(config, "test_books", DEFAULT_HELD_OUT_BOOKS),
      core.option(config, "seed", 0))))
  texts = {b.name: book_text(b, lowercase) for b in corpus}
  counts = collections.Counter()
  for b in parts["train"]:
    counts.update(texts[b.name])
  vocab = text.Vocabulary.from_counts(counts, vocab_size - len(text.RESERVED))
  splits = {}
  for split, chosen in parts.items():
    rows = [windows(encode(texts[b.name], vocab), context) for b in chosen]
    tokens = np.concatenate(rows or [np.zeros((0, context + 1), np.int32)]).astype(np.int32)
    splits[split] = {"tokens": tokens if split == "train"
                     else evenly_spaced(tokens, held_out_windows)}
  if not len(splits["train"]["tokens"]):
    raise core.DataError(f"book_chars at {location}: no training book has "
                         f"{context + 1} characters; lower --config.data.context.")
  described = "; ".join(f"{s} books: {', '.join(b.name for b in parts[s]) or 'none'}"
                        for s in ("validation", "test"))
  if held_out_windows:
    described += f"; at most {held_out_windows} evenly spaced windows of each held-out split"
  info = {"vocab_size": len(vocab), "vocabulary": tuple(vocab.words),
          "pad_id": text.PAD_ID, "oov_id": text.OOV_ID, "context": context,
          "lowercase": lowercase,
          "held_out_windows": held_out_windows,
          **{f"{s}_books": tuple(b.name for b in parts[s]) for s in SPLITS}}
  return core.Dataset(NAME, source, location, splits,
                      "; ".join(n for n in (notes, described) if n), info)


def load_files(config: Any, auto: bool) -> core.Dataset:
  del auto
  path, _ = locate.find_or_raise(config, books.find_files, books.NAME, books.FILES_HELP)
  start = time.perf_counter()
  corpus = books.read_books(path)
  ds = build(corpus, config, "files", path)
  _log.info("Read %d books from %s and cut character windows in %.1f s", len(corpus),
            path, time.perf_counter() - start)
  return ds


def load_synthetic(config: Any, auto: bool) -> core.Dataset:
  """``lnorm.data.books.synthetic_books`` (topic words in predictable order), as
  characters: for smoke runs only."""
  del auto
  corpus = books.synthetic_books(
      core.option(config, "synthetic_books", books.DEFAULT_SYNTHETIC_BOOKS),
      core.option(config, "seed", 0))
  return build(corpus, config, "synthetic", "lnorm.data.books.synthetic_books",
               "SYNTHETIC books of random topic words, for smoke runs only")


SOURCES = {"files": load_files, "synthetic": load_synthetic}
AUTO = ("files",)
