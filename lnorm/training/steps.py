"""The jitted steps of the training loop and what builds their inputs.

``make_train_step`` is one pure optimisation step over a ``TrainState`` that carries
``batch_stats``; ``make_train_chunk`` fuses several into one ``lax.scan``;
``make_eval_step`` and ``evaluate`` give a split's mean metrics; ``SplitEvaluator``
evaluates a run's splits the same way at every evaluation; ``length_buckets`` is the
padded lengths a run's batches take. The state they step is built by
``lnorm.training.train_state``.

Several seeds train together through the same functions under ``jax.vmap``
(``train_chunk_over_seeds``: over the seeds' states, batches and keys, each seed's
arrays on a leading axis; ``eval_step_over_seeds``: over their states, on one batch,
so that ``evaluate`` gives each metric as one value per seed).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from lnorm.data import batching
from lnorm.data.core import Dataset
from lnorm.errors import ConfigError
from lnorm.progress import Progress
from lnorm.training import optim
from lnorm.training import parallel
from lnorm.training.task import Task
from lnorm.training.train_state import TrainState


NORM_METRICS = ("grad_norm", "param_norm", "update_norm")


def _norms(grads, params, updates) -> dict[str, jax.Array]:
  return {"grad_norm": optim.global_norm(grads), "param_norm": optim.global_norm(params),
          "update_norm": optim.global_norm(updates)}


def clip_indicators(grads, stages: Sequence[optim.ClipStage]) -> dict[str, jax.Array]:
  """Whether each clip of ``stages`` (``lnorm.training.optim.clip_stages``) changed
  this gradient: 1.0 or 0.0 each. The stages run in the optimizer's order, each on what
  the previous ones left, with the optimizer's own functions."""
  out = {}
  for clip in stages:
    grads, acted = clip.apply(grads)
    out[clip.metric] = jnp.asarray(acted).astype(jnp.float32)
  return out


def training_loss(task: Task, model: nn.Module, batch_stats, batch, rngs, params):
  """``(loss, (metrics, new batch_stats))`` of a batch in training mode: what the
  train step differentiates, for scripts that study its gradient."""
  outputs, mutated = model.apply(
      {"params": params, "batch_stats": batch_stats},
      *task.model_inputs(batch), train=True, rngs=rngs, mutable=["batch_stats"])
  loss, metrics = task.loss_and_metrics(outputs, batch, model)
  return loss, (metrics, mutated.get("batch_stats", batch_stats))


def make_train_step(task: Task, model: nn.Module,
                    clips: Sequence[optim.ClipStage] | None = None) -> Callable:
  """One optimisation step: ``(state, batch, rng, measure_norms=True) -> (state,
  metrics)``.

  The gradient, parameter and update norms read every parameter three more times: for
  a model with a large embedding at batch size 1 that costs as much as the step itself
  (IMDB: 88 against 48 ms), so ``make_train_chunk`` measures them at its last step
  only. ``measure_norms`` is a Python bool that chooses the program, not a branch in
  it: a ``lax.cond`` on a traced flag makes a GPU copy the flag to the host and wait
  for it at every update (issue 59). Without it the norms are absent from the step's
  metrics. Whether the clips acted (``clip_indicators``; ``clips`` defaults to the
  task's optimizer config) is measured at every step.
  """
  if clips is None:
    clips = optim.clip_stages(task.config.get("optimizer") or {}, task.clip_rules)

  def train_step(state: TrainState, batch, rng, measure_norms=True):
    step_rng = jax.random.fold_in(rng, state.step)
    rngs = {name: jax.random.fold_in(step_rng, i) for i, name in enumerate(task.rng_streams)}

    loss_fn = functools.partial(training_loss, task, model, state.batch_stats, batch, rngs)
    (loss, (metrics, batch_stats)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
        state.params)
    updates, opt_state = state.tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state,
                              batch_stats=batch_stats)
    out = {
        "loss": loss,
        "clips": clip_indicators(grads, clips),
        "sums": {k: jnp.sum(v) for k, v in metrics.items()},
    }
    if measure_norms:
      # Summed in the step's own program, a norm may differ by an ulp from the one a
      # branch of its own summed before (issue 59; the losses and parameters do not).
      out.update(_norms(grads, params, updates))
    return new_state, out

  return train_step


def make_train_chunk(train_step: Callable) -> Callable:
  """Runs K stacked batches ([K, B, ...]) through ``train_step``, measuring the norms
  at the last step only: ``out``'s per-step ``NORM_METRICS`` are zero but at the last
  step, which the records read.

  The first K - 1 steps run in one ``lax.scan`` without the norms, the last after it
  with them: no branch in the per-update path, at the price of compiling the step
  twice when K > 1."""

  def chunk(state, batches, rng):
    k = jax.tree.leaves(batches)[0].shape[0]
    last = jax.tree.map(lambda x: x[-1], batches)
    if k == 1:
      state, out = train_step(state, last, rng, measure_norms=True)
      return state, jax.tree.map(lambda v: v[None], out)
    state, outs = jax.lax.scan(
        lambda s, batch: train_step(s, batch, rng, measure_norms=False), state,
        jax.tree.map(lambda x: x[:-1], batches))
    state, out = train_step(state, last, rng, measure_norms=True)
    outs.update({name: jnp.zeros((k - 1,), out[name].dtype) for name in NORM_METRICS})
    return state, jax.tree.map(lambda head, v: jnp.concatenate([head, v[None]]), outs, out)

  return chunk


def train_chunk_over_seeds(train_chunk: Callable, state_axes: Any) -> Callable:
  """``make_train_chunk``'s call over several seeds at once: the stacked states (their
  seed axes ``state_axes``, ``train_state.stack_seeds``'), batches ``[S, K, B, ...]``
  and keys ``[S]``; every output but the state's shared counters has a seed axis."""
  return jax.vmap(train_chunk, in_axes=(state_axes, 0, 0), out_axes=(state_axes, 0))


def eval_step_over_seeds(eval_step: Callable, state_axes: Any) -> Callable:
  """``make_eval_step``'s step over several seeds' stacked states (their seed axes
  ``state_axes``), each seeing the same batch: its sums have a leading seed axis, its
  example count does not."""
  return jax.vmap(eval_step, in_axes=(state_axes, None), out_axes=(0, None))


def make_eval_step(task: Task, model: nn.Module) -> Callable:
  def eval_step(state: TrainState, batch):
    outputs = model.apply({"params": state.params, "batch_stats": state.batch_stats},
                          *task.model_inputs(batch), train=False)
    _, metrics = task.loss_and_metrics(outputs, batch, model)
    mask = batch["mask"]
    return {k: jnp.sum(v * mask) for k, v in metrics.items()}, jnp.sum(mask)

  return eval_step


def evaluate(eval_step: Callable, state: TrainState, arrays, batch_size: int,
             mesh, buckets: batching.LengthBuckets | None = None,
             progress: Callable[..., Progress] | None = None) -> dict[str, float]:
  """Means of the task's per-example metrics over a whole split: floats, or from an
  ``eval_step_over_seeds``, a float64 array of the seeds' means each. ``progress``, if
  given, makes the Progress that counts its batches (``total=``, ``unit=``)."""
  totals: dict[str, Any] = {}
  count = 0.0
  num_examples = len(next(iter(arrays.values()))) if arrays else 0
  report = (progress(total=-(-num_examples // batch_size), unit="batch")
            if progress is not None else None)
  try:
    for batch in batching.eval_batches(arrays, batch_size, multiple_of=mesh.size,
                                       buckets=buckets):
      sums, n = eval_step(state, parallel.shard_batch(batch, mesh))
      for k, v in jax.device_get(sums).items():
        # In float64, as Python's floats add: a seed's sums are those of its run alone.
        totals[k] = totals.get(k, 0.0) + np.asarray(v, np.float64)
      count += float(n)
      if report is not None:
        report.update(1)
  finally:
    if report is not None:
      report.close()
  means = {k: v / max(count, 1.0) for k, v in totals.items()}
  return {k: float(v) if np.ndim(v) == 0 else v for k, v in means.items()}


def length_buckets(config: ml_collections.ConfigDict, task: Task,
                   train_arrays) -> batching.LengthBuckets | None:
  """The config's ``length_buckets`` for the task's variable-length feature, with edges
  at quantiles of the training lengths; None when off (``num`` 1)."""
  spec = config.get("length_buckets")
  if spec is None or spec.num == 1:
    return None
  # Their bounds (num, group_steps >= 1) are checked with the config's other fields
  # (``defaults.check_values``), before any data loads.
  if task.length_feature is None:
    raise ConfigError(f"Experiment {config.experiment!r} has no variable-length feature "
                      "to bucket: set --config.length_buckets.num=1.")
  feature, length = task.length_feature
  return batching.LengthBuckets.from_quantiles(train_arrays, feature, length, spec.num,
                                               spec.group_steps)


class SplitEvaluator:
  """Evaluates a run's splits, each with the same eval step and batch size, into
  ``{"<split>/<metric>": mean}``; splits the dataset lacks are skipped.

  With length buckets, a split is sorted by length at its first evaluation, so that its
  batches trim well (the order does not change a split's mean metrics).
  """

  def __init__(self, eval_step: Callable, dataset: Dataset, batch_size: int, mesh,
               buckets: batching.LengthBuckets | None = None,
               progress: Callable[..., Progress] | None = None):
    self._eval_step = eval_step
    self._dataset = dataset
    self._batch_size = batch_size
    self._mesh = mesh
    self._buckets = buckets
    self._progress = progress
    self._sorted: dict[str, Mapping[str, Any]] = {}

  def _arrays(self, split: str) -> Mapping[str, Any]:
    if self._buckets is None:
      return self._dataset.splits[split]
    if split not in self._sorted:
      self._sorted[split] = self._buckets.sorted_by_length(self._dataset.splits[split])
    return self._sorted[split]

  def __call__(self, state: "TrainState", splits: Sequence[str]) -> dict[str, float]:
    scores = {}
    for split in splits:
      if split in self._dataset.splits:
        progress = (None if self._progress is None else
                    functools.partial(self._progress, f"evaluate {split}"))
        split_scores = evaluate(self._eval_step, state, self._arrays(split),
                                self._batch_size, self._mesh, self._buckets, progress)
        scores.update({f"{split}/{k}": v for k, v in split_scores.items()})
    return scores
