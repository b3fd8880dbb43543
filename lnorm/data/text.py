"""Tokenisation, vocabularies and fixed-length id sequences, shared by the text
experiments (IMDB here; skip-thoughts and the attentive reader reuse them).

Reserved ids: 0 = padding, 1 = out-of-vocabulary (OOV); words take ids 2, 3, ... in
order of decreasing training frequency, ties broken alphabetically, so the same
text always gives the same vocabulary. A model that needs more special symbols (the
skip-thoughts decoders' end of sentence, EOS) passes them as ``specials``: they take
the ids right after OOV.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Sequence

import numpy as np

PAD = "<pad>"
OOV = "<oov>"
EOS = "<eos>"
PAD_ID = 0
OOV_ID = 1
RESERVED = (PAD, OOV)

# IMDB reviews carry HTML line breaks ('<br />', also '<br/>', '<br>').
_HTML_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
# A word is letters/digits, with inner apostrophes kept ("don't", "rock'n'roll");
# every other non-space character is a token of its own.
_TOKEN = re.compile(r"\w+(?:'\w+)*|[^\w\s]")


def tokenize(text: str) -> list[str]:
  """Lower-cased word and punctuation tokens; HTML line breaks become spaces."""
  return _TOKEN.findall(_HTML_BREAK.sub(" ", text).lower())


class Vocabulary:
  """Words <-> ids, with PAD_ID and OOV_ID reserved."""

  def __init__(self, words: Sequence[str]):
    words = list(words)
    if words[:2] != list(RESERVED):
      words = list(RESERVED) + [w for w in words if w not in RESERVED]
    self.words = words
    self._ids = {w: i for i, w in enumerate(words)}
    if len(self._ids) != len(words):
      raise ValueError("duplicate words in the vocabulary")

  @classmethod
  def from_counts(cls, counts: Mapping[str, int], max_words: int,
                  specials: Sequence[str] = ()) -> "Vocabulary":
    """The ``max_words`` most frequent words (ties: alphabetical order), after
    ``specials`` (which count towards ``max_words``)."""
    skip = set(RESERVED) | set(specials)
    ranked = sorted((w for w, c in counts.items() if c > 0 and w not in skip),
                    key=lambda w: (-counts[w], w))
    return cls(list(specials) + ranked[:max(max_words - len(specials), 0)])

  @classmethod
  def from_texts(cls, token_lists: Iterable[Sequence[str]], max_words: int) -> "Vocabulary":
    return cls.from_counts(count_words(token_lists), max_words)

  def __len__(self) -> int:
    """The number of ids, reserved ones included: the embedding table's size."""
    return len(self.words)

  def id(self, word: str) -> int:
    return self._ids.get(word, OOV_ID)

  def encode(self, tokens: Sequence[str]) -> list[int]:
    return [self._ids.get(t, OOV_ID) for t in tokens]

  def decode(self, ids: Iterable[int]) -> list[str]:
    return [self.words[i] for i in ids if i != PAD_ID]

  def save(self, path: str) -> None:
    """One word per line, in id order: the file :meth:`load` reads back."""
    if any("\n" in w for w in self.words):
      raise ValueError("a word contains a newline; it cannot be saved one per line")
    with open(path, "w", encoding="utf-8") as f:
      f.write("\n".join(self.words) + "\n")

  @classmethod
  def load(cls, path: str) -> "Vocabulary":
    with open(path, encoding="utf-8") as f:
      words = f.read().split("\n")[:-1]
    if words[:len(RESERVED)] != list(RESERVED):
      raise ValueError(f"{path} is not a saved vocabulary: it must start with "
                       f"{', '.join(RESERVED)}, one word per line")
    return cls(words)


def count_words(token_lists: Iterable[Sequence[str]]) -> dict[str, int]:
  counts: dict[str, int] = {}
  for tokens in token_lists:
    for t in tokens:
      counts[t] = counts.get(t, 0) + 1
  return counts


def pad_and_truncate(sequences: Sequence[Sequence[int]], max_length: int,
                     padding: str = "post", truncating: str = "pre"):
  """(ids int32 [N, max_length], lengths int32 [N]).

  ``truncating='pre'`` drops the *start* of a long sequence and keeps its end (as
  Keras ``pad_sequences`` does); 'post' keeps the start. ``padding='post'`` puts
  PAD_ID after the tokens, where a sequence mask or flax ``seq_lengths`` expect it;
  'pre' puts it in front (Keras's default).
  """
  if padding not in ("pre", "post") or truncating not in ("pre", "post"):
    raise ValueError(f"padding and truncating must be 'pre' or 'post', got "
                     f"{padding!r}, {truncating!r}")
  out = np.full((len(sequences), max_length), PAD_ID, np.int32)
  lengths = np.zeros(len(sequences), np.int32)
  for i, seq in enumerate(sequences):
    seq = np.asarray(seq, np.int32)
    if len(seq) > max_length:
      seq = seq[len(seq) - max_length:] if truncating == "pre" else seq[:max_length]
    lengths[i] = len(seq)
    if len(seq):
      if padding == "post":
        out[i, :len(seq)] = seq
      else:
        out[i, max_length - len(seq):] = seq
  return out, lengths
