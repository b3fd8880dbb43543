r"""Handwriting synthesis on IAM-OnDB: LN paper sec. 6.5, Figure 5.

The network of Graves (2013) sec. 5.2: three stacked LSTMs of 400 with skip
connections (input and window to every layer, every layer to the output), a soft
window of 10 Gaussians over the one-hot text (57 symbols), and a mixture of 20
bivariate Gaussians plus an end-of-stroke Bernoulli (121 outputs): 3,650,151 weights
without LN (the paper: about 3.7M). Adam, batch 8, lines of up to 500 pen moves.
``norm`` picks the LSTM: ``none`` (baseline) or ``ln`` (the LN-LSTM of
docs/experiments.md, sec. 4, in all three layers).

The paper's claim (Figure 5): LN reaches a log-likelihood comparable to the
baseline's much faster (in updates). The paper gives no number to match.

Long lines: 76% of IAM-OnDB's lines have more than 500 moves (the mean is about 630).
With ``data.long_lines='truncate'`` (the default, the paper's "sequence length of 500")
they are cut to their first 500 moves and keep their whole transcription, so the
window need not reach the last character; ``'drop'`` keeps only lines that fit.

Reproduce one curve of Figure 5 (IAM-OnDB's two archives in $LNORM_DATA_DIR/iamondb/):

  lnorm train --config configs/handwriting.py:norm=ln --workdir runs/handwriting/ln

and the figure with ``lnorm sweep --config configs/handwriting.py --sweep figure5``.
Validation runs five times per decade of updates (``eval_points_per_decade``) on top
of the epoch ends, so that the figure's logarithmic axis has points from its first
decade on.

``clip=graves`` replaces the global-norm clip of 100 with Graves's element-wise bounds
(+-100 on the output layer's gradients, +-10 on the LSTMs'), applied to the parameter
gradients rather than, as Graves did, to the derivatives inside back-propagation.

``scale=cpu`` is a reduced setting that shows both curves on one CPU core in about
half an hour each: LSTMs of 128 instead of 400 (a step of 300 moves costs ~0.25 s
instead of ~2.2 s for 500 moves at 400 units, batch 8, one core); every second point
of each stroke (``data.downsample=2``: lines average ~330 moves instead of ~630, so
that most lines fit in 400 moves whole and the window sees the text to its end),
lines of up to 400 moves, the window starting at 0.1 characters per move (twice
the paper setting's 0.05, since a thinned line has half the moves per character), 3
epochs, and the validation NLL every 250 updates for curves against updates. NLLs at this scale are per thinned move and are not
comparable with full-resolution ones. ``smoke=true`` is a tiny model on synthetic
scribbles for tests.
"""

import ml_collections

from lnorm.config import parse_arg_string
from lnorm.training.defaults import SCALES, base_config, norm_options

#: The ``clip`` config argument: global-norm clipping, or Graves's element-wise form.
CLIPS = ("global", "graves")


def get_config(arg=None):
  args = parse_arg_string(arg, {"norm": "ln", "scale": "paper", "clip": "global",
                                "smoke": False},
                          choices={"scale": SCALES, "clip": CLIPS})
  c = base_config()
  c.experiment = "handwriting"
  c.scale = args["scale"]  # paper | cpu: which setting the fields below start from.
  # none | ln | rms | prms | dyt | scalenorm | ln_simple | module:attribute
  # (docs/extending.md): the LSTM variant of all three layers (lnorm.rnn).
  c.norm = args["norm"]
  c.norm_options = norm_options()  # ln.eps / ln.scale_init reach the LSTMs' LNs.
  # Recurrent matrices [H, kH] as k orthogonal H x H gate blocks, as in the authors'
  # code; "orthogonal" takes one orthogonal matrix over the whole [H, kH].
  c.recurrent_init = "orthogonal_per_gate"
  c.hidden_size = 400  # Units of each LSTM layer.
  c.num_layers = 3  # Stacked LSTMs; the window is computed from the first.
  c.num_gaussians = 10  # K, Gaussians of the soft window over the characters.
  c.num_components = 20  # M, bivariate Gaussians of the output mixture (6M + 1 outputs).
  c.forget_bias = 1.0  # Initial forget-gate bias of every LSTM.
  # Characters the untrained window advances per pen move: IAM-OnDB has ~21 moves per
  # character (median). Graves gives no initialisation; 1.0 (a zero bias under the
  # exp) sends the window past the text at once, where it never learns to follow it
  # (runs with 1.0 at scale=cpu: see experiments/handwriting/model.py).
  c.window_initial_step = 0.05
  c.scan_unroll = 1  # Time steps per scan iteration (same results; longer compile).

  c.batch_size = 8
  c.num_epochs = 30
  c.optimizer.name = "adam"  # optax defaults: b1 0.9, b2 0.999, eps 1e-8.
  c.optimizer.learning_rate = 1e-3
  # Graves clipped derivatives; the loss is in nats per line (hundreds to thousands),
  # so early gradients are large. Global-norm clipping; 0 turns it off.
  c.optimizer.clip_global_norm = 100.0
  # Graves (2013) sec. 4-5 clipped element-wise: +-100 at the output layer, +-10 in the
  # LSTMs. Here: parameter-path pattern -> bound (0: off) for the parameter gradients,
  # each coordinate clipped to its group's bound ("layer_*" holds the three LSTMs and
  # the window layer of the first). Graves clipped the derivatives with respect to the
  # outputs and the LSTM activations inside back-propagation instead, so that the
  # gradients computed from them used the clipped values: a different operation
  # (lnorm.training.optim.clip_elementwise). The config argument clip=graves sets the
  # bounds 100 and 10 and turns clip_global_norm off.
  c.optimizer.clip_elementwise = ml_collections.ConfigDict({"mixture": 0.0, "layer_*": 0.0})
  if args["clip"] == "graves":
    c.optimizer.clip_elementwise.mixture = 100.0
    c.optimizer.clip_elementwise["layer_*"] = 10.0
    c.optimizer.clip_global_norm = 0.0
  c.eval_batch_size = 64
  # Written after every epoch into <workdir>/images/ (empty: no sample).
  c.sample_text = "layer normalization"
  c.sample_bias = 0.5  # Graves's sampling bias b (0: the model's own distribution).
  c.sample_max_steps = 0  # Pen moves before a sample is cut off (0: 40 per character).
  c.eval_splits = ("validation",)
  c.final_eval_splits = ("test",)
  # Figure 5's x axis is logarithmic (units of 200 updates, up to ~200k updates): the
  # epoch-end evaluations (the first after ~1,400 updates) leave its first decade empty.
  # Five validations per decade of updates, at geometrically spaced steps, put five
  # points in each decade from the start (about 27 up to 200k updates) at the cost of
  # that many passes over the 5% validation split.
  c.eval_points_per_decade = 5
  c.eval_every_splits = ("validation",)

  c.data.name = "iamondb"
  c.data.source = "auto"  # auto: files (the two archives or folders) -> strokes_npy.
  c.data.max_points = 500  # Pen moves per line (Graves: sequences of 500).
  c.data.long_lines = "truncate"  # Lines over max_points: 'truncate' or 'drop'.
  # Lines with a move longer than this (raw tablet units) hold a sensor glitch and are
  # dropped: 31 of IAM-OnDB's 12,187 transcribed lines.
  c.data.max_offset = 2000.0
  c.data.downsample = 1  # Keep every n-th point of each stroke (1: all, the paper).
  c.data.validation_fraction = 0.05  # Share of the forms held out for validation.
  c.data.test_fraction = 0.05  # Share of the forms held out for test.

  if args["scale"] == "cpu":
    c.hidden_size = 128
    c.data.downsample = 2
    c.window_initial_step = 0.1  # Half the moves per character after thinning.
    c.data.max_points = 400
    c.num_epochs = 3
    c.eval_every_steps = 250
  if args["smoke"]:
    c.hidden_size = 16
    c.num_gaussians = 3
    c.num_components = 4
    c.num_epochs = 1
    c.batch_size = 4
    c.progress_bar = False
    c.data.source = "synthetic"
    c.data.synthetic_size = 48
    c.data.max_points = 64
    c.sample_text = "bad face"  # Words of the synthetic lines.
    c.sample_max_steps = 40
    c.eval_points_per_decade = 0  # Epoch ends only: keeps the smoke runs short.
  return c


def get_sweep(name=None):
  """Named grids of dotted overrides (see ``lnorm sweep``).

  lnorm sweep --config configs/handwriting.py --sweep figure5 --workdir runs/handwriting
  lnorm sweep --config configs/handwriting.py:scale=cpu --sweep cpu --workdir runs/hw_cpu
  """
  # Imported here: the config itself (get_config) needs none of the benchmark.
  from lnorm.sweeps import benchmark_suite  # pylint: disable=g-import-not-at-top
  sweeps = {
      # The benchmark's own members at each scale, its spec's grids (`lnorm benchmark
      # --experiments handwriting` runs the same).
      **benchmark_suite.named_sweeps("handwriting"),
      # Figure 5: baseline and LN at paper size (for a GPU).
      "figure5": [{"norm": n} for n in ("none", "ln")],
  }
  return sweeps if name is None else sweeps[name]
