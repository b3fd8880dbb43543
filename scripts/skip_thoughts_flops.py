r"""How close does a skip-thoughts training step come to this machine's matmul rate?

Counts the matmul FLOPs of one training step analytically at the padded length the
step computes (every batch is padded to ``data.max_words`` steps);
``lnorm.training.benchmark`` compiles and times the harness's own train step on random
token ids, measures the matmul rate and prints the share of it a step achieves, with
sentences/s (a training example is one (previous, current, next) triple: 3 sentences).

  python scripts/skip_thoughts_flops.py --config configs/skip_thoughts.py:norm=ln,scale=cpu
  # Also the same step with the GRUs scanned step by step (no fused recurrence), and
  # the ratio of the two, measured in one process:
  python scripts/skip_thoughts_flops.py --config configs/skip_thoughts.py:norm=none,scale=cpu \
      --compare-scan
"""

from __future__ import annotations

import contextlib
import json

import jax
import jax.numpy as jnp
import numpy as np

from experiments.skip_thoughts import task as task_lib
from lnorm.rnn import cells
from lnorm.training import benchmark


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


def main():
  args, config = benchmark.parse_args(
      __doc__.split("\n")[0], "configs/skip_thoughts.py:norm=ln,scale=cpu",
      lambda parser: parser.add_argument(
          "--compare-scan", action="store_true",
          help="also time the step with the GRUs scanned step by step"))
  task = task_lib.Task(config)
  batch = jax.tree.map(jnp.asarray, random_batch(config, np.random.default_rng(0)))
  result = _measure(args, config, task, batch)
  if args.compare_scan:
    with scanned_grus():
      scanned = _measure(args, config, task, batch)
    result = {"fused": result, "scanned": scanned,
              "fused_over_scanned_wall": (result["step_seconds_wall"]
                                          / scanned["step_seconds_wall"])}
  print(json.dumps(result, indent=2))


if __name__ == "__main__":
  main()
