r"""How close does a DRAW training step come to this machine's matmul rate?

Counts the matmul FLOPs of one training step analytically;
``lnorm.training.benchmark`` compiles and times the harness's own train step, measures
the matmul rate and prints the share of it a step achieves, with examples/s.

  python scripts/draw_flops.py --config configs/draw.py:norm=ln_cell [--steps 5]
"""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np

from lnorm.data.core import Dataset
from lnorm.training import benchmark
from lnorm.training.task import load_task


def matmul_macs_per_example(c, image_hw=(28, 28)) -> int:
  """Multiply-accumulates of one forward pass for one image (matmuls only)."""
  h, z, t = c.hidden_size, c.latent_size, c.num_glimpses
  rows, cols = image_hw
  pixels = rows * cols
  rn = c.read_n if c.attention else 0
  wn = c.write_n if c.attention else 0

  def attend(n):  # F_y x F_x^T (or its transpose for writing): two small matmuls
    return n * rows * cols + n * n * cols

  read_size = 2 * rn * rn if rn else 2 * pixels
  per_glimpse = (
      ((h * 5 + 2 * attend(rn)) if rn else 0)  # read attention map, x and x_hat
      + (read_size + h) * 4 * h + h * 4 * h  # encoder LSTM
      + h * 2 * z  # posterior
      + z * 4 * h + h * 4 * h  # decoder LSTM
      + h * (wn * wn if wn else pixels)  # write patch / full canvas
      + ((h * 5 + attend(wn)) if wn else 0))  # write attention map and F_y^T w F_x
  return t * per_glimpse


def main():
  args, config = benchmark.parse_args(__doc__.split("\n")[0], "configs/draw.py:norm=ln_cell")
  task = load_task(config)
  b = config.batch_size
  images = (np.random.default_rng(0).random((b, 28, 28)) < 0.13).astype(np.uint8)
  dataset = Dataset("binarized_mnist", "synthetic", "random", {"train": {"image": images}},
                    info={"image_shape": (28, 28)})
  batch = {"image": jnp.asarray(images), "mask": jnp.ones((b,), jnp.float32)}
  flops = benchmark.train_step_flops(matmul_macs_per_example(config) * b)
  report = benchmark.measure_train_step(
      task, task.build_model(dataset), config, batch, flops=flops, steps=args.steps,
      matmul_size=args.matmul_size, matmul_reps=args.matmul_reps)
  print(json.dumps({"config": args.config, **report,
                    "examples_per_sec_wall": b / report["step_seconds_wall"]}, indent=2))


if __name__ == "__main__":
  main()
