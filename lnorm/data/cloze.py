"""Cloze question answering with anonymised entities (the attentive reader's data).

An example is a passage, a question with one ``@placeholder`` and an answer, an
entity of the passage. Entities are anonymised as ``@entity0``, ``@entity1``, ... per
example, the way Hermann et al. (2015) released the CNN and Daily Mail corpora.

Sources:

* ``files``: the CNN / Daily Mail corpus as distributed (``cnn.tgz`` unpacked): one
  ``.question`` file per example under
  ``<data_dir>/<corpus>/questions/{training,validation,test}/`` (``corpus`` is
  ``cnn`` or ``dailymail``). A file holds, line by line: the article URL, a blank
  line, the passage, a blank line, the question, a blank line, the answer entity, a
  blank line, then one ``@entityN:original name`` line per entity (REFERENCE.md
  sec. 5). ``passage_sentences`` > 0 keeps that many sentences of each passage, as in
  the Cooijmans et al. preprocessing the LN paper used (4), either the ``first`` ones
  or the ones sharing the most words with the question (``sentence_selection=
  'overlap'``, kept in passage order).
* ``cloze_books``: a cloze task built from a folder of tokenised books
  (``lnorm.data.cloze_books``), split by book.
* ``synthetic``: passages where the answer is the entity that follows a cue word the
  question names; for smoke runs only.

Arrays of every split (``encode``): ``passage`` int32 [N, max_passage_tokens] and
``passage_length`` [N]; ``question`` int32 [N, max_question_tokens] and
``question_length`` [N]; ``answer`` int32 [N], the answer's entity number (0 for
``@entity0``). Ids: 0 pad, 1 OOV, 2 ``@placeholder``, 3 + k ``@entityk``
(``info['entity_offset']`` = 3) for k < ``info['num_entities']``, then the words of
the training split by frequency. Every split is padded to one length, so the
training step compiles once (the shared loop draws batches from fixed-shape arrays;
see the experiment's README text for the cost). Examples longer than the limits or
with more entities than ``num_entities`` are dropped and counted in the notes.

Recorded with every dataset (``info['baselines']``, and the notes): the share of
questions that the most frequent entity of the passage answers, and chance, the
mean of 1 / (entities in the passage).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import sys
import time
from typing import Any, Iterable, Sequence

import numpy as np

from lnorm.data import cache
from lnorm.data import core
from lnorm.data import locate
from lnorm.data import text

NAME = "cloze"
PLACEHOLDER = "@placeholder"
ENTITY_PREFIX = "@entity"
PLACEHOLDER_ID = len(text.RESERVED)  # 2
ENTITY_OFFSET = PLACEHOLDER_ID + 1  # 3: @entity0
SPLIT_DIRS = {"train": "training", "validation": "validation", "test": "test"}
CORPORA = ("cnn", "dailymail")
SELECTIONS = ("first", "overlap")
DEFAULT_MAX_PASSAGE = 2000  # Tokens; CNN passages average about 760.
DEFAULT_MAX_QUESTION = 100
DEFAULT_NUM_ENTITIES = 600  # CNN numbers entities up to about 530.
FILES_HELP = ("the CNN/Daily Mail question files, <corpus>/questions/"
              "{training,validation,test}/*.question (cnn.tgz unpacked)")
_ENTITY = re.compile(r"^@entity(\d+)$")
_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ClozeExample:
  passage: tuple[str, ...]  # Tokens; entities as @entityN.
  question: tuple[str, ...]  # Tokens with one @placeholder.
  answer: str  # @entityN, present in the passage.


def entity_number(token: str) -> int | None:
  """N for ``@entityN``, else None."""
  m = _ENTITY.match(token)
  return int(m.group(1)) if m else None


# --- the CNN / Daily Mail .question files ------------------------------------------------


def parse_question_file(content: str, path: str) -> ClozeExample:
  """One ``.question`` file's text -> ClozeExample; MalformedDataError naming ``path``
  and the problem otherwise."""
  lines = content.split("\n")
  fix = ("Expected: URL, blank, passage, blank, question with @placeholder, blank, "
         "answer @entityN, blank, then @entityN:name lines (REFERENCE.md sec. 5).")
  if len(lines) < 7:
    raise core.MalformedDataError(path, f"it has {len(lines)} lines, fewer than 7", fix)
  for i in (1, 3, 5):
    if lines[i].strip():
      raise core.MalformedDataError(path, f"line {i + 1} should be blank", fix)
  passage, question, answer = lines[2].split(), lines[4].split(), lines[6].strip()
  if not passage:
    raise core.MalformedDataError(path, "the passage (line 3) is empty", fix)
  if question.count(PLACEHOLDER) != 1:
    raise core.MalformedDataError(
        path, f"the question (line 5) holds {question.count(PLACEHOLDER)} "
        f"{PLACEHOLDER}, not one", fix)
  if entity_number(answer) is None:
    raise core.MalformedDataError(path, f"the answer (line 7) {answer!r} is not an "
                                  "@entityN marker", fix)
  for j, line in enumerate(lines[8:], start=9):
    if line.strip() and entity_number(line.split(":", 1)[0]) is None:
      raise core.MalformedDataError(path, f"line {j} {line[:40]!r} is not "
                                    "@entityN:name", fix)
  return ClozeExample(tuple(passage), tuple(question), answer)


def _sentences(tokens: Sequence[str]) -> list[list[str]]:
  from lnorm.data import books  # pylint: disable=g-import-not-at-top
  return books.split_sentences(list(tokens))


def restrict_passage(example: ClozeExample, num_sentences: int,
                     selection: str) -> ClozeExample:
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
  sentences = _sentences(example.passage)
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


def read_question_dir(path: str) -> list[ClozeExample]:
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


# --- arrays ------------------------------------------------------------------------------


def candidates(example: ClozeExample) -> list[str]:
  """The passage's entities, in order of first appearance."""
  return list(dict.fromkeys(t for t in example.passage if entity_number(t) is not None))


def most_frequent_entity(example: ClozeExample) -> str:
  """The passage's most frequent entity (ties: the first to appear)."""
  ents = candidates(example)
  counts = {e: 0 for e in ents}
  for t in example.passage:
    if t in counts:
      counts[t] += 1
  return max(ents, key=lambda e: (counts[e], -ents.index(e)))


def baselines(examples: Sequence[ClozeExample]) -> dict[str, float]:
  """Accuracy of the most-frequent-entity guess, and chance (mean 1 / candidates)."""
  if not examples:
    return {"most_frequent_entity_accuracy": float("nan"), "chance_accuracy": float("nan")}
  return {
      "most_frequent_entity_accuracy": float(np.mean(
          [most_frequent_entity(e) == e.answer for e in examples])),
      "chance_accuracy": float(np.mean([1.0 / len(candidates(e)) for e in examples])),
  }


def vocabulary(train: Iterable[ClozeExample], vocab_size: int,
               num_entities: int) -> text.Vocabulary:
  """pad, OOV, @placeholder, @entity0..@entity{num_entities-1}, then the most frequent
  training words, ``vocab_size`` ids in all."""
  specials = [PLACEHOLDER] + [f"{ENTITY_PREFIX}{k}" for k in range(num_entities)]
  if vocab_size < len(text.RESERVED) + len(specials):
    raise core.DataError(
        f"cloze: vocab_size {vocab_size} is smaller than the {len(specials) + 2} "
        "reserved, placeholder and entity ids; raise --config.data.vocab_size.")
  counts = text.count_words(list(e.passage) + list(e.question) for e in train)
  return text.Vocabulary.from_counts(counts, vocab_size - len(text.RESERVED), specials)


def _fits(e: ClozeExample, max_passage: int, max_question: int, num_entities: int) -> bool:
  numbers = [entity_number(t) for t in e.passage + e.question + (e.answer,)]
  return (len(e.passage) <= max_passage and len(e.question) <= max_question
          and max((n for n in numbers if n is not None), default=0) < num_entities
          and e.answer in e.passage)


def encode(examples: Sequence[ClozeExample], vocab: text.Vocabulary, max_passage: int,
           max_question: int) -> dict[str, np.ndarray]:
  """The arrays of the module docstring; every example must fit the limits."""
  passage, passage_length = text.pad_and_truncate(
      [vocab.encode(e.passage) for e in examples], max_passage, "post", "post")
  question, question_length = text.pad_and_truncate(
      [vocab.encode(e.question) for e in examples], max_question, "post", "post")
  answer = np.asarray([entity_number(e.answer) for e in examples], np.int32)
  return {"passage": passage, "passage_length": passage_length, "question": question,
          "question_length": question_length, "answer": answer.reshape(-1)}


def build(splits: dict[str, list[ClozeExample]], config: Any, source: str,
          location: str, notes: str = "", info: dict | None = None) -> core.Dataset:
  """Filters, vocabulary, arrays, baselines and the record of a dict of splits."""
  max_passage = core.option(config, "max_passage_tokens", DEFAULT_MAX_PASSAGE)
  max_question = core.option(config, "max_question_tokens", DEFAULT_MAX_QUESTION)
  num_entities = core.option(config, "num_entities", DEFAULT_NUM_ENTITIES)
  vocab_size = core.option(config, "vocab_size", 50000)
  kept, dropped = {}, {}
  for split, examples in splits.items():
    kept[split] = [e for e in examples if _fits(e, max_passage, max_question, num_entities)]
    dropped[split] = len(examples) - len(kept[split])
  if not kept.get("train"):
    raise core.DataError(
        f"cloze at {location}: no training example fits max_passage_tokens="
        f"{max_passage}, max_question_tokens={max_question}, num_entities="
        f"{num_entities}; raise those --config.data fields.")
  vocab = vocabulary(kept["train"], vocab_size, num_entities)
  arrays = {s: encode(ex, vocab, max_passage, max_question) for s, ex in kept.items()}
  base = {s: baselines(ex) for s, ex in kept.items()}
  lengths = {s: float(np.mean(a["passage_length"])) if len(a["answer"]) else 0.0
             for s, a in arrays.items()}
  described = "; ".join(
      f"{s}: {len(kept[s])} questions ({dropped[s]} over the limits dropped), mean "
      f"passage {lengths[s]:.0f} tokens, most-frequent-entity accuracy "
      f"{base[s]['most_frequent_entity_accuracy']:.3f}, chance "
      f"{base[s]['chance_accuracy']:.3f}" for s in kept)
  info = {**(info or {}), "vocab_size": len(vocab), "vocabulary": tuple(vocab.words),
          "num_entities": num_entities, "entity_offset": ENTITY_OFFSET,
          "placeholder_id": PLACEHOLDER_ID, "baselines": base,
          "max_passage_tokens": max_passage, "max_question_tokens": max_question}
  return core.Dataset(NAME, source, location, arrays,
                      "; ".join(n for n in (notes, described) if n), info)


# --- cached datasets ---------------------------------------------------------------------


def _to_cache(ds: core.Dataset) -> dict[str, np.ndarray]:
  out = {f"{s}/{k}": v for s, arrays in ds.splits.items() for k, v in arrays.items()}
  out["vocabulary"] = np.asarray(ds.info["vocabulary"], dtype=str)
  out["notes"] = np.asarray(ds.notes)
  out["baselines"] = np.asarray([[s, k, str(v)] for s, b in ds.info["baselines"].items()
                                 for k, v in b.items()], dtype=str)
  return out


def _from_cache(arrays: dict[str, np.ndarray], config: Any, source: str, location: str,
                info: dict) -> core.Dataset:
  splits: dict[str, dict[str, np.ndarray]] = {}
  for key, v in arrays.items():
    if "/" in key:
      split, field = key.split("/", 1)
      splits.setdefault(split, {})[field] = v
  base: dict[str, dict[str, float]] = {}
  for s, k, v in arrays["baselines"]:
    base.setdefault(str(s), {})[str(k)] = float(v)
  words = [str(w) for w in arrays["vocabulary"]]
  info = {**info, "vocab_size": len(words), "vocabulary": tuple(words),
          "num_entities": core.option(config, "num_entities", DEFAULT_NUM_ENTITIES),
          "entity_offset": ENTITY_OFFSET, "placeholder_id": PLACEHOLDER_ID,
          "baselines": base,
          "max_passage_tokens": splits["train"]["passage"].shape[1],
          "max_question_tokens": splits["train"]["question"].shape[1]}
  return core.Dataset(NAME, source, location, splits, str(arrays["notes"]), info)


#: The data fields that change the arrays, part of every cache key.
_CACHE_FIELDS = ("corpus", "passage_sentences", "sentence_selection", "vocab_size",
                 "num_entities", "max_passage_tokens", "max_question_tokens",
                 "validation_books", "test_books", "min_entity_count", "seed")


def cached(config: Any, kind: str, source_path: str, decoder_modules, build_fn,
           source: str, info: dict | None = None) -> core.Dataset:
  """``build_fn()``'s dataset, read from lnorm.data.cache when an entry for the same
  source file, decoder code and data fields exists."""
  info = info or {}
  if not cache.enabled(config):
    return build_fn()
  version = repr([(f, core.option(config, f)) for f in _CACHE_FIELDS])
  directory = cache.cache_dir(config, core.data_dir(core.option(config, "data_dir")))
  path = cache.key_path(directory, kind, source_path, version, decoder=decoder_modules)
  arrays = cache.load(path)
  if arrays is not None:
    return _from_cache(arrays, config, source, source_path, info)
  ds = build_fn()
  cache.save(path, _to_cache(ds))
  return ds


def load_files(config: Any, auto: bool) -> core.Dataset:
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
    return build(splits, config, "files", root, cut, {"corpus": corpus})

  return cached(config, f"cloze-{corpus}", root, [sys.modules[__name__]], build_fn,
                "files", {"corpus": corpus})


# --- synthetic ---------------------------------------------------------------------------


def synthetic_examples(num_examples: int, seed: int) -> list[ClozeExample]:
  """Passages of filler words and 3-6 entities, each entity after its own cue word
  ``cueK``; the question names one cue, and its entity is the answer. For smoke runs
  only: attention to the cue word solves it."""
  rng = np.random.default_rng([seed, 12])
  filler = [f"w{i}" for i in range(20)]
  out = []
  for _ in range(num_examples):
    n = int(rng.integers(3, 7))
    entities = [f"{ENTITY_PREFIX}{k}" for k in rng.permutation(10)[:n]]
    cues = [f"cue{k}" for k in rng.permutation(8)[:n]]
    passage = []
    for cue, ent in zip(cues, entities):
      passage += [filler[i] for i in rng.integers(0, 20, rng.integers(1, 5))]
      passage += [cue, ent]
    passage += [filler[i] for i in rng.integers(0, 20, rng.integers(0, 4))]
    k = int(rng.integers(n))
    question = [filler[int(rng.integers(20))], cues[k], PLACEHOLDER, "."]
    out.append(ClozeExample(tuple(passage), tuple(question), entities[k]))
  return out


def load_synthetic(config: Any, auto: bool) -> core.Dataset:
  del auto
  n = core.option(config, "synthetic_examples", 512)
  seed = core.option(config, "seed", 0)
  splits = {s: synthetic_examples(n if s == "train" else n // 4, seed + i)
            for i, s in enumerate(("train", "validation", "test"))}
  return build(splits, config, "synthetic", "lnorm.data.cloze.synthetic_examples",
               "SYNTHETIC cue-word cloze questions, for smoke runs only")


def _load_cloze_books(config: Any, auto: bool) -> core.Dataset:
  from lnorm.data import cloze_books  # pylint: disable=g-import-not-at-top
  return cloze_books.load(config, auto)


SOURCES = {"files": load_files, "cloze_books": _load_cloze_books,
           "synthetic": load_synthetic}
# 'auto' never swaps the CNN corpus for a different task: cloze_books is asked for.
AUTO = ("files",)
