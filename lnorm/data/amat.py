"""A strict reader for the ``.amat`` text files of binarized MNIST (Larochelle &
Murray 2011): one image per line, 784 space-separated values, each 0 or 1."""

from __future__ import annotations

import gzip

import numpy as np

from lnorm.data.core import MalformedDataError

NUM_PIXELS = 784
_CANONICAL_LENGTH = 2 * NUM_PIXELS - 1  # '0 1 0 ... 1'


def read(path: str) -> np.ndarray:
  """uint8 [N, 784] in {0, 1}; gzipped files (by content) are accepted too."""
  with open(path, "rb") as f:
    raw = f.read()
  if raw[:2] == b"\x1f\x8b":
    try:
      raw = gzip.decompress(raw)
    except (OSError, EOFError) as e:
      raise MalformedDataError(path, f"corrupt gzip data ({e})") from e
  return parse(raw, path)


def parse(raw: bytes, path: str) -> np.ndarray:
  lines = raw.split(b"\n")
  while lines and not lines[-1].strip():
    lines.pop()
  out = np.empty((len(lines), NUM_PIXELS), np.uint8)
  for i, line in enumerate(lines):
    out[i] = _parse_line(line.strip(), i + 1, path)
  return out


def _parse_line(line: bytes, lineno: int, path: str) -> np.ndarray:
  # Fast path for the canonical single-space layout; anything else is split.
  if len(line) == _CANONICAL_LENGTH and line.count(b" ") == NUM_PIXELS - 1:
    values = np.frombuffer(line[::2], np.uint8) - ord("0")
    if np.all(values <= 1):
      return values
  tokens = line.split()
  if len(tokens) != NUM_PIXELS:
    raise MalformedDataError(path, f"line {lineno} has {len(tokens)} values, expected "
                             f"{NUM_PIXELS}")
  values = np.empty(NUM_PIXELS, np.uint8)
  for j, tok in enumerate(tokens):
    if tok not in (b"0", b"1"):
      try:
        as_float = float(tok)
      except ValueError:
        as_float = None
      if as_float not in (0.0, 1.0):
        raise MalformedDataError(path, f"line {lineno}, value {j + 1} is "
                                 f"{tok.decode(errors='replace')!r}, expected 0 or 1")
      tok = b"1" if as_float == 1.0 else b"0"
    values[j] = tok == b"1"
  return values
