"""The Children's Book Test (Hill et al. 2016) file format, ``data.source=cbt``.

Layout: ``<data_dir>/cbt/cbtest_<T>_{train,valid_2000ex,test_2500ex}.txt`` (also
found directly in ``<data_dir>`` or in the distribution's ``CBTest/data/``), where
``<T>`` is the word type removed from the query, ``data.word_type``: ``NE`` (named
entities, the default), ``CN`` (common nouns), ``V`` (verbs) or ``P``
(prepositions). The validation and test files may carry any suffix after ``valid``
and ``test``.

The format: examples separated by a blank line; each example has 21 lines numbered
``1 `` to ``21 ``; lines 1 to 20 are the context sentences (tokenised); line 21 is
the query, with the missing word written ``XXXXX``, then a tab, the answer, two tabs,
and the candidates separated by ``|`` (10 in the CBT). A malformed example is an
error naming the file and the line.

Mapping onto the reader's input (:func:`to_cloze`): the passage is the last
``data.context_sentences`` context sentences (20: all), the question is the query
with ``XXXXX`` as ``@placeholder``. The candidates become the entities: each example
numbers its candidates ``@entity0`` .. ``@entity9`` in a random order (drawn from
``data.seed``), every occurrence of a candidate word in the passage and the question
is replaced by its marker, whatever its case (``In`` opening a sentence is the
candidate ``in``), and every other word is lower-cased, as in the CNN corpus. The same model and loss then serve both datasets, and predictions are
restricted to the example's candidates (``candidate_mask``). Examples whose answer is
not in the kept passage are dropped and counted (lnorm.data.cloze.dataset).
"""

from __future__ import annotations

import dataclasses
import glob
import logging
import os
import sys
import time
from typing import Any, Sequence

import numpy as np

from lnorm.data import core
from lnorm.data import locate
from lnorm.data.cloze import dataset
from lnorm.data.cloze import example as ex

NAME = "cbt"
WORD_TYPES = ("NE", "CN", "V", "P")
CONTEXT_LINES = 20
BLANK = "XXXXX"
#: split -> the word after cbtest_<T>_ in the file name.
SPLIT_FILES = {"train": "train", "validation": "valid", "test": "test"}
FILES_HELP = ("the Children's Book Test files cbtest_<T>_train.txt, "
              "cbtest_<T>_valid_2000ex.txt and cbtest_<T>_test_2500ex.txt")
_FORMAT = ("Expected examples separated by a blank line, each of 21 lines numbered "
           "'1 ' to '21 ': 20 context sentences, then the query with XXXXX, a tab, "
           "the answer, two tabs and the candidates separated by '|'.")
_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CbtExample:
  """One example as the file holds it (original words, no anonymisation)."""

  context: tuple[tuple[str, ...], ...]  # 20 tokenised sentences.
  query: tuple[str, ...]  # Holds BLANK once.
  answer: str
  candidates: tuple[str, ...]  # The answer among them.


# --- the file format ---------------------------------------------------------------------


def format_example(e: CbtExample) -> str:
  """The 21 lines of one example, each ending in a newline."""
  lines = [f"{i} {' '.join(s)}" for i, s in enumerate(e.context, start=1)]
  lines.append(f"{len(e.context) + 1} {' '.join(e.query)}\t{e.answer}\t\t"
               f"{'|'.join(e.candidates)}")
  return "".join(l + "\n" for l in lines)


def write_file(path: str, examples: Sequence[CbtExample]) -> None:
  """Examples in the CBT format, each followed by a blank line (as the CBT files)."""
  with open(path, "w", encoding="utf-8") as f:
    for e in examples:
      f.write(format_example(e) + "\n")


def _parse_query(line: str, path: str, where: str) -> tuple[tuple[str, ...], str, tuple]:
  fields = line.split("\t")
  if len(fields) < 3:
    raise core.MalformedDataError(
        path, f"{where}: the query line holds {len(fields) - 1} tabs; expected the "
        "query, a tab, the answer, two tabs and the candidates", _FORMAT)
  query, answer = tuple(fields[0].split()), fields[1].strip()
  candidates = tuple(dict.fromkeys(c.strip() for c in fields[-1].split("|") if c.strip()))
  if query.count(BLANK) != 1:
    raise core.MalformedDataError(
        path, f"{where}: the query holds {query.count(BLANK)} {BLANK}, not one", _FORMAT)
  if answer not in candidates:
    raise core.MalformedDataError(
        path, f"{where}: the answer {answer!r} is not among the candidates "
        f"{'|'.join(candidates)!r}", _FORMAT)
  return query, answer, candidates


def _parse_example(lines: Sequence[str], first_line: int, path: str) -> CbtExample:
  """One example's lines; ``first_line`` is the file line number of its line 1."""
  if len(lines) != CONTEXT_LINES + 1:
    raise core.MalformedDataError(
        path, f"the example at line {first_line} has {len(lines)} lines, not "
        f"{CONTEXT_LINES + 1} (a missing line?)", _FORMAT)
  sentences = []
  for k, line in enumerate(lines, start=1):
    number, _, rest = line.partition(" ")
    if number != str(k):
      raise core.MalformedDataError(
          path, f"line {first_line + k - 1} (line {k} of the example at line "
          f"{first_line}) starts with {number[:10]!r}, not '{k} '", _FORMAT)
    sentences.append(rest)
  where = f"line {first_line + CONTEXT_LINES} (the query of the example at line {first_line})"
  query, answer, candidates = _parse_query(sentences[-1], path, where)
  context = tuple(tuple(s.split()) for s in sentences[:-1])
  return CbtExample(context, query, answer, candidates)


def parse(content: str, path: str) -> list[CbtExample]:
  """The examples of one file's text; MalformedDataError naming ``path`` and the
  line otherwise."""
  examples, block, first = [], [], 0
  for n, line in enumerate(content.split("\n"), start=1):
    line = line.rstrip("\r")
    if line.strip():
      if not block:
        first = n
      block.append(line)
    elif block:
      examples.append(_parse_example(block, first, path))
      block = []
  if block:
    examples.append(_parse_example(block, first, path))
  return examples


def read_file(path: str) -> list[CbtExample]:
  try:
    with open(path, encoding="utf-8") as f:
      content = f.read()
  except UnicodeDecodeError as e:
    raise core.MalformedDataError(path, f"not UTF-8 text ({e})") from e
  return parse(content, path)


# --- onto the reader's input -------------------------------------------------------------


def to_cloze(e: CbtExample, context_sentences: int,
             rng: np.random.Generator) -> ex.ClozeExample:
  """The example as the reader sees it (see the module docstring)."""
  # Case-insensitive, as the published CBT readers match candidates: "In" opening a
  # sentence is the candidate "in", "Mother" is "mother". Candidates equal but for
  # case are one entity.
  words = list(dict.fromkeys(c.lower() for c in e.candidates))
  markers = ex.random_markers(words, rng)
  passage = [w for s in e.context[len(e.context) - context_sentences:] for w in s]
  return ex.ClozeExample(ex.anonymise(passage, markers, fold_case=True),
                         ex.anonymise(e.query, markers, blank=BLANK, fold_case=True),
                         markers[e.answer.lower()], tuple(markers[w] for w in words))


def find_files(data_dir: str | None,
               word_type: str) -> tuple[dict[str, str] | None, list[str]]:
  """``split -> path`` of the first folder holding ``cbtest_<T>_train.txt``."""
  looked = []
  for d in locate.search_dirs(data_dir, NAME):
    for folder in (d, os.path.join(d, "CBTest", "data")):
      pattern = os.path.join(folder, f"cbtest_{word_type}_{{train,valid*,test*}}.txt")
      looked.append(pattern)
      found = split_files(folder, word_type)
      if found is not None:
        return found, looked
  return None, looked


def split_files(folder: str, word_type: str) -> dict[str, str] | None:
  """``split -> path`` in ``folder``, None without a training file. The validation
  and test files may have any suffix; two candidates for one split are an error."""
  train = os.path.join(folder, f"cbtest_{word_type}_train.txt")
  if not os.path.isfile(train):
    return None
  found = {"train": train}
  for split in ("validation", "test"):
    matches = sorted(glob.glob(os.path.join(
        glob.escape(folder), f"cbtest_{word_type}_{SPLIT_FILES[split]}*.txt")))
    if len(matches) > 1:
      raise core.DataError(f"cbt: {folder} holds several {split} files "
                           f"({', '.join(map(os.path.basename, matches))}); keep one.")
    if matches:
      found[split] = matches[0]
  if "validation" not in found:
    raise core.DatasetNotFoundError(
        "cbt", [os.path.join(folder, f"cbtest_{word_type}_valid*.txt")],
        f"A validation file is needed beside {train}: {FILES_HELP}.")
  return found


def check_options(config: Any) -> tuple[str, int]:
  """``(word_type, context_sentences)`` of the data config, checked."""
  word_type = core.option(config, "word_type", "NE")
  if word_type not in WORD_TYPES:
    raise core.DataError(f"cbt: word_type must be one of {', '.join(WORD_TYPES)}, got "
                         f"{word_type!r}; set --config.data.word_type.")
  context = core.option(config, "context_sentences", CONTEXT_LINES)
  if not 1 <= context <= CONTEXT_LINES:
    raise core.DataError(f"cbt: context_sentences must be in [1, {CONTEXT_LINES}], got "
                         f"{context}; set --config.data.context_sentences.")
  return word_type, context


def load_files(config: Any, files: dict[str, str], source: str, notes: str = "",
               decoder=(), word_type: str | None = None) -> core.Dataset:
  """The dataset of CBT files ``split -> path`` (the real CBT, or the task written
  from books, whose module is added to the ``decoder`` modules of the cache key, and
  whose ``word_type`` names its word classes, ``NE+CN``)."""
  checked_type, context = check_options(config)
  word_type = word_type or checked_type
  seed = core.option(config, "seed", 0)
  location = os.path.dirname(files["train"])
  info = {"word_type": word_type, "context_sentences": context,
          "files": {s: os.path.basename(p) for s, p in files.items()}}

  def build_fn():
    start = time.perf_counter()
    splits = {}
    for k, (split, path) in enumerate(files.items()):
      rng = np.random.default_rng([seed, k, 21])
      splits[split] = [to_cloze(e, context, rng) for e in read_file(path)]
    _log.info("Read %s in %.1f s", location, time.perf_counter() - start)
    num_candidates = max(len(e.candidates) for s in splits.values() for e in s)
    cut = (f"passages: the last {context} of the {CONTEXT_LINES} context sentences"
           if context < CONTEXT_LINES else "")
    return dataset.build(splits, config, source, location,
                         "; ".join(n for n in (notes, f"word type {word_type}", cut) if n),
                         info, num_entities=num_candidates)

  return dataset.cached(config, f"cloze-cbt-{word_type}", list(files.values()),
                        [sys.modules[__name__], dataset, ex, *decoder], build_fn, source,
                        info)


def load(config: Any, auto: bool) -> core.Dataset:
  del auto
  word_type, _ = check_options(config)
  files, _ = locate.find_or_raise(config, lambda d: find_files(d, word_type), NAME,
                                  FILES_HELP)
  return load_files(config, files, "cbt")
