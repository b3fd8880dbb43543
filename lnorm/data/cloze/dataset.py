"""Cloze examples -> the arrays the attentive reader trains on, with the baselines and
the record of every split, and a cache of those arrays.

Arrays of every split (:func:`encode`): ``passage`` int32 [N, max_passage_tokens] and
``passage_length`` [N]; ``question`` int32 [N, max_question_tokens] and
``question_length`` [N]; ``answer`` int32 [N], the answer's entity number (0 for
``@entity0``); and, for sources with listed candidates (the Children's Book Test
format), ``candidate_mask`` bool [N, num_entities], true at the example's candidates.
Ids: 0 pad, 1 OOV, 2 ``@placeholder``, 3 + k ``@entityk`` (``info['entity_offset']``
= 3) for k < ``info['num_entities']``, then the words of the training split by
frequency. Every split is padded to one length, so the shared loop draws batches
from fixed-shape arrays. ``question_window`` > 0 cuts every question to that many
tokens either side of ``@placeholder`` (a unidirectional question LSTM then ends
near the blank).

Unanswerable questions: longer than the limits, with more entities than
``num_entities``, or whose answer is not in the passage. Training drops them. An
evaluation split keeps every question, as published accuracies count every question
of a split (the CBT's 2,000 validation and 2,500 test): an unanswerable one is cut to
the limits (entity markers past ``num_entities`` become OOV) and flagged false in
``answerable`` bool [N] (every split has it), which the attentive reader's error
scores as wrong. The notes and ``info['unanswerable']`` say how many there were.

Recorded with every dataset (``info['baselines']``, and the notes): the share of
questions that the candidate seen most often in the passage answers, and chance,
the mean of 1 / (number of candidates); an unanswerable question counts as missed
in both.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Sequence

import numpy as np

from lnorm.data import cache
from lnorm.data import core
from lnorm.data import text
from lnorm.data.cloze import example as ex

NAME = "cloze"
DEFAULT_MAX_PASSAGE = 2000  # Tokens; CNN passages average about 760.
DEFAULT_MAX_QUESTION = 100
DEFAULT_NUM_ENTITIES = 600  # CNN numbers entities up to about 530.
DEFAULT_VOCAB_SIZE = 50000
#: The split whose unanswerable questions are dropped; the others score them wrong.
TRAIN = "train"


def vocabulary(train: Iterable[ex.ClozeExample], vocab_size: int,
               num_entities: int) -> text.Vocabulary:
  """pad, OOV, @placeholder, @entity0..@entity{num_entities-1}, then the most frequent
  training words, ``vocab_size`` ids in all."""
  specials = [ex.PLACEHOLDER] + [ex.entity_marker(k) for k in range(num_entities)]
  if vocab_size < len(text.RESERVED) + len(specials):
    raise core.DataError(
        f"cloze: vocab_size {vocab_size} is smaller than the {len(specials) + 2} "
        "reserved, placeholder and entity ids; raise --config.data.vocab_size.")
  counts = text.count_words(list(e.passage) + list(e.question) for e in train)
  return text.Vocabulary.from_counts(counts, vocab_size - len(text.RESERVED), specials)


def _within_limits(e: ex.ClozeExample, max_passage: int, max_question: int,
                   num_entities: int) -> bool:
  tokens = e.passage + e.question + (e.answer,) + tuple(e.candidates or ())
  numbers = [ex.entity_number(t) for t in tokens]
  return (len(e.passage) <= max_passage and len(e.question) <= max_question
          and max((n for n in numbers if n is not None), default=0) < num_entities)


def encode(examples: Sequence[ex.ClozeExample], vocab: text.Vocabulary, max_passage: int,
           max_question: int, num_entities: int,
           answerable: Sequence[bool] | None = None) -> dict[str, np.ndarray]:
  """The arrays of the module docstring. An example flagged not ``answerable``
  (default: all are) may exceed the limits: it is cut to them, and its answer past
  ``num_entities`` is written as 0."""
  answerable = np.ones(len(examples), bool) if answerable is None else np.asarray(
      answerable, bool)
  passage, passage_length = text.pad_and_truncate(
      [vocab.encode(e.passage) for e in examples], max_passage, "post", "post")
  question, question_length = text.pad_and_truncate(
      [vocab.encode(e.question) for e in examples], max_question, "post", "post")
  answer = np.asarray([ex.entity_number(e.answer) for e in examples], np.int32)
  answer = np.where(answerable, answer, np.where(answer < num_entities, answer, 0))
  arrays = {"passage": passage, "passage_length": passage_length, "question": question,
            "question_length": question_length, "answer": answer.reshape(-1).astype(np.int32),
            "answerable": answerable}
  if examples and examples[0].candidates is not None:
    mask = np.zeros((len(examples), num_entities), bool)
    for i, e in enumerate(examples):
      numbers = [ex.entity_number(c) for c in e.candidates]
      mask[i, [n for n in numbers if n < num_entities]] = True
    arrays["candidate_mask"] = mask
  return arrays


def _describe(split: str, kept: int, over: int, unanswerable: int, mean_length: float,
              base: dict[str, float]) -> str:
  problems = [f"{over} over the limits"]
  if unanswerable:
    problems.append(f"{unanswerable} without the answer in the passage")
  fate = "dropped" if split == TRAIN else "kept and scored wrong"
  return (f"{split}: {kept} questions ({', '.join(problems)} {fate}), mean passage "
          f"{mean_length:.0f} tokens, most-frequent-candidate accuracy "
          f"{base['most_frequent_candidate_accuracy']:.3f}, chance "
          f"{base['chance_accuracy']:.3f}")


def build(splits: dict[str, list[ex.ClozeExample]], config: Any, source: str,
          location: str, notes: str = "", info: dict | None = None,
          num_entities: int | None = None) -> core.Dataset:
  """Filters, vocabulary, arrays, baselines and the record of a dict of splits.

  ``num_entities``: the size of the answer vocabulary when the source fixes it (the
  number of listed candidates); else ``data.num_entities``.
  """
  max_passage = core.option(config, "max_passage_tokens", DEFAULT_MAX_PASSAGE)
  max_question = core.option(config, "max_question_tokens", DEFAULT_MAX_QUESTION)
  if num_entities is None:
    num_entities = core.option(config, "num_entities", DEFAULT_NUM_ENTITIES)
  vocab_size = core.option(config, "vocab_size", DEFAULT_VOCAB_SIZE)
  window = core.option(config, "question_window", 0)
  kept, answerable, over, unanswerable = {}, {}, {}, {}
  for split, examples in splits.items():
    examples = [ex.question_window(e, window) for e in examples]
    fits = [_within_limits(e, max_passage, max_question, num_entities) for e in examples]
    ok = [f and e.answer in e.passage for f, e in zip(fits, examples)]
    over[split] = fits.count(False)
    unanswerable[split] = len(examples) - over[split] - ok.count(True)
    if split == TRAIN:
      kept[split] = [e for e, k in zip(examples, ok) if k]
      answerable[split] = [True] * len(kept[split])
    else:
      kept[split], answerable[split] = examples, ok
  if not kept.get(TRAIN):
    raise core.DataError(
        f"cloze at {location}: no training example fits max_passage_tokens="
        f"{max_passage}, max_question_tokens={max_question}, num_entities="
        f"{num_entities} with its answer in the passage; raise those --config.data "
        "fields.")
  vocab = vocabulary(kept[TRAIN], vocab_size, num_entities)
  arrays = {s: encode(e, vocab, max_passage, max_question, num_entities, answerable[s])
            for s, e in kept.items()}
  base = {s: ex.baselines(e, answerable[s]) for s, e in kept.items()}
  cut = f"questions cut to {window} tokens either side of the blank" if window else ""
  described = "; ".join(
      _describe(s, len(kept[s]), over[s], unanswerable[s],
                float(np.mean(a["passage_length"])) if len(a["answer"]) else 0.0, base[s])
      for s, a in arrays.items())
  info = {**(info or {}), "vocab_size": len(vocab), "vocabulary": tuple(vocab.words),
          "num_entities": num_entities, "entity_offset": ex.ENTITY_OFFSET,
          "placeholder_id": ex.PLACEHOLDER_ID, "baselines": base,
          "num_questions": {s: len(e) for s, e in kept.items()},
          "unanswerable": {s: answerable[s].count(False) for s in kept},
          "max_passage_tokens": max_passage, "max_question_tokens": max_question}
  return core.Dataset(NAME, source, location, arrays,
                      "; ".join(n for n in (notes, cut, described) if n), info)


# --- cached datasets ---------------------------------------------------------------------


def _to_cache(ds: core.Dataset) -> dict[str, np.ndarray]:
  out = {f"{s}/{k}": v for s, arrays in ds.splits.items() for k, v in arrays.items()}
  out["vocabulary"] = np.asarray(ds.info["vocabulary"], dtype=str)
  out["notes"] = np.asarray(ds.notes)
  out["num_entities"] = np.asarray(ds.info["num_entities"])
  out["baselines"] = np.asarray([[s, k, str(v)] for s, b in ds.info["baselines"].items()
                                 for k, v in b.items()], dtype=str)
  return out


def _from_cache(arrays: dict[str, np.ndarray], source: str, location: str,
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
          "num_entities": int(arrays["num_entities"]),
          "entity_offset": ex.ENTITY_OFFSET, "placeholder_id": ex.PLACEHOLDER_ID,
          "baselines": base,
          "num_questions": {s: len(a["answer"]) for s, a in splits.items()},
          "unanswerable": {s: int(np.sum(~a["answerable"])) for s, a in splits.items()},
          "max_passage_tokens": splits["train"]["passage"].shape[1],
          "max_question_tokens": splits["train"]["question"].shape[1]}
  return core.Dataset(NAME, source, location, splits, str(arrays["notes"]), info)


#: The data fields that change the arrays, part of every cache key.
CACHE_FIELDS = ("corpus", "word_type", "context_sentences", "question_window",
                "passage_sentences",
                "sentence_selection", "vocab_size", "num_entities", "max_passage_tokens",
                "max_question_tokens", "validation_books", "test_books",
                "min_entity_count", "seed")


def cache_root(config: Any) -> str:
  """Where lnorm.data.cache keeps this run's cached data."""
  return cache.cache_dir(config, core.data_dir(core.option(config, "data_dir")))


def cached(config: Any, kind: str, source_path: str | Sequence[str], decoder_modules,
           build_fn, source: str, info: dict | None = None) -> core.Dataset:
  """``build_fn()``'s dataset, read from lnorm.data.cache when an entry for the same
  source files, decoder code and data fields exists."""
  info = info or {}
  location = (source_path if isinstance(source_path, str)
              else os.path.dirname(source_path[0]))
  if not cache.enabled(config):
    return build_fn()
  version = repr([(f, core.option(config, f)) for f in CACHE_FIELDS])
  path = cache.key_path(cache_root(config), kind, source_path, version,
                        decoder=decoder_modules)
  arrays = cache.load(path)
  if arrays is not None:
    return _from_cache(arrays, source, location, info)
  ds = build_fn()
  cache.save(path, _to_cache(ds))
  return ds
