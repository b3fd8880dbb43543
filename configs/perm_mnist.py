r"""Permutation-invariant MNIST: LN paper sec. 6.6, Figure 6.

A 784-1000-1000-10 ReLU MLP trained with Adam on 55,000 MNIST images (5,000 held out
for validation), with no normalization, BN on all layers, or LN on the hidden layers
only. At batch size 4 BN uses the unbiased variance estimate.

The paper's claim (Figure 6): LN is robust to the batch size and trains faster than
BN; at batch size 4 BN trains visibly worse. The paper gives no learning rate, epoch
count or activation: 1e-3, ReLU and the epochs below are the usual reading.

Reproduce one curve of Figure 6 on the full data:

  lnorm train --config configs/perm_mnist.py:norm=ln,batch_size=128 \
      --workdir runs/perm_mnist/ln_b128 --config.data.source=files

and the whole figure with ``lnorm sweep --config configs/perm_mnist.py --sweep figure6
--workdir runs/fig6 --config.data.source=files`` (``--sweep cpu`` and ``--sweep
paper``: the benchmark's grids, declared once in ``experiments/perm_mnist/spec.py``).
"""

from experiments.perm_mnist import spec
from lnorm.config import parse_arg_string
from lnorm.training.defaults import base_config, norm_options


def get_config(arg=None):
  args = parse_arg_string(arg, {"norm": "ln", "batch_size": 128, "smoke": False})
  c = base_config()
  c.experiment = "perm_mnist"
  # none | ln | rms | prms | dyt | scalenorm | ln_simple | bn | wn | bln | module:attribute
  # (your own normalizer, docs/extending.md).
  c.norm = args["norm"]
  c.norm_options = norm_options()
  c.norm_position = "auto"  # 'pre' g(N(Wx)), 'post' N(g(Wx)); auto follows each paper.
  c.normalize_logits = "auto"  # 'auto' (BN/WN yes, LN no, as in the paper), 'true', 'false'.
  c.hidden_sizes = (1000, 1000)
  c.activation = "relu"
  # The batch size and what it sets with it: BN's unbiased variance at batch 4 (the LN
  # paper's), the steps fused per jitted call (spec.batch_fields).
  c.update_from_flattened_dict(spec.batch_fields(args["batch_size"]))
  c.num_epochs = 20
  c.optimizer.name = "adam"
  c.optimizer.learning_rate = 1e-3

  c.data.name = "mnist"
  c.data.source = "auto"  # auto: tfds (if prepared) -> files -> embedded 5k digits.
  c.data.validation_size = 5000  # The paper's 55k/5k split.
  c.data.permute_pixels = False  # A fixed seeded pixel permutation, to demonstrate invariance.

  if args["smoke"]:
    c.hidden_sizes = (32, 32)
    c.num_epochs = 1
    c.data.source = "embedded"
    c.eval_batch_size = 500
  return c


def _figure6_member(norm, batch_size):
  # The config argument batch_size=4 would set the others; a dotted override does not.
  return {"norm": norm, **spec.batch_fields(batch_size)}


def get_sweep(name=None):
  """Named grids of dotted overrides (see ``lnorm sweep``).

  lnorm sweep --config configs/perm_mnist.py --sweep figure6 --workdir runs/fig6
  lnorm sweep --config configs/perm_mnist.py --sweep cpu --workdir runs/perm_mnist_cpu
  """
  # Imported here: the config itself (get_config) needs none of the benchmark.
  from lnorm.sweeps import benchmark_suite  # pylint: disable=g-import-not-at-top
  figure6 = [_figure6_member(n, b) for b in (128, 4) for n in ("none", "bn", "ln")]
  sweeps = {
      # The benchmark's own members at each scale (`lnorm benchmark --experiments
      # perm_mnist` runs the same): at cpu, batch 4 with every normalizer it judges, one
      # epoch, the pilot's first three seeds (the benchmark sizes the pilot from seed
      # 0's minutes and adds the seeds its claims need).
      **benchmark_suite.named_sweeps("perm_mnist"),
      # Figure 6: baseline, BN and LN at batch sizes 128 and 4.
      "figure6": figure6,
      "perm_mnist": figure6,  # The same grid under the name.
      # LN vs BN at batch 128 over three seeds: mean and spread in the summary.
      "seeds": [{**_figure6_member(n, 128), "seed": s} for n in ("bn", "ln") for s in (0, 1, 2)],
      # The speed claim at batch 4 (issue 15): LN against BN over three seeds, 2 epochs,
      # evaluated every 1,000 updates so that `lnorm compare --baseline norm=bn` can
      # read the updates to BN's best test error.
      "speed_b4": [{**_figure6_member(n, 4), "seed": s, "num_epochs": 2,
                    "eval_every_steps": 1000}
                   for n in ("bn", "ln") for s in (0, 1, 2)],
  }
  return sweeps if name is None else sweeps[name]
