r"""How close does an attentive-reader training step come to this machine's matmul rate?

Counts the matmul FLOPs of one training step analytically at the padded lengths the
step really computes; ``lnorm.training.benchmark`` compiles and times the harness's
own train step on a batch of those shapes, measures the matmul rate and prints the
share of it a step achieves, with examples/s.

  python scripts/attentive_reader_flops.py \
      --config configs/attentive_reader.py:norm=ln,scale=cpu [--steps 5] \
      [--passage_tokens 96]

``--passage_tokens`` measures the step at the padded passage lengths of the length
buckets (the run log names them; a comma-separated list) instead of the longest,
``data.max_passage_tokens``, and reports each and their mean: the buckets sit at
quantiles of the training lengths, so each takes about the same share of the steps.
"""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np

from lnorm.data.cloze import ENTITY_OFFSET
from lnorm.training import benchmark
from lnorm.training.task import load_task


def matmul_macs_per_example(config, passage_tokens: int) -> int:
  """Multiply-accumulates of one forward pass for one example (matmuls only), at
  the padded passage and question lengths; the answer softmax has ``num_entities``
  outputs (10 candidates for CBT-style data) or the whole vocabulary."""
  m, d = config.model, config.data
  e, h, a, r = m.embed_size, m.hidden_size, m.attention_size, m.readout_size
  tp, tq = passage_tokens, d.max_question_tokens
  n = d.vocab_size if m.answer_vocabulary == "vocabulary" else d.num_entities
  lstm = lambda t: t * (e * 4 * h + h * 4 * h)
  attention = tp * h * a + h * a + tp * a + (tp * h * h + h * h if m.bilinear else 0)
  pooling = 2 * tp * h  # sum_t alpha_t d_t and the mean of d_t
  return lstm(tp) + lstm(tq) + attention + pooling + 3 * h * r + r * n


def main():
  def add_arguments(parser):
    parser.add_argument("--passage_tokens", default="",
                        help="Padded passage lengths, comma-separated (default: "
                        "data.max_passage_tokens).")

  args, config = benchmark.parse_args(__doc__.split("\n")[0],
                                      "configs/attentive_reader.py:norm=ln,scale=cpu",
                                      add_arguments)
  task = load_task(config)
  d = config.data
  lengths = [int(t) for t in args.passage_tokens.split(",") if t] or [d.max_passage_tokens]
  reports = {tp: measure(task, config, args, tp) for tp in lengths}
  mean = lambda key: float(np.mean([r[key] for r in reports.values()]))
  print(json.dumps({
      "config": args.config, "batch_size": config.batch_size,
      "question_tokens": d.max_question_tokens,
      "by_passage_tokens": reports,
      "mean_over_lengths": {k: mean(k) for k in ("step_seconds_wall", "step_seconds_cpu",
                                                  "ratio_wall", "ratio_cpu",
                                                  "examples_per_sec_wall")},
  }, indent=2))


def measure(task, config, args, tp: int) -> dict:
  """The benchmark report of one train step at padded passage length ``tp``."""
  b, d = config.batch_size, config.data
  rng = np.random.default_rng(0)
  passage = rng.integers(ENTITY_OFFSET, d.vocab_size, (b, tp))
  question = rng.integers(ENTITY_OFFSET, d.vocab_size, (b, d.max_question_tokens))
  batch = {"passage": jnp.asarray(passage, jnp.int32),
           "passage_length": jnp.full((b,), tp, jnp.int32),
           "question": jnp.asarray(question, jnp.int32),
           "question_length": jnp.full((b,), d.max_question_tokens, jnp.int32),
           "answer": jnp.zeros((b,), jnp.int32), "mask": jnp.ones((b,), jnp.float32)}
  model = task.model_for(d.vocab_size, d.num_entities, ENTITY_OFFSET)
  flops = benchmark.train_step_flops(matmul_macs_per_example(config, tp) * b)
  report = benchmark.measure_train_step(
      task, model, config, batch, flops=flops, steps=args.steps,
      matmul_size=args.matmul_size, matmul_reps=args.matmul_reps)
  return {**report, "examples_per_sec_wall": b / report["step_seconds_wall"]}


if __name__ == "__main__":
  main()
