"""The training loop every experiment shares: ``train_and_evaluate(config, workdir)``.

Pure, jitted steps over a TrainState carrying ``batch_stats``; the batch sharded over
all devices; several steps fused into one call when asked; checkpoints at epoch ends,
every few minutes and on SIGTERM; and exact resumption, because the data order and
the step RNG depend only on (seed, epoch, step).

What ``metrics.jsonl`` holds (every point has ``step`` and ``time/train_seconds``, the
wall time spent in training calls since the run began, compilation, evaluation and
checkpointing excluded, carried across resumes):

- an epoch record at each epoch end, told apart by ``time/epoch_seconds``: the epoch's
  train means, throughput and norms, and the ``eval_splits`` (plus the
  ``final_eval_splits`` at the run's end); ``epoch`` is the epoch number;
- when ``max_steps`` ends the run inside an epoch, the run's last record is an epoch
  record of that partial epoch: its train means cover the partial epoch's steps, it
  evaluates the ``eval_splits`` and ``final_eval_splits`` with the population
  statistics so far (as mid-epoch evaluations do), and its ``epoch`` is fractional
  (step / steps_per_epoch). The checkpoint saved with it is mid-epoch, so raising
  ``max_steps`` later continues that epoch exactly as an uninterrupted run would;
- mid-epoch evaluations (``eval_every_steps``), a task's own evaluation
  (``Task.periodic_evaluation`` every ``periodic_eval_every_steps``, when set) and
  running train losses (``log_every_steps``), with a fractional ``epoch`` and no
  ``time/epoch_seconds``.

``lnorm.training.defaults.is_complete`` tells from the epoch records whether a run
reached the length its config asks for.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import time
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax.training import train_state

from lnorm import config as config_lib
from lnorm.data import batching
from lnorm.data.core import Dataset
from lnorm.errors import ConfigError, DivergenceError, UserError, WorkdirConflictError
from lnorm.normalization import finalize_epoch_statistics
from lnorm.training import parallel
from lnorm.training.checkpoint import Checkpointer, abstract_like
from lnorm.training import defaults
from lnorm.training.defaults import RESUMABLE_FIELDS
from lnorm.training.metrics_writer import MetricWriter
from lnorm.training.optim import make_optimizer
from lnorm.training.task import Task, load_task

CONFIG_FILE = "config.json"


class TrainState(train_state.TrainState):
  batch_stats: Any = None


class Interrupted(UserError):
  """SIGTERM or SIGINT arrived; a checkpoint was saved."""


# --- the steps ------------------------------------------------------------------------


def _global_norm(tree) -> jax.Array:
  return optax.tree.norm(jax.tree.map(lambda x: x.astype(jnp.float32), tree))


NORM_METRICS = ("grad_norm", "param_norm", "update_norm")


def _norms(grads, params, updates) -> dict[str, jax.Array]:
  return {"grad_norm": _global_norm(grads), "param_norm": _global_norm(params),
          "update_norm": _global_norm(updates)}


def make_train_step(task: Task, model: nn.Module) -> Callable:
  """One optimisation step: ``(state, batch, rng, measure_norms) -> (state, metrics)``.

  The gradient, parameter and update norms read every parameter three more times: for
  a model with a large embedding at batch size 1 that costs as much as the step itself
  (IMDB: 88 against 48 ms), so ``measure_norms`` (traced) can skip them; they are then
  zero. ``make_train_chunk`` measures them at its last step.
  """

  def train_step(state: TrainState, batch, rng, measure_norms=True):
    step_rng = jax.random.fold_in(rng, state.step)
    rngs = {name: jax.random.fold_in(step_rng, i) for i, name in enumerate(task.rng_streams)}

    def loss_fn(params):
      outputs, mutated = model.apply(
          {"params": params, "batch_stats": state.batch_stats},
          *task.model_inputs(batch), train=True, rngs=rngs, mutable=["batch_stats"])
      loss, metrics = task.loss_and_metrics(outputs, batch)
      return loss, (metrics, mutated.get("batch_stats", state.batch_stats))

    (loss, (metrics, batch_stats)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
        state.params)
    updates, opt_state = state.tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state,
                              batch_stats=batch_stats)
    norms = jax.lax.cond(
        measure_norms, _norms,
        lambda *_: {k: jnp.zeros((), jnp.float32) for k in NORM_METRICS},
        grads, params, updates)
    out = {
        "loss": loss,
        **norms,
        "sums": {k: jnp.sum(v) for k, v in metrics.items()},
    }
    return new_state, out

  return train_step


def make_train_chunk(train_step: Callable) -> Callable:
  """Runs K stacked batches ([K, B, ...]) through ``train_step`` in one lax.scan,
  measuring the norms at the last step only."""

  def chunk(state, batches, rng):
    k = jax.tree.leaves(batches)[0].shape[0]
    is_last = jnp.arange(k) == k - 1
    return jax.lax.scan(lambda s, xs: train_step(s, xs[0], rng, xs[1]), state,
                        (batches, is_last))

  return chunk


def make_eval_step(task: Task, model: nn.Module) -> Callable:
  def eval_step(state: TrainState, batch):
    outputs = model.apply({"params": state.params, "batch_stats": state.batch_stats},
                          *task.model_inputs(batch), train=False)
    _, metrics = task.loss_and_metrics(outputs, batch)
    mask = batch["mask"]
    return {k: jnp.sum(v * mask) for k, v in metrics.items()}, jnp.sum(mask)

  return eval_step


def evaluate(eval_step: Callable, state: TrainState, arrays, batch_size: int,
             mesh, buckets: batching.LengthBuckets | None = None) -> dict[str, float]:
  """Means of the task's per-example metrics over a whole split."""
  totals: dict[str, float] = {}
  count = 0.0
  for batch in batching.eval_batches(arrays, batch_size, multiple_of=mesh.size,
                                     buckets=buckets):
    sums, n = eval_step(state, parallel.shard_batch(batch, mesh))
    for k, v in jax.device_get(sums).items():
      totals[k] = totals.get(k, 0.0) + float(v)
    count += float(n)
  return {k: v / max(count, 1.0) for k, v in totals.items()}


def length_buckets(config: ml_collections.ConfigDict, task: Task,
                   train_arrays) -> batching.LengthBuckets | None:
  """The config's ``length_buckets`` for the task's variable-length feature, with edges
  at quantiles of the training lengths; None when off (``num`` 1)."""
  spec = config.get("length_buckets")
  if spec is None or spec.num == 1:
    return None
  if spec.num < 1 or spec.group_steps < 1:
    raise ConfigError(f"length_buckets.num={spec.num}, length_buckets.group_steps="
                      f"{spec.group_steps}: both must be at least 1 (num 1 turns "
                      "bucketing off).")
  if task.length_feature is None:
    raise ConfigError(f"Experiment {config.experiment!r} has no variable-length feature "
                      "to bucket: set --config.length_buckets.num=1.")
  feature, length = task.length_feature
  return batching.LengthBuckets.from_quantiles(train_arrays, feature, length, spec.num,
                                               spec.group_steps)


# --- run records ----------------------------------------------------------------------


def _comparable(flat: dict[str, Any]) -> dict[str, Any]:
  return {k: v for k, v in flat.items()
          if not any(k == f or (f.endswith(".") and k.startswith(f)) for f in RESUMABLE_FIELDS)}


def check_workdir(workdir: str, config: ml_collections.ConfigDict) -> None:
  """Refuses a workdir that holds a run of a different config."""
  path = os.path.join(workdir, CONFIG_FILE)
  if not os.path.exists(path):
    return
  with open(path) as f:
    previous = _comparable(json.load(f).get("config", {}))
  current = _comparable(json.loads(json.dumps(config_lib.to_flat_dict(config))))
  differing = sorted(k for k in set(previous) | set(current)
                     if previous.get(k) != current.get(k))
  if differing:
    details = "; ".join(f"{k}: {previous.get(k)!r} in the workdir, {current.get(k)!r} now"
                        for k in differing[:8])
    raise WorkdirConflictError(
        f"The workdir {workdir} holds a run of a different config ({details}). "
        "Resuming would mix two experiments: use a new --workdir, or delete this one.")


def write_run_record(workdir: str, config: ml_collections.ConfigDict, dataset: Dataset,
                     extra: dict[str, Any]) -> None:
  if jax.process_index() != 0:
    return
  record = {
      "config": config_lib.to_flat_dict(config),
      "data": dataset.describe(),
      "devices": {"count": jax.device_count(), "platform": jax.devices()[0].platform,
                  "processes": jax.process_count()},
      "jax_default_matmul_precision": str(jax.config.jax_default_matmul_precision),
      **extra,
  }
  with open(os.path.join(workdir, CONFIG_FILE), "w") as f:
    json.dump(record, f, indent=2, default=str)


# --- the loop -------------------------------------------------------------------------


class _SignalGuard:
  """Turns SIGTERM/SIGINT into a flag the loop checks between calls."""

  def __init__(self):
    self.received = None
    self._previous = {}

  def __enter__(self):
    for sig in (signal.SIGTERM, signal.SIGINT):
      try:
        self._previous[sig] = signal.signal(sig, self._handle)
      except ValueError:  # Not the main thread: leave signals alone.
        pass
    return self

  def _handle(self, signum, frame):
    del frame
    self.received = signal.Signals(signum).name

  def __exit__(self, *args):
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)
    return False


def _epoch_bookkeeping() -> dict[str, Any]:
  """The host-side sums of one epoch, reset at each epoch end."""
  return {"epoch_sums": {}, "epoch_examples": 0, "epoch_seconds": 0.0,
          "timed_examples": 0, "timed_seconds": 0.0, "compile_seconds": 0.0,
          "epoch_norms": {}, "epoch_steps": 0, "norm_samples": 0}


def _host_init() -> dict[str, Any]:
  # train_seconds spans the whole run: the clock `lnorm compare` reads time-to-target on.
  return {**_epoch_bookkeeping(), "train_seconds": 0.0}


def init_train_state(config: ml_collections.ConfigDict, task: Task, model: nn.Module,
                     train_arrays, mesh) -> TrainState:
  """The initial, replicated train state of a config: what training starts from and
  the structure a checkpoint of that config restores into (``lnorm bln-search``)."""
  init_rng, _ = jax.random.split(jax.random.key(config.seed))
  # Initialise on a real batch: data-dependent initialisations (WN) need one.
  first = {k: v[0] for k, v in batching.train_chunk(
      train_arrays, config.batch_size, config.seed, 0, 0, 1).items()}
  init_rngs = {"params": init_rng, **{s: init_rng for s in task.rng_streams}}
  variables = jax.jit(functools.partial(model.init, train=True))(
      init_rngs, *task.model_inputs(first))
  tx = make_optimizer(config.optimizer)
  state = TrainState.create(apply_fn=model.apply, params=variables["params"], tx=tx,
                            batch_stats=variables.get("batch_stats", {}))
  return jax.device_put(state, parallel.replicated(mesh))


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, float]:
  """Trains and evaluates one config into ``workdir``; resumes if it holds a checkpoint.

  Returns the final epoch's logged metrics.
  """
  parallel.maybe_initialize_distributed()
  if config.matmul_precision != "default":
    jax.config.update("jax_default_matmul_precision", config.matmul_precision)
  task = load_task(config)
  workdir = os.path.abspath(workdir)
  os.makedirs(workdir, exist_ok=True)
  check_workdir(workdir, config)

  mesh = parallel.make_mesh()
  parallel.check_batch_size(config.batch_size, mesh)
  dataset = task.load_data()
  train_arrays = dataset.splits[task.train_split()]
  num_train = dataset.num_examples(task.train_split())
  steps_per_epoch = batching.steps_per_epoch(num_train, config.batch_size)
  if steps_per_epoch == 0:
    raise UserError(f"The training split has {num_train} examples, fewer than one batch "
                    f"of {config.batch_size}: lower --config.batch_size.")
  if config.max_steps < 0:
    raise ConfigError(f"max_steps is {config.max_steps}: use a number of updates, or 0 "
                      "to train for num_epochs epochs.")
  total_steps = defaults.total_steps(config, steps_per_epoch)
  model = task.build_model(dataset)
  buckets = length_buckets(config, task, train_arrays)
  if buckets is not None:
    logging.info("Length buckets of %r: %s tokens.", buckets.feature, buckets.edges)

  _, train_rng = jax.random.split(jax.random.key(config.seed))
  state = init_train_state(config, task, model, train_arrays, mesh)
  num_params = sum(x.size for x in jax.tree.leaves(state.params))

  checkpointer = Checkpointer(workdir)
  host = _host_init()
  start_step = 0
  if checkpointer.latest_step() is not None:
    state, saved_host = checkpointer.restore(abstract_like(state))
    # Bookkeeping added in later versions starts from its initial value.
    host = {**_host_init(), **saved_host}
    start_step = int(state.step)
    logging.info("Resuming from the checkpoint at step %d.", start_step)

  write_run_record(workdir, config, dataset, {
      "num_params": num_params, "steps_per_epoch": steps_per_epoch,
      "length_buckets": None if buckets is None else list(buckets.edges)})
  logging.info("Data: %s", json.dumps(dataset.describe()))
  logging.info("Model: %d parameters; %d steps per epoch; %d devices.", num_params,
               steps_per_epoch, mesh.size)
  writer = MetricWriter(workdir, config_lib.to_flat_dict(config), config.wandb,
                        resume_step=start_step)
  writer.summary({"num_params": num_params, "data/source": dataset.source,
                  "data/num_train": num_train})

  rep = parallel.replicated(mesh)
  train_chunk = jax.jit(make_train_chunk(make_train_step(task, model)), donate_argnums=0,
                        out_shardings=(rep, rep))
  eval_step = jax.jit(make_eval_step(task, model), out_shardings=rep)
  with_population = lambda s: s.replace(batch_stats=finalize_epoch_statistics(s.batch_stats))
  end_epoch = jax.jit(with_population, donate_argnums=0, out_shardings=rep)
  # Mid-epoch evaluations see the population statistics so far, on a copy: training
  # goes on accumulating into the live state.
  population_so_far = jax.jit(with_population, out_shardings=rep)

  # With length buckets, a split is sorted by length at its first evaluation, so that
  # its batches trim well (the order does not change a split's mean metrics).
  sorted_splits: dict[str, Any] = {}

  def eval_arrays(split):
    if buckets is None:
      return dataset.splits[split]
    if split not in sorted_splits:
      sorted_splits[split] = buckets.sorted_by_length(dataset.splits[split])
    return sorted_splits[split]

  def evaluate_splits(state, splits) -> dict[str, float]:
    scores = {}
    for split in splits:
      if split in dataset.splits:
        split_scores = evaluate(eval_step, state, eval_arrays(split),
                                config.eval_batch_size, mesh, buckets)
        scores.update({f"{split}/{k}": v for k, v in split_scores.items()})
    return scores

  def write(step, metrics):
    writer.write(step, {**metrics, "time/train_seconds": host["train_seconds"]})

  # An evaluation beyond the data splits, for tasks that define one (skip-thoughts:
  # its encoder on SentEval), every periodic_eval_every_steps updates.
  periodic_every = config.get("periodic_eval_every_steps", 0)

  last_metrics: dict[str, float] = {}
  last_save = time.time()
  step = start_step
  num_epochs = -(-total_steps // steps_per_epoch)
  compiled_shapes: set[tuple] = set()
  order_epoch, order = None, None
  try:
    with _SignalGuard() as signals:
      while step < total_steps:
        epoch = step // steps_per_epoch
        in_epoch = step % steps_per_epoch
        # Training in this epoch stops at its end, or earlier at max_steps.
        stop = min(steps_per_epoch, total_steps - epoch * steps_per_epoch)
        progress = _progress_bar(config, epoch, num_epochs, steps_per_epoch, in_epoch)
        epoch_start = time.time()
        while in_epoch < stop:
          k = min(config.steps_per_call, stop - in_epoch)
          batch_start = time.time()
          if order_epoch != epoch:
            order_epoch = epoch
            order = batching.training_order(train_arrays, config.batch_size, config.seed,
                                            epoch, buckets)
          chunk = batching.train_chunk(train_arrays, config.batch_size, config.seed, epoch,
                                       in_epoch, k, buckets, order)
          shape = tuple(v.shape for v in chunk.values())
          call_start = time.time()
          state, out = train_chunk(state, parallel.shard_batch(chunk, mesh, 1), train_rng)
          out = jax.device_get(out)
          call_end = time.time()
          _check_finite(out, step, epoch, checkpointer.latest_step())
          _accumulate(host, out, k * config.batch_size)
          # The first call of each chunk shape compiles: keep it out of the throughput
          # and of the training time.
          if shape in compiled_shapes:
            host["timed_examples"] += k * config.batch_size
            host["timed_seconds"] += call_end - call_start
            host["train_seconds"] += call_end - batch_start  # Input assembly included.
          else:
            compiled_shapes.add(shape)
            host["compile_seconds"] += call_end - call_start
            logging.info(
                "Compiled the train step for %d steps%s in %.1f s (%d shapes so far).", k,
                "" if buckets is None else
                f" of {buckets.feature} length {chunk[buckets.feature].shape[2]}",
                call_end - call_start, len(compiled_shapes))
          step += k
          in_epoch += k
          if config.log_every_steps and step % config.log_every_steps < k:
            write(step, {"epoch": step / steps_per_epoch,
                         "train/loss": float(np.mean(out["loss"]))})
          if (config.eval_every_steps and step % config.eval_every_steps < k
              and in_epoch < stop):
            # Evaluation time is kept out of the epoch's training time.
            host["epoch_seconds"] += time.time() - epoch_start
            scores = evaluate_splits(population_so_far(state), config.eval_every_splits)
            write(step, {"epoch": step / steps_per_epoch, **scores})
            logging.info("step %d (epoch %.2f): %s", step, step / steps_per_epoch,
                         _format(scores))
            epoch_start = time.time()
          if periodic_every and step % periodic_every < k:
            host["epoch_seconds"] += time.time() - epoch_start
            scores = task.periodic_evaluation(population_so_far(state), workdir, step)
            if scores:  # A task may leave a step to its end_of_epoch.
              write(step, {"epoch": step / steps_per_epoch, **scores})
              logging.info("step %d: %s", step, _format(scores))
            epoch_start = time.time()
          if progress is not None:
            progress.update(k)
            progress.set_postfix(
                loss=f"{float(np.mean(out['loss'])):.4f}",
                ex_per_s=f"{host['timed_examples'] / max(host['timed_seconds'], 1e-9):.0f}")
          if signals.received:
            break
          if time.time() - last_save > config.checkpoint_every_secs and in_epoch < stop:
            host["epoch_seconds"] += time.time() - epoch_start
            epoch_start = time.time()
            checkpointer.save(step, state, host)
            last_save = time.time()
        if progress is not None:
          progress.close()
        host["epoch_seconds"] += time.time() - epoch_start
        if signals.received and in_epoch < stop:
          checkpointer.save(step, state, host)
          checkpointer.wait()
          raise Interrupted(
              f"Received {signals.received} at step {step} (epoch {epoch + 1}); saved a "
              f"checkpoint. Rerun the same command to resume from step {step}.")
        epoch_done = in_epoch == steps_per_epoch
        if epoch_done:
          state = end_epoch(state)
          evaluated = state
        else:
          # max_steps ends the run inside this epoch: evaluate on the population
          # statistics so far and keep the live state (and the epoch's sums) for a
          # later, longer run to continue from.
          evaluated = population_so_far(state)
        last_metrics = _epoch_metrics(host, epoch + 1 if epoch_done else step / steps_per_epoch)
        splits = tuple(config.eval_splits)
        if step == total_steps:
          splits += tuple(s for s in config.final_eval_splits if s not in splits)
        last_metrics.update(evaluate_splits(evaluated, splits))
        extra = task.end_of_epoch(evaluated, workdir, step, writer)
        if extra:
          last_metrics.update(extra)
        last_metrics["time/train_seconds"] = host["train_seconds"]
        writer.write(step, last_metrics)
        logging.info("epoch %.4g: %s", last_metrics["epoch"], _format(last_metrics))
        if epoch_done:
          host.update(_epoch_bookkeeping())
        checkpointer.save(step, state, host)
        last_save = time.time()
        if signals.received and step < total_steps:
          checkpointer.wait()
          raise Interrupted(
              f"Received {signals.received} after epoch {epoch + 1}; saved a checkpoint. "
              "Rerun the same command to resume.")
    if not last_metrics:
      last_metrics = _last_epoch_record(workdir)
    writer.summary({f"final/{k}": v for k, v in last_metrics.items()})
    return last_metrics
  finally:
    checkpointer.close()
    writer.close()


def _progress_bar(config, epoch, num_epochs, total, initial):
  if not config.progress_bar:
    return None
  from tqdm.auto import tqdm  # pylint: disable=g-import-not-at-top
  return tqdm(total=total, initial=initial, desc=f"epoch {epoch + 1}/{num_epochs}",
              unit="step", leave=False, mininterval=1.0)


def _check_finite(out, step: int, epoch: int, last_checkpoint: int | None) -> None:
  # Only a call's last step measured its gradient norm.
  bad = ~np.isfinite(out["loss"])
  bad[-1] |= not np.isfinite(out["grad_norm"][-1])
  if bad.any():
    first = int(np.argmax(bad))
    what = "loss" if not np.isfinite(out["loss"][first]) else "gradient norm"
    raise DivergenceError(
        f"The {what} became {out['loss'][first] if what == 'loss' else out['grad_norm'][first]} "
        f"at training step {step + first} (epoch {epoch + 1}). Lower the learning rate "
        "(--config.optimizer.learning_rate), clip gradients "
        "(--config.optimizer.clip_global_norm=1.0) or change the seed. "
        f"The last good checkpoint is at step {last_checkpoint}; this state was not saved.")


def _accumulate(host: dict[str, Any], out, examples: int) -> None:
  for k, v in out["sums"].items():
    host["epoch_sums"][k] = host["epoch_sums"].get(k, 0.0) + float(np.sum(v))
  host["epoch_norms"]["loss"] = host["epoch_norms"].get("loss", 0.0) + float(np.sum(out["loss"]))
  for k in NORM_METRICS:
    host["epoch_norms"][k] = host["epoch_norms"].get(k, 0.0) + float(out[k][-1])
  host["norm_samples"] += 1
  host["epoch_examples"] += examples
  host["epoch_steps"] += len(out["loss"])


def _epoch_metrics(host: dict[str, Any], epoch: float) -> dict[str, float]:
  """The epoch record's training part; ``epoch`` is fractional for a partial epoch."""
  n = max(host["epoch_examples"], 1)
  steps = max(host["epoch_steps"], 1)
  metrics = {"epoch": epoch}
  metrics.update({f"train/{k}": v / n for k, v in host["epoch_sums"].items()})
  # The loss is averaged over every step, the norms over the steps that measured them
  # (the last of each fused call).
  samples = max(host["norm_samples"], 1)
  metrics.update({f"train/{k}": v / (samples if k in NORM_METRICS else steps)
                  for k, v in host["epoch_norms"].items()})
  metrics["time/epoch_seconds"] = host["epoch_seconds"]
  # Throughput of the jitted steps alone: compilation and evaluation excluded.
  if host["timed_seconds"] > 0:
    metrics["train/examples_per_sec"] = host["timed_examples"] / host["timed_seconds"]
  if host["compile_seconds"] > 0:
    metrics["time/compile_seconds"] = host["compile_seconds"]
  return metrics


def _last_epoch_record(workdir: str) -> dict[str, float]:
  from lnorm.training.metrics_writer import read_metrics  # pylint: disable=g-import-not-at-top
  records = [r for r in read_metrics(workdir) if "time/epoch_seconds" in r]
  return {k: v for k, v in records[-1].items() if k != "step"} if records else {}


def _format(metrics: dict[str, float]) -> str:
  return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                   for k, v in metrics.items())
