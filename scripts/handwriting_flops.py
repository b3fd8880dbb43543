r"""Throughput of a handwriting synthesis training step, and its share of the matmul rate.

Counts the matmul FLOPs of one training step analytically on a batch of full-length
lines; ``lnorm.training.benchmark`` compiles and times the harness's own train step,
measures the matmul rate and prints the share of it a step achieves.

  python scripts/handwriting_flops.py --config configs/handwriting.py:norm=ln,scale=cpu

Points per second count every time step of the padded batch (``max_points`` per line);
multiply by the mean share of real points (``length / max_points``) for the rate on
real lines.
"""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np

from lnorm.models import mdn
from lnorm.data import strokes as strokes_lib
from lnorm.data.core import Dataset
from lnorm.training import benchmark
from lnorm.training.task import load_task


def matmul_macs_per_point(c, num_chars: int, num_symbols: int) -> int:
  """Multiply-accumulates of one forward time step for one line (matmuls only)."""
  h, k, v = c.hidden_size, c.num_gaussians, num_symbols
  layer1 = (3 + v) * 4 * h + h * 4 * h  # [x_t, w_{t-1}] and h1_{t-1} -> gates
  window = h * 3 * k + num_chars * v  # alpha, beta, kappa; then w_t = phi c
  upper = (c.num_layers - 1) * ((3 + v + h) * 4 * h + h * 4 * h)  # skip inputs + below
  output = c.num_layers * h * mdn.num_outputs(c.num_components)
  return layer1 + window + upper + output


def main():
  args, config = benchmark.parse_args(
      __doc__.split("\n")[0], "configs/handwriting.py:norm=ln,scale=cpu",
      lambda p: p.add_argument("--chars", type=int, default=64,
                               help="Characters per line (padded)."))
  task = load_task(config)
  b, t, u = config.batch_size, config.data.max_points, args.chars
  num_symbols = strokes_lib.alphabet_size()
  rng = np.random.default_rng(0)
  arrays = {"strokes": np.concatenate([rng.normal(size=(b, t, 2)),
                                       rng.random((b, t, 1)) < 0.05], -1).astype(np.float32),
            "length": np.full((b,), t, np.int32),
            "text": rng.integers(1, num_symbols, (b, u)).astype(np.int32),
            "text_length": np.full((b,), u, np.int32)}
  dataset = Dataset("iamondb", "synthetic", "random", {"train": arrays},
                    info={"num_symbols": num_symbols})
  batch = {k: jnp.asarray(v) for k, v in arrays.items()} | {"mask": jnp.ones((b,), jnp.float32)}
  flops = benchmark.train_step_flops(matmul_macs_per_point(config, u, num_symbols) * b * t)
  report = benchmark.measure_train_step(
      task, task.build_model(dataset), config, batch, flops=flops, steps=args.steps,
      matmul_size=args.matmul_size, matmul_reps=args.matmul_reps)
  print(json.dumps({
      "config": args.config, "hidden_size": config.hidden_size, "points_per_line": t,
      "chars_per_line": u, **report,
      "points_per_sec_wall": b * t / report["step_seconds_wall"],
      "points_per_sec_cpu": b * t / report["step_seconds_cpu"]}, indent=2))


if __name__ == "__main__":
  main()
