r"""IMDB sentiment with a two-layer LSTM: BLN paper sec. 4.2
(docs/experiments.md, sec. 8).

embedding 512 -> LSTM 128 (all states) -> norm -> LSTM 64 (last state) -> norm ->
dense 32 tanh -> norm -> 1 logit, the norm one of bln, bn, ln, none; both LSTMs with
the authors' Keras ``dropout=0.2, recurrent_dropout=0.2`` (one mask per review for the
inputs and one for h, reused at every step); Adam lr 0.003, binary cross-entropy, 10
epochs, batch size 1 or 25; the 20,000 most frequent training words, reviews cut to
their last 80 tokens; trained on a seeded 20% of the 20,000 training reviews left after
holding out 5,000 for validation (``subset=whole`` for all of them); the full
25,000-review test set.

The paper's claim: BLN beats BN and LN at batch sizes 1 and 25. The authors'
repository reports test loss / accuracy, 20% subset:
  batch 25: BLN 0.496/0.771, BN 0.620/0.698, LN 0.639/0.711;
  batch 1:  BLN 0.583/0.731, BN 0.979/0.495, LN 0.688/0.684.

Reproduce one cell, then BLN's 16-configuration inference search:

  lnorm train --config configs/bln_imdb.py:norm=bln,batch_size=25 \
      --workdir runs/bln/imdb_bln_b25 --config.data.source=files
  lnorm bln-search --workdir runs/bln/imdb_bln_b25

``padding=keras`` adds the authors' input convention: reviews padded in front and the
padding run through the LSTMs and the norms unmasked (Keras ``pad_sequences`` and an
``Embedding`` without ``mask_zero``), so BN's and BLN's statistics see it:

  lnorm train --config configs/bln_imdb.py:norm=bln,batch_size=25,padding=keras \
      --workdir runs/bln/imdb_bln_b25_keras --config.data.source=files

and the whole comparison with ``lnorm sweep --config configs/bln_imdb.py --sweep comparison``.
"""

import ml_collections

from experiments.bln_imdb import spec
from lnorm.config import parse_arg_string
from lnorm.errors import ConfigError
from lnorm.training.defaults import base_config, norm_options

#: The ``padding`` config argument: where padding goes and whether the model masks it.
PADDING = {
    # Padding after the tokens, kept out of the LSTM states and every statistic.
    "masked": {"padding": "post", "mask_padding": True},
    # The authors' Keras code: pad_sequences' default padding in front, and an
    # Embedding without mask_zero, so the LSTMs and the norms see the padding.
    "keras": {"padding": "pre", "mask_padding": False},
}


def get_config(arg=None):
  args = parse_arg_string(arg, {"norm": "bln", "batch_size": 25, "subset": "0.2",
                                "padding": "masked", "smoke": False})
  if args["padding"] not in PADDING:
    raise ConfigError(f"padding={args['padding']!r}: use one of {', '.join(PADDING)}.")
  c = base_config()
  c.experiment = "bln_imdb"
  # bln | bn | ln | rms | prms | dyt | scalenorm | ln_simple | none | module:attribute
  # (your own normalizer, docs/extending.md).
  c.norm = args["norm"]
  # Options of the chosen norm. Sequences [B, T, 128] use BN over (batch, time) per
  # feature, LN per example and step, BLN batch statistics per step (the authors'
  # per-position convention) and feature statistics per example and step.
  c.norm_options = norm_options()
  # The batch size, and the steps fused per jitted call with it (spec.batch_fields):
  # batch size 1 means 4,000 steps an epoch, fused so that dispatch does not dominate.
  c.update_from_flattened_dict(spec.batch_fields(args["batch_size"]))
  c.num_epochs = 10  # The paper's epochs.
  c.optimizer.name = "adam"
  c.optimizer.learning_rate = 0.003  # The authors' code.
  c.eval_batch_size = 500  # Per-epoch evaluation; BLN uses norm_options.bln.inference.
  # The 25,000 test reviews take longer to evaluate than an epoch of the 20% subset
  # trains: validation after every epoch, test after the last.
  c.eval_splits = ("validation",)
  c.eval_every_splits = ("validation",)  # With eval_every_steps: not the 25k test reviews.
  c.final_eval_splits = ("test",)
  # Test is then also evaluated on the model of the epoch with the lowest validation
  # error (kept in the workdir): the benchmark reports test where validation selects.
  c.select_on = "validation/error"

  c.model = ml_collections.ConfigDict()
  c.model.embed_size = 512
  c.model.lstm_sizes = (128, 64)  # The first returns all states, the second its last.
  c.model.hidden_size = 32  # The tanh dense layer before the logit.
  # Both LSTMs are Keras's LSTM(dropout=0.2, recurrent_dropout=0.2): dropout on the
  # inputs, recurrent_dropout on h before W_h, in training only.
  c.model.dropout = 0.2
  c.model.recurrent_dropout = 0.2
  # How `dropout` draws its masks: 'per_sequence', one mask per review reused at
  # every step (Keras; recurrent_dropout always works so), or 'per_step', a fresh
  # mask at every step and feature. The IMDB tables of docs/results.md written before
  # recurrent dropout existed (batch 25 and batch 1, 10 epochs) used 'per_step' with
  # recurrent_dropout=0 and masked padding; reproduce them with
  # --config.model.dropout_mask=per_step --config.model.recurrent_dropout=0.
  c.model.dropout_mask = "per_sequence"
  # True: a sequence mask keeps padding out of the LSTM states and of every norm's
  # statistics. False: all max_length steps run through the LSTMs and the norms, the
  # final state is the last step's (needs padding='pre' to end on a real token).
  c.model.mask_padding = PADDING[args["padding"]]["mask_padding"]
  c.model.forget_bias = 1.0  # Keras's unit_forget_bias.

  c.data.name = "imdb"
  c.data.source = "auto"  # auto: tfds (if prepared) -> files.
  c.data.validation_size = 5000  # Held out of the 25k training reviews.
  c.data.subset_fraction = 1.0 if args["subset"] == "whole" else float(args["subset"])
  c.data.vocab_size = 20000  # The most frequent training words (+ pad and OOV ids).
  c.data.max_length = 80  # Longer reviews keep their last 80 tokens (Keras's default).
  # 'post': padding after the tokens (masked); 'pre': in front (Keras's default).
  c.data.padding = PADDING[args["padding"]]["padding"]
  c.data.seed = 0  # Seeds the hold-out and the subset.

  if args["smoke"]:
    c.num_epochs = 1
    c.model.embed_size = 16
    c.model.lstm_sizes = (8, 4)
    c.model.hidden_size = 4
    c.data.source = "synthetic"
    c.data.synthetic_size = 50  # Random token sequences with label-dependent words.
    c.data.vocab_size = 100
    c.data.max_length = 12
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
      # --experiments bln_imdb` runs the same).
      **benchmark_suite.named_sweeps("bln_imdb"),
      # The paper's comparison: three norms at batch sizes 25 and 1 (20% subset).
      "comparison": specs.bln_comparison(spec.BATCH),
  }
  return sweeps if name is None else sweeps[name]
