r"""Throughput of a handwriting synthesis training step, and its share of the matmul rate.

Counts the matmul FLOPs of one training step analytically (forward = 2 x MACs,
backward = 2 x forward), times the harness's own jitted train step on a batch of
full-length lines (compile time separately), and prints pen points per second and
the share of the measured float32 matmul rate a step achieves. The timing and the
matmul rate are DRAW's probe's (scripts/draw_flops.py), reused as they are.

  python scripts/handwriting_flops.py --config configs/handwriting.py:norm=ln,scale=cpu

Points per second count every time step of the padded batch (``max_points`` per line);
multiply by the mean share of real points (``length / max_points``) for the rate on
real lines.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from draw_flops import matmul_rate, time_calls  # pylint: disable=g-import-not-at-top
from lnorm import config as config_lib
from lnorm import mdn
from lnorm.data import strokes as strokes_lib
from lnorm.data.core import Dataset
from lnorm.training.loop import TrainState, make_train_step
from lnorm.training.optim import make_optimizer
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
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--config", default="configs/handwriting.py:norm=ln,scale=cpu")
  p.add_argument("--steps", type=int, default=5, help="Timed training steps.")
  p.add_argument("--chars", type=int, default=64, help="Characters per line (padded).")
  p.add_argument("--matmul_size", type=int, default=2048)
  p.add_argument("--matmul_reps", type=int, default=10)
  argv, overrides = config_lib.split_config_overrides(sys.argv[1:])
  args = p.parse_args(argv)
  config = config_lib.load_config(args.config)
  config_lib.apply_overrides(config, overrides)
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
  model = task.build_model(dataset)
  batch = {k: jnp.asarray(v) for k, v in arrays.items()} | {"mask": jnp.ones((b,), jnp.float32)}
  params = jax.jit(lambda key: model.init(key, *task.model_inputs(batch), train=True))(
      jax.random.key(0))["params"]
  state = TrainState.create(apply_fn=model.apply, params=params,
                            tx=make_optimizer(config.optimizer), batch_stats={})
  step = jax.jit(make_train_step(task, model))
  key = jax.random.key(1)

  t0, c0 = time.perf_counter(), time.process_time()
  compiled = step.lower(state, batch, key).compile()
  compile_s, compile_cpu = time.perf_counter() - t0, time.process_time() - c0

  state, _ = compiled(state, batch, key)  # warm-up
  holder = {"state": state}

  def one():
    holder["state"], out = compiled(holder["state"], batch, key)
    return out["loss"]

  step_wall, step_cpu = time_calls(one, args.steps)
  rate_wall, rate_cpu = matmul_rate(args.matmul_size, args.matmul_reps)
  macs = matmul_macs_per_point(config, u, num_symbols)
  flops = 3 * 2 * macs * b * t  # forward 2*MACs, backward 2x forward
  report = {
      "config": args.config, "norm": config.norm, "hidden_size": config.hidden_size,
      "batch_size": b, "points_per_line": t, "chars_per_line": u,
      "devices": str(jax.devices()),
      "parameters": sum(x.size for x in jax.tree.leaves(params)),
      "compile_seconds_wall": round(compile_s, 2),
      "compile_seconds_cpu": round(compile_cpu, 2),
      "step_seconds_wall": step_wall, "step_seconds_cpu": step_cpu,
      "points_per_sec_wall": b * t / step_wall, "points_per_sec_cpu": b * t / step_cpu,
      "train_step_matmul_flops": flops,
      "matmul_flops_per_sec_wall": rate_wall, "matmul_flops_per_sec_cpu": rate_cpu,
      # Share of the measured matmul rate that the step achieves (1.0 = as fast as a
      # big matmul). The CPU-time version discounts other processes on the machine.
      "ratio_wall": (flops / rate_wall) / step_wall,
      "ratio_cpu": (flops / rate_cpu) / step_cpu,
  }
  print(json.dumps(report, indent=2))


if __name__ == "__main__":
  main()
