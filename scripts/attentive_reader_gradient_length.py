r"""How does the attentive reader's gradient at initialisation grow with passage length?

Takes the first training batch of a config, cuts its passages to each length in
``--lengths`` and prints the global norm of the loss gradient at the initial
parameters: the same parameters, questions, answers and dropout masks at every
length, so only the number of recurrent steps the gradient passes through changes.

  python scripts/attentive_reader_gradient_length.py \
      --config configs/attentive_reader.py:norm=ln,scale=cpu [--lengths 25,50,100,200,400]

Why it exists: LN normalises the recurrent term W_h h, so its Jacobian with respect
to h scales with gain / std(W_h h), whatever the scale of W_h. With gain 1.0 that
makes the LN-LSTM's backward recurrence grow, and the gradient grows geometrically
with the passage; with Cooijmans et al.'s gain 0.1 it does not (docs/results.md).
"""

from __future__ import annotations

import json

import jax
import numpy as np

from lnorm.data import batching
from lnorm.training import benchmark
from lnorm.training import loop
from lnorm.training import parallel
from lnorm.training.task import load_task


def gradient_norm(task, model, params, batch_stats, batch, rngs) -> float:
  def loss_fn(p):
    outputs, _ = model.apply({"params": p, "batch_stats": batch_stats},
                             *task.model_inputs(batch), train=True, rngs=rngs,
                             mutable=["batch_stats"])
    return task.loss_and_metrics(outputs, batch)[0]
  grads = jax.grad(loss_fn)(params)
  return float(np.sqrt(sum(float(np.sum(np.square(g))) for g in jax.tree.leaves(grads))))


def truncated(batch, length: int):
  """The batch with every passage cut to its first ``length`` tokens."""
  cut = dict(batch)
  cut["passage"] = batch["passage"][:, :length]
  cut["passage_length"] = np.minimum(batch["passage_length"], length)
  return cut


def main():
  def add_arguments(parser):
    parser.add_argument("--lengths", default="25,50,100,200,400",
                        help="Passage lengths in tokens, comma-separated.")

  args, config = benchmark.parse_args(__doc__.split("\n")[0],
                                      "configs/attentive_reader.py:norm=ln,scale=cpu",
                                      add_arguments)
  task = load_task(config)
  dataset = task.load_data()
  model = task.build_model(dataset)
  train = dataset.splits[task.train_split()]
  state = loop.init_train_state(config, task, model, train, parallel.make_mesh())
  first = {k: v[0] for k, v in
           batching.train_chunk(train, config.batch_size, config.seed, 0, 0, 1).items()}
  rngs = {name: jax.random.key(i) for i, name in enumerate(task.rng_streams)}
  norms = {}
  for length in (int(n) for n in args.lengths.split(",")):
    norms[length] = gradient_norm(task, model, state.params, state.batch_stats,
                                  truncated(first, length), rngs)
    print(f"passage tokens {length:5d}: gradient norm {norms[length]:.3g}", flush=True)
  print(json.dumps({"config": args.config, "norm": config.norm,
                    "ln_gain": config.norm_options.ln.scale_init,
                    "init": config.model.init, "gradient_norm_by_length": norms}))


if __name__ == "__main__":
  main()
