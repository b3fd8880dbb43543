"""Small PNG writers for experiment pictures (sample grids, strips with boxes).

Images are float arrays in [0, 1], grey ``[N, H, W]`` or colour ``[N, H, W, 3]``. PIL
only: no plotting backend, so they work headless and in tests.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from PIL import Image, ImageDraw

Box = tuple[float, float, float, float]  # (left, top, right, bottom) in pixels


def to_rgb(images: np.ndarray) -> np.ndarray:
  """``[N, H, W]`` or ``[N, H, W, 3]`` floats -> ``[N, H, W, 3]`` uint8."""
  images = np.clip(np.asarray(images, np.float32), 0.0, 1.0)
  if images.ndim == 3:
    images = np.repeat(images[..., None], 3, axis=-1)
  return np.round(images * 255).astype(np.uint8)


def grid(images: np.ndarray, cols: int | None = None, pad: int = 1,
         pad_value: int = 128) -> np.ndarray:
  """Tiles ``N`` images row by row into one ``[rows*(H+pad)+pad, ..., 3]`` uint8 array."""
  images = to_rgb(images)
  n, h, w, _ = images.shape
  cols = cols or math.ceil(math.sqrt(n))
  rows = math.ceil(n / cols)
  out = np.full((rows * (h + pad) + pad, cols * (w + pad) + pad, 3), pad_value, np.uint8)
  for k in range(n):
    r, c = divmod(k, cols)
    out[pad + r * (h + pad):pad + r * (h + pad) + h,
        pad + c * (w + pad):pad + c * (w + pad) + w] = images[k]
  return out


def upscale(images: np.ndarray, factor: int) -> np.ndarray:
  """Nearest-neighbour upscaling of ``[N, H, W(, 3)]`` (boxes then stay legible)."""
  images = np.repeat(np.repeat(np.asarray(images), factor, axis=1), factor, axis=2)
  return images


def draw_boxes(image: np.ndarray, boxes: Sequence[Box], color: tuple[int, int, int],
               width: int = 1) -> np.ndarray:
  """``image [H, W, 3]`` uint8 with rectangle outlines drawn on a copy."""
  pil = Image.fromarray(np.ascontiguousarray(image))
  draw = ImageDraw.Draw(pil)
  for left, top, right, bottom in boxes:
    draw.rectangle([left, top, right, bottom], outline=color, width=width)
  return np.asarray(pil)


def save_png(image: np.ndarray, path: str) -> str:
  """Writes an ``[H, W, 3]`` uint8 (or ``[H, W]`` float) image; returns the path."""
  if image.dtype != np.uint8:
    image = to_rgb(image[None])[0]
  Image.fromarray(image).save(path)
  return path
