r"""CIFAR-10 with the modified LeNet-5: BLN paper sec. 4.1 (docs/experiments.md, sec. 8).

conv 6@5x5 'same' tanh -> avg-pool 2 -> norm -> conv 16@5x5 'valid' tanh -> avg-pool 2
-> norm -> dense 120 tanh -> norm -> dense 84 tanh -> norm -> dense 10, with the norm
one of bln, bn, ln, none; Adam lr 0.002, 15 epochs, batch size 1 or 25, trained on a
seeded 20% of the 45,000 training images left after holding out 5,000 for validation
(``subset=whole`` for the whole set); the full 10,000-image test set.

The paper's claim: BLN beats BN and LN at batch sizes 1 and 25. The authors'
repository reports test loss / accuracy, 20% subset:
  batch 25: BLN 1.531/0.455, BN 1.575/0.453, LN 1.666/0.423;
  batch 1:  BLN 1.562/0.442, BN 22.1/0.109,  LN 1.734/0.378.

Reproduce one cell, then BLN's 16-configuration inference search (selected on the
validation split):

  lnorm train --config configs/bln_cifar.py:norm=bln,batch_size=25 \
      --workdir runs/bln/cifar_bln_b25 --config.data.source=files
  lnorm bln-search --workdir runs/bln/cifar_bln_b25

and the whole comparison with ``lnorm sweep --config configs/bln_cifar.py --sweep comparison``.
"""

from experiments.bln_cifar import spec
from lnorm.config import parse_arg_string
from lnorm.training.defaults import base_config, norm_options


def get_config(arg=None):
  args = parse_arg_string(arg, {"norm": "bln", "batch_size": 25, "subset": "0.2",
                                "norm_axes": "conventional", "smoke": False})
  c = base_config()
  c.experiment = "bln_cifar"
  # bln | bn | ln | rms | prms | dyt | scalenorm | ln_simple | none | module:attribute
  # (your own normalizer, docs/extending.md).
  c.norm = args["norm"]
  # Options of the chosen norm; for the conv maps the axes come from norm_axes.
  c.norm_options = norm_options()
  # Conv-map axes (experiments/bln_cifar/task.py): 'conventional' (BN per channel over
  # N,H,W; LN and BLN's feature statistics over H,W,C) or 'authors' (BLN's batch
  # statistics per position over N, feature statistics over C, as their Keras layer).
  c.norm_axes = args["norm_axes"]
  # The batch size, and the steps fused per jitted call with it (spec.batch_fields):
  # batch size 1 means 9,000 steps an epoch, fused so that dispatch does not dominate.
  c.update_from_flattened_dict(spec.batch_fields(args["batch_size"]))
  c.num_epochs = 15  # The paper's epochs.
  c.optimizer.name = "adam"
  c.optimizer.learning_rate = 0.002  # The authors' code.
  # Per-epoch evaluation uses each norm's inference mode (BLN: norm_options.bln.inference,
  # population statistics by default), which does not depend on this batch size.
  c.eval_batch_size = 1000

  c.data.name = "cifar10"
  c.data.source = "auto"  # auto: tfds (if prepared) -> files.
  c.data.validation_size = 5000  # Held out of the 50k training images.
  # The protocol's seeded 20% training subset; 'whole' trains on all 45,000.
  c.data.subset_fraction = 1.0 if args["subset"] == "whole" else float(args["subset"])
  c.data.seed = 0  # Seeds the hold-out and the subset.

  if args["smoke"]:
    c.num_epochs = 1
    c.data.source = "synthetic"
    c.data.synthetic_size = 100  # Random images with class-dependent colours.
    c.eval_batch_size = 50
    c.progress_bar = False
  return c


def get_sweep(name=None):
  """Named grids of dotted overrides (see ``lnorm sweep``)."""
  # Imported here: the config itself (get_config) needs none of the benchmark.
  from lnorm.analysis import specs  # pylint: disable=g-import-not-at-top
  from lnorm.sweeps import benchmark_suite  # pylint: disable=g-import-not-at-top
  sweeps = {
      # The benchmark's own members at each scale, its spec's grids (`lnorm benchmark
      # --experiments bln_cifar` runs the same).
      **benchmark_suite.named_sweeps("bln_cifar"),
      # The paper's comparison: three norms at batch sizes 25 and 1 (20% subset).
      "comparison": specs.bln_comparison(spec.BATCH),
  }
  return sweeps if name is None else sweeps[name]
