"""Pictures of generated handwriting: the line as SVG and PNG, and the window's
attention over the characters against time (Graves 2013, Figure 13's heat map)."""

from __future__ import annotations

import os

import numpy as np

from lnorm.data import strokes as strokes_lib

_MARGIN = 10.0


def _pyplot():
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def pen_strokes(moves: np.ndarray, scale) -> list[np.ndarray]:
  """Scaled moves ``[T, 3]`` -> the pen-down strokes as ``[n, 2]`` point arrays in
  the data's units (y grows downwards, as on the whiteboard and in SVG)."""
  moves = np.asarray(moves, np.float64).copy()
  moves[:, :2] *= np.asarray(scale, np.float64)
  points = strokes_lib.offsets_to_points(moves)
  # Row i of points ends a stroke when its flag is set.
  ends = np.flatnonzero(points[:, 2] > 0.5)
  starts = np.concatenate([[0], ends[:-1] + 1]) if len(ends) else np.array([0])
  if not len(ends) or ends[-1] != len(points) - 1:
    ends = np.append(ends, len(points) - 1)
  return [points[s:e + 1, :2] for s, e in zip(starts, ends) if e > s]


def save_svg(strokes: list[np.ndarray], path: str, stroke_width: float = 3.0) -> str:
  """One polyline per stroke, in the data's coordinates."""
  if strokes:
    xy = np.concatenate(strokes)
    low, high = xy.min(0) - _MARGIN, xy.max(0) + _MARGIN
  else:
    low, high = np.zeros(2), np.full(2, 2 * _MARGIN)
  size = high - low
  lines = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="{low[0]:.1f} {low[1]:.1f} '
           f'{size[0]:.1f} {size[1]:.1f}" width="{size[0]:.0f}" height="{size[1]:.0f}">',
           f'<rect x="{low[0]:.1f}" y="{low[1]:.1f}" width="{size[0]:.1f}" '
           f'height="{size[1]:.1f}" fill="white"/>']
  for s in strokes:
    pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in s)
    lines.append(f'<polyline points="{pts}" fill="none" stroke="black" '
                 f'stroke-width="{stroke_width}" stroke-linecap="round" '
                 'stroke-linejoin="round"/>')
  lines.append("</svg>")
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
  return path


def save_png(strokes: list[np.ndarray], path: str, title: str = "") -> str:
  plt = _pyplot()
  xy = np.concatenate(strokes) if strokes else np.zeros((1, 2))
  width = max(float(np.ptp(xy[:, 0])), 1.0)
  height = max(float(np.ptp(xy[:, 1])), 1.0)
  fig, ax = plt.subplots(figsize=(min(max(12 * width / max(width, height * 6), 3), 16), 2.5))
  for s in strokes:
    ax.plot(s[:, 0], s[:, 1], "k-", linewidth=1.5, solid_capstyle="round")
  ax.set_aspect("equal")
  ax.invert_yaxis()
  ax.axis("off")
  if title:
    ax.set_title(title, fontsize=9)
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.savefig(path, dpi=120, bbox_inches="tight")
  plt.close(fig)
  return path


def save_attention(phi: np.ndarray, text: str, path: str) -> str:
  """``phi [T, U]``: the window's weight of each character (rows) at each step."""
  plt = _pyplot()
  fig, ax = plt.subplots(figsize=(10, max(2.5, 0.18 * len(text))))
  ax.imshow(np.asarray(phi).T, aspect="auto", origin="upper", cmap="Greys",
            interpolation="nearest")
  ax.set_yticks(range(len(text)))
  ax.set_yticklabels([c if c != " " else "␣" for c in text], fontsize=7)
  ax.set_xlabel("pen move t")
  ax.set_ylabel("character u")
  ax.set_title("window weights phi(t, u)", fontsize=9)
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.savefig(path, dpi=120, bbox_inches="tight")
  plt.close(fig)
  return path


def save_sample(sample: dict, text: str, scale, out_base: str, title: str = "") -> dict[str, str]:
  """``out_base``.svg, ``out_base``.png and ``out_base``_attention.png of one sample."""
  strokes = pen_strokes(sample["moves"], scale)
  return {"svg": save_svg(strokes, out_base + ".svg"),
          "png": save_png(strokes, out_base + ".png", title),
          "attention": save_attention(sample["phi"], text, out_base + "_attention.png")}
