r"""How does a recurrent model's gradient at initialisation grow with sequence length?

Takes the first training batch of a config, cuts the task's variable-length feature
(``Task.length_feature``: the attentive reader's passages) to each length in
``--lengths`` and prints the global norm of the training loss's gradient at the
initial parameters: the same parameters, other inputs, targets and dropout masks at
every length, so only the number of recurrent steps the gradient passes through
changes.

  python scripts/gradient_norm_by_length.py \
      --config configs/attentive_reader.py:norm=ln,scale=cpu [--lengths 25,50,100,200,400] \
      [--config.norm_options.ln.scale_init=0.1]

Why it exists: LN normalises the recurrent term W_h h, so its Jacobian with respect
to h scales with gain / std(W_h h), whatever the scale of W_h. With gain 1.0 that
makes the LN-LSTM's backward recurrence grow, and the gradient grows geometrically
with the sequence; with Cooijmans et al.'s gain 0.1 it does not (docs/results.md).
"""

from __future__ import annotations

import functools
import json

import jax
import numpy as np
import optax

from lnorm.training import assembly
from lnorm.training import process
from lnorm.training import throughput
from lnorm.training import steps
from lnorm.training import train_state


def truncated(batch, feature: str, lengths: str, length: int):
  """The batch with ``feature`` ([B, T, ...]) cut to its first ``length`` steps."""
  return {**batch, feature: batch[feature][:, :length],
          lengths: np.minimum(batch[lengths], length)}


def main():
  def add_arguments(parser):
    parser.add_argument("--lengths", default="25,50,100,200,400",
                        help="Sequence lengths in steps, comma-separated.")

  args, config = throughput.parse_args(__doc__.split("\n")[0],
                                      "configs/attentive_reader.py:norm=ln,scale=cpu",
                                      add_arguments)
  process.set_up(config)  # As `lnorm train` runs: before JAX starts.
  task = assembly.check(config)
  if task.length_feature is None:
    raise SystemExit(f"error: experiment {config.experiment!r} declares no "
                     "variable-length feature (Task.length_feature) to cut; the "
                     "attentive reader does.")
  feature, lengths = task.length_feature
  task, dataset, model = assembly.assemble_model(config, task=task)
  train = dataset.splits[task.train_split()]
  first = train_state.first_training_batch(config, train)
  state = train_state.TrainStateInitializer(config, task, model).from_scratch(first)
  rngs = {name: jax.random.key(i) for i, name in enumerate(task.rng_streams)}
  norms = {}
  for length in (int(n) for n in args.lengths.split(",")):
    loss_fn = functools.partial(steps.training_loss, task, model, state.batch_stats,
                                truncated(first, feature, lengths, length), rngs)
    grads = jax.grad(lambda p: loss_fn(p)[0])(state.params)
    norms[length] = float(optax.global_norm(grads))
    print(f"{feature} length {length:5d}: gradient norm {norms[length]:.3g}", flush=True)
  print(json.dumps({"config": args.config, "norm": config.norm,
                    "ln_gain": config.norm_options.ln.scale_init,
                    "gradient_norm_by_length": norms}))


if __name__ == "__main__":
  main()
