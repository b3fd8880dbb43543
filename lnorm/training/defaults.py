"""The config fields every experiment shares. Each ``configs/<name>.py`` starts from
``base_config()`` and sets the paper's values."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import math
import re

import ml_collections
from ml_collections import config_dict

from lnorm.config import did_you_mean
from lnorm.errors import ConfigError

#: Fields that may change when a run resumes: they do not change the results. Raising
#: num_epochs or max_steps extends a finished run. A config's ``scale`` (paper, cpu)
#: only names a setting whose fields are compared one by one: a workdir from before the
#: field existed still resumes.
#: The ``scale`` config argument of the experiments with a reduced setting for CPUs.
SCALES = ("paper", "cpu")

RESUMABLE_FIELDS = (
    "num_epochs", "max_steps", "wandb.", "checkpoint_every_secs", "log_every_steps",
    "progress_bar", "steps_per_call", "eval_batch_size", "eval_every_steps",
    "eval_every_splits", "final_eval_splits", "scale", "eval_points_per_decade",
    "progress_every_secs", "data.data_dir", "lstm_impl",
)


def base_config() -> ml_collections.ConfigDict:
  c = ml_collections.ConfigDict()
  c.experiment = ""  # Which experiments/<name>/task.py runs this config.
  c.seed = 0  # Seeds initialisation, data order and dropout.
  c.num_epochs = 1  # Training epochs.
  # If > 0, the run's length in updates instead of num_epochs: it ends after max_steps
  # updates, inside an epoch or past num_epochs, for curves against updates (with
  # eval_every_steps). A stop inside an epoch ends with a record of the partial epoch
  # (see lnorm.training.loop).
  c.max_steps = 0
  c.batch_size = 128  # The global batch size, split over all devices.
  c.eval_batch_size = 1000  # Batch size for evaluation (does not change results).
  c.eval_splits = ("validation", "test")  # Splits evaluated after every epoch.
  # Splits evaluated only after the last epoch: a test set that costs more to evaluate
  # every epoch than the epoch's training does.
  c.final_eval_splits = ()
  # Also evaluate every N steps inside an epoch (0: at epoch ends only), for curves of
  # runs whose epochs are long; only these splits, to keep the cost down. With
  # steps_per_call > 1 it evaluates at the first call boundary past each multiple.
  c.eval_every_steps = 0
  # Validation, which targets, best values and selections are taken on, and test, to
  # report at the evaluation validation selects. A config whose test set costs more
  # than it is worth at every evaluation keeps validation alone here and puts test in
  # final_eval_splits (handwriting, IMDB); perm-MNIST's cpu setting keeps both: 0.7 s
  # for validation and 1.0 s for test, against 3.3 s of training between two.
  c.eval_every_splits = ("validation", "test")
  # A validation metric ("validation/error") to select the reported model on, for a
  # config that evaluates test only at the run's end (final_eval_splits): the loop keeps
  # the variables of the evaluation where it is best (in <workdir>/selected/) and
  # evaluates the run's other splits on them after the last update, recorded as
  # ``selected/step`` and ``selected/<split>/<metric>`` beside the last model's values.
  # Empty: off.
  c.select_on = ""
  # Also evaluate the eval_every_splits at this many geometrically spaced steps per
  # decade (0: off), for curves on a log-scaled step axis that have points from the
  # first decade on: the distinct round(10 ** (i / n)) for i = 0, 1, 2, ...; n = 3
  # gives steps 1, 2, 5, 10, 22, 46, 100, 215, 464, 1000, ... With steps_per_call > 1,
  # at the first call boundary at or past each of them. Adds to eval_every_steps.
  c.eval_points_per_decade = 0
  # Training steps fused into one jitted call (a lax.scan): at small batch sizes the
  # per-step dispatch dominates otherwise. Does not change the results; the gradient,
  # parameter and update norms are then measured at the last step of each call.
  c.steps_per_call = 1
  # Pad each batch's variable-length feature (the task's length_feature) to one of
  # `num` lengths, at quantiles of the training lengths, instead of to the longest
  # example of the split: a step costs what its examples need, for one compilation per
  # length. Training draws `group_steps` consecutive batches from one length (a
  # multiple of steps_per_call keeps each fused call to one shape). 1: off.
  c.length_buckets = ml_collections.ConfigDict({"num": 1, "group_steps": 1})
  c.log_every_steps = 0  # Also log the running train loss every N steps (0: epochs only).
  c.checkpoint_every_secs = 300.0  # Besides every epoch end and on SIGTERM.
  # Show progress with loss and examples/s: a tqdm bar on a terminal; elsewhere (a log
  # file, a sweep member's train.log, a cluster job) a plain line every
  # progress_every_secs seconds.
  c.progress_bar = True
  c.progress_every_secs = 30.0
  c.matmul_precision = "default"  # 'highest' to disable TF32/bf16 passes on GPU/TPU.
  # How recurrent layers run their LSTMs and GRUs (lnorm.rnn.implementation): 'auto'
  # runs, on an NVIDIA GPU, the plain LSTM (no normalizer in the recurrence, no
  # recurrent dropout) through cuDNN and the normalized cells through the Pallas step
  # kernels, and lnorm's own scan elsewhere; 'scan' always lnorm's; 'cudnn' always
  # cuDNN, 'pallas' always the kernels (interpreted, slowly, without an NVIDIA GPU),
  # each an error where it cannot run. The same parameters give the same outputs every
  # way (up to float rounding), so a run may resume under another choice. config.json's
  # "recurrence" says which ran.
  c.lstm_impl = "auto"

  # How a task's per-example losses become the training loss (Task.reduce_loss): their
  # "mean" over the batch, or their "sum" (the LN-paper authors' Theano code for
  # skip-thoughts and order-embeddings), which multiplies the gradient by the batch size
  # and so makes a global-norm clip that many times tighter.
  c.loss_reduction = "mean"

  c.optimizer = ml_collections.ConfigDict()
  c.optimizer.name = "adam"  # One of lnorm.training.optim.OPTIMIZERS.
  c.optimizer.learning_rate = 1e-3
  # Linear learning-rate warm-up over the first N updates (from lr / N to lr), then the
  # constant rate (0: none). Xiong et al. (2020): post-LN Transformers need it.
  c.optimizer.warmup_steps = 0
  c.optimizer.clip_global_norm = 0.0  # Clip the global gradient norm (0: off).
  # How clip_global_norm applies: "standard" (lnorm.training.optim.GLOBAL_CLIP_RULES),
  # or a rule of the experiment's own (its Task.clip_rules).
  c.optimizer.clip_global_norm_rule = "standard"
  c.optimizer.clip_tensor_norm = 0.0  # Clip each gradient tensor's norm (0: off).

  c.data = ml_collections.ConfigDict()
  c.data.name = ""  # Dataset name for lnorm.data.load.
  c.data.source = "auto"  # 'auto', 'tfds', 'files', or a dataset-specific source.
  c.data.data_dir = config_dict.placeholder(str)  # Overrides $LNORM_DATA_DIR.
  c.data.seed = 0  # Seeds held-out splits and subsets (not the training order).

  c.wandb = ml_collections.ConfigDict()
  c.wandb.project = "lnorm"
  c.wandb.entity = ""
  c.wandb.group = ""  # Sweeps put their members in one group.
  c.wandb.name = ""
  c.wandb.tags = ()
  # 'online', 'offline' or 'disabled' win over $WANDB_MODE; 'auto' follows $WANDB_MODE
  # when set, else is online with an API key and offline without (WANDB_MODES).
  c.wandb.mode = "auto"
  # Set by `lnorm benchmark` for its members: the hash of what the member trains (its
  # experiment's config, overrides and variant: lnorm.analysis.rule.setting_hash), so
  # that its records say which setting they are a run of, and a workdir of another
  # setting is not resumed into this one. Empty outside the benchmark; changes no result.
  c.benchmark_hash = ""
  return c


#: The shared fields' bounds, checked before any data loads: (field, lowest value,
#: whether the lowest is allowed, what the field is).
_BOUNDS = (
    ("batch_size", 1, True, "the examples per update"),
    ("eval_batch_size", 1, True, "the examples per evaluation batch"),
    ("steps_per_call", 1, True, "updates fused into one call"),
    ("max_steps", 0, True, "the run's length in updates (0: num_epochs epochs)"),
    ("num_epochs", 0, True, "training epochs"),
    ("eval_every_steps", 0, True, "updates between mid-epoch evaluations (0: off)"),
    ("eval_points_per_decade", 0, True, "geometric evaluations per decade (0: off)"),
    ("log_every_steps", 0, True, "updates between running-loss records (0: off)"),
    ("periodic_eval_every_steps", 0, True, "updates between a task's own evaluations"),
    ("checkpoint_every_secs", 0, False, "seconds between time-based checkpoints"),
    ("progress_every_secs", 0, True, "seconds between progress lines"),
    ("optimizer.learning_rate", 0, False, "the step size"),
    ("optimizer.warmup_steps", 0, True, "the updates of the learning-rate warm-up (0: none)"),
    ("optimizer.clip_global_norm", 0, True, "the global-norm clip (0: off)"),
    ("optimizer.clip_tensor_norm", 0, True, "the per-tensor clip (0: off)"),
    ("length_buckets.num", 1, True, "length buckets (1: off)"),
    ("length_buckets.group_steps", 1, True, "batches drawn from one length in a row"),
)


#: The seeds, checked with the bounds: NumPy's and JAX's generators refuse a negative
#: seed, and scikit-learn's (the SentEval probes) one of 2**32 or more.
_SEEDS = (
    ("seed", "initialisation, data order and dropout"),
    ("data.seed", "the held-out splits and subsets"),
)
SEED_LIMIT = 2 ** 32

#: The values of ``wandb.mode``: 'auto' chooses one of the others
#: (``lnorm.training.metrics_writer.wandb_mode``).
WANDB_MODES = ("auto", "online", "offline", "disabled")


def _field(config: Any, dotted: str) -> Any:
  node = config
  for part in dotted.split("."):
    if node is None or part not in node:
      return None
    node = node[part]
  return node


def check_select_on(config: Any) -> None:
  """Refuses a ``select_on`` that no evaluation of the run measures: it would keep no
  model and record nothing."""
  metric = _field(config, "select_on") or ""
  if not metric:
    return
  split = metric.partition("/")[0]
  evaluated = (tuple(_field(config, "eval_splits") or ())
               + tuple(_field(config, "eval_every_splits") or ()))
  if "/" not in metric or split not in evaluated:
    raise ConfigError(
        f"select_on={metric!r}: it must be '<split>/<metric>' of a split the run "
        f"evaluates during training (eval_splits or eval_every_splits: "
        f"{', '.join(dict.fromkeys(evaluated)) or 'none'}). Set "
        f"--config.select_on=validation/error, or '' to keep no selected model.")


def _check_wandb_mode(mode: str | None) -> None:
  """Refuses a ``wandb.mode`` that is none of WANDB_MODES (wandb's own refusal is a
  pydantic traceback, after the data has loaded)."""
  if mode is not None and mode not in WANDB_MODES:
    raise ConfigError(f"wandb.mode={mode!r} is not a wandb mode"
                      f"{did_you_mean(str(mode), WANDB_MODES)}. Set --config.wandb.mode to "
                      f"one of {', '.join(WANDB_MODES)}.")


def check_values(config: ml_collections.ConfigDict) -> None:
  """Refuses values of the shared fields no run can use (a batch size of 0, a negative
  learning rate, max_steps or seed, a misspelt wandb.mode), naming the field and the
  valid values: before any data loads, where they would otherwise fail late, or train
  silently wrong. No JAX."""
  for dotted, lowest, inclusive, what in _BOUNDS:
    value = _field(config, dotted)
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
      continue
    bad = not math.isfinite(value) or (value < lowest if inclusive else value <= lowest)
    if bad:
      bound = f">= {lowest}" if inclusive else f"> {lowest}"
      raise ConfigError(f"{dotted}={value!r}: it is {what} and must be {bound}. Set "
                        f"--config.{dotted}=... to a value {bound}.")
  for dotted, what in _SEEDS:
    value = _field(config, dotted)
    if value is not None and not 0 <= value < SEED_LIMIT:
      raise ConfigError(f"{dotted}={value!r}: it seeds {what} and must be an integer from 0 "
                        f"to {SEED_LIMIT - 1}. Set --config.{dotted}=0, or another seed in "
                        "that range.")
  _check_wandb_mode(_field(config, "wandb.mode"))
  if not (_field(config, "max_steps") or 0) and _field(config, "num_epochs") == 0:
    raise ConfigError("num_epochs=0 and max_steps=0: the run would train nothing. Set "
                      "--config.num_epochs (epochs) or --config.max_steps (updates).")
  check_select_on(config)


def total_steps(config: Mapping[str, Any], steps_per_epoch: int) -> int:
  """The updates a run of ``config`` trains for: ``max_steps`` if set, else
  ``num_epochs`` epochs."""
  max_steps = config.get("max_steps") or 0
  return max_steps if max_steps > 0 else config.get("num_epochs", 0) * steps_per_epoch


def geometric_steps(points_per_decade: int, last: int) -> list[int]:
  """The steps up to ``last`` of a geometric schedule with ``points_per_decade`` points
  per decade: the distinct ``round(10 ** (i / n))`` for i = 0, 1, 2, ..., evenly
  spaced on a log axis (n = 3: 1, 2, 5, 10, 22, 46, 100, ...). [] when n is 0."""
  if points_per_decade <= 0:
    return []
  steps: list[int] = []
  i = 0
  while (value := round(10 ** (i / points_per_decade))) <= last:
    if not steps or value > steps[-1]:
      steps.append(value)
    i += 1
  return steps


#: The record a run writes to metrics.jsonl when it stops on a loss or gradient norm
#: that is not finite: the step it stopped at. Such a run is over (rerunning it on the
#: same data and seed stops at the same step), and a comparison counts it as a seed that
#: never reached the target rather than leaving it out.
DIVERGED_AT = "stopped/diverged_at_step"

#: What a run with ``select_on`` adds to its last record: the step of the evaluation
#: whose model it kept, and ``selected/test/error``, ... of that model
#: (``lnorm.training.selected_model``).
SELECTED_STEP = "selected/step"
SELECTED_PREFIX = "selected/"

#: What a task that keeps its own best model logs (experiments/order_embeddings): the
#: step of the evaluation whose model it keeps, in every validation record and in the
#: last one, beside the ``test/...`` it measured on that model after the last update.
KEPT_STEP = "best/step"


#: Parts of a metric's name that make a larger value better (rsum: the retrieval sum of
#: recalls); anything else (error, loss, nll, bound, kl, mse, rank) is better lower.
_HIGHER_IS_BETTER = re.compile(
    r"accuracy|(^|[/_])acc($|_)|recall|r@\d|(^|[/_])r\d+($|_)|pearson|spearman|"
    r"examples_per_sec|(^|[/_])auc($|_)|(^|[/_])f1($|_)|bleu|(^|[/_])rsum$")


def lower_is_better(metric: str) -> bool:
  """Whether a smaller value of ``metric`` is better, judged by its name."""
  return not _HIGHER_IS_BETTER.search(metric)


def seeds_together_problem(config: Any) -> str | None:
  """Why seeds of ``config`` cannot train together in one program (``lnorm train
  --seeds``), or None when they can."""
  buckets = config.get("length_buckets")
  if buckets is not None and buckets.get("num", 1) > 1:
    # Padded to the longest seed's bucket, a batch is another computation for a model
    # that reads its padding (the attentive reader's clip rule does): no longer the
    # seed's run alone.
    return ("its length_buckets.num > 1 pads each seed's batches to a length of their "
            "own, which seeds stacked in one program cannot keep")
  return None


def has_diverged(points: Sequence[Mapping[str, Any]]) -> bool:
  """Whether the last record of a run's metrics says it stopped as not finite."""
  return bool(points) and DIVERGED_AT in points[-1]


def is_complete(config: Mapping[str, Any], epoch_records: Sequence[Mapping[str, Any]]) -> bool:
  """Whether a run trained as long as ``config`` asks, judged from its epoch records
  (the points of metrics.jsonl with ``time/epoch_seconds``) alone, without JAX or the
  data: ``max_steps`` updates when set, else ``num_epochs`` epochs. ``config`` is a
  ConfigDict or config.json's flat dict. Raising either field makes a complete run
  incomplete again: rerunning it extends the run."""
  if not epoch_records:
    return False
  last = epoch_records[-1]
  max_steps = config.get("max_steps") or 0
  if max_steps > 0:
    return last.get("step", 0) >= max_steps
  return last.get("epoch", 0) >= config.get("num_epochs", 0)


def norm_options() -> ml_collections.ConfigDict:
  """Every normalizer's options at their defaults, one block per normalizer
  (``norm_options.ln.eps``), from their definitions (lnorm.normalization.modules):
  a model reads the block of the chosen norm, and config.json records them all. An
  option whose default is None (ScaleNorm's scale_init: sqrt(d)) is a float
  placeholder, so that a flag can set it."""
  # Imported here: the definitions live beside the Flax modules, and this module is
  # read without JAX by the commands that only look at configs and records.
  from lnorm.normalization.registry import DEFINITIONS  # pylint: disable=import-outside-toplevel
  import lnorm.normalization  # pylint: disable=import-outside-toplevel,unused-import  (registers them)
  o = ml_collections.ConfigDict()
  for name, definition in DEFINITIONS.items():
    o[name] = ml_collections.ConfigDict({
        option: config_dict.placeholder(float) if default is None else default
        for option, default in definition.options.items()})
  return o
