"""A cloze task built from a corpus of tokenised books, the way the Children's Book
Test was built from Project Gutenberg (Hill et al. 2016), with entities anonymised
as in the CNN corpus (Hermann et al. 2015).

The books are read by ``lnorm.data.books`` (the same ``files`` layout:
``<data_dir>/books/*.tar.gz`` or a folder of ``<book>.txt``), split into sentences
there, and then:

* **Named entities** without a tagger: a word type is an entity if it is alphabetic,
  capitalised with at least one lower-case letter after the first (not ``I``,
  ``CHAPTER`` or ``II``), never seen in lower case anywhere in the corpus (``Alice``
  yes, ``The`` no), not a title (``Mr``, ``Mrs``, ...), and seen capitalised at least
  ``min_entity_count`` times after a word inside a sentence (so a word capitalised
  only because it opens a sentence does not count). Each word is its own entity:
  ``Frank Churchill`` is two. Entity types come from the whole corpus, which holds no
  answers.
* **Examples**: for every sentence i of a book with ``passage_sentences`` sentences
  before it, the passage is sentences i - P .. i - 1 and the question is sentence i
  with one entity replaced by ``@placeholder``: an entity that occurs exactly once
  in the question (a second occurrence would give the answer away) and at least once
  in the passage, drawn with (seed, book, i) when several qualify. Sentences without
  one give no example.
* **Anonymisation**: the example's entities are numbered in order of first
  appearance, then the numbers are permuted at random per example (as in the
  released CNN corpus, where numbers carry no order); every other word is
  lower-cased, as in the CNN corpus.
* **Splits by book**: ``validation_books`` and ``test_books`` books, drawn with
  ``seed`` through ``lnorm.data.books.split_books``, are held out whole, so no passage
  of a held-out book is seen in training.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, Sequence

import numpy as np

from lnorm.data import books
from lnorm.data import cloze
from lnorm.data import core
from lnorm.data import locate

DEFAULT_PASSAGE_SENTENCES = 4  # As the LN paper's CNN passages.
DEFAULT_MIN_ENTITY_COUNT = 3
DEFAULT_HELD_OUT_BOOKS = 2  # Validation books; as many test books.
#: Capitalised words that are titles, not names, though never seen lower-cased.
TITLES = frozenset({"Mr", "Mrs", "Ms", "Dr", "St", "Messrs", "Mme", "Mlle"})
_log = logging.getLogger(__name__)


def entity_words(book_sentences: Sequence[Sequence[Sequence[str]]],
                 min_count: int = DEFAULT_MIN_ENTITY_COUNT) -> frozenset[str]:
  """The word types taken for named entities (see the module docstring) in the
  sentences of several books (original case)."""
  lower, inside = set(), {}
  for sentences in book_sentences:
    for sentence in sentences:
      for i, w in enumerate(sentence):
        if w.islower():
          lower.add(w)
        elif i > 0 and sentence[i - 1][:1].isalnum() and _name_shaped(w):
          inside[w] = inside.get(w, 0) + 1
  return frozenset(w for w, n in inside.items()
                   if n >= min_count and w.lower() not in lower and w not in TITLES)


def _name_shaped(w: str) -> bool:
  return w.isalpha() and len(w) > 1 and w[0].isupper() and any(c.islower() for c in w[1:])


def book_examples(sentences: Sequence[Sequence[str]], entities: frozenset[str],
                  passage_sentences: int, rng_key: Sequence[int]) -> list[cloze.ClozeExample]:
  """The cloze examples of one book's sentences (see the module docstring);
  ``rng_key`` seeds the entity numbering of this book's examples."""
  out = []
  for i in range(passage_sentences, len(sentences)):
    passage = [w for s in sentences[i - passage_sentences:i] for w in s]
    question = list(sentences[i])
    in_passage = {w for w in passage if w in entities}
    answers = sorted({w for w in question if w in in_passage and question.count(w) == 1})
    order = list(dict.fromkeys(w for w in passage + question if w in entities))
    for k, answer in enumerate(answers):
      numbers = np.random.default_rng([*rng_key, i, k]).permutation(len(order))
      names = {w: f"{cloze.ENTITY_PREFIX}{numbers[j]}" for j, w in enumerate(order)}
      blanked = [cloze.PLACEHOLDER if w == answer else w for w in question]
      out.append(cloze.ClozeExample(_anonymise(passage, names),
                                    _anonymise(blanked, names), names[answer]))
  return out


def _anonymise(tokens, names) -> tuple[str, ...]:
  return tuple(names[w] if w in names else w.lower() for w in tokens)


def split_held_out(corpus: Sequence[books.Book], validation_books: int, test_books: int,
                   seed: int):
  """(train, validation, test) lists of whole books."""
  train, held = books.split_books(corpus, validation_books + test_books, seed)
  return train, held[:validation_books], held[validation_books:]


def build_splits(corpus: Sequence[books.Book], config: Any):
  """Split name -> examples, and a description of the entities and books."""
  passage_sentences = core.option(config, "passage_sentences", DEFAULT_PASSAGE_SENTENCES)
  if passage_sentences < 1:
    raise core.DataError(f"cloze_books: passage_sentences must be >= 1, got "
                         f"{passage_sentences}; set --config.data.passage_sentences.")
  seed = core.option(config, "seed", 0)
  sentences = {b.name: books.book_sentences(b, lowercase=False) for b in corpus}
  entities = entity_words(list(sentences.values()),
                          core.option(config, "min_entity_count", DEFAULT_MIN_ENTITY_COUNT))
  parts = split_held_out(
      corpus, core.option(config, "validation_books", DEFAULT_HELD_OUT_BOOKS),
      core.option(config, "test_books", DEFAULT_HELD_OUT_BOOKS), seed)
  index = {b.name: k for k, b in enumerate(corpus)}
  splits = {
      split: [e for b in chosen
              for e in book_examples(sentences[b.name], entities, passage_sentences,
                                     (seed, index[b.name]))]
      for split, chosen in zip(("train", "validation", "test"), parts)}
  described = (f"{len(corpus)} books, {len(entities)} entity word types; validation "
               f"books: {', '.join(b.name for b in parts[1])}; test books: "
               f"{', '.join(b.name for b in parts[2])}")
  books_of = {s: tuple(b.name for b in p)
              for s, p in zip(("train", "validation", "test"), parts)}
  return splits, described, books_of


def load(config: Any, auto: bool) -> core.Dataset:
  del auto
  path, _ = locate.find_or_raise(config, books.find_files, books.NAME, books.FILES_HELP)

  def build_fn():
    start = time.perf_counter()
    splits, described, _ = build_splits(books.read_books(path), config)
    ds = cloze.build(splits, config, "cloze_books", path,
                     f"cloze questions built from books ({described})")
    _log.info("Built cloze questions from %s in %.1f s", path, time.perf_counter() - start)
    return ds

  return cloze.cached(config, "cloze-books", path,
                      [sys.modules[__name__], cloze, books], build_fn, "cloze_books")
