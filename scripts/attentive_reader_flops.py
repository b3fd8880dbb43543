r"""How close does an attentive-reader training step come to this machine's matmul
rate? The attentive-reader counterpart of scripts/draw_flops.py, whose timing and
matmul-rate helpers it reuses.

Counts the matmul FLOPs of one training step analytically at the padded lengths the
step really computes (forward = 2 x MACs, backward = 2 x forward), times the loop's
own jitted train step on a batch of the configured shapes (compile time separately),
and prints step time, examples/s and the share of the measured matmul rate.

  python scripts/attentive_reader_flops.py \
      --config configs/attentive_reader.py:norm=ln,scale=cpu [--steps 5]
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
from lnorm import config as config_lib
from lnorm.data.cloze import ENTITY_OFFSET
from lnorm.training.loop import TrainState, make_train_step
from lnorm.training.optim import make_optimizer
from lnorm.training.task import load_task


def matmul_macs_per_example(config) -> int:
  """Multiply-accumulates of one forward pass for one example (matmuls only), at
  the padded passage and question lengths."""
  m, d = config.model, config.data
  e, h, a, r = m.embed_size, m.hidden_size, m.attention_size, m.readout_size
  tp, tq, n = d.max_passage_tokens, d.max_question_tokens, d.num_entities
  lstm = lambda t: t * (e * 4 * h + h * 4 * h)
  attention = tp * h * a + h * a + tp * a + (tp * h * h + h * h if m.bilinear else 0)
  pooling = 2 * tp * h  # sum_t alpha_t d_t and the mean of d_t
  return lstm(tp) + lstm(tq) + attention + pooling + 3 * h * r + r * n


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--config", default="configs/attentive_reader.py:norm=ln,scale=cpu")
  p.add_argument("--steps", type=int, default=5, help="Timed training steps.")
  p.add_argument("--matmul_size", type=int, default=2048)
  p.add_argument("--matmul_reps", type=int, default=10)
  argv, overrides = config_lib.split_config_overrides(sys.argv[1:])
  args = p.parse_args(argv)
  config = config_lib.load_config(args.config)
  config_lib.apply_overrides(config, overrides)
  task = load_task(config)
  b, d = config.batch_size, config.data
  rng = np.random.default_rng(0)
  passage = rng.integers(ENTITY_OFFSET, d.vocab_size, (b, d.max_passage_tokens))
  question = rng.integers(ENTITY_OFFSET, d.vocab_size, (b, d.max_question_tokens))
  batch = {"passage": jnp.asarray(passage, jnp.int32),
           "passage_length": jnp.full((b,), d.max_passage_tokens, jnp.int32),
           "question": jnp.asarray(question, jnp.int32),
           "question_length": jnp.full((b,), d.max_question_tokens, jnp.int32),
           "answer": jnp.zeros((b,), jnp.int32), "mask": jnp.ones((b,), jnp.float32)}
  model = task.model_for(d.vocab_size, d.num_entities, ENTITY_OFFSET)
  key = jax.random.key(0)
  variables = jax.jit(lambda k: model.init({"params": k, "dropout": k, "entities": k},
                                           *task.model_inputs(batch), train=True))(key)
  state = TrainState.create(apply_fn=model.apply, params=variables["params"],
                            tx=make_optimizer(config.optimizer),
                            batch_stats=variables.get("batch_stats", {}))
  step = jax.jit(make_train_step(task, model))

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
  flops = 3 * 2 * matmul_macs_per_example(config) * b
  print(json.dumps({
      "config": args.config, "batch_size": b, "devices": str(jax.devices()),
      "padded_shapes": {"passage": [b, d.max_passage_tokens],
                        "question": [b, d.max_question_tokens]},
      "compile_seconds_wall": round(compile_s, 2),
      "compile_seconds_cpu": round(compile_cpu, 2),
      "step_seconds_wall": step_wall, "step_seconds_cpu": step_cpu,
      "examples_per_sec_wall": b / step_wall,
      "train_step_matmul_flops": flops,
      # XLA counts the body of a while loop (each LSTM's scan) once, not per step.
      "xla_cost_analysis_flops": xla_flops,
      "matmul_flops_per_sec_wall": rate_wall, "matmul_flops_per_sec_cpu": rate_cpu,
      "ratio_wall": (flops / rate_wall) / step_wall,
      "ratio_cpu": (flops / rate_cpu) / step_cpu,
  }, indent=2))


if __name__ == "__main__":
  main()
