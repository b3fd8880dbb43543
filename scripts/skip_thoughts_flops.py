r"""How close does a skip-thoughts training step come to this machine's matmul rate?

Counts the matmul FLOPs of one training step analytically (forward = 2 x MACs,
backward = 2 x forward) at the padded length the step computes (every batch is
padded to ``data.max_words`` steps), times the harness's own jitted train step on
random token ids (compile time separately), and divides by the float32 matmul rate
that ``scripts/draw_flops.py`` measures. Prints sentences/s (a training example is
one (previous, current, next) triple: 3 sentences) and the ratio.

  python scripts/skip_thoughts_flops.py --config configs/skip_thoughts.py:norm=ln,scale=cpu
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from draw_flops import matmul_rate, time_calls  # scripts/ is on sys.path when run.
from experiments.skip_thoughts import task as task_lib
from lnorm import config as config_lib
from lnorm.training.loop import TrainState, make_train_step
from lnorm.training.optim import make_optimizer


def matmul_macs_per_example(c) -> dict[str, int]:
  """Multiply-accumulates of one forward pass for one triple, by part (matmuls only):
  three GRUs of T steps (W_x [E, 3H] and W_h [H, 3H] per step) and the shared output
  layer [H, V] at each of the two decoders' T steps."""
  t, e, h, v = c.data.max_words, c.model.embed_size, c.model.hidden_size, c.data.vocab_size
  return {"grus": 3 * t * (e * 3 * h + h * 3 * h), "output_layer": 2 * t * h * v}


def random_batch(c, rng) -> dict[str, np.ndarray]:
  b, t = c.batch_size, c.data.max_words
  examples = task_lib.placeholder_examples(b, t)
  examples["tokens"] = rng.integers(3, c.data.vocab_size, (b, 3, t)).astype(np.int32)
  examples["length"] = np.full((b, 3), t, np.int32)
  examples["mask"] = np.ones(b, np.float32)
  return examples


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--config", default="configs/skip_thoughts.py:norm=ln,scale=cpu")
  p.add_argument("--steps", type=int, default=5, help="Timed training steps.")
  p.add_argument("--matmul_size", type=int, default=2048)
  p.add_argument("--matmul_reps", type=int, default=10)
  argv, overrides = config_lib.split_config_overrides(sys.argv[1:])
  args = p.parse_args(argv)
  config = config_lib.load_config(args.config)
  config_lib.apply_overrides(config, overrides)
  task = task_lib.Task(config)
  model = task.model_for_vocabulary(config.data.vocab_size)
  batch = jax.tree.map(jnp.asarray, random_batch(config, np.random.default_rng(0)))
  params = jax.jit(model.init)(jax.random.key(0), *task.model_inputs(batch))["params"]
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
  macs = matmul_macs_per_example(config)
  b = config.batch_size
  flops = 3 * 2 * sum(macs.values()) * b
  print(json.dumps({
      "config": args.config, "batch_size": b, "padded_length": config.data.max_words,
      "compile_seconds_wall": round(compile_s, 2), "compile_seconds_cpu": round(compile_cpu, 2),
      "step_seconds_wall": step_wall, "step_seconds_cpu": step_cpu,
      "triples_per_sec_wall": b / step_wall, "sentences_per_sec_wall": 3 * b / step_wall,
      "forward_macs_per_triple": macs, "train_step_matmul_flops": flops,
      "matmul_flops_per_sec_wall": rate_wall, "matmul_flops_per_sec_cpu": rate_cpu,
      # Share of the measured matmul rate the step achieves (1.0: as fast as one big
      # matmul); the CPU-time version discounts other processes on the machine.
      "ratio_wall": (flops / rate_wall) / step_wall,
      "ratio_cpu": (flops / rate_cpu) / step_cpu,
  }, indent=2))


if __name__ == "__main__":
  main()
