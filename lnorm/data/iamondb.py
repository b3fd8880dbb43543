"""IAM On-Line Handwriting Database (Liwicki & Bunke 2005) for handwriting synthesis
(Graves 2013 sec. 5; LN paper sec. 6.5; docs/experiments.md, sec. 3).

Sources:
  files        the distribution's ``lineStrokes-all.tar.gz`` and ``ascii-all.tar.gz``
               (or the extracted ``lineStrokes/`` and ``ascii/`` folders) in
               ``<data_dir>/iamondb/`` or ``<data_dir>``. Each line's stroke file
               ``lineStrokes/a01/a01-000/a01-000u-03.xml`` pairs with the third line of
               the ``CSR:`` section of ``ascii/a01/a01-000/a01-000u.txt``.
  strokes_npy  the preprocessed copy many tutorials use: ``strokes.npy``, an object
               array of ``[T, 3]`` rows (end_of_stroke, dx, dy), with one transcription
               per line in ``sentences.txt``.
  synthetic    generated scribbles whose shapes depend on the characters: smoke runs
               only, never results.

Splits: 'train', 'validation', 'test', held out by form (one writer's copy of one
text, e.g. ``a01-000u``; the database's own split files are not in the public
archives and writer ids are not in the file names), seeded by ``data.seed``. The
'strokes_npy' copy has no form ids: its lines are held out one by one.

Features: 'strokes' float32 [N, max_points, 3] (dx, dy scaled by the training
offsets' std, end_of_stroke), 'length' int32 [N], 'text' int32 [N, max_chars]
(ids over ``strokes.ALPHABET``, 0-padded), 'text_length' int32 [N]. The scale, the
alphabet and what cleaning did are in ``info`` and in the run's data record.
"""

from __future__ import annotations

import logging
import os
import pickle
import re
import tarfile
import sys
import time
import xml.etree.ElementTree as ET
from typing import Any, Iterator

import numpy as np

from lnorm.data import cache
from lnorm.data import core
from lnorm.data import locate
from lnorm.data import strokes as strokes_lib

NAME = "iamondb"
STROKES_ARCHIVE = "lineStrokes-all.tar.gz"
ASCII_ARCHIVE = "ascii-all.tar.gz"
FILES_HELP = (f"{STROKES_ARCHIVE} and {ASCII_ARCHIVE} (or the extracted lineStrokes/ "
              "and ascii/ folders)")
NPY_HELP = "strokes.npy and sentences.txt"

DEFAULTS = {
    "max_points": 500,  # Offsets per line (Graves: sequences of 500).
    "long_lines": "truncate",  # Or 'drop': see strokes.clean_lines.
    # Raw whiteboard units (about 1/100 mm?): no pen moves this far between two samples
    # at ~100 Hz except through a sensor glitch. Pen-up jumps between words stay well
    # under it.
    "max_offset": 2000.0,
    "downsample": 1,  # Keep every n-th point of each stroke (1: all).
    "validation_fraction": 0.05,
    "test_fraction": 0.05,
}

_LINE_FILE = re.compile(r"(?:^|/)lineStrokes/(?:[^/]+/)*(?P<form>[a-z0-9]+-[a-z0-9]+[a-z]?)"
                        r"-(?P<line>\d+)\.xml$")
_ASCII_FILE = re.compile(r"(?:^|/)ascii/(?:[^/]+/)*(?P<form>[a-z0-9]+-[a-z0-9]+[a-z]?)\.txt$")

#: Why a stroke file can be skipped, in the order the notes give them.
SKIP_REASONS = ("no_transcription", "no_csr_line")
#: Stroke files of the complete distribution without a CSR line at their index.
KNOWN_NO_CSR_LINE = 8
#: Skipped files named in a warning or the notes; the rest are counted.
MAX_NAMED = 20

_log = logging.getLogger(__name__)


# --- the file formats -----------------------------------------------------------------


def parse_line_strokes(data: bytes, where: str) -> np.ndarray:
  """A line's XML -> int32 ``[P, 3]`` rows (x, y, end_of_stroke), strokes in order.

  ``where`` names the file in errors.
  """
  try:
    root = ET.fromstring(data)
  except ET.ParseError as e:
    raise core.MalformedDataError(where, f"not well-formed XML ({e})") from e
  stroke_set = root.find("StrokeSet")
  if stroke_set is None:
    raise core.MalformedDataError(where, "no <StrokeSet> element")
  rows = []
  for s, stroke in enumerate(stroke_set.iter("Stroke")):
    points = stroke.findall("Point")
    for p, point in enumerate(points):
      try:
        x, y = int(float(point.attrib["x"])), int(float(point.attrib["y"]))
      except (KeyError, ValueError) as e:
        raise core.MalformedDataError(
            where, f"point {p} of stroke {s} has no numeric x and y ({point.attrib})") from e
      rows.append((x, y, int(p == len(points) - 1)))
  if not rows:
    raise core.MalformedDataError(where, "no <Stroke>/<Point> elements")
  return np.array(rows, np.int32)


def parse_transcription(text: str, where: str) -> list[str]:
  """A form's ascii file -> the lines of its ``CSR:`` section (blank lines skipped)."""
  parts = re.split(r"^CSR:\s*$", text, maxsplit=1, flags=re.MULTILINE)
  if len(parts) != 2:
    raise core.MalformedDataError(where, "no 'CSR:' section")
  return [line.strip() for line in parts[1].splitlines() if line.strip()]


# --- reading the two collections ------------------------------------------------------


def _members(path: str) -> Iterator[tuple[str, bytes]]:
  """(name, contents) of every file in a tar archive or under a folder, sorted."""
  if os.path.isdir(path):
    names = []
    for root, _, files in os.walk(path):
      names += [os.path.join(root, f) for f in files]
    for name in sorted(names):
      with open(name, "rb") as f:
        yield os.path.relpath(name, os.path.dirname(path)), f.read()
    return
  try:
    with tarfile.open(path, "r:*") as tf:
      # One streaming pass: random access into a .tar.gz is slow.
      for member in tf:
        if member.isfile():
          yield member.name, tf.extractfile(member).read()
  except (tarfile.TarError, OSError, EOFError) as e:
    raise core.MalformedDataError(path, f"cannot be read as a tar archive ({e})") from e


def read_collection(strokes_path: str, ascii_path: str) -> dict[str, np.ndarray]:
  """Both collections -> a compact, cacheable form, lines sorted by id.

  'points' int32 [P, 3] (x, y, end_of_stroke) of all lines concatenated, 'offsets'
  [N + 1] (line i is points[offsets[i]:offsets[i+1]]), 'text' (the lines' CSR
  transcriptions, newline-joined UTF-8), 'line_id' and 'form_id' (likewise), and the
  ids of the stroke files skipped, likewise, for each reason: 'no_transcription' (the
  form has no ascii file at all: an incomplete copy) and 'no_csr_line' (the form's
  ascii file has fewer CSR lines than the form has stroke files: 8 lines of the
  complete database).
  """
  transcripts = {}
  for name, data in _members(ascii_path):
    m = _ASCII_FILE.search(name)
    if m:
      where = f"{ascii_path}:{name}" if not os.path.isdir(ascii_path) else name
      transcripts[m["form"]] = parse_transcription(data.decode("latin-1"), where)
  if not transcripts:
    raise core.MalformedDataError(ascii_path, "no ascii/<...>/<form>.txt files")
  lines = {}
  for name, data in _members(strokes_path):
    m = _LINE_FILE.search(name)
    if m:
      where = f"{strokes_path}:{name}" if not os.path.isdir(strokes_path) else name
      lines[(m["form"], int(m["line"]))] = parse_line_strokes(data, where)
  if not lines:
    raise core.MalformedDataError(strokes_path, "no lineStrokes/<...>/<form>-NN.xml files")
  points, offsets, texts, line_ids, form_ids = [], [0], [], [], []
  skipped = {reason: [] for reason in SKIP_REASONS}
  for (form, number), line_points in sorted(lines.items()):
    line_id = f"{form}-{number:02d}"
    if form not in transcripts:
      skipped["no_transcription"].append(line_id)
      continue
    csr = transcripts[form]
    if not 1 <= number <= len(csr):
      skipped["no_csr_line"].append(line_id)
      continue
    points.append(line_points)
    offsets.append(offsets[-1] + len(line_points))
    texts.append(csr[number - 1])
    line_ids.append(line_id)
    form_ids.append(form)
  return {"points": np.concatenate(points) if points else np.zeros((0, 3), np.int32),
          "offsets": np.array(offsets, np.int64), "text": _pack(texts),
          "line_id": _pack(line_ids), "form_id": _pack(form_ids),
          **{reason: _pack(ids) for reason, ids in skipped.items()}}


def _pack(strings: list[str]) -> np.ndarray:
  # One newline-joined buffer keeps the cache free of pickled objects.
  return np.frombuffer("\n".join(strings).encode("utf-8"), np.uint8)


def _unpack(packed: np.ndarray) -> list[str]:
  return packed.tobytes().decode("utf-8").split("\n") if packed.size else []


# --- sources --------------------------------------------------------------------------


def find_files(data_dir: str | None):
  looked = []
  for d in locate.search_dirs(data_dir, NAME):
    for strokes, ascii_ in ((STROKES_ARCHIVE, ASCII_ARCHIVE), ("lineStrokes", "ascii")):
      pair = os.path.join(d, strokes), os.path.join(d, ascii_)
      looked.append(f"{pair[0]} + {os.path.basename(pair[1])}")
      if all(os.path.exists(p) for p in pair):
        return pair, looked
  return None, looked


def load_files(config: Any, auto: bool) -> core.Dataset:
  del auto
  (strokes_path, ascii_path), _ = locate.find_or_raise(
      config, find_files, NAME, FILES_HELP)
  collection = _cached_collection(strokes_path, ascii_path, config)
  texts = _unpack(collection["text"])
  bounds = collection["offsets"]
  lines = [strokes_lib.points_to_offsets(collection["points"][bounds[i]:bounds[i + 1]])
           for i in range(len(texts))]
  skipped = describe_skipped(*(_unpack(collection[r]) for r in SKIP_REASONS))
  if skipped:
    _log.warning("%s: %s", NAME, skipped)
  return _finish(lines, texts, _unpack(collection["form_id"]), config, "files",
                 f"{strokes_path} + {ascii_path}", skipped or "every stroke file transcribed")


def describe_skipped(no_transcription: list[str], no_csr_line: list[str]) -> str:
  """Which stroke files were skipped and why, for the warning and the notes ('' when
  none was). The two reasons differ in kind: a form without its ascii file means the
  copy is incomplete (a file lost in copying or extraction), while a few lines without
  a CSR line are in the distribution itself."""
  parts = []
  if no_transcription:
    forms: dict[str, list[str]] = {}
    for line_id in no_transcription:
      forms.setdefault(line_id.rsplit("-", 1)[0], []).append(line_id)
    named = [f"{form} ({', '.join(ids)})" for form, ids in forms.items()]
    parts.append(
        f"{len(no_transcription)} stroke files skipped because their form's transcription "
        f"file ascii/<...>/<form>.txt is missing, in {_count(len(forms), 'form')}: "
        f"{_some(named)}. "
        "The copy of ascii-all.tar.gz (or ascii/) is incomplete; restore it to train on "
        "these lines")
  if no_csr_line:
    parts.append(f"{len(no_csr_line)} stroke files without a CSR transcription line "
                 f"skipped: their form's transcription has fewer CSR lines than the form "
                 f"has stroke files (the complete database has {KNOWN_NO_CSR_LINE} such "
                 f"lines): {_some(no_csr_line)}")
  return "; ".join(parts)


def _count(n: int, noun: str) -> str:
  return f"{n} {noun}" + ("" if n == 1 else "s")


def _some(names: list[str]) -> str:
  shown = ", ".join(names[:MAX_NAMED])
  return shown + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")


def _cached_collection(strokes_path, ascii_path, config):
  entry = None
  if cache.enabled(config):
    entry = cache.key_path(cache.cache_dir(config), NAME,
                           (strokes_path, ascii_path), decoder=(sys.modules[__name__],))
    collection = cache.load(entry)
    if collection is not None:
      _log.info("Read parsed %s from cache %s", strokes_path, entry)
      return collection
  start = time.perf_counter()
  collection = read_collection(strokes_path, ascii_path)
  _log.info("Parsed %s and %s in %.1f s", strokes_path, ascii_path, time.perf_counter() - start)
  if entry is not None:
    cache.save(entry, collection)
  return collection


def find_npy(data_dir: str | None):
  looked = []
  for d in locate.search_dirs(data_dir, NAME):
    pair = os.path.join(d, "strokes.npy"), os.path.join(d, "sentences.txt")
    looked.append(f"{pair[0]} + sentences.txt")
    if all(os.path.exists(p) for p in pair):
      return pair, looked
  return None, looked


def read_strokes_npy(strokes_path: str, sentences_path: str) -> tuple[list[np.ndarray], list[str]]:
  """(offsets [T, 3] as (dx, dy, end_of_stroke), transcriptions) of the npy copy."""
  try:
    # The format is a pickled object array: only load files you trust.
    raw = np.load(strokes_path, allow_pickle=True, encoding="latin1")
  except (OSError, ValueError, pickle.UnpicklingError) as e:
    # numpy.load falls back to unpickling any file that is not .npy or .npz, so a file
    # of another format fails as a pickle.
    raise core.MalformedDataError(strokes_path, f"cannot be read by numpy.load ({e})") from e
  with open(sentences_path, encoding="utf-8", errors="replace") as f:
    texts = [line.rstrip("\n") for line in f]
  while texts and not texts[-1]:
    texts.pop()
  if len(raw) != len(texts):
    raise core.MalformedDataError(
        sentences_path, f"{len(texts)} lines, but {strokes_path} holds {len(raw)} stroke "
        "arrays: they must correspond one to one")
  lines = []
  for i, line in enumerate(raw):
    try:
      line = np.asarray(line, np.float32)
    except (TypeError, ValueError) as e:
      raise core.MalformedDataError(
          strokes_path, f"entry {i} is not a numeric array ({e})") from e
    if line.ndim != 2 or line.shape[1] != 3:
      raise core.MalformedDataError(
          strokes_path, f"entry {i} has shape {line.shape}, expected [T, 3] rows of "
          "(end_of_stroke, dx, dy)")
    lines.append(line[:, [1, 2, 0]])
  return lines, texts


def load_strokes_npy(config: Any, auto: bool) -> core.Dataset:
  del auto
  (strokes_path, sentences_path), _ = locate.find_or_raise(config, find_npy, NAME, NPY_HELP)
  lines, texts = read_strokes_npy(strokes_path, sentences_path)
  # No form ids in this copy: each line is its own group.
  return _finish(lines, texts, [str(i) for i in range(len(lines))], config, "strokes_npy",
                 strokes_path, "lines held out one by one (no form ids in strokes.npy)")


def load_synthetic(config: Any, auto: bool) -> core.Dataset:
  """Scribbles: each character is a short arc whose curvature and size depend on it,
  so the text predicts the strokes and a smoke run's loss can fall."""
  del auto
  n = core.option(config, "synthetic_size", 96)
  rng = np.random.default_rng([core.option(config, "seed", 0), 13])
  words = ["ab", "cab", "dead", "bead", "face", "add", "bed", "fade"]
  lines, texts = [], []
  for _ in range(n):
    text = " ".join(rng.choice(words, size=rng.integers(1, 4)))
    offsets = []
    for ch in text:
      code = ord(ch) % 7
      steps = 3 + code % 3
      angles = np.linspace(0, np.pi * (0.5 + 0.25 * code), steps)
      size = 10.0 + 3.0 * code
      arc = np.stack([size * np.cos(angles + code), size * np.sin(angles + code)], 1)
      arc += rng.normal(0, 0.5, arc.shape)
      eos = np.zeros((steps, 1))
      eos[-1] = 1.0
      offsets.append(np.concatenate([arc, eos], 1))
    lines.append(np.concatenate(offsets).astype(np.float32))
    texts.append(text)
  return _finish(lines, texts, [str(i) for i in range(n)], config, "synthetic",
                 "lnorm.data.iamondb.load_synthetic",
                 "SYNTHETIC character-dependent scribbles, for smoke runs only")


def _opt(config, key):
  return core.option(config, key, DEFAULTS.get(key))


def _finish(lines: list[np.ndarray], texts: list[str], groups: list[str], config: Any,
            source: str, location: str, note: str) -> core.Dataset:
  """Clean, split by group, scale by the training offsets' std, and pad."""
  max_points = _opt(config, "max_points")
  kept, lines, cleaning = strokes_lib.clean_lines(
      lines, texts, max_offset=_opt(config, "max_offset"), max_points=max_points,
      long_lines=_opt(config, "long_lines"), downsample_factor=_opt(config, "downsample"))
  texts = [texts[i] for i in kept]
  groups = [groups[i] for i in kept]
  split_of = _split_groups(groups, core.option(config, "seed", 0),
                           _opt(config, "validation_fraction"), _opt(config, "test_fraction"))
  train = [i for i, s in enumerate(split_of) if s == "train"]
  if not train:
    raise core.DataError(f"{NAME}: no training lines left after cleaning ({cleaning.describe()}).")
  scale = strokes_lib.offset_scale([lines[i] for i in train])
  alphabet = strokes_lib.ALPHABET
  encoded = [strokes_lib.encode_text(t, alphabet) for t in texts]
  num_points = max_points if max_points > 0 else max(len(l) for l in lines)
  num_chars = max(len(t) for t in encoded)
  data = {}
  for split in ("train", "validation", "test"):
    index = [i for i, s in enumerate(split_of) if s == split]
    data[split] = strokes_lib.pad_lines([lines[i] for i in index], [encoded[i] for i in index],
                                        scale, num_points, num_chars)
  num_groups = {s: len({groups[i] for i, t in enumerate(split_of) if t == s}) for s in data}
  factor = _opt(config, "downsample")
  thinned = f"1 point in {factor} of each stroke kept; " if factor > 1 else ""
  notes = (f"{note}; {thinned}{cleaning.describe()}; split by form (seed "
           f"{core.option(config, 'seed', 0)}): {num_groups}; offsets divided by the "
           f"training std (dx, dy) = ({scale[0]:.4g}, {scale[1]:.4g})")
  info = {"alphabet": alphabet, "num_symbols": strokes_lib.alphabet_size(alphabet),
          "offset_scale": tuple(float(s) for s in scale), "max_points": num_points,
          "max_chars": num_chars, "cleaning": cleaning.describe()}
  return core.Dataset(NAME, source, location, data, notes, info)


def _split_groups(groups: list[str], seed: int, validation: float, test: float) -> list[str]:
  """The split of each line: whole groups (forms) drawn at random, seeded."""
  names = sorted(set(groups))
  order = np.random.default_rng([seed, 0]).permutation(len(names))
  n_val = int(round(validation * len(names)))
  n_test = int(round(test * len(names)))
  if len(names) > 2 and validation > 0:
    n_val = max(n_val, 1)
  if len(names) > 2 and test > 0:
    n_test = max(n_test, 1)
  which = {}
  for rank, g in enumerate(order):
    which[names[g]] = ("validation" if rank < n_val else
                       "test" if rank < n_val + n_test else "train")
  return [which[g] for g in groups]


SOURCES = {"files": load_files, "strokes_npy": load_strokes_npy, "synthetic": load_synthetic}
AUTO = ("files", "strokes_npy")
