"""Corpora of books for sentence-level models: skip-thoughts (sentences in their book
order) and any model that reads whole books.

The ``files`` source reads a folder of books, one ``<book>.txt`` per book, as a
directory or as a ``.tar.gz``/``.tgz``/``.tar``/``.zip`` archive, under
``<data_dir>/books/`` (or ``<data_dir>``). Each file holds one paragraph or one
sentence per line, already tokenised: tokens separated by spaces, punctuation split
off (``Alice 's`` , ``do n't`` , ``end .``), as NLTK's or the Penn Treebank's tokeniser
leave it. This is the layout of BookCorpus as Kiros et al. (2015) used it and of
``books/gutenberg_tokenized.tar.gz`` in the data folder here (17 Project Gutenberg
books, a stand-in for BookCorpus).

Sentences (:func:`split_sentences`, rule-based because the text is tokenised): a
sentence ends after a token made only of ``.``, ``!`` and ``?`` (``.``, ``?!``,
``...``), together with the closing quotes and brackets right after it, and at the
end of every line. An abbreviation keeps its full stop attached (``Mr.``), so it
never ends a sentence. Sentences run on across the lines of a book and never across
two books.

Splits: whole books. ``validation_books`` books, drawn with ``seed``, are held out
for validation perplexity; the rest train. The vocabulary
(:class:`lnorm.data.text.Vocabulary`: pad, OOV, EOS, then the most frequent words)
comes from the training books only.

Features (:func:`triples`): one example per sentence that has a previous and a next
sentence in the same book, all three shorter than ``max_words`` words (Kiros et al.:
30): ``tokens`` int32 [N, 3, max_words] (previous, current, next sentence, each as
word ids followed by EOS, padded with 0) and ``length`` int32 [N, 3] (words + 1).
``token_weight`` float32 [N] is one over the split's mean number of target tokens
per example (previous + next, EOS included), so that a per-example metric multiplied
by it averages, over the split, to a per-token mean (see experiments/skip_thoughts).

The corpus is held in memory as every lnorm dataset is: about 360 bytes a triple,
fine for tens of millions of sentences; BookCorpus's 74M would need a streaming
pipeline.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tarfile
import time
import zipfile
from typing import Any, Sequence

import numpy as np

from lnorm.data import core
from lnorm.data import locate
from lnorm.data import text

NAME = "books"
DEFAULT_VOCAB_SIZE = 20000  # Kiros et al.: 20k ids, the special ones included.
DEFAULT_MAX_WORDS = 30  # Kiros et al.: sentences shorter than 30 words.
DEFAULT_VALIDATION_BOOKS = 1
DEFAULT_SYNTHETIC_BOOKS = 6
FILES_HELP = ("one <book>.txt per book (tokenised, one paragraph or sentence per line) "
              "in a folder books/ or an archive books/*.tar.gz")
_ARCHIVES = (".tar.gz", ".tgz", ".tar", ".zip")
#: Tokens that end a sentence are made only of these characters.
_TERMINAL_CHARS = frozenset(".!?")
#: Tokens that close a quotation or bracket stay with the sentence they follow.
CLOSING = frozenset({"''", "'", '"', ")", "]", "}", "\u201d", "\u2019", "\u00bb"})
EOS_ID = len(text.RESERVED)  # The first special after pad and OOV.

_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Book:
  name: str  # The file name without its folder and .txt.
  lines: tuple[str, ...]  # Non-empty lines, in order.


# --- reading ---------------------------------------------------------------------------


def _decode(data: bytes, name: str, where: str) -> str:
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise core.MalformedDataError(where, f"{name} is not UTF-8 text ({e})",
                                  "Convert the book to UTF-8.") from e


def _book(name: str, data: bytes, where: str) -> Book:
  lines = tuple(l.strip() for l in _decode(data, name, where).splitlines() if l.strip())
  return Book(os.path.splitext(os.path.basename(name))[0], lines)


def read_books(path: str) -> list[Book]:
  """The ``*.txt`` books of a directory or archive, sorted by name (a fixed order,
  whatever order the archive stores them in)."""
  items: list[tuple[str, bytes]] = []
  try:
    if os.path.isdir(path):
      for f in os.listdir(path):
        if f.endswith(".txt"):
          with open(os.path.join(path, f), "rb") as fh:
            items.append((f, fh.read()))
    elif path.endswith(".zip"):
      with zipfile.ZipFile(path) as zf:
        items = [(n, zf.read(n)) for n in zf.namelist() if n.endswith(".txt")]
    else:
      with tarfile.open(path, "r:*") as tf:
        for member in tf:
          if member.isfile() and member.name.endswith(".txt"):
            items.append((member.name, tf.extractfile(member).read()))
  except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError) as e:
    raise core.MalformedDataError(path, f"not a readable directory or archive ({e})") from e
  books = sorted((_book(n, d, path) for n, d in items), key=lambda b: b.name)
  names = [b.name for b in books]
  if len(set(names)) != len(names):
    raise core.MalformedDataError(path, "two books have the same file name",
                                  "Give every book its own <name>.txt.")
  books = [b for b in books if b.lines]
  if not books:
    raise core.MalformedDataError(path, "no non-empty <book>.txt file found",
                                  f"Expected {FILES_HELP}.")
  return books


def find_files(data_dir: str | None) -> tuple[str | None, list[str]]:
  """An archive in <data_dir>/books or <data_dir>, else <data_dir>/books itself when
  it holds .txt books."""
  looked = []
  dirs = locate.search_dirs(data_dir, NAME)
  for d in dirs:
    looked.append(os.path.join(d, "*{" + ",".join(_ARCHIVES) + "}"))
    if os.path.isdir(d):
      archives = sorted(f for f in os.listdir(d) if f.endswith(_ARCHIVES))
      if archives:
        return os.path.join(d, archives[0]), looked
  if dirs:
    folder = dirs[0]
    looked.append(os.path.join(folder, "*.txt"))
    if os.path.isdir(folder) and any(f.endswith(".txt") for f in os.listdir(folder)):
      return folder, looked
  return None, looked


# --- sentences -------------------------------------------------------------------------


def _ends_sentence(token: str) -> bool:
  return bool(token) and set(token) <= _TERMINAL_CHARS


def split_sentences(tokens: Sequence[str]) -> list[list[str]]:
  """One tokenised line (a paragraph) -> its sentences (see the module docstring)."""
  sentences, current = [], []
  i = 0
  while i < len(tokens):
    current.append(tokens[i])
    if _ends_sentence(tokens[i]):
      while i + 1 < len(tokens) and tokens[i + 1] in CLOSING:
        i += 1
        current.append(tokens[i])
      sentences.append(current)
      current = []
    i += 1
  if current:
    sentences.append(current)
  return sentences


def book_sentences(book: Book, lowercase: bool) -> list[list[str]]:
  """Every sentence of a book, in order."""
  out = []
  for line in book.lines:
    out.extend(split_sentences((line.lower() if lowercase else line).split()))
  return out


def triple_index(lengths: Sequence[int], max_words: int) -> np.ndarray:
  """Indices i of one book's sentences such that sentences i - 1, i and i + 1 all
  have fewer than ``max_words`` words (Kiros et al. drop a triple with any longer
  sentence). Neighbours are the book's true neighbours: a dropped long sentence is
  never skipped over."""
  short = np.asarray(lengths) < max_words
  if len(short) < 3:
    return np.zeros(0, np.int64)
  keep = short[:-2] & short[1:-1] & short[2:]
  return np.flatnonzero(keep) + 1


def triples(books_sentences: Sequence[Sequence[Sequence[str]]], vocab: text.Vocabulary,
            max_words: int) -> dict[str, np.ndarray]:
  """The (previous, current, next) examples of several books (see the docstring)."""
  tokens, lengths = [], []
  for sentences in books_sentences:
    index = triple_index([len(s) for s in sentences], max_words)
    if not len(index):
      continue
    ids, lens = text.pad_and_truncate(
        [vocab.encode(s) + [EOS_ID] for s in sentences], max_words, "post", "post")
    tokens.append(np.stack([ids[index - 1], ids[index], ids[index + 1]], axis=1))
    lengths.append(np.stack([lens[index - 1], lens[index], lens[index + 1]], axis=1))
  if tokens:
    tokens, lengths = np.concatenate(tokens), np.concatenate(lengths)
  else:
    tokens = np.zeros((0, 3, max_words), np.int32)
    lengths = np.zeros((0, 3), np.int32)
  targets = lengths[:, 0].sum() + lengths[:, 2].sum()
  weight = len(lengths) / targets if targets else 0.0
  return {"tokens": tokens, "length": lengths,
          "token_weight": np.full(len(lengths), weight, np.float32)}


# --- the dataset -----------------------------------------------------------------------


def split_books(books: Sequence[Book], validation_books: int, seed: int):
  """(train, validation) lists of books; the validation books drawn with ``seed``."""
  if not 0 <= validation_books < len(books):
    raise core.DataError(
        f"books: validation_books must be in [0, {len(books)}) for a corpus of "
        f"{len(books)} books, got {validation_books}; set --config.data.validation_books.")
  held = set(np.random.default_rng([seed, 0]).permutation(len(books))[:validation_books])
  train = [b for i, b in enumerate(books) if i not in held]
  validation = [b for i, b in enumerate(books) if i in held]
  return train, validation


def build(books: Sequence[Book], config: Any, source: str, location: str,
          notes: str = "") -> core.Dataset:
  """Sentences, splits, vocabulary and triples of a list of books."""
  lowercase = bool(core.option(config, "lowercase", True))
  max_words = core.option(config, "max_words", DEFAULT_MAX_WORDS)
  vocab_size = core.option(config, "vocab_size", DEFAULT_VOCAB_SIZE)
  if vocab_size <= len(text.RESERVED) + 1:
    raise core.DataError(f"books: vocab_size {vocab_size} leaves no room for words "
                         "after pad, OOV and EOS; set --config.data.vocab_size.")
  train_books, validation_books = split_books(
      books, core.option(config, "validation_books", DEFAULT_VALIDATION_BOOKS),
      core.option(config, "seed", 0))
  sentences = {b.name: book_sentences(b, lowercase) for b in books}
  vocab = text.Vocabulary.from_counts(
      text.count_words(s for b in train_books for s in sentences[b.name]),
      vocab_size - len(text.RESERVED), specials=(text.EOS,))
  data = {split: triples([sentences[b.name] for b in chosen], vocab, max_words)
          for split, chosen in (("train", train_books), ("validation", validation_books))}
  if not len(data["train"]["length"]):
    raise core.DataError(f"books at {location}: no training sentence has a previous "
                         f"and a next sentence shorter than {max_words} words.")
  num_sentences = sum(len(s) for s in sentences.values())
  described = (f"{len(books)} books, {num_sentences} sentences; validation books: "
               f"{', '.join(b.name for b in validation_books) or 'none'}")
  info = {"vocab_size": len(vocab), "vocabulary": tuple(vocab.words),
          "pad_id": text.PAD_ID, "oov_id": text.OOV_ID, "eos_id": EOS_ID,
          "max_words": max_words, "lowercase": lowercase,
          "train_books": tuple(b.name for b in train_books),
          "validation_books": tuple(b.name for b in validation_books)}
  return core.Dataset(NAME, source, location, data,
                      "; ".join(n for n in (notes, described) if n), info)


def load_files(config: Any, auto: bool) -> core.Dataset:
  del auto
  path, _ = locate.find_or_raise(config, find_files, NAME, FILES_HELP)
  start = time.perf_counter()
  books = read_books(path)
  ds = build(books, config, "files", path)
  _log.info("Read %d books from %s and built sentence triples in %.1f s", len(books), path,
            time.perf_counter() - start)
  return ds


def synthetic_books(num_books: int, seed: int) -> list[Book]:
  """Tokenised books whose sentences follow each other predictably: sentence k of a
  book draws most of its words from topic k mod 4, so the next sentence's words can
  be predicted from the current one's. For smoke runs only."""
  rng = np.random.default_rng([seed, 13])
  topics = [[f"w{t}_{i}" for i in range(12)] for t in range(4)]
  books = []
  for b in range(num_books):
    lines = []
    for paragraph in range(int(rng.integers(4, 8))):
      sentences = []
      for k in range(int(rng.integers(2, 5))):
        topic = topics[(paragraph * 5 + k) % 4]
        words = [topic[i] for i in rng.integers(0, len(topic), rng.integers(2, 9))]
        sentences.append(" ".join(words) + " " + ("?" if rng.random() < 0.2 else "."))
      lines.append(" ".join(sentences))
    books.append(Book(f"synthetic_{b:02d}", tuple(lines)))
  return books


def load_synthetic(config: Any, auto: bool) -> core.Dataset:
  del auto
  books = synthetic_books(core.option(config, "synthetic_books", DEFAULT_SYNTHETIC_BOOKS),
                          core.option(config, "seed", 0))
  return build(books, config, "synthetic", "lnorm.data.books.synthetic_books",
               "SYNTHETIC books of random topic words, for smoke runs only")


SOURCES = {"files": load_files, "synthetic": load_synthetic}
AUTO = ("files",)

