"""The CNN / Daily Mail corpus of Hermann et al. (2015) as distributed (``cnn.tgz``
unpacked), ``data.source=files``.

One ``.question`` file per example under
``<data_dir>/<corpus>/questions/{training,validation,test}/`` (``corpus`` is ``cnn``
or ``dailymail``). A file holds, line by line: the article URL, a blank line, the
passage, a blank line, the question, a blank line, the answer entity, a blank line,
then one ``@entityN:original name`` line per entity (docs/experiments.md sec. 5).
``passage_sentences`` > 0 keeps that many sentences of each passage, as in the
Cooijmans et al. preprocessing the LN paper used (4), either the ``first`` ones or
the ones sharing the most words with the question (``sentence_selection=
'overlap'``, kept in passage order).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import time
from typing import Any

from lnorm.data import books
from lnorm.data import core
from lnorm.data import locate
from lnorm.data.cloze import dataset
from lnorm.data.cloze import example as ex

SPLIT_DIRS = {"train": "training", "validation": "validation", "test": "test"}
CORPORA = ("cnn", "dailymail")
SELECTIONS = ("first", "overlap")
FILES_HELP = ("the CNN/Daily Mail question files, <corpus>/questions/"
              "{training,validation,test}/*.question (cnn.tgz unpacked)")
_log = logging.getLogger(__name__)


def parse_question_file(content: str, path: str) -> ex.ClozeExample:
  """One ``.question`` file's text -> ClozeExample; MalformedDataError naming ``path``
  and the problem otherwise."""
  lines = content.split("\n")
  fix = ("Expected: URL, blank, passage, blank, question with @placeholder, blank, "
         "answer @entityN, blank, then @entityN:name lines (docs/experiments.md sec. 5).")
  if len(lines) < 7:
    raise core.MalformedDataError(path, f"it has {len(lines)} lines, fewer than 7", fix)
  for i in (1, 3, 5):
    if lines[i].strip():
      raise core.MalformedDataError(path, f"line {i + 1} should be blank", fix)
  passage, question, answer = lines[2].split(), lines[4].split(), lines[6].strip()
  if not passage:
    raise core.MalformedDataError(path, "the passage (line 3) is empty", fix)
  if question.count(ex.PLACEHOLDER) != 1:
    raise core.MalformedDataError(
        path, f"the question (line 5) holds {question.count(ex.PLACEHOLDER)} "
        f"{ex.PLACEHOLDER}, not one", fix)
  if ex.entity_number(answer) is None:
    raise core.MalformedDataError(path, f"the answer (line 7) {answer!r} is not an "
                                  "@entityN marker", fix)
  for j, line in enumerate(lines[8:], start=9):
    if line.strip() and ex.entity_number(line.split(":", 1)[0]) is None:
      raise core.MalformedDataError(path, f"line {j} {line[:40]!r} is not "
                                    "@entityN:name", fix)
  return ex.ClozeExample(tuple(passage), tuple(question), answer)


def restrict_passage(example: ex.ClozeExample, num_sentences: int,
                     selection: str) -> ex.ClozeExample:
  """The example with its passage cut to ``num_sentences`` sentences (0: all): the
  ``first`` ones, or the ones sharing the most distinct words with the question
  (``overlap``, ties to the earlier sentence), kept in passage order. The answer
  must survive the cut; if the chosen sentences lack it, the highest-ranked
  sentence holding it replaces the lowest-ranked one chosen."""
  if num_sentences <= 0:
    return example
  if selection not in SELECTIONS:
    raise core.DataError(f"sentence_selection must be one of {', '.join(SELECTIONS)}, "
                         f"got {selection!r}")
  sentences = books.split_sentences(list(example.passage))
  if len(sentences) <= num_sentences:
    return example
  if selection == "first":
    ranked = list(range(len(sentences)))
  else:
    words = set(example.question)
    ranked = sorted(range(len(sentences)),
                    key=lambda i: (-len(words & set(sentences[i])), i))
  chosen = ranked[:num_sentences]
  if not any(example.answer in sentences[i] for i in chosen):
    with_answer = [i for i in ranked if example.answer in sentences[i]]
    if with_answer:
      chosen[-1] = with_answer[0]
  passage = tuple(t for i in sorted(chosen) for t in sentences[i])
  return dataclasses.replace(example, passage=passage)


def find_files(data_dir: str | None, corpus: str) -> tuple[str | None, list[str]]:
  """``<dir>/<corpus>/questions`` holding a training/ folder, in the search dirs."""
  looked = []
  for d in locate.search_dirs(data_dir, corpus):
    for root in (os.path.join(d, "questions"), os.path.join(d, corpus, "questions")):
      looked.append(os.path.join(root, "training", "*.question"))
      if os.path.isdir(os.path.join(root, "training")):
        return root, looked
  return None, looked


def read_question_dir(path: str) -> list[ex.ClozeExample]:
  """Every ``*.question`` file of a folder, in file-name order."""
  names = sorted(f for f in os.listdir(path) if f.endswith(".question"))
  out = []
  for name in names:
    full = os.path.join(path, name)
    try:
      with open(full, encoding="utf-8") as f:
        out.append(parse_question_file(f.read(), full))
    except UnicodeDecodeError as e:
      raise core.MalformedDataError(full, f"not UTF-8 text ({e})") from e
  return out


def load(config: Any, auto: bool) -> core.Dataset:
  del auto
  corpus = core.option(config, "corpus", "cnn")
  if corpus not in CORPORA:
    raise core.DataError(f"cloze: corpus must be one of {', '.join(CORPORA)}, got "
                         f"{corpus!r}; set --config.data.corpus.")
  root, _ = locate.find_or_raise(config, lambda d: find_files(d, corpus), corpus,
                                 FILES_HELP)
  sentences = core.option(config, "passage_sentences", 0)
  selection = core.option(config, "sentence_selection", "first")

  def build_fn():
    start = time.perf_counter()
    splits = {}
    for split, folder in SPLIT_DIRS.items():
      path = os.path.join(root, folder)
      if os.path.isdir(path):
        splits[split] = [restrict_passage(e, sentences, selection)
                         for e in read_question_dir(path)]
    _log.info("Read %s in %.1f s", root, time.perf_counter() - start)
    cut = f"passages cut to {selection} {sentences} sentences" if sentences else ""
    return dataset.build(splits, config, "files", root, cut, {"corpus": corpus})

  return dataset.cached(config, f"cloze-{corpus}", root,
                        [sys.modules[__name__], dataset, ex], build_fn, "files",
                        {"corpus": corpus})
