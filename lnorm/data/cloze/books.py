"""Cloze tasks built from a corpus of tokenised books, the way the Children's Book
Test was built from Project Gutenberg (Hill et al. 2016).

The books are read by ``lnorm.data.books`` (the same ``files`` layout:
``<data_dir>/books/*.tar.gz`` or a folder of ``<book>.txt``) and split into
sentences there. Both tasks share:

* **Named entities** without a tagger: a word type is an entity if it is alphabetic,
  capitalised with at least one lower-case letter after the first (not ``I``,
  ``CHAPTER`` or ``II``), never seen in lower case anywhere in the corpus (``Alice``
  yes, ``The`` no), not a title (``Mr``, ``Mrs``, ...), and seen capitalised at least
  ``min_entity_count`` times after a word inside a sentence (so a word capitalised
  only because it opens a sentence does not count). Each word is its own entity:
  ``Frank Churchill`` is two. Entity types come from the whole corpus, which holds no
  answers.
* **Answers**: an entity that occurs exactly once in the query sentence (a second
  occurrence would give the answer away) and at least once in the passage.
* **Splits by book**: ``validation_books`` and ``test_books`` books, drawn with
  ``seed`` through ``lnorm.data.books.split_books``, are held out whole, so no passage
  of a held-out book is seen in training.

``data.source=cloze_books``, the small task: for every sentence i with
``passage_sentences`` (4) sentences before it, one example per answer of sentence i,
the passage being sentences i - 4 .. i - 1; every entity of the example is anonymised
(numbered in order of first appearance, the numbers then permuted at random per
example, as in the released CNN corpus) and every other word lower-cased.

``data.source=cbt_books``, the Children's Book Test made from the books
(:func:`cbt_examples`): for every sentence i with 20 sentences before it in its book
and at least one answer, one example: the 20 sentences as context and sentence i as
the query, one answer (drawn at random when several qualify) replaced by ``XXXXX``;
10 candidates, the answer and 9 other entities drawn at random from those of the
context and the query, as in the CBT, where every candidate appears in the context
or the query (a sentence whose context and query name fewer than 9 other entities
is no question). Consecutive examples share context
sentences: every qualifying sentence is a query, not only one per window of 21. The
task is written in the CBT file format (lnorm.data.cloze.cbt) into the lnorm cache
directory (``<cache>/cbt-books-<key>/cbt/cbtest_NE_*.txt``, where it can be inspected
or used elsewhere; never into the data directory) and read back by the CBT reader,
which anonymises the candidates.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Mapping, Sequence

import numpy as np

from lnorm.data import books
from lnorm.data import cache
from lnorm.data import core
from lnorm.data import locate
from lnorm.data.cloze import cbt
from lnorm.data.cloze import dataset
from lnorm.data.cloze import example as ex
from lnorm.errors import ConfigError

DEFAULT_PASSAGE_SENTENCES = 4  # cloze_books: as the LN paper's CNN passages.
DEFAULT_MIN_ENTITY_COUNT = 3
DEFAULT_HELD_OUT_BOOKS = 2  # Validation books; as many test books.
NUM_CANDIDATES = 10  # Hill et al.
#: Capitalised words that are titles, not names, though never seen lower-cased.
TITLES = frozenset({"Mr", "Mrs", "Ms", "Dr", "St", "Messrs", "Mme", "Mlle"})
SPLITS = ("train", "validation", "test")
#: cbt_books: the word classes a blank may be (``data.word_classes``): named entities
#: and common nouns, the CBT's two main classes (Hill et al.).
WORD_CLASSES = ("NE", "CN")
#: cbt_books, ``data.blanks_per_query``: "one" blank drawn per query sentence, as the
#: CBT; "every": a question for every word of the sentence that qualifies.
BLANKS_PER_QUERY = ("one", "every")
#: cbt_books, ``data.candidate_pool``: a blank's 9 other candidates are words of its
#: own class from the passage and the query ("class", the CBT); "top_up": when its
#: class offers fewer than 9 there, the rest are drawn from the words of the other
#: classes of ``word_classes`` there (4-sentence passages seldom name 10 entities or
#: 10 nouns: "class" keeps about a third of the blanks, "top_up" almost all).
CANDIDATE_POOLS = ("class", "top_up")
#: Common nouns without a tagger (:func:`common_nouns`): the words a determiner or a
#: possessive precedes; seen at least this often, ...
COMMON_NOUN_MIN_COUNT = 5
DETERMINERS = frozenset({"the", "a", "an", "his", "her", "my", "your", "their", "our",
                         "its"})
#: ... after a determiner in at least this share of their occurrences, ...
COMMON_NOUN_DETERMINER_SHARE = 0.3
#: ... and followed there by such a word in less than this share (``the little
#: girl``: ``little`` modifies a noun; ``the door .``: ``door`` is one).
COMMON_NOUN_MODIFIER_SHARE = 0.2
#: The data fields that decide the written CBT-style task.
TASK_FIELDS = ("validation_books", "test_books", "min_entity_count", "seed",
               "context_sentences", "word_classes", "blanks_per_query", "candidate_pool")
SOURCE_NOTE = "SOURCE.txt"  # Beside cbt/: what the task was built from.
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


def common_nouns(book_sentences: Sequence[Sequence[Sequence[str]]],
                 min_count: int = COMMON_NOUN_MIN_COUNT) -> frozenset[str]:
  """The lower-case word types taken for common nouns, without a tagger (the CBT
  used one): alphabetic words seen at least ``min_count`` times, at least
  COMMON_NOUN_DETERMINER_SHARE of them right after a determiner or possessive
  (``the door``, ``his hand``), and followed there by another such word less than
  COMMON_NOUN_MODIFIER_SHARE of the time, which leaves out most adjectives (``the
  little girl``). An approximation: on the 17 books it keeps ``world``, ``house``,
  ``door``, ``whale``, drops ``little``, ``same``, ``whole``, and misses nouns seldom
  seen after a determiner."""
  total, after = {}, {}
  for sentences in book_sentences:
    for sentence in sentences:
      for i, w in enumerate(sentence):
        if w.isalpha() and w.islower():
          total[w] = total.get(w, 0) + 1
          if i > 0 and sentence[i - 1].lower() in DETERMINERS:
            after[w] = after.get(w, 0) + 1
  nounish = {w for w, n in total.items()
             if n >= min_count and after.get(w, 0) >= COMMON_NOUN_DETERMINER_SHARE * n}
  modifies = {}
  for sentences in book_sentences:
    for sentence in sentences:
      for i in range(1, len(sentence) - 1):
        if sentence[i - 1].lower() in DETERMINERS and sentence[i + 1] in nounish:
          modifies[sentence[i]] = modifies.get(sentence[i], 0) + 1
  return frozenset(w for w in nounish
                   if modifies.get(w, 0) < COMMON_NOUN_MODIFIER_SHARE * after[w])


def _name_shaped(w: str) -> bool:
  return w.isalpha() and len(w) > 1 and w[0].isupper() and any(c.islower() for c in w[1:])


def answers(query: Sequence[str], in_passage: set[str]) -> list[str]:
  """The entities that may be blanked in ``query``: once in it, and in the passage
  (``in_passage``: the passage's entities). Sorted, so draws are reproducible."""
  return sorted({w for w in query if w in in_passage and query.count(w) == 1})


# --- cloze_books: 4-sentence passages, every entity anonymised -----------------------------


def book_examples(sentences: Sequence[Sequence[str]], entities: frozenset[str],
                  passage_sentences: int, rng_key: Sequence[int]) -> list[ex.ClozeExample]:
  """The cloze_books examples of one book's sentences (see the module docstring);
  ``rng_key`` seeds the entity numbering of this book's examples."""
  out = []
  for i in range(passage_sentences, len(sentences)):
    passage = [w for s in sentences[i - passage_sentences:i] for w in s]
    question = list(sentences[i])
    order = list(dict.fromkeys(w for w in passage + question if w in entities))
    for k, answer in enumerate(answers(question, {w for w in passage if w in entities})):
      markers = ex.random_markers(order, np.random.default_rng([*rng_key, i, k]))
      out.append(ex.ClozeExample(ex.anonymise(passage, markers),
                                 ex.anonymise(question, markers, blank=answer),
                                 markers[answer]))
  return out


def split_held_out(corpus: Sequence[books.Book], validation_books: int, test_books: int,
                   seed: int):
  """(train, validation, test) lists of whole books."""
  train, held = books.split_books(corpus, validation_books + test_books, seed)
  return train, held[:validation_books], held[validation_books:]


def _corpus_parts(corpus: Sequence[books.Book], config: Any):
  """Sentences of every book (original case), the entity words, and the books of
  each split."""
  sentences = {b.name: books.book_sentences(b, lowercase=False) for b in corpus}
  entities = entity_words(list(sentences.values()),
                          core.option(config, "min_entity_count", DEFAULT_MIN_ENTITY_COUNT))
  parts = split_held_out(
      corpus, core.option(config, "validation_books", DEFAULT_HELD_OUT_BOOKS),
      core.option(config, "test_books", DEFAULT_HELD_OUT_BOOKS),
      core.option(config, "seed", 0))
  return sentences, entities, dict(zip(SPLITS, parts))


def _describe_corpus(corpus, entities, parts) -> str:
  return (f"{len(corpus)} books, {len(entities)} entity word types; validation "
          f"books: {', '.join(b.name for b in parts['validation'])}; test books: "
          f"{', '.join(b.name for b in parts['test'])}")


def build_splits(corpus: Sequence[books.Book], config: Any):
  """cloze_books: split name -> examples, a description of the entities and books,
  and the book names of each split."""
  passage_sentences = core.option(config, "passage_sentences", DEFAULT_PASSAGE_SENTENCES)
  if passage_sentences < 1:
    raise core.DataError(f"cloze_books: passage_sentences must be >= 1, got "
                         f"{passage_sentences}; set --config.data.passage_sentences.")
  seed = core.option(config, "seed", 0)
  sentences, entities, parts = _corpus_parts(corpus, config)
  index = {b.name: k for k, b in enumerate(corpus)}
  splits = {
      split: [e for b in chosen
              for e in book_examples(sentences[b.name], entities, passage_sentences,
                                     (seed, index[b.name]))]
      for split, chosen in parts.items()}
  books_of = {s: tuple(b.name for b in p) for s, p in parts.items()}
  return splits, _describe_corpus(corpus, entities, parts), books_of


def _books_path(config: Any) -> str:
  path, _ = locate.find_or_raise(config, books.find_files, books.NAME, books.FILES_HELP)
  return path


def load_cloze_books(config: Any, auto: bool) -> core.Dataset:
  del auto
  path = _books_path(config)

  def build_fn():
    start = time.perf_counter()
    splits, described, _ = build_splits(books.read_books(path), config)
    ds = dataset.build(splits, config, "cloze_books", path,
                       f"cloze questions built from books ({described})")
    _log.info("Built cloze questions from %s in %.1f s", path, time.perf_counter() - start)
    return ds

  return dataset.cached(config, "cloze-books", path,
                        [sys.modules[__name__], dataset, ex, books], build_fn,
                        "cloze_books")


# --- cbt_books: the Children's Book Test made from the books --------------------------------


def cbt_examples(sentences: Sequence[Sequence[str]], classes: Mapping[str, frozenset[str]],
                 rng: np.random.Generator, context_sentences: int = cbt.CONTEXT_LINES,
                 every_blank: bool = False, top_up: bool = False) -> list[cbt.CbtExample]:
  """The CBT-style examples of one book's sentences (see the module docstring).

  ``classes``: word class -> its words (``{"NE": entities}``); a blank's candidates
  are words of its own class. Answers and candidates come from the last
  ``context_sentences`` of the 20 context sentences (and the query), the passage
  the reader then reads. ``every_blank``: a question for every qualifying word of
  the query, else one drawn at random. ``top_up``: a blank whose class offers fewer
  than 9 other candidates takes the rest at random from the words of the other
  classes in the passage and the query (see CANDIDATE_POOLS)."""
  out = []
  c = cbt.CONTEXT_LINES
  for i in range(c, len(sentences)):
    context, query = sentences[i - c:i], list(sentences[i])
    if cbt.BLANK in query:
      continue
    blanks, pools = [], {}
    for name, words in classes.items():
      in_window = list(dict.fromkeys(w for s in context[c - context_sentences:] for w in s
                                     if w in words))
      for answer in answers(query, set(in_window)):
        # The reader matches candidates whatever their case, and a common noun
        # opening the sentence is capitalised: it must not be in the query twice.
        if name != "NE" and [w.lower() for w in query].count(answer) != 1:
          continue
        blanks.append(answer)
        pools[answer] = [w for w in dict.fromkeys(in_window + [w for w in query if w in words])
                         if w != answer]
    if not blanks:
      continue
    if top_up:
      _top_up(pools, classes, context[c - context_sentences:], query, rng)
    enough = [a for a in blanks if len(pools[a]) >= NUM_CANDIDATES - 1]
    if every_blank:
      chosen = enough
    else:
      # Uniform over the blanks with 9 others to draw. Drawn over all blanks first:
      # within one class all or none have enough, and the task of one class stays
      # the one written before there were several.
      k = rng.integers(len(blanks))
      if not enough:
        continue
      chosen = [blanks[k] if blanks[k] in enough else enough[rng.integers(len(enough))]]
    for answer in chosen:
      pool = pools[answer]
      picked = [pool[j] for j in rng.choice(len(pool), NUM_CANDIDATES - 1, replace=False)]
      blanked = tuple(cbt.BLANK if w == answer else w for w in query)
      out.append(cbt.CbtExample(tuple(map(tuple, context)), blanked, answer,
                                tuple(sorted([answer, *picked]))))
  return out


def _top_up(pools: dict[str, list[str]], classes: Mapping[str, frozenset[str]],
            window: Sequence[Sequence[str]], query: Sequence[str],
            rng: np.random.Generator) -> None:
  """Fills each pool short of 9 words up to 9 with words of the other classes in
  ``window`` and ``query``, drawn at random; a pool that cannot reach 9 stays short
  (no question). Pools of 9 or more stay as they are, so their draws do not change."""
  any_class = frozenset().union(*classes.values())
  seen = list(dict.fromkeys(w for s in (*window, query) for w in s if w in any_class))
  for answer, pool in pools.items():
    short = NUM_CANDIDATES - 1 - len(pool)
    if short <= 0:
      continue
    others = [w for w in seen if w != answer and w not in pool]
    if len(others) >= short:
      pool.extend(others[j] for j in sorted(rng.choice(len(others), short, replace=False)))


def task_options(config: Any) -> tuple[tuple[str, ...], int, bool, bool]:
  """cbt_books' ``(word classes, context_sentences, every_blank, top_up)``, checked."""
  raw = core.option(config, "word_classes", "NE")
  classes = tuple(w.strip().upper() for w in str(raw).split(","))
  if (not all(w in WORD_CLASSES for w in classes)
      or len(set(classes)) != len(classes)):
    raise ConfigError(f"cbt_books: word_classes={raw!r}; give NE, CN or NE,CN "
                      "(--config.data.word_classes=NE,CN).")
  context = core.option(config, "context_sentences", cbt.CONTEXT_LINES)
  if not isinstance(context, int) or not 1 <= context <= cbt.CONTEXT_LINES:
    raise ConfigError(f"cbt_books: context_sentences={context!r}; give an integer in "
                      f"[1, {cbt.CONTEXT_LINES}] (--config.data.context_sentences=4).")
  blanks = core.option(config, "blanks_per_query", "one")
  if blanks not in BLANKS_PER_QUERY:
    raise ConfigError(f"cbt_books: blanks_per_query={blanks!r}; give one of "
                      f"{', '.join(BLANKS_PER_QUERY)} (--config.data.blanks_per_query=every).")
  pool = core.option(config, "candidate_pool", "class")
  if pool not in CANDIDATE_POOLS:
    raise ConfigError(f"cbt_books: candidate_pool={pool!r}; give one of "
                      f"{', '.join(CANDIDATE_POOLS)} (--config.data.candidate_pool=top_up).")
  if pool == "top_up" and len(classes) < 2:
    raise ConfigError(f"cbt_books: candidate_pool=top_up draws from the other word "
                      f"classes, but word_classes={raw!r} names one; set "
                      "--config.data.word_classes=NE,CN or candidate_pool=class.")
  return classes, context, blanks == "every", pool == "top_up"


def word_type_tag(classes: Sequence[str]) -> str:
  """The ``<T>`` of the written files' names: ``NE``, ``CN``, ``NE+CN``."""
  return "+".join(classes)


def cbt_splits(corpus: Sequence[books.Book], config: Any):
  """cbt_books: split name -> CbtExamples, and a description of the corpus."""
  seed = core.option(config, "seed", 0)
  names, context, every_blank, top_up = task_options(config)
  sentences, entities, parts = _corpus_parts(corpus, config)
  classes = {"NE": entities}
  if "CN" in names:
    classes["CN"] = common_nouns(list(sentences.values()))
  classes = {name: classes[name] for name in names}
  index = {b.name: k for k, b in enumerate(corpus)}
  splits = {split: [e for b in chosen
                    for e in cbt_examples(sentences[b.name], classes,
                                          np.random.default_rng([seed, index[b.name], 20]),
                                          context, every_blank, top_up)]
            for split, chosen in parts.items()}
  described = _describe_corpus(corpus, entities, parts)
  if "CN" in names:
    described += f", {len(classes['CN'])} common noun word types"
  return splits, described


def file_names(counts: dict[str, int], tag: str = "NE") -> dict[str, str]:
  """split -> file name, in the CBT's pattern (``cbtest_NE_valid_2000ex.txt``)."""
  return {"train": f"cbtest_{tag}_train.txt",
          "validation": f"cbtest_{tag}_valid_{counts['validation']}ex.txt",
          "test": f"cbtest_{tag}_test_{counts['test']}ex.txt"}


def write_task(corpus: Sequence[books.Book], config: Any, folder: str) -> str:
  """Writes the task's three files into ``<folder>/cbt/``; returns the description
  of the corpus."""
  splits, described = cbt_splits(corpus, config)
  names, context, every_blank, top_up = task_options(config)
  os.makedirs(os.path.join(folder, cbt.NAME))
  counts = {s: len(e) for s, e in splits.items()}
  files = file_names(counts, word_type_tag(names))
  described += "; questions: " + ", ".join(f"{s} {n}" for s, n in counts.items())
  for split, examples in splits.items():
    cbt.write_file(os.path.join(folder, cbt.NAME, files[split]), examples)
  what = " and ".join({"NE": "named-entity", "CN": "common-noun"}[n] for n in names)
  how = []
  if context < cbt.CONTEXT_LINES:
    how.append(f"answers and candidates from the last {context} context sentences")
  if every_blank:
    how.append("a question for every qualifying word of a query")
  if top_up:
    how.append("candidates topped up from the other word classes when the answer's "
               "class offers fewer than 9 others")
  with open(os.path.join(folder, SOURCE_NOTE), "w", encoding="utf-8") as f:
    f.write(f"CBT-style {what} questions built by lnorm.data.cloze.books from "
            f"{described}{''.join('; ' + h for h in how)}\n")
  return described


def task_folder(config: Any, books_path: str) -> str:
  """Where the task built from ``books_path`` with this config's fields lives in the
  cache: keyed by the books' files, the fields and the code that writes it."""
  version = repr([(f, core.option(config, f)) for f in TASK_FIELDS])
  key = cache.key_path(dataset.cache_root(config), "cbt-books", books_path, version,
                       decoder=[sys.modules[__name__], cbt, books])
  return os.path.splitext(key)[0]


def _write_once(config: Any, books_path: str, folder: str) -> None:
  """Writes the task into ``folder`` unless it is there; atomically, so that a run
  stopped half-way or a concurrent run never leaves half a task behind."""
  if os.path.isdir(folder):
    return
  parent = os.path.dirname(folder)
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(dir=parent, prefix=os.path.basename(folder) + ".tmp")
  try:
    write_task(books.read_books(books_path), config, tmp)
    os.chmod(tmp, 0o755)  # mkdtemp makes it private; a shared cache must be readable.
    os.replace(tmp, folder)
    _log.info("Wrote the CBT-style task built from %s to %s", books_path, folder)
  except OSError:
    if not os.path.isdir(folder):
      raise
  finally:
    if os.path.isdir(tmp):
      shutil.rmtree(tmp)


def load_cbt_books(config: Any, auto: bool) -> core.Dataset:
  del auto
  tag = word_type_tag(task_options(config)[0])
  word_type, _ = cbt.check_options(config)
  if word_type != "NE":
    raise core.DataError(f"cbt_books takes its word classes from data.word_classes, not "
                         f"word_type={word_type!r}: set --config.data.word_classes="
                         f"{word_type} and leave data.word_type at NE.")
  books_path = _books_path(config)
  if not cache.enabled(config):
    # Nothing may stay behind: the task is written to a folder deleted after reading.
    with tempfile.TemporaryDirectory(prefix="lnorm-cbt-books-") as tmp:
      write_task(books.read_books(books_path), config, tmp)
      return cbt.load_files(config, _files(tmp, tag), "cbt_books", _source_note(tmp),
                            [sys.modules[__name__]], word_type=tag)
  folder = task_folder(config, books_path)
  _write_once(config, books_path, folder)
  return cbt.load_files(config, _files(folder, tag), "cbt_books", _source_note(folder),
                        [sys.modules[__name__]], word_type=tag)


def _source_note(folder: str) -> str:
  with open(os.path.join(folder, SOURCE_NOTE), encoding="utf-8") as f:
    return f.read().strip()


def _files(folder: str, tag: str) -> dict[str, str]:
  found = cbt.split_files(os.path.join(folder, cbt.NAME), tag)
  if found is None or "test" not in found:
    raise core.DataError(f"cbt_books: {folder} does not hold the three task files; "
                         "delete it and run again.")
  return found
