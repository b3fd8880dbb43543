r"""Skip-thought vectors with GRU and LN-GRU: LN paper sec. 6.3, Table 3
(docs/experiments.md, sec. 6).

Paper settings (the defaults): vocabulary 20k, word embedding 620, GRU encoder 2400
and two GRU decoders 2400 (previous and next sentence) conditioned through their
initial state, one shared output layer; sentences shorter than 30 words; Adam, lr
2e-4, batch 64, global-norm clip 5; 1M updates on BookCorpus, evaluated every 50k.
As in the authors' code (ryankiros/skip-thoughts, ``training/``): the loss summed over
the batch before the clip (``loss_reduction=sum``) and their Adam without effective
bias correction (``optimizer.name=adam_theano``); ``--config.loss_reduction=mean
--config.optimizer.name=adam`` gives the runs made before these defaults.
Table 3, SICK r / rho / MSE and MR / CR / SUBJ / MPQA accuracy:
  Ours      0.842 / 0.767 / 0.298, 77.3 / 81.8 / 92.6 / 87.9
  Ours + LN 0.854 / 0.785 / 0.277, 79.5 / 82.6 / 93.4 / 89.0

BookCorpus is not public; ``data.source=files`` reads any folder of tokenised books
(``lnorm.data.books``). Here that is 17 Project Gutenberg books (1.6M tokens; 28.6k
training triples, 1.9k in the held-out book): a stand-in for BookCorpus's 74M
sentences, not a reproduction.

``scale=cpu`` (for one CPU core, about 40 minutes for 2 passes over that corpus):
embedding 620 -> 128, GRUs 2400 -> 512, vocabulary 20k -> 10k; everything else is
the paper's. The output layer's [H, V] matmul at every target position dominates the
step, so H and V shrink the most; at 10k words 3.0% of the training tokens are
out of vocabulary (1.2% at 20k). One step takes 2.4 s on one core (LN), so the
2 x 446 steps take about 36 minutes, plus 9 validations of 15 s.

  lnorm train --config configs/skip_thoughts.py:norm=ln,scale=cpu \
      --workdir runs/skip_thoughts/cpu_ln --config.data.source=files
  lnorm evaluate --workdir runs/skip_thoughts/cpu_ln --tasks sick,mr,cr,subj,mpqa,trec

Table 3's grid on a GPU: ``lnorm sweep --config configs/skip_thoughts.py --sweep
table3 --workdir runs/skip_thoughts/paper``; the claim test on a CPU (the benchmark's
members): ``lnorm sweep --config configs/skip_thoughts.py:scale=cpu --sweep cpu
--workdir runs/skip_thoughts/cpu``.
"""

import ml_collections

from lnorm.config import parse_arg_string
from lnorm.training.defaults import SCALES, base_config, norm_options


def get_config(arg=None):
  args = parse_arg_string(arg, {"norm": "ln", "scale": "paper", "smoke": False},
                          choices={"scale": SCALES})
  c = base_config()
  c.experiment = "skip_thoughts"
  c.scale = args["scale"]  # paper | cpu: which setting the fields below start from.
  # All three GRUs: none | ln | rms | prms | dyt | scalenorm | ln_simple
  # | module:attribute (your own normalizer, docs/extending.md).
  c.norm = args["norm"]
  c.norm_options = norm_options()  # ln: eps 1e-5 and gain 1 of the LN-GRU.
  # Recurrent matrices [H, kH] as k orthogonal H x H gate blocks, as in the authors'
  # code; "orthogonal" takes one orthogonal matrix over the whole [H, kH].
  c.recurrent_init = "orthogonal_per_gate"
  c.batch_size = 64
  # The loss summed over the batch, not averaged, as Kiros et al.'s training/model.py
  # sums its costs: the clip of 5 below then acts on 64 times the mean's gradient, so
  # it is active almost always. "mean" was the default before (clip 64 times looser).
  c.loss_reduction = "sum"
  # Kiros et al.'s training/optim.py: Adam whose bias correction is in effect missing,
  # so that early steps are up to 6.6 times a standard Adam's (lnorm.training.optim.
  # scale_by_adam_theano). "adam" (optax's standard Adam) was the default before.
  c.optimizer.name = "adam_theano"
  c.optimizer.learning_rate = 2e-4  # The effective lr of Kiros et al.'s code.
  c.optimizer.clip_global_norm = 5.0  # Kiros et al.'s training/train.py, grad_clip=5.
  # The paper counts updates (1M, checkpoints every 50k): max_steps sets the length.
  c.max_steps = 1_000_000
  c.num_epochs = 1  # Unused while max_steps > 0.
  c.eval_splits = ("validation",)  # Validation perplexity of held-out books.
  c.eval_every_steps = 50_000
  c.eval_every_splits = ("validation",)
  c.eval_batch_size = 256
  # SentEval in the training loop (the paper's checkpoints every 50k updates), into
  # metrics.jsonl as eval/sick_pearson, eval/mr_accuracy, ...; `lnorm evaluate` does
  # the same on a finished run.
  c.periodic_eval_every_steps = 50_000
  c.sentence_eval = ml_collections.ConfigDict()
  c.sentence_eval.tasks = ("sick", "mr", "cr", "subj", "mpqa", "trec")
  c.sentence_eval.folds = 10  # SentEval: 10-fold CV, the L2 strength by inner 10-fold CV.
  c.sentence_eval.inner_folds = 10
  c.sentence_eval.data_dir = ""  # senteval/ and sick/ under it; "": $LNORM_DATA_DIR.

  c.model = ml_collections.ConfigDict()
  c.model.embed_size = 620
  c.model.hidden_size = 2400  # Encoder and both decoders.

  c.data.name = "books"
  c.data.source = "files"
  c.data.vocab_size = 20000  # Ids, pad, OOV and EOS included (Kiros et al.'s n_words).
  c.data.max_words = 30  # Sentences shorter than 30 words (triples with a longer one dropped).
  c.data.lowercase = True  # The SentEval benchmark files are lower-cased.
  c.data.validation_books = 1  # Held out whole, drawn with data.seed (austen-sense here).

  if args["scale"] == "cpu":
    c.model.embed_size = 128
    c.model.hidden_size = 512
    c.data.vocab_size = 10000
    c.max_steps = 0
    c.num_epochs = 2  # Passes over the 28.6k training triples of the Gutenberg corpus.
    c.eval_every_steps = 100
    c.steps_per_call = 10
    # The six tasks take about 2 minutes on one core (experiments.skip_thoughts.linear_models fits every
    # fold and C at once): three points per run for Figure 3's curves (ln-fig3).
    c.periodic_eval_every_steps = 300

  if args["smoke"]:
    c.model.embed_size = 8
    c.model.hidden_size = 16
    c.data.source = "synthetic"
    c.data.vocab_size = 60
    c.data.max_words = 12
    c.data.validation_books = 1
    c.batch_size = 8
    c.max_steps = 0
    c.num_epochs = 1
    c.eval_every_steps = 0
    c.periodic_eval_every_steps = 0
    c.sentence_eval.folds = c.sentence_eval.inner_folds = 2
    c.eval_batch_size = 32
    c.progress_bar = False
  return c


def get_sweep(name=None):
  """Named grids of dotted overrides (see ``lnorm sweep``)."""
  # Imported here: the config itself (get_config) needs none of the benchmark.
  from lnorm.sweeps import benchmark_suite  # pylint: disable=g-import-not-at-top
  sweeps = {
      # The benchmark's own members at each scale, its spec's grids (`lnorm benchmark
      # --experiments skip_thoughts` runs the same).
      **benchmark_suite.named_sweeps("skip_thoughts"),
      # Table 3: the GRU and LN-GRU skip-thoughts at the paper's size.
      "table3": [{"norm": n} for n in ("none", "ln")],
  }
  return sweeps if name is None else sweeps[name]
