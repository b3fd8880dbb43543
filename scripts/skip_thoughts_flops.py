r"""How close does a skip-thoughts training step come to this machine's matmul rate?

Counts the matmul FLOPs of one training step analytically at the padded length the
step computes (every batch is padded to ``data.max_words`` steps);
``lnorm.training.benchmark`` compiles and times the harness's own train step on random
token ids, measures the matmul rate and prints the share of it a step achieves, with
sentences/s (a training example is one (previous, current, next) triple: 3 sentences).

  python scripts/skip_thoughts_flops.py --config configs/skip_thoughts.py:norm=ln,scale=cpu
  # The step with the GRUs fused against the same step scanning them step by step
  # (no fused recurrence), timed in alternation in one process:
  python scripts/skip_thoughts_flops.py --config configs/skip_thoughts.py:norm=none,scale=cpu \
      --compare-scan
"""

from __future__ import annotations

import contextlib
import json
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from experiments.skip_thoughts import task as task_lib
from lnorm.rnn import cells
from lnorm.training import benchmark
from lnorm.training.steps import TrainState, make_train_step
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


@contextlib.contextmanager
def scanned_grus():
  """The GRUs scan their cell step by step, as before the fused GRU recurrence
  (what ``RecurrentLayer(fused=False)`` does, for a model that builds its own)."""
  fusable = cells.GRUCell.fusable
  cells.GRUCell.fusable = property(lambda self: False)
  try:
    yield
  finally:
    cells.GRUCell.fusable = fusable


def _measure(args, config, task, batch) -> dict:
  model = task.model_for_vocabulary(config.data.vocab_size)
  macs = matmul_macs_per_example(config)
  b = config.batch_size
  report = benchmark.measure_train_step(
      task, model, config, batch, flops=benchmark.train_step_flops(sum(macs.values()) * b),
      steps=args.steps, matmul_size=args.matmul_size, matmul_reps=args.matmul_reps)
  return {"config": args.config, "padded_length": config.data.max_words,
          "forward_macs_per_triple": macs, **report,
          "triples_per_sec_wall": b / report["step_seconds_wall"],
          "sentences_per_sec_wall": 3 * b / report["step_seconds_wall"]}


def _step_runner(config, task, batch):
  """A compiled, warmed-up train step of the model as built now: ``run()`` takes one."""
  model = task.model_for_vocabulary(config.data.vocab_size)
  key = jax.random.key(config.seed)
  variables = jax.jit(lambda k: model.init(k, *task.model_inputs(batch), train=True))(key)
  state = TrainState.create(apply_fn=model.apply, params=variables["params"],
                            tx=make_optimizer(config.optimizer),
                            batch_stats=variables.get("batch_stats", {}))
  compiled = jax.jit(make_train_step(task, model)).lower(state, batch, key).compile()
  holder = {"state": compiled(state, batch, key)[0]}

  def run():
    holder["state"], out = compiled(holder["state"], batch, key)
    jax.block_until_ready(out["loss"])
  run()
  return run


def compare_scan(args, config, task, batch) -> dict:
  """Median wall seconds of the step with the GRUs fused and scanned, timed in
  alternation (one of each per round), so that a shared machine's load falls on both."""
  fused = _step_runner(config, task, batch)
  with scanned_grus():
    scanned = _step_runner(config, task, batch)
  times = {"fused": [], "scanned": []}
  for _ in range(args.steps):
    for name, run in (("fused", fused), ("scanned", scanned)):
      start = time.perf_counter()
      run()
      times[name].append(time.perf_counter() - start)
  medians = {name: statistics.median(t) for name, t in times.items()}
  return {"step_seconds_wall_median": medians,
          "fused_over_scanned": medians["fused"] / medians["scanned"]}


def main():
  args, config = benchmark.parse_args(
      __doc__.split("\n")[0], "configs/skip_thoughts.py:norm=ln,scale=cpu",
      lambda parser: parser.add_argument(
          "--compare-scan", action="store_true",
          help="instead, time the step with the GRUs fused and scanned step by step"))
  task = task_lib.Task(config)
  batch = jax.tree.map(jnp.asarray, random_batch(config, np.random.default_rng(0)))
  if args.compare_scan:
    result = {"config": args.config, **compare_scan(args, config, task, batch)}
  else:
    result = _measure(args, config, task, batch)
  print(json.dumps(result, indent=2))


if __name__ == "__main__":
  main()
