"""Reading the Large Movie Review Dataset (Maas et al. 2011) in its published
layout ``aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt``, as a directory or as
the tar.gz, into texts and labels (1 = pos, 0 = neg), sorted by path."""

from __future__ import annotations

import os
import re
import tarfile

from lnorm.data.core import MalformedDataError

SPLITS = ("train", "test")
LABELS = {"neg": 0, "pos": 1}
_ENTRY = re.compile(r"^(?:.*/)?aclImdb/(?P<split>train|test)/(?P<polarity>pos|neg)/"
                    r"(?P<file>[^/]+)$")
_FILE = re.compile(r"^\d+_\d+\.txt$")

Corpus = dict[str, tuple[list[str], list[int]]]  # split -> (texts, labels)


def _classify(name: str, where: str):
  """(split, label) for a review entry, None for anything else (unsup/, vocab...)."""
  m = _ENTRY.match(name)
  if not m:
    return None
  if not _FILE.match(m["file"]):
    raise MalformedDataError(where, f"unexpected file {name!r} (expected <id>_<rating>.txt)")
  return m["split"], LABELS[m["polarity"]]


def _decode(data: bytes, name: str, where: str) -> str:
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    raise MalformedDataError(where, f"{name} is not UTF-8 text ({e})") from e


def _collect(items, where: str) -> Corpus:
  """items: (name, split, label, text); sorted by name for a fixed order."""
  corpus = {s: ([], []) for s in SPLITS}
  for name, split, label, text in sorted(items):
    corpus[split][0].append(text)
    corpus[split][1].append(label)
  empty = [s for s in SPLITS if not corpus[s][0]]
  if empty:
    raise MalformedDataError(where, f"no reviews in aclImdb/{{{','.join(empty)}}}/{{pos,neg}}/")
  return corpus


def read_tar(path: str) -> Corpus:
  """One streaming pass over the archive (random access into a .tar.gz is slow)."""
  items = []
  try:
    with tarfile.open(path, "r:*") as tf:
      for member in tf:
        if not member.isfile():
          continue
        kind = _classify(member.name, path)
        if kind is not None:
          text = _decode(tf.extractfile(member).read(), member.name, path)
          items.append((member.name, *kind, text))
  except (tarfile.TarError, OSError, EOFError) as e:
    raise MalformedDataError(path, f"not a readable tar archive ({e})") from e
  return _collect(items, path)


def read_dir(root: str) -> Corpus:
  """``root`` is the folder that holds ``aclImdb/``."""
  items = []
  for split in SPLITS:
    for polarity in LABELS:
      folder = os.path.join(root, "aclImdb", split, polarity)
      if not os.path.isdir(folder):
        raise MalformedDataError(os.path.join(root, "aclImdb"), f"missing {split}/{polarity}/")
      for f in os.listdir(folder):
        name = f"aclImdb/{split}/{polarity}/{f}"
        kind = _classify(name, root)
        with open(os.path.join(folder, f), "rb") as fh:
          items.append((name, *kind, _decode(fh.read(), name, root)))
  return _collect(items, root)
