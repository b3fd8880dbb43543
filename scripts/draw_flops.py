r"""How close does a DRAW training step come to this machine's matmul rate?

Counts the matmul FLOPs of one training step analytically (forward = 2 x MACs,
backward = 2 x forward), times the harness's own jitted train step (compile time
separately), measures the float32 matmul rate with a jitted square matmul, and
prints step time, examples/s and the ratio (FLOPs / matmul rate) / step time: the
share of the matmul rate a step achieves. XLA's own FLOP estimate is printed beside
the analytic count. Wall and process CPU times are both given: on a shared machine
the CPU time is the fairer clock.

  python scripts/draw_flops.py --config configs/draw.py:norm=ln_cell [--steps 5]
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

from lnorm import config as config_lib
from lnorm.data.core import Dataset
from lnorm.training.loop import TrainState, make_train_step
from lnorm.training.optim import make_optimizer
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


def time_calls(fn, n):
  """(wall seconds, process CPU seconds) per call over ``n`` calls."""
  w, p = time.perf_counter(), time.process_time()
  for _ in range(n):
    jax.block_until_ready(fn())
  return (time.perf_counter() - w) / n, (time.process_time() - p) / n


def matmul_rate(size: int, reps: int) -> tuple[float, float]:
  a = jax.random.normal(jax.random.key(0), (size, size), jnp.float32)
  b = jax.random.normal(jax.random.key(1), (size, size), jnp.float32)
  f = jax.jit(lambda a, b: a @ b)
  jax.block_until_ready(f(a, b))
  wall, cpu = time_calls(lambda: f(a, b), reps)
  flops = 2 * size ** 3
  return flops / wall, flops / cpu


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--config", default="configs/draw.py:norm=ln_cell")
  p.add_argument("--steps", type=int, default=5, help="Timed training steps.")
  p.add_argument("--matmul_size", type=int, default=2048)
  p.add_argument("--matmul_reps", type=int, default=10)
  import sys  # pylint: disable=g-import-not-at-top
  argv, overrides = config_lib.split_config_overrides(sys.argv[1:])
  args = p.parse_args(argv)
  config = config_lib.load_config(args.config)
  config_lib.apply_overrides(config, overrides)
  task = load_task(config)
  b = config.batch_size
  rng = np.random.default_rng(0)
  images = (rng.random((b, 28, 28)) < 0.13).astype(np.uint8)
  dataset = Dataset("binarized_mnist", "synthetic", "random", {"train": {"image": images}},
                    info={"image_shape": (28, 28)})
  model = task.build_model(dataset)
  batch = {"image": jnp.asarray(images), "mask": jnp.ones((b,), jnp.float32)}
  variables = jax.jit(lambda k: model.init({"params": k, "sample": k},
                                           *task.model_inputs(batch), train=True))(
      jax.random.key(0))
  state = TrainState.create(apply_fn=model.apply, params=variables["params"],
                            tx=make_optimizer(config.optimizer), batch_stats={})
  step = jax.jit(make_train_step(task, model))
  key = jax.random.key(1)

  t0, c0 = time.perf_counter(), time.process_time()
  compiled = step.lower(state, batch, key).compile()
  compile_s, compile_cpu = time.perf_counter() - t0, time.process_time() - c0
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, list) else cost
  xla_flops = float(cost.get("flops", float("nan"))) if cost else float("nan")

  state, _ = compiled(state, batch, key)  # warm-up
  holder = {"state": state}

  def one():
    holder["state"], out = compiled(holder["state"], batch, key)
    return out["loss"]

  step_wall, step_cpu = time_calls(one, args.steps)
  rate_wall, rate_cpu = matmul_rate(args.matmul_size, args.matmul_reps)
  macs = matmul_macs_per_example(config)
  flops = 3 * 2 * macs * b  # forward 2*MACs, backward 2x forward
  report = {
      "config": args.config, "batch_size": b, "devices": str(jax.devices()),
      "compile_seconds_wall": round(compile_s, 2),
      "compile_seconds_cpu": round(compile_cpu, 2),
      "step_seconds_wall": step_wall, "step_seconds_cpu": step_cpu,
      "examples_per_sec_wall": b / step_wall,
      "train_step_matmul_flops": flops,
      # XLA counts the body of a while loop (the nn.scan) once, not num_glimpses times.
      "xla_cost_analysis_flops": xla_flops,
      "matmul_flops_per_sec_wall": rate_wall, "matmul_flops_per_sec_cpu": rate_cpu,
      "ideal_step_seconds_wall": flops / rate_wall,
      # Share of the measured matmul rate that the step achieves (1.0 = as fast as a
      # big matmul). The CPU-time version discounts other processes on the machine.
      "ratio_wall": (flops / rate_wall) / step_wall,
      "ratio_cpu": (flops / rate_cpu) / step_cpu,
  }
  print(json.dumps(report, indent=2))


if __name__ == "__main__":
  main()
