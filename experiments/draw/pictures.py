"""DRAW's pictures: a grid of samples, and one canvas over the glimpses with the
read (green) and write (red) attention boxes drawn where each glimpse looked."""

from __future__ import annotations

import numpy as np

from lnorm.analysis import images

SCALE = 3  # upscaling of every 28x28 frame, so that the boxes are legible
READ_COLOR = (0, 200, 0)
WRITE_COLOR = (230, 0, 0)


def save_samples(canvases: np.ndarray, path: str) -> str:
  """``canvases [N, H, W]`` in [0, 1] (Bernoulli means) as a square grid."""
  return images.save_png(images.grid(images.upscale(canvases, 2)), path)


def attention_box(att: dict[str, np.ndarray], k: int, n: int) -> tuple[float, ...]:
  """The box an N x N grid covers, (left, top, right, bottom) in 0-based pixels:
  centre g, side N * delta (filter centres plus half a stride each side)."""
  half = n * float(att["delta"][k]) / 2
  gx, gy = float(att["gx"][k]) - 1, float(att["gy"][k]) - 1  # 1-based -> 0-based
  return gx - half, gy - half, gx + half, gy + half


def save_canvas_strip(trace: dict, path: str, image_shape: tuple[int, int],
                      sizes: dict[str, int], example: int = 0, cols: int = 16) -> str:
  """Every glimpse's canvas of one example, ``cols`` frames a row, with the attention
  boxes of that glimpse (none without attention). ``trace`` is time-major; ``sizes``
  gives the grid size N of 'read' and 'write'."""
  canvases = np.asarray(trace["canvas"])[:, example].reshape((-1,) + tuple(image_shape))
  frames = images.to_rgb(images.upscale(canvases, SCALE))
  steps = frames.shape[0]
  out = []
  for t in range(steps):
    frame = frames[t]
    for key, color in (("read", READ_COLOR), ("write", WRITE_COLOR)):
      att = trace.get(key)
      if att is None:
        continue
      box = attention_box({k: v[t] for k, v in att.items()}, example, sizes[key])
      frame = images.draw_boxes(frame, [tuple(SCALE * (v + 0.5) - 0.5 for v in box)],
                                color)
    out.append(frame)
  return images.save_png(images.grid(np.stack(out).astype(np.float32) / 255,
                                     cols=min(cols, steps), pad=2), path)
