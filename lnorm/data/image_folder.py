"""Reading image-folder datasets: ``<root>/<split>/<class>/<file>.{png,jpg}``, as a
directory or inside a zip archive.

Labels come from a given class list (not from sorting folder names) so that they
match the dataset's official label order.
"""

from __future__ import annotations

import io
import os
import re
import zipfile
from typing import Sequence

import numpy as np
from PIL import Image

from lnorm.data.core import MalformedDataError

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg")
_LOSSY = (".jpg", ".jpeg")


def _entry_pattern(splits: Sequence[str]) -> re.Pattern:
  # [prefix/]<split>/<class>/<file>
  return re.compile(r"^(?P<prefix>(?:.*/)?)(?P<split>" + "|".join(map(re.escape, splits)) +
                    r")/(?P<cls>[^/]+)/(?P<file>[^/]+)$")


def list_entries(names: Sequence[str], splits: Sequence[str], classes: Sequence[str],
                 where: str) -> dict[str, list[tuple[str, int]]]:
  """split -> [(entry name, label)], sorted by (label, file name).

  ``names`` are archive-relative paths with '/' separators. All image entries must
  share one prefix, and every class folder must be one of ``classes``.
  """
  pattern = _entry_pattern(splits)
  label_of = {c: i for i, c in enumerate(classes)}
  out = {s: [] for s in splits}
  prefixes = set()
  for name in names:
    if not name.lower().endswith(IMAGE_EXTENSIONS):
      continue
    m = pattern.match(name)
    if not m:
      continue
    prefixes.add(m["prefix"])
    if m["cls"] not in label_of:
      raise MalformedDataError(where, f"unknown class folder {m['cls']!r} in {name!r}; "
                               f"expected one of {', '.join(classes)}")
    out[m["split"]].append((name, label_of[m["cls"]]))
  if len(prefixes) > 1:
    raise MalformedDataError(where, f"images under several roots: {sorted(prefixes)}")
  for split in splits:
    out[split].sort(key=lambda e: (e[1], e[0]))
  return out


def is_lossy(entries: dict[str, list[tuple[str, int]]]) -> bool:
  return any(n.lower().endswith(_LOSSY) for es in entries.values() for n, _ in es)


def decode(data: bytes, shape: tuple[int, int, int], name: str, where: str) -> np.ndarray:
  """An RGB uint8 array of ``shape`` from encoded image bytes."""
  try:
    with Image.open(io.BytesIO(data)) as im:
      arr = np.asarray(im.convert("RGB"))
  except Exception as e:  # PIL raises many types for broken files.
    raise MalformedDataError(where, f"cannot decode image {name!r} ({e})") from e
  if arr.shape != shape:
    raise MalformedDataError(where, f"image {name!r} has shape {arr.shape}, expected {shape}")
  return arr


def read_zip(path: str, splits: Sequence[str], classes: Sequence[str],
             shape: tuple[int, int, int]) -> tuple[dict[str, dict[str, np.ndarray]], bool]:
  """(split -> {'image', 'label'}, lossy) from an image-folder zip."""
  try:
    with zipfile.ZipFile(path) as zf:
      entries = list_entries(zf.namelist(), splits, classes, path)
      _check_nonempty(entries, path)
      data = {s: _decode_all(es, zf.read, shape, path) for s, es in entries.items()}
  except zipfile.BadZipFile as e:
    raise MalformedDataError(path, f"not a readable zip archive ({e})") from e
  return data, is_lossy(entries)


def read_dir(root: str, splits: Sequence[str], classes: Sequence[str],
             shape: tuple[int, int, int]) -> tuple[dict[str, dict[str, np.ndarray]], bool]:
  """(split -> {'image', 'label'}, lossy) from ``root/<split>/<class>/*``."""
  names = []
  for split in splits:
    for dirpath, _, files in os.walk(os.path.join(root, split)):
      rel = os.path.relpath(dirpath, root).replace(os.sep, "/")
      names += [f"{rel}/{f}" for f in files]
  entries = list_entries(names, splits, classes, root)
  _check_nonempty(entries, root)

  def read(name):
    with open(os.path.join(root, name), "rb") as f:
      return f.read()

  return {s: _decode_all(es, read, shape, root) for s, es in entries.items()}, is_lossy(entries)


def has_layout(root: str, splits: Sequence[str], classes: Sequence[str]) -> bool:
  """Whether ``root`` looks like an image-folder dataset (split/class folders)."""
  return all(os.path.isdir(os.path.join(root, s)) for s in splits) and any(
      os.path.isdir(os.path.join(root, splits[0], c)) for c in classes)


def _check_nonempty(entries, where):
  empty = [s for s, es in entries.items() if not es]
  if empty:
    raise MalformedDataError(where, f"no images for split(s) {', '.join(empty)} "
                             "(expected <split>/<class>/<file>.png|jpg)")


def _decode_all(entries, read, shape, where) -> dict[str, np.ndarray]:
  images = np.empty((len(entries),) + shape, np.uint8)
  for i, (name, _) in enumerate(entries):
    images[i] = decode(read(name), shape, name, where)
  labels = np.array([label for _, label in entries], np.int32)
  return {"image": images, "label": labels}
