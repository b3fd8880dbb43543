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
- mid-epoch evaluations (``eval_every_steps``, and ``eval_points_per_decade``
  geometrically spaced steps), a task's own evaluation (``Task.periodic_evaluation``
  every ``periodic_eval_every_steps``, when set) and running train losses
  (``log_every_steps``), with a fractional ``epoch`` and no ``time/epoch_seconds``.

The gradient's record, in epoch records (over the epoch) and at mid-epoch evaluations
(over the steps since the previous one, or since the epoch began):

- ``train/grad_norm``: the global L2 norm of the gradient *before* any clipping, the
  gradient as the loss gives it. With ``steps_per_call > 1`` it is measured at each
  call's last step only (see ``make_train_step``), and averaged over those;
- ``train/clipped_fraction``: the share of steps whose gradient the global-norm clip
  (``optimizer.clip_global_norm``) rescaled, and ``train/tensor_clipped_fraction`` the
  share where the per-tensor clip (``optimizer.clip_tensor_norm``) rescaled at least
  one tensor, and ``train/elementwise_clipped_fraction`` the share where the
  element-wise clip (``optimizer.clip_elementwise``) bounded at least one coordinate;
  each is logged when its clip is on, and counts every step
  (``lnorm.training.optim.clip_stages``).

``lnorm.training.defaults.is_complete`` tells from the epoch records whether a run
reached the length its config asks for.
"""

from __future__ import annotations

import bisect
import functools
import json
import logging
import os
import signal
import time
from typing import Any, Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax.training import train_state

from lnorm import config as config_lib
from lnorm.data import batching
from lnorm.errors import ConfigError, DivergenceError, Interrupted, UserError
from lnorm.normalization import finalize_epoch_statistics
from lnorm.progress import Progress, stage
from lnorm.rnn import normalizer_record
from lnorm.training import defaults
from lnorm.training import parallel
from lnorm.training import workdir as workdir_lib
from lnorm.training.checkpoint import Checkpointer, abstract_like
from lnorm.training.metrics_writer import MetricWriter
from lnorm.training import optim
from lnorm.training.optim import make_optimizer
from lnorm.training.task import Task, load_task

# Here before lnorm.training.workdir held them; other modules still import them from here.
CONFIG_FILE = workdir_lib.CONFIG_FILE
check_workdir = workdir_lib.check_workdir

#: The first time-based checkpoint comes after at most this many seconds; later ones
#: every checkpoint_every_secs. Without it the first checkpoint waited for an epoch's
#: end or checkpoint_every_secs (300 s), and a kill before it lost everything: a
#: handwriting epoch at scale=cpu is 1,366 steps. One more save costs about a second,
#: and bounds the work a crash in the first minutes loses to one minute. A time, not a
#: number of steps, because a step takes a millisecond in one experiment and a second
#: in another.
FIRST_CHECKPOINT_SECS = 60.0


class TrainState(train_state.TrainState):
  batch_stats: Any = None


# --- the steps ------------------------------------------------------------------------


def _global_norm(tree) -> jax.Array:
  return optax.tree.norm(jax.tree.map(lambda x: x.astype(jnp.float32), tree))


NORM_METRICS = ("grad_norm", "param_norm", "update_norm")


def _norms(grads, params, updates) -> dict[str, jax.Array]:
  return {"grad_norm": _global_norm(grads), "param_norm": _global_norm(params),
          "update_norm": _global_norm(updates)}


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
  loss, metrics = task.loss_and_metrics(outputs, batch)
  return loss, (metrics, mutated.get("batch_stats", batch_stats))


def make_train_step(task: Task, model: nn.Module,
                    clips: Sequence[optim.ClipStage] | None = None) -> Callable:
  """One optimisation step: ``(state, batch, rng, measure_norms) -> (state, metrics)``.

  The gradient, parameter and update norms read every parameter three more times: for
  a model with a large embedding at batch size 1 that costs as much as the step itself
  (IMDB: 88 against 48 ms), so ``measure_norms`` (traced) can skip them; they are then
  zero. ``make_train_chunk`` measures them at its last step. Whether the clips acted
  (``clip_indicators``; ``clips`` defaults to the task's optimizer config) is measured
  at every step.
  """
  if clips is None:
    clips = optim.clip_stages(task.config.get("optimizer") or {})

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
    norms = jax.lax.cond(
        measure_norms, _norms,
        lambda *_: {k: jnp.zeros((), jnp.float32) for k in NORM_METRICS},
        grads, params, updates)
    out = {
        "loss": loss,
        **norms,
        "clips": clip_indicators(grads, clips),
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
             mesh, buckets: batching.LengthBuckets | None = None,
             progress: Callable[..., Progress] | None = None) -> dict[str, float]:
  """Means of the task's per-example metrics over a whole split. ``progress``, if
  given, makes the Progress that counts its batches (``total=``, ``unit=``)."""
  totals: dict[str, float] = {}
  count = 0.0
  num_examples = len(next(iter(arrays.values()))) if arrays else 0
  report = (progress(total=-(-num_examples // batch_size), unit="batch")
            if progress is not None else None)
  try:
    for batch in batching.eval_batches(arrays, batch_size, multiple_of=mesh.size,
                                       buckets=buckets):
      sums, n = eval_step(state, parallel.shard_batch(batch, mesh))
      for k, v in jax.device_get(sums).items():
        totals[k] = totals.get(k, 0.0) + float(v)
      count += float(n)
      if report is not None:
        report.update(1)
  finally:
    if report is not None:
      report.close()
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


def _gradient_window() -> dict[str, Any]:
  """Sums over the steps since the last mid-epoch evaluation (or the epoch's start)."""
  return {"steps": 0, "norm_samples": 0, "grad_norm": 0.0, "clips": {}}


def _epoch_bookkeeping() -> dict[str, Any]:
  """The host-side sums of one epoch, reset at each epoch end."""
  return {"epoch_sums": {}, "epoch_examples": 0, "epoch_seconds": 0.0,
          "timed_examples": 0, "timed_seconds": 0.0, "compile_seconds": 0.0,
          "epoch_norms": {}, "epoch_steps": 0, "norm_samples": 0, "epoch_clips": {},
          "eval_window": _gradient_window()}


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


def _resume(checkpointer: Checkpointer, state: TrainState,
            workdir: str) -> tuple[TrainState, dict[str, Any], int]:
  """``(state, host bookkeeping, step)`` to start from: the latest checkpoint's, or the
  initial ones, saying why when an earlier attempt left files but no checkpoint."""
  if checkpointer.latest_step() is None:
    left = workdir_lib.earlier_attempt(workdir)
    if left:
      logging.warning(
          "Starting from scratch: %s holds no checkpoint, only the %s of an earlier "
          "attempt that stopped before its first checkpoint (killed, crashed or out of "
          "disk); they are replaced.", workdir, left)
    return state, _host_init(), 0
  state, saved_host = checkpointer.restore(abstract_like(state))
  # Bookkeeping added in later versions starts from its initial value.
  host = {**_host_init(), **saved_host}
  logging.info("Resuming from the checkpoint at step %d.", int(state.step))
  return state, host, int(state.step)


class _CheckpointTimer:
  """When the next time-based checkpoint is due: ``every_secs`` after the last save,
  and the first one sooner (FIRST_CHECKPOINT_SECS)."""

  def __init__(self, every_secs: float, have_checkpoint: bool,
               clock: Callable[[], float] = time.time):
    self.every_secs = every_secs
    self.have_checkpoint = have_checkpoint
    self._clock = clock
    self._last = clock()

  def due(self) -> bool:
    interval = self.every_secs
    if not self.have_checkpoint:
      interval = min(interval, FIRST_CHECKPOINT_SECS)
    return self._clock() - self._last > interval

  def saved(self) -> None:
    self.have_checkpoint = True
    self._last = self._clock()


def _crossed_multiple(every: int, before: int, after: int) -> bool:
  """Whether a multiple of ``every`` (0: never) lies in (before, after]: the call that
  took the run from step ``before`` to ``after`` passed it."""
  return bool(every) and after // every > before // every


class EvalSchedule:
  """The steps of the mid-epoch evaluations: every ``eval_every_steps`` and the
  ``eval_points_per_decade`` geometric points (``defaults.geometric_steps``). Both
  depend on the step alone, so a resumed run evaluates where an uninterrupted one does.
  """

  def __init__(self, every_steps: int, points_per_decade: int, last_step: int):
    if every_steps < 0 or points_per_decade < 0:
      raise ConfigError(
          f"eval_every_steps={every_steps}, eval_points_per_decade={points_per_decade}: "
          "use 0 to turn a schedule off, or a positive number.")
    self.every_steps = every_steps
    self.points = defaults.geometric_steps(points_per_decade, last_step)

  def due(self, before: int, after: int) -> bool:
    """Whether the call from step ``before`` to ``after`` reached an evaluation step:
    with several steps per call, the first call boundary at or past it evaluates."""
    passed_point = bisect.bisect_right(self.points, after) > bisect.bisect_right(
        self.points, before)
    return passed_point or _crossed_multiple(self.every_steps, before, after)


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
  workdir_lib.check_workdir(workdir, config)

  mesh = parallel.make_mesh()
  parallel.check_batch_size(config.batch_size, mesh)
  dataset = task.load_data()
  data_record = workdir_lib.data_record(dataset)
  workdir_lib.check_data(workdir, data_record)
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
  schedule = EvalSchedule(config.eval_every_steps, config.get("eval_points_per_decade", 0),
                          total_steps)
  model = task.build_model(dataset)
  buckets = length_buckets(config, task, train_arrays)
  if buckets is not None:
    logging.info("Length buckets of %r: %s tokens.", buckets.feature, buckets.edges)

  _, train_rng = jax.random.split(jax.random.key(config.seed))
  state = init_train_state(config, task, model, train_arrays, mesh)
  num_params = sum(x.size for x in jax.tree.leaves(state.params))

  checkpointer = Checkpointer(workdir)
  state, host, start_step = _resume(checkpointer, state, workdir)

  workdir_lib.write_run_record(workdir, config, data_record, {
      "num_params": num_params, "steps_per_epoch": steps_per_epoch,
      "length_buckets": None if buckets is None else list(buckets.edges),
      **normalizer_record(model, config.get("norm"))})
  logging.info("Data: %s", json.dumps(data_record))
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

  every_secs = config.get("progress_every_secs", 30.0)
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
        # A bar only for evaluations long enough to wonder about.
        progress = functools.partial(Progress, f"evaluate {split}", every_secs=every_secs,
                                     enabled=config.progress_bar, delay_secs=5.0)
        split_scores = evaluate(eval_step, state, eval_arrays(split),
                                config.eval_batch_size, mesh, buckets, progress)
        scores.update({f"{split}/{k}": v for k, v in split_scores.items()})
    return scores

  def hook(name: str, step: int, run: Callable[[], Any]) -> Any:
    """A task's own evaluation, which may take minutes (SentEval, retrieval)."""
    with stage(f"{config.experiment}: {name} at step {step}",
               every_secs=every_secs):
      return run()

  def write(step, metrics):
    writer.write(step, {**metrics, "time/train_seconds": host["train_seconds"]})

  # An evaluation beyond the data splits, for tasks that define one (skip-thoughts:
  # its encoder on SentEval), every periodic_eval_every_steps updates.
  periodic_every = config.get("periodic_eval_every_steps", 0)

  last_metrics: dict[str, float] = {}
  checkpoint_timer = _CheckpointTimer(config.checkpoint_every_secs,
                                      checkpointer.latest_step() is not None)
  step = start_step
  num_epochs = -(-total_steps // steps_per_epoch)
  compiled_shapes: set[tuple] = set()
  order_epoch, order = None, None
  # One count for the whole run, so that its end and the time left follow max_steps.
  progress = Progress(_epoch_label(step, steps_per_epoch, num_epochs), total=total_steps,
                      initial=start_step, unit="step", every_secs=every_secs,
                      enabled=config.progress_bar)
  try:
    with _SignalGuard() as signals, progress:
      while step < total_steps:
        epoch = step // steps_per_epoch
        in_epoch = step % steps_per_epoch
        # Training in this epoch stops at its end, or earlier at max_steps.
        stop = min(steps_per_epoch, total_steps - epoch * steps_per_epoch)
        progress.set_description(_epoch_label(step, steps_per_epoch, num_epochs))
        epoch_start = time.time()
        evaluation_due = False
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
          before, step = step, step + k
          in_epoch += k
          if _crossed_multiple(config.log_every_steps, before, step):
            write(step, {"epoch": step / steps_per_epoch,
                         "train/loss": float(np.mean(out["loss"]))})
          evaluation_due = schedule.due(before, step)
          if in_epoch < stop and evaluation_due:
            # Evaluation time is kept out of the epoch's training time.
            host["epoch_seconds"] += time.time() - epoch_start
            scores = evaluate_splits(population_so_far(state), config.eval_every_splits)
            write(step, {"epoch": step / steps_per_epoch,
                         **_window_metrics(host["eval_window"]), **scores})
            host["eval_window"] = _gradient_window()
            logging.info("step %d (epoch %.2f): %s", step, step / steps_per_epoch,
                         _format(scores))
            epoch_start = time.time()
          if _crossed_multiple(periodic_every, before, step):
            host["epoch_seconds"] += time.time() - epoch_start
            scores = hook("periodic evaluation", step,
                          lambda: task.periodic_evaluation(population_so_far(state), workdir,
                                                           step))
            if scores:  # A task may leave a step to its end_of_epoch.
              write(step, {"epoch": step / steps_per_epoch, **scores})
              logging.info("step %d: %s", step, _format(scores))
            epoch_start = time.time()
          progress.update(
              k, loss=f"{float(np.mean(out['loss'])):.4f}",
              ex_per_s=f"{host['timed_examples'] / max(host['timed_seconds'], 1e-9):.0f}")
          if signals.received:
            break
          if checkpoint_timer.due() and in_epoch < stop:
            host["epoch_seconds"] += time.time() - epoch_start
            epoch_start = time.time()
            checkpointer.save(step, state, host)
            checkpoint_timer.saved()
        host["epoch_seconds"] += time.time() - epoch_start
        if signals.received and in_epoch < stop:
          checkpointer.save(step, state, host)
          checkpointer.wait()
          raise Interrupted(
              f"Stopped by {signals.received} at step {step} (epoch {epoch + 1}/"
              f"{num_epochs}) and saved a checkpoint there. Rerun the same command to "
              f"resume from step {step}.")
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
        extra = hook("end of epoch", step,
                     lambda: task.end_of_epoch(evaluated, workdir, step, writer))
        if extra:
          last_metrics.update(extra)
        last_metrics["time/train_seconds"] = host["train_seconds"]
        writer.write(step, last_metrics)
        logging.info("epoch %.4g: %s", last_metrics["epoch"], _format(last_metrics))
        if epoch_done:
          host.update(_epoch_bookkeeping())
        elif evaluation_due:
          # This record stands in for the mid-epoch evaluation due here: a longer run
          # continuing from it must count its gradient window as an uninterrupted one.
          host["eval_window"] = _gradient_window()
        checkpointer.save(step, state, host)
        checkpoint_timer.saved()
        if signals.received and step < total_steps:
          checkpointer.wait()
          raise Interrupted(
              f"Stopped by {signals.received} after epoch {epoch + 1}/{num_epochs} and "
              f"saved a checkpoint at step {step}. Rerun the same command to resume.")
    if not last_metrics:
      last_metrics = _last_epoch_record(workdir)
    writer.summary({f"final/{k}": v for k, v in last_metrics.items()})
    return last_metrics
  finally:
    checkpointer.close()
    writer.close()


def _epoch_label(step: int, steps_per_epoch: int, num_epochs: int) -> str:
  return f"epoch {min(step // steps_per_epoch + 1, num_epochs)}/{num_epochs}"


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
  window = host["eval_window"]
  window["steps"] += len(out["loss"])
  window["norm_samples"] += 1
  window["grad_norm"] += float(out["grad_norm"][-1])
  # Whether the clips acted is known for every step: count them all.
  for k, v in out.get("clips", {}).items():
    clipped = float(np.sum(v))
    host["epoch_clips"][k] = host["epoch_clips"].get(k, 0.0) + clipped
    window["clips"][k] = window["clips"].get(k, 0.0) + clipped


def _window_metrics(window: dict[str, Any]) -> dict[str, float]:
  """The gradient's record over a mid-epoch evaluation's window."""
  if not window["norm_samples"]:
    return {}
  metrics = {"train/grad_norm": window["grad_norm"] / window["norm_samples"]}
  metrics.update({f"train/{k}": v / window["steps"] for k, v in window["clips"].items()})
  return metrics


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
  metrics.update({f"train/{k}": v / steps for k, v in host["epoch_clips"].items()})
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
