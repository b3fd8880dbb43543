r"""A character-level Transformer language model with the normalizer in the post-LN
or pre-LN place (docs/experiments.md, sec. 12): LayerNorm's successors where they
were proposed, and Xiong et al.'s (2020) placement claim.

Paper size (the defaults), as in the pre-LN analyses (Xiong et al. 2020, their
WMT14 base: 6 layers, width 512, 8 heads, MLP 2048): a decoder-only Transformer over a context of
512 characters, tied input and output embeddings, learned positions; Adam lr 5e-4,
batch 32 windows, linear warm-up over 4,000 updates (Xiong et al.'s post-LN
baseline), then constant; 100k updates, validation every 2,000.

Data: the 17 Project Gutenberg books of skip-thoughts (``lnorm.data.book_chars``),
split by whole book as the cloze tasks are (2 validation, 2 test books), as
characters (vocabulary: the training books' characters, at most 128 ids).

``placement``: ``pre`` (the default), ``post``, or ``none`` (no normalizer; needs
norm=none). ``norm``: none | ln | rms | prms | dyt | scalenorm | ln_simple |
module:attribute (your own normalizer, docs/extending.md), in every normalizer's
place. DyT's alpha starts at 0.8 before attention and 0.2 elsewhere, its authors'
values for their narrowest language model (LLaMA 7B, width 4096; they lower alpha as
width grows and keep the attention's 4 times the others'); 0.5, their default for
other Transformers, is ``--config.norm_options.dyt.alpha_init=0.5
--config.norm_options.dyt.alpha_init_attention=0.5``.

``scale=cpu`` (one CPU core, about 5 minutes a run): 4 layers, width 128, 4 heads,
MLP 512, context 128, batch 16 windows, lr 1e-3, warm-up 100 updates, 1,000 updates
with validation every 100 on 1,024 evenly spaced windows of the validation books (and
as many of the test books at the end); everything else as above. Why: at batch 32 an
update took about 0.5 s on one core, and scoring all 5,672 validation windows took
longer than 100 updates, so a run took about 16 minutes, most of it evaluation;
1,024 windows estimate the mean loss to about 0.01 nats, and every run scores the
same ones.

  lnorm train --config configs/transformer_lm.py:norm=ln,placement=post,scale=cpu \
      --workdir runs/transformer_lm/post_ln --config.optimizer.warmup_steps=0
"""

import ml_collections

from lnorm.config import parse_arg_string
from lnorm.training.defaults import SCALES, base_config, norm_options

PLACEMENTS = ("post", "pre", "none")


def get_config(arg=None):
  args = parse_arg_string(arg, {"norm": "ln", "placement": "pre", "scale": "paper",
                                "smoke": False},
                          choices={"scale": SCALES, "placement": PLACEMENTS})
  c = base_config()
  c.experiment = "transformer_lm"
  c.scale = args["scale"]  # paper | cpu: which setting the fields below start from.
  c.norm = args["norm"]
  c.placement = args["placement"]  # post | pre (plus a final norm) | none.
  c.norm_options = norm_options()
  # Zhu et al. (2025), LLaMA 7B: alpha_0 0.8 in the attention's DyT, 0.2 in the
  # MLP's and the final one (lnorm's other experiments keep the 0.5 of their Table 10).
  c.norm_options.dyt.alpha_init = 0.2
  c.norm_options.dyt.alpha_init_attention = 0.8

  c.model = ml_collections.ConfigDict()
  c.model.num_layers = 6
  c.model.width = 512
  c.model.num_heads = 8
  c.model.mlp_size = 2048
  c.model.positions = "learned"  # learned | sinusoidal
  c.model.tie_embeddings = True  # The output layer is the input embedding's transpose.

  c.batch_size = 32
  c.optimizer.name = "adam"
  c.optimizer.learning_rate = 5e-4
  c.optimizer.warmup_steps = 4000  # Xiong et al.'s post-LN warm-up; 0: none.
  c.max_steps = 100_000
  c.num_epochs = 1  # Unused while max_steps > 0.
  # An epoch is only 282 updates at context 512: validation at its ends and every
  # eval_every_steps, the test books (3x the validation's characters) once at the end.
  c.eval_splits = ("validation",)
  c.final_eval_splits = ("test",)
  c.eval_every_steps = 2000
  c.eval_every_splits = ("validation",)
  c.eval_batch_size = 64

  c.data.name = "book_chars"
  c.data.source = "files"
  c.data.context = 512  # Characters the model reads; windows hold one more.
  c.data.vocab_size = 128  # Ids, pad and OOV included.
  c.data.lowercase = False
  c.data.validation_books = 2  # Held out whole, drawn with data.seed, as the cloze tasks.
  c.data.test_books = 2
  c.data.held_out_windows = 0  # Score every held-out window; >0: that many, evenly spaced.

  if args["scale"] == "cpu":
    c.model.num_layers = 4
    c.model.width = 128
    c.model.num_heads = 4
    c.model.mlp_size = 512
    c.data.context = 128
    c.data.held_out_windows = 1024
    c.batch_size = 16
    c.optimizer.learning_rate = 1e-3
    c.optimizer.warmup_steps = 100
    c.max_steps = 1000
    c.eval_every_steps = 100
    c.steps_per_call = 10

  if args["smoke"]:
    c.model.num_layers = 2
    c.model.width = 16
    c.model.num_heads = 2
    c.model.mlp_size = 24
    c.data.source = "synthetic"
    c.data.synthetic_books = 12  # 10 train, 1 validation, 1 test.
    c.data.context = 32
    c.data.validation_books = c.data.test_books = 1
    c.optimizer.warmup_steps = 0
    c.optimizer.learning_rate = 3e-3
    c.batch_size = 8
    c.max_steps = 0
    c.num_epochs = 1
    c.eval_every_steps = 0
    c.eval_batch_size = 32
    c.progress_bar = False
  return c


def get_sweep(name=None):
  """Named grids of dotted overrides (see ``lnorm sweep``)."""
  # Imported here: the config itself (get_config) needs none of the benchmark.
  from lnorm.sweeps import benchmark_suite  # pylint: disable=g-import-not-at-top
  placement = [{"norm": "ln", "placement": p, "optimizer.warmup_steps": w}
               for p in ("post", "pre") for w in (0, None)]
  sweeps = {
      # The benchmark's own members at each scale, its spec's grids (`lnorm benchmark
      # --experiments transformer_lm` runs the same).
      **benchmark_suite.named_sweeps("transformer_lm"),
      # Xiong et al.'s claim: post-LN and pre-LN, with and without warm-up (None: the
      # config's warm-up).
      "placement": [{k: v for k, v in m.items() if v is not None} for m in placement],
      # Every per-example normalizer in the pre-LN place, and the normalizer-free net.
      "norms": [{"norm": n} for n in ("ln", "rms", "prms", "dyt", "scalenorm", "ln_simple")]
               + [{"norm": "none", "placement": "none"}],
  }
  return sweeps if name is None else sweeps[name]
