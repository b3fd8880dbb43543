"""IMDB movie-review sentiment (Maas et al. 2011) for the BLN RNN
(docs/experiments.md, sec. 8).

Splits: 'train' = the 25k training reviews less a seeded random hold-out of
``validation_size`` (5,000), then optionally a seeded ``subset_fraction``;
'validation' = the hold-out; 'test' = the 25k test reviews.

Features: 'tokens' int32 [N, max_length] (word ids, see ``lnorm.data.text``: 0 pad,
1 OOV), 'length' int32 [N] (number of real tokens after truncation), 'label' int32
[N] (1 = positive). A review longer than ``max_length`` keeps its *last* tokens, as
Keras ``pad_sequences`` does in the BLN code. Padding goes *after* the tokens by
default (``padding='post'``), where flax ``seq_lengths`` and sequence masks expect
it; ``padding='pre'`` reproduces Keras's default layout, the last token at the last
step, for a model that runs the padding through unmasked as the authors' Keras model
does (``configs/bln_imdb.py:padding=keras``). 'length' counts the real tokens either
way.

The vocabulary is the ``vocab_size`` most frequent words of the training split
(after the hold-out, before the subset, so the 20% and whole-set runs share it).
``info['vocab_size']`` counts ids including the two reserved ones: it is the size
of the embedding table.
"""

from __future__ import annotations

import array
import collections
import glob
import logging
import os
import sys
import time
from typing import Any

import numpy as np

from lnorm.data import acl_imdb
from lnorm.data import cache
from lnorm.data import core
from lnorm.data import locate
from lnorm.data import splits
from lnorm.data import text
from lnorm.data import tfds_source

NAME = "imdb"
TFDS_NAME = "imdb_reviews/plain_text"
DEFAULT_VOCAB_SIZE = 20000
DEFAULT_MAX_LENGTH = 80
DEFAULT_VALIDATION_SIZE = 5000
DEFAULT_SYNTHETIC_SIZE = 256
FILES_HELP = "aclImdb/ (the extracted archive) or aclImdb_v1.tar.gz"
_SPLITS = ("train", "test")

_log = logging.getLogger(__name__)


def load_tfds(config: Any, auto: bool) -> core.Dataset:
  tfds_dir = core.option(config, "tfds_data_dir")
  download = not auto and core.option(config, "tfds_download", True)
  raw = tfds_source.read_splits(TFDS_NAME, _SPLITS, tfds_dir, download, _from_tfds, NAME)
  corpus = {s: ([str(t) for t in a["text"]], a["label"].tolist()) for s, a in raw.items()}
  return _finish(tokenize_corpus(corpus), config, "tfds", tfds_source.where(TFDS_NAME, tfds_dir))


def _from_tfds(examples: list[dict]) -> dict[str, np.ndarray]:
  return {"text": np.array([tfds_source.text(ex["text"]) for ex in examples], dtype=object),
          "label": tfds_source.stack(examples, "label", np.int32)}


def find_files(data_dir: str | None) -> tuple[tuple[str, str] | None, list[str]]:
  looked = []
  dirs = locate.search_dirs(data_dir, NAME)
  for d in dirs:
    looked.append(os.path.join(d, "aclImdb"))
    if os.path.isdir(os.path.join(d, "aclImdb")):
      return ("dir", d), looked
  for d in dirs:
    looked.append(os.path.join(d, "aclImdb*.tar.gz"))
    archives = sorted(glob.glob(os.path.join(d, "aclImdb*.tar.gz")))
    if archives:
      return ("tar", archives[0]), looked
  return None, looked


def load_files(config: Any, auto: bool) -> core.Dataset:
  del auto
  (kind, path), _ = locate.find_or_raise(config, find_files, NAME, FILES_HELP, TFDS_NAME)
  if kind == "dir":
    tokenized = tokenize_corpus(acl_imdb.read_dir(path))
    return _finish(tokenized, config, "files", os.path.join(path, "aclImdb"))
  return _finish(_tokenized_archive(path, config), config, "files", path)


def _tokenized_archive(path: str, config: Any) -> dict[str, np.ndarray]:
  entry = None
  if cache.enabled(config):
    entry = cache.key_path(cache.cache_dir(config), NAME, path,
                           decoder=(acl_imdb, sys.modules[__name__], text))
    tokenized = cache.load(entry)
    if tokenized is not None:
      _log.info("Read tokenized %s from cache %s", path, entry)
      return tokenized
  start = time.perf_counter()
  tokenized = tokenize_corpus(acl_imdb.read_tar(path))
  _log.info("Read and tokenized %s in %.1f s", path, time.perf_counter() - start)
  if entry is not None:
    cache.save(entry, tokenized)
  return tokenized


def tokenize_corpus(corpus: acl_imdb.Corpus) -> dict[str, np.ndarray]:
  """Texts -> a compact, cacheable form: 'words' (every distinct token, sorted) and,
  per split, 'ids' (all reviews' tokens as indices into words, concatenated),
  'offsets' (review i is ids[offsets[i]:offsets[i+1]]) and 'label'."""
  # A new word gets the next id; map() keeps the per-token lookup out of Python code.
  index: dict[str, int] = collections.defaultdict()
  index.default_factory = index.__len__
  flat = {}
  for split in _SPLITS:
    texts, labels = corpus[split]
    ids = array.array("i")
    offsets = [0]
    for t in texts:
      ids.extend(map(index.__getitem__, text.tokenize(t)))
      offsets.append(len(ids))
    flat[split] = (np.frombuffer(ids, np.int32), np.array(offsets, np.int64),
                   np.asarray(labels, np.int32))
  # Renumber in alphabetical order, so that ties in frequency break alphabetically.
  words = sorted(index)
  new_id = np.empty(len(index), np.int32)
  new_id[[index[w] for w in words]] = np.arange(len(words), dtype=np.int32)
  out = {"words": _pack_words(words)}
  for split, (ids, offsets, labels) in flat.items():
    out[f"{split}_ids"] = new_id[ids] if len(ids) else ids
    out[f"{split}_offsets"] = offsets
    out[f"{split}_label"] = labels
  return out


def _pack_words(words: list[str]) -> np.ndarray:
  # One newline-joined UTF-8 buffer: a fixed-width string array would pad every
  # word to the longest one (72 characters in IMDB), 10x the size.
  return np.frombuffer("\n".join(words).encode("utf-8"), np.uint8)


def _unpack_words(packed: np.ndarray) -> list[str]:
  return packed.tobytes().decode("utf-8").split("\n") if packed.size else []


def _finish(tokenized: dict[str, np.ndarray], config: Any, source: str,
            location: str) -> core.Dataset:
  seed = core.option(config, "seed", 0)
  max_length = core.option(config, "max_length", DEFAULT_MAX_LENGTH)
  padding = core.option(config, "padding", "post")
  truncating = core.option(config, "truncating", "pre")
  # Reviews are referred to by index until the vocabulary is known.
  reviews = {s: {"index": np.arange(len(tokenized[f"{s}_label"]))} for s in _SPLITS}
  train, validation = splits.holdout(
      reviews["train"], core.option(config, "validation_size", DEFAULT_VALIDATION_SIZE),
      seed, NAME)
  words = _unpack_words(tokenized["words"])
  train_ids = _gather(tokenized, "train", train["index"])
  counts = np.bincount(np.concatenate(train_ids) if train_ids else np.zeros(0, np.int64),
                       minlength=len(words))
  vocab = text.Vocabulary.from_counts(
      {words[i]: int(counts[i]) for i in np.flatnonzero(counts)},
      core.option(config, "vocab_size", DEFAULT_VOCAB_SIZE))
  lookup = np.full(len(words), text.OOV_ID, np.int32)  # corpus id -> vocabulary id
  corpus_id = {w: i for i, w in enumerate(words)}
  for vocab_id in range(len(text.RESERVED), len(vocab)):
    lookup[corpus_id[vocab.words[vocab_id]]] = vocab_id

  fraction = core.option(config, "subset_fraction", 1.0)
  chosen = {"train": splits.subset(train, fraction, seed, NAME)["index"],
            "validation": validation["index"], "test": reviews["test"]["index"]}
  data = {}
  for split, index in chosen.items():
    source_split = "test" if split == "test" else "train"
    seqs = [lookup[ids] for ids in _gather(tokenized, source_split, index)]
    tokens, lengths = text.pad_and_truncate(seqs, max_length, padding, truncating)
    data[split] = {"tokens": tokens, "length": lengths,
                   "label": tokenized[f"{source_split}_label"][index]}
  notes = f"training subset: {fraction:g} of the training split (seeded)" if fraction != 1.0 else ""
  return core.Dataset(NAME, source, location, data, notes, _info(vocab, max_length, padding,
                                                                  truncating))


def _gather(tokenized, split: str, index: np.ndarray) -> list[np.ndarray]:
  ids, offsets = tokenized[f"{split}_ids"], tokenized[f"{split}_offsets"]
  return [ids[offsets[i]:offsets[i + 1]] for i in index]


def _info(vocab: text.Vocabulary, max_length: int, padding: str, truncating: str):
  return {"num_classes": 2, "vocab_size": len(vocab), "vocabulary": tuple(vocab.words),
          "pad_id": text.PAD_ID, "oov_id": text.OOV_ID, "max_length": max_length,
          "padding": padding, "truncating": truncating}


def load_synthetic(config: Any, auto: bool) -> core.Dataset:
  """Random reviews with the real structure: for smoke runs, never for results.

  Positive reviews draw more often from the first half of the words, so that a
  model can learn something and a smoke run can show the loss falling.
  """
  del auto
  n = core.option(config, "synthetic_size", DEFAULT_SYNTHETIC_SIZE)
  num_words = min(core.option(config, "vocab_size", DEFAULT_VOCAB_SIZE), 1000)
  max_length = core.option(config, "max_length", DEFAULT_MAX_LENGTH)
  padding = core.option(config, "padding", "post")
  rng = np.random.default_rng([core.option(config, "seed", 0), 11])
  vocab = text.Vocabulary([f"word{i}" for i in range(num_words)])
  half = num_words // 2
  data = {}
  for split, size in (("train", n), ("validation", max(1, n // 4)), ("test", max(1, n // 4))):
    labels = rng.integers(0, 2, size=size).astype(np.int32)
    seqs = []
    for label in labels:
      length = rng.integers(1, 2 * max_length)
      low = rng.integers(2, 2 + half, size=length)
      high = rng.integers(2 + half, len(vocab), size=length)
      seqs.append(np.where(rng.random(length) < (0.7 if label else 0.3), low, high))
    tokens, lengths = text.pad_and_truncate(seqs, max_length, padding, "pre")
    data[split] = {"tokens": tokens, "length": lengths, "label": labels}
  return core.Dataset(NAME, "synthetic", "lnorm.data.imdb.load_synthetic", data,
                      "SYNTHETIC random token sequences with IMDB's structure, for smoke "
                      "runs only", _info(vocab, max_length, padding, "pre"))


SOURCES = {"tfds": load_tfds, "files": load_files, "synthetic": load_synthetic}
AUTO = ("tfds", "files")
