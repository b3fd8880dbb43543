"""The cloze example every source produces, its anonymised entities, its candidates
and the two baselines recorded with every split.

An example is a passage, a question holding one ``@placeholder`` and an answer, an
entity marker ``@entityN``. Entities are anonymised per example, the way Hermann et
al. (2015) released the CNN and Daily Mail corpora: the numbers carry no meaning
across examples, so a model must find the answer in the passage.

The candidates of an example are the answers a prediction may choose from: the
entities of the passage (the CNN corpus, the cloze task built from books), or an
explicit list (the Children's Book Test's 10 words, numbered ``@entity0`` to
``@entity9``).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Mapping, Sequence

import numpy as np

from lnorm.data import text

PLACEHOLDER = "@placeholder"
ENTITY_PREFIX = "@entity"
PLACEHOLDER_ID = len(text.RESERVED)  # 2
ENTITY_OFFSET = PLACEHOLDER_ID + 1  # 3: @entity0
_ENTITY = re.compile(r"^@entity(\d+)$")


@dataclasses.dataclass(frozen=True)
class ClozeExample:
  passage: tuple[str, ...]  # Tokens; entities as @entityN.
  question: tuple[str, ...]  # Tokens with one @placeholder.
  answer: str  # @entityN.
  #: The markers a prediction chooses from; None: the entities of the passage.
  candidates: tuple[str, ...] | None = None


def entity_number(token: str) -> int | None:
  """N for ``@entityN``, else None."""
  m = _ENTITY.match(token)
  return int(m.group(1)) if m else None


def entity_marker(number: int) -> str:
  return f"{ENTITY_PREFIX}{number}"


def random_markers(words: Sequence[str], rng: np.random.Generator) -> dict[str, str]:
  """``word -> @entityN`` for distinct ``words``, the numbers 0..len-1 permuted at
  random (as in the released CNN corpus, where a number says nothing about order)."""
  numbers = rng.permutation(len(words))
  return {w: entity_marker(int(n)) for w, n in zip(words, numbers)}


def anonymise(tokens: Sequence[str], markers: Mapping[str, str],
              blank: str | None = None, fold_case: bool = False) -> tuple[str, ...]:
  """Tokens with each word of ``markers`` replaced by its marker, ``blank`` (if
  given) by ``@placeholder``, and every other word lower-cased, as in the CNN
  corpus. ``fold_case``: a token matches a word of ``markers`` (whose keys are then
  lower case) whatever its case, so ``In`` opening a sentence is the candidate
  ``in``."""
  out = []
  for w in tokens:
    key = w.lower() if fold_case else w
    if w == blank:
      out.append(PLACEHOLDER)
    elif key in markers:
      out.append(markers[key])
    else:
      out.append(w.lower())
  return tuple(out)


def question_window(example: ClozeExample, width: int) -> ClozeExample:
  """The example with its question cut to ``width`` tokens either side of the
  ``@placeholder`` (0: the whole question)."""
  if width <= 0:
    return example
  at = example.question.index(PLACEHOLDER)
  return dataclasses.replace(
      example, question=example.question[max(0, at - width):at + width + 1])


def candidates(example: ClozeExample) -> list[str]:
  """The example's candidate markers: its explicit list, else the passage's
  entities in order of first appearance."""
  if example.candidates is not None:
    return list(example.candidates)
  return list(dict.fromkeys(t for t in example.passage if entity_number(t) is not None))


def most_frequent_candidate(example: ClozeExample) -> str:
  """The candidate seen most often in the passage (ties: the first to appear in the
  passage, then the first listed)."""
  cands = candidates(example)
  counts = {c: 0 for c in cands}
  never = len(example.passage)
  first = {}
  for i, t in enumerate(example.passage):
    if t in counts:
      counts[t] += 1
      first.setdefault(t, i)
  best = max(range(len(cands)),
             key=lambda k: (counts[cands[k]], -first.get(cands[k], never), -k))
  return cands[best]


def baselines(examples: Sequence[ClozeExample],
              answerable: Sequence[bool] | None = None) -> dict[str, float]:
  """Accuracy of guessing the most frequent candidate of the passage, and chance,
  the mean of 1 / (number of candidates); a question not ``answerable`` counts as
  missed in both, as the reader's error counts it."""
  if not examples:
    return {"most_frequent_candidate_accuracy": float("nan"),
            "chance_accuracy": float("nan")}
  answerable = [True] * len(examples) if answerable is None else answerable
  return {
      "most_frequent_candidate_accuracy": float(np.mean(
          [ok and most_frequent_candidate(e) == e.answer
           for e, ok in zip(examples, answerable)])),
      "chance_accuracy": float(np.mean([1.0 / len(candidates(e)) if ok else 0.0
                                        for e, ok in zip(examples, answerable)])),
  }
