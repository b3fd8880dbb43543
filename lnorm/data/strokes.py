"""Online handwriting as pen offsets: the representation of Graves (2013) sec. 4.

A line is ``[T, 3]`` float32 rows ``(dx, dy, end_of_stroke)``: the pen's move from
the previous point and whether the pen lifts after this point. Coordinates keep the
tablet's orientation (y grows downwards, as in SVG). The helpers here are shared by
every source of handwriting data: turning absolute points into offsets, dropping
corrupt lines, fitting lines to a fixed length, scaling offsets by the training
standard deviation, and encoding transcriptions over a fixed alphabet.
"""

from __future__ import annotations

import dataclasses

import numpy as np

#: Symbols with a one-hot column of their own, in this order; id 0 is every other
#: character. 56 symbols plus 'other' make the 57-dimensional window of Graves (2013)
#: and the LN paper: space, the letters, and the three most frequent punctuation marks
#: of IAM-OnDB's transcriptions ('.', ',', '"'; 98.8% of its characters are covered).
ALPHABET = " abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,\""
OTHER = 0  # The id of a character outside ALPHABET.

# Long lines: what happens to a line with more than max_points offsets.
LONG_LINE_POLICIES = ("truncate", "drop")


def alphabet_size(alphabet: str = ALPHABET) -> int:
  """One-hot width: the alphabet's symbols plus 'other'."""
  return len(alphabet) + 1


def encode_text(text: str, alphabet: str = ALPHABET) -> np.ndarray:
  """int32 ids: 1 + the symbol's position in ``alphabet``, 0 for any other character."""
  index = {ch: i + 1 for i, ch in enumerate(alphabet)}
  return np.array([index.get(ch, OTHER) for ch in text], np.int32)


def points_to_offsets(points: np.ndarray) -> np.ndarray:
  """Absolute ``[P, 3]`` rows ``(x, y, end_of_stroke)`` -> ``[P - 1, 3]`` offsets.

  Row i is ``p_{i+1} - p_i`` with the end-of-stroke flag of ``p_{i+1}``: the line's
  first point only fixes where it starts.
  """
  points = np.asarray(points, np.float64)
  offsets = np.empty((max(len(points) - 1, 0), 3), np.float32)
  offsets[:, :2] = np.diff(points[:, :2], axis=0)
  offsets[:, 2] = points[1:, 2]
  return offsets


def offsets_to_points(offsets: np.ndarray) -> np.ndarray:
  """Inverse of :func:`points_to_offsets`, starting at (0, 0) with the pen down (the
  first point of the first stroke)."""
  offsets = np.asarray(offsets, np.float64)
  xy = np.concatenate([np.zeros((1, 2)), np.cumsum(offsets[:, :2], axis=0)])
  eos = np.concatenate([[0.0], offsets[:, 2]])
  return np.concatenate([xy, eos[:, None]], axis=1)


def downsample(offsets: np.ndarray, factor: int) -> np.ndarray:
  """Keeps every ``factor``-th point of each stroke and the stroke's last point: a
  coarser line with the same strokes (moves never merge across a pen lift)."""
  if factor <= 1:
    return offsets
  points = offsets_to_points(offsets)
  ends = points[:, 2] > 0.5
  # Index of each point within its stroke: a stroke starts after each end.
  starts = np.concatenate([[True], ends[:-1]])
  stroke = np.cumsum(starts) - 1
  first = np.flatnonzero(starts)
  within = np.arange(len(points)) - first[stroke]
  keep = (within % factor == 0) | ends
  return points_to_offsets(points[keep])


@dataclasses.dataclass
class Cleaning:
  """What :func:`clean_lines` did, recorded with the run."""

  kept: int = 0
  dropped_empty: int = 0  # Fewer than 2 offsets, or an empty transcription.
  dropped_outlier: int = 0  # An offset longer than max_offset.
  dropped_long: int = 0  # Over max_points offsets, with long_lines='drop'.
  truncated_long: int = 0  # Over max_points offsets, cut to max_points.

  def describe(self) -> str:
    return (f"kept {self.kept} lines; dropped {self.dropped_empty} empty, "
            f"{self.dropped_outlier} with an offset over max_offset, {self.dropped_long} "
            f"over max_points; truncated {self.truncated_long} to max_points")


def clean_lines(lines: list[np.ndarray], texts: list[str], *, max_offset: float,
                max_points: int, long_lines: str, downsample_factor: int = 1):
  """(kept indices, offsets fitted to max_points, Cleaning).

  A line with an offset longer than ``max_offset`` (raw units) holds a sensor glitch
  (a point far off the whiteboard): it is dropped whole, since cutting the glitch
  out would join two unrelated pen positions. Lines over ``max_points`` offsets are
  truncated to their first ``max_points`` (the transcription stays whole: the model
  sees a line that stops early) or dropped, as ``long_lines`` says. ``max_points <= 0``
  keeps every length. ``downsample_factor`` > 1 thins each surviving line first (see
  :func:`downsample`).
  """
  if long_lines not in LONG_LINE_POLICIES:
    raise ValueError(f"long_lines must be one of {LONG_LINE_POLICIES}, got {long_lines!r}")
  report = Cleaning()
  kept, fitted = [], []
  for i, (offsets, text) in enumerate(zip(lines, texts)):
    if len(offsets) < 2 or not text.strip():
      report.dropped_empty += 1
      continue
    if max_offset > 0 and np.max(np.hypot(offsets[:, 0], offsets[:, 1])) > max_offset:
      report.dropped_outlier += 1
      continue
    offsets = downsample(offsets, downsample_factor)
    if 0 < max_points < len(offsets):
      if long_lines == "drop":
        report.dropped_long += 1
        continue
      offsets = offsets[:max_points]
      report.truncated_long += 1
    kept.append(i)
    fitted.append(offsets)
  report.kept = len(kept)
  return np.array(kept, np.int64), fitted, report


def offset_scale(lines: list[np.ndarray]) -> np.ndarray:
  """``[2]`` standard deviations of dx and dy over every offset of ``lines``.

  Offsets are divided by it, not centred: a zero move stays zero, and a sample
  multiplied back by it comes out in the data's units.
  """
  xy = np.concatenate([l[:, :2] for l in lines]).astype(np.float64)
  return np.maximum(xy.std(axis=0), 1e-8).astype(np.float32)


def pad_lines(lines: list[np.ndarray], texts: list[np.ndarray], scale: np.ndarray,
              num_points: int, num_chars: int) -> dict[str, np.ndarray]:
  """Fixed-shape arrays: 'strokes' [N, num_points, 3] (scaled offsets, zero-padded),
  'length' [N], 'text' [N, num_chars] (ids, 0-padded), 'text_length' [N]."""
  n = len(lines)
  strokes = np.zeros((n, num_points, 3), np.float32)
  text = np.zeros((n, num_chars), np.int32)
  for i, (line, chars) in enumerate(zip(lines, texts)):
    strokes[i, :len(line), :2] = line[:, :2] / scale
    strokes[i, :len(line), 2] = line[:, 2]
    text[i, :len(chars)] = chars
  return {"strokes": strokes, "length": np.array([len(l) for l in lines], np.int32),
          "text": text, "text_length": np.array([len(t) for t in texts], np.int32)}
