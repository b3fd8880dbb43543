"""What an experiment gives the shared training loop.

An experiment subclasses :class:`Task` and says three things: which data, which
model, and how model outputs become a loss and per-example metrics. The loop in
``lnorm.training.loop`` does everything else (batching, jit, sharding, checkpoints,
logging, resumption), the same way for every experiment.

A task is a description of its experiment, made from the config alone: it keeps no
data, model or schedule on itself. A hook that needs more than a batch is handed the
assembled run (``lnorm.training.assembly.AssembledRun``: its data, model, mesh and
schedule) by its caller, so that one task serves any number of runs and a hook cannot
read a model or a dataset another run left behind.
"""

from __future__ import annotations

import importlib
import types
from typing import TYPE_CHECKING, Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections

from lnorm.data.core import Dataset
from lnorm.errors import ConfigError, UserError
from lnorm.normalization import NORMS, check_norm_choice
from lnorm.training import defaults
from lnorm.training import experiments
from lnorm.training import optim

if TYPE_CHECKING:  # assembly imports this module.
  from lnorm.training.assembly import AssembledRun

Batch = Mapping[str, jax.Array]

#: experiment name -> its package (``task`` defines its ``Task``): the registry, kept
#: where the analysis may read it too (lnorm.training.experiments).
EXPERIMENTS = experiments.EXPERIMENTS


#: The values of ``config.loss_reduction`` (see :meth:`Task.reduce_loss`).
LOSS_REDUCTIONS = ("mean", "sum")


class Task:
  """Base class: override ``build_model`` and ``loss_and_metrics``.

  Batches are dicts of arrays. The loop adds ``mask`` (float32 [B], 0 for padding
  added to fill an evaluation batch); per-example metrics are summed under it.
  """

  #: Normalizers this experiment supports (checked before any data is loaded).
  norms: tuple[str, ...] = tuple(NORMS)
  #: Names of the random streams the model draws from in training (e.g. dropout).
  rng_streams: tuple[str, ...] = ()
  #: The padded variable-length feature and the feature holding its real lengths,
  #: which ``config.length_buckets`` groups batches by; None: the task has none.
  length_feature: tuple[str, str] | None = None
  #: Values of ``config.loss_reduction`` this experiment honours: those whose
  #: ``loss_and_metrics`` reduces through :meth:`reduce_loss` list ``LOSS_REDUCTIONS``;
  #: the others accept only the mean, so that asking them for a sum is an error rather
  #: than a silent no-op.
  loss_reductions: tuple[str, ...] = ("mean",)
  #: Global clip rules of the experiment's own, by ``optimizer.clip_global_norm_rule``
  #: (the attentive reader's code's), beside the harness's ``optim.GLOBAL_CLIP_RULES``.
  clip_rules: Mapping[str, optim.ClipRule] = types.MappingProxyType({})

  def __init__(self, config: ml_collections.ConfigDict):
    self.config = config
    norm = config.get("norm")
    if norm is not None:
      check_norm_choice(norm, self.norms, config.experiment)
    reduction = config.get("loss_reduction", "mean")
    if reduction not in self.loss_reductions:
      raise ConfigError(f"loss_reduction={reduction!r} is not available for experiment "
                        f"{config.experiment!r}. Valid choices: "
                        f"{', '.join(self.loss_reductions)}.")

  def reduce_loss(self, per_example: jax.Array) -> jax.Array:
    """The training loss from per-example losses ``[B]``, by ``config.loss_reduction``.

    ``mean`` is independent of the batch size. ``sum`` is what the skip-thoughts and
    order-embeddings authors minimised: its gradient is B times the mean's, so a
    global-norm clip at c acts on it as a clip at c / B acts on the mean's gradient
    (the clipped sum-gradient is exactly B times the mean-gradient clipped at c / B).
    Adam is nearly invariant to that factor, so in effect only the clip tightens.
    """
    reduction = self.config.get("loss_reduction", "mean")
    if reduction == "sum":
      return jnp.sum(per_example)
    if reduction == "mean":
      return jnp.mean(per_example)
    raise ConfigError(f"loss_reduction={reduction!r}; valid choices: "
                      f"{', '.join(LOSS_REDUCTIONS)}.")

  def run_warnings(self) -> tuple[str, ...]:
    """What a run of this config is told before it spends its compute (a setting the
    project found never learns), logged once when the run is set up
    (``lnorm.training.loop.set_up``), however often the config is checked."""
    return ()

  def load_data(self) -> Dataset:
    """The config's data; the task keeps no reference to it (the run holds it)."""
    from lnorm import data  # pylint: disable=g-import-not-at-top
    return data.load(self.config.data.name, self.config.data)

  def build_model(self, dataset: Dataset) -> nn.Module:
    raise NotImplementedError

  def model_inputs(self, batch: Batch) -> tuple[Any, ...]:
    """Positional model arguments taken from a batch."""
    raise NotImplementedError

  def loss_and_metrics(self, outputs: Any, batch: Batch, model: nn.Module,
                       ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """The scalar training loss and per-example metrics [B] of ``outputs``, what
    ``model`` made of ``batch``. The model is handed in for the sizes it was built
    with (the attentive reader's entity block), which the task does not keep. Tasks
    whose loss is a reduction of per-example losses use :meth:`reduce_loss`, so that
    ``config.loss_reduction`` chooses between their mean and their sum."""
    raise NotImplementedError

  def end_of_epoch(self, run: AssembledRun, state: Any, workdir: str, step: int,
                   writer: Any) -> dict | None:
    """Runs after each epoch's evaluation of ``run`` (the ``AssembledRun``: its data,
    model and schedule) in ``workdir``; may return extra metrics to log (e.g. DRAW
    writes its sample images here)."""
    del run, state, workdir, step, writer
    return None

  def periodic_evaluation(self, run: AssembledRun, state: Any, workdir: str,
                          step: int) -> dict[str, float]:
    """Scores beyond the data splits of ``run`` (the ``AssembledRun``), every
    ``periodic_eval_every_steps`` updates (skip-thoughts: its encoder on SentEval).
    Only called when that field is set."""
    del run, state, workdir, step
    raise NotImplementedError(
        f"{type(self).__name__} has no periodic evaluation; set periodic_eval_every_steps=0.")

  # --- optional abilities: an experiment that has one overrides its method ---

  def sample(self, workdir: str, *, text: str, bias: float = 0.0, seed: int = 0,
             out_base: str | None = None) -> dict[str, Any]:
    """``lnorm sample``: writes ``text`` with the run in ``workdir``; returns the files
    written (handwriting)."""
    del workdir, text, bias, seed, out_base
    raise UserError(f"Experiment {self.config.experiment!r} has no sampler: `lnorm sample` "
                    "works for generative experiments whose task defines sample().")

  def sentence_encoder(self, workdir: str, kind: str = "trained") -> tuple[Any, int]:
    """``lnorm evaluate``: ``(encode, step)``, the run's sentence encoder and its
    checkpoint's step (skip-thoughts)."""
    del workdir, kind
    raise self._no_sentence_encoder()

  def sentence_evaluation(self) -> Any:
    """``lnorm evaluate``: the experiment's evaluations of sentence vectors, a module
    with ``task_names``, ``protocol`` and ``evaluate_encoder`` (skip-thoughts')."""
    raise self._no_sentence_encoder()

  def _no_sentence_encoder(self) -> UserError:
    return UserError(f"Experiment {self.config.experiment!r} has no sentence encoder to "
                     "evaluate: lnorm evaluate scores sentence-vector models "
                     "(skip_thoughts).")

  def train_split(self) -> str:
    return "train"

  def trivial_baseline(self, dataset: Dataset) -> dict | None:
    """What a trivial model fit to the training split alone scores on the held-out
    splits (``lnorm.evaluation.trivial``): ``{"model": "class prior (majority class)",
    "values": {"validation/error": 0.894, ...}}``, each metric named as the run logs
    it. The loop writes it into config.json as ``"trivial"``, so that an analysis can
    tell a task that was learned from one that was not. None: the experiment declares
    none."""
    del dataset
    return None

  def forward_macs(self, dataset: Dataset, batch: Batch) -> int:
    """Multiply-accumulates of the model's matmuls (and convolutions) in one forward
    pass over ``batch``, counted from the config, the data's sizes and the batch's
    padded shapes: what ``lnorm flops`` sets against the measured step time. Each
    experiment counts its own, beside its model."""
    del dataset, batch
    raise NotImplementedError(f"{type(self).__name__} does not count its FLOPs: give it a "
                              "forward_macs(dataset, batch).")

  def train_step_flops(self, dataset: Dataset, batch: Batch) -> int:
    """The matmul FLOPs of one train step on ``batch`` (see ``train_step_flops``)."""
    return train_step_flops(self.forward_macs(dataset, batch))


class ClassificationTask(Task):
  """A classifier of ``batch["label"]`` from logits: the mean negative log-likelihood
  as its loss, per-example NLL and 0/1 error as its metrics. (Its trivial baseline,
  the class prior, is each experiment's: lnorm.evaluation, which holds it, builds on
  this package.)"""

  def loss_and_metrics(self, logits: jax.Array, batch: Batch, model: nn.Module,
                       ) -> tuple[jax.Array, dict[str, jax.Array]]:
    del model  # Unused.
    metrics = classification_metrics(logits, batch["label"])
    return jnp.mean(metrics["nll"]), metrics


def train_step_flops(forward_macs: int) -> int:
  """A train step's FLOPs from its forward multiply-accumulates: 2 FLOPs per MAC, and
  the backward pass costs twice the forward."""
  return 3 * 2 * forward_macs


def load_task(config: ml_collections.ConfigDict) -> Task:
  name = config.get("experiment")
  if name not in EXPERIMENTS:
    raise ConfigError(f"Unknown experiment {name!r}. Valid choices: "
                      f"{', '.join(sorted(EXPERIMENTS))}.")
  return task_class(name)(config)


def task_class(name: str) -> type[Task]:
  """The ``Task`` of the registered experiment ``name``, imported through the registry."""
  path = experiments.module(name, "task")
  try:
    module = importlib.import_module(path)
  except ModuleNotFoundError as e:
    raise ConfigError(f"Experiment {name!r} is registered but its module {path} cannot "
                      f"be imported ({e}).") from e
  return module.Task


def check_config(config: ml_collections.ConfigDict) -> Task:
  """Every check a config can pass before its data loads: the shared fields' values
  (``defaults.check_values``) and the experiment's own (its Task: the normalizer, the
  loss reduction, dropout rates, ...). Returns the task. ``lnorm train``, its dry run
  and ``lnorm sweep`` (each member, before the first runs) call it."""
  defaults.check_values(config)
  return load_task(config)


def classification_metrics(logits: jax.Array, labels: jax.Array) -> dict[str, jax.Array]:
  """Per-example negative log-likelihood and 0/1 error, shared by classifiers."""
  logits = logits.astype(jnp.float32)
  nll = -jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=-1)[:, 0]
  error = (jnp.argmax(logits, -1) != labels).astype(jnp.float32)
  return {"nll": nll, "error": error}
