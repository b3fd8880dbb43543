"""The training loop every experiment shares: ``train_and_evaluate(config, workdir)``.

``train_and_evaluate`` reads as the outline of a run: set up (the task, its data and
model, the run's length), resume (``checkpoint_policy.resume``), train epoch by epoch
with the mid-epoch evaluations of ``eval_schedule``, evaluate at each epoch end, and
record (``records``, written to ``metrics.jsonl`` and wandb). The jitted steps live in
``lnorm.training.steps``.

Pure, jitted steps over a TrainState carrying ``batch_stats``; the batch sharded over
all devices; several steps fused into one call when asked; checkpoints at epoch ends,
every few minutes and on SIGTERM or Ctrl-C (``stop_signals``: checked between the
phases of the set-up and after every train call); and exact resumption, because the
data order and the step RNG depend only on (seed, epoch, step).

What ``metrics.jsonl`` holds (every point has ``step``, ``time/train_seconds``, the
wall time spent in training calls since the run began, compilation, evaluation and
checkpointing excluded, and ``time/wall_seconds``, all of the run's wall time from the
set-up on, data loading, compilation and evaluation included: what a member costs, as
the benchmark's pilot reads it; both carried across resumes):

- an epoch record at each epoch end, told apart by ``time/epoch_seconds``: the epoch's
  train means, throughput and norms, and the ``eval_splits`` (plus the
  ``final_eval_splits`` at the run's end); ``epoch`` is the epoch number;
- when ``max_steps`` ends the run inside an epoch, the run's last record is an epoch
  record of that partial epoch: its train means cover the partial epoch's steps, it
  evaluates the ``eval_splits`` and ``final_eval_splits`` with the population
  statistics so far (as mid-epoch evaluations do), and its ``epoch`` is fractional
  (step / steps_per_epoch). The checkpoint saved with it is mid-epoch, so raising
  ``max_steps`` later continues that epoch exactly as an uninterrupted run would;
- with ``select_on`` set, the run's last record also holds ``selected/step`` and the
  splits other than the selection's evaluated on the model of that step
  (``selected/test/error``, ...; ``lnorm.training.selected_model``);
- mid-epoch evaluations (``eval_every_steps``, and ``eval_points_per_decade``
  geometrically spaced steps), a task's own evaluation (``Task.periodic_evaluation``
  every ``periodic_eval_every_steps``, when set) and running train losses
  (``log_every_steps``: ``train/loss``, the mean over the call's steps, and
  ``train/grad_norm``, the call's last step's), with a fractional ``epoch`` and no
  ``time/epoch_seconds``.

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

import contextlib
import dataclasses
import functools
import json
import logging
import os
import time
from typing import Any, Iterator

import jax
import ml_collections
import numpy as np

from lnorm import config as config_lib
from lnorm.data import batching
from lnorm.errors import DivergenceError, Interrupted
from lnorm.normalization import finalize_epoch_statistics
from lnorm.progress import Progress, stage
from lnorm.rnn import normalizer_record
from lnorm.training import assembly
from lnorm.training import compilation_cache
from lnorm.training import defaults
from lnorm.training import environment
from lnorm.training import parallel
from lnorm.training import process
from lnorm.training import records
from lnorm.training import workdir as workdir_lib
from lnorm.training.checkpoint import Checkpointer
from lnorm.training.checkpoint_policy import CheckpointTimer, resume
from lnorm.training.eval_schedule import EvalSchedule, crossed_multiple, misalignment
from lnorm.training.metrics_writer import MetricWriter
from lnorm.training.selected_model import SelectedModel
from lnorm.training.stop_signals import StopSignals
from lnorm.training.steps import (SplitEvaluator, make_eval_step, make_train_chunk,
                                  make_train_step)
from lnorm.training.task import Task
from lnorm.training.train_state import TrainState, seed_keys


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       task: Task | None = None,
                       signals: StopSignals | None = None) -> dict[str, float]:
  """Trains and evaluates one config into ``workdir``; resumes if it holds a checkpoint.

  ``task``: what ``assembly.check(config)`` returned, when the caller (``lnorm train``)
  checked the config already; else it is checked here, the same way. ``signals``:
  the caller's, entered before it imported JAX (``lnorm train``); else SIGINT and
  SIGTERM are caught from here on.
  Returns the final epoch's logged metrics.
  """
  if signals is None:
    with StopSignals() as signals:
      return train_and_evaluate(config, workdir, task, signals)
  started = time.time()
  run = set_up(config, os.path.abspath(workdir), task, signals)
  with contextlib.ExitStack() as cleanup:
    checkpointer = Checkpointer(run.workdir)
    cleanup.callback(checkpointer.close)
    _stop_before_training(signals, checkpointer)
    state = run.initial_state()
    state, host, start_step = resume(checkpointer, state, run.workdir)
    checkpointer.check_room(state)  # Before an epoch is trained that could not be saved.
    writer = _open_records(run, state, start_step)
    cleanup.callback(writer.close)
    training = _Training(run, checkpointer, writer, host, started)
    _stop_before_training(signals, checkpointer)
    step, last_metrics = start_step, {}
    with training.progress(start_step):
      while step < run.total_steps:
        state, step = training.train_epoch(state, step, signals)
        state, last_metrics = training.end_epoch(state, step, signals)
    if not last_metrics:  # Already complete: a rerun returns what the run ended with.
      last_metrics = records.last_epoch_record(run.workdir)
    writer.summary({f"final/{k}": v for k, v in last_metrics.items()})
    return last_metrics


# --- set up ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Run:
  """An assembled run in its workdir: what it trains, on what and for how long (the
  config, task, data, model, mesh and steps) is its ``assembled`` run's, read through
  this one; the workdir's own record and the evaluation schedule are added here."""
  assembled: assembly.AssembledRun
  workdir: str
  data_record: dict[str, Any]
  schedule: EvalSchedule

  def __getattr__(self, name: str) -> Any:  # config, task, dataset, model, steps, ...
    if name == "assembled":  # Not set yet (a copy under construction): no recursion.
      raise AttributeError(name)
    return getattr(self.assembled, name)


def set_up(config: ml_collections.ConfigDict, workdir: str, task: Task | None = None,
           signals: StopSignals | None = None) -> Run:
  """Checks the config (unless ``task``, ``assembly.check``'s result, says it was) and
  the workdir, loads the data and builds the model; ``signals`` stop the loading at
  once (``StopSignals.interruptible``)."""
  process.set_up(config)
  compilation_cache.enable()
  task = task or assembly.check(config)
  for warning in task.run_warnings():
    logging.warning(warning)
  os.makedirs(workdir, exist_ok=True)
  workdir_lib.check_workdir(workdir, config)
  with (signals.interruptible("while the data loaded, before training began. Rerun the "
                              "same command to continue.")
        if signals else contextlib.nullcontext()):
    assembled = assembly.assemble(config, task=task)
  data_record = workdir_lib.data_record(assembled.dataset)
  workdir_lib.check_data(workdir, data_record)
  total_steps, steps_per_epoch = assembled.total_steps, assembled.steps_per_epoch
  schedule = EvalSchedule(config.eval_every_steps, config.get("eval_points_per_decade", 0),
                          total_steps)
  note = misalignment(config.eval_every_steps, config.steps_per_call, steps_per_epoch,
                      total_steps)
  if note:  # Evaluations at other steps than asked: say so, where the user looks first.
    logging.warning(note)
  buckets = assembled.buckets
  if buckets is not None:
    logging.info("Length buckets of %r: %s tokens.", buckets.feature, buckets.edges)
  return Run(assembled, workdir, data_record, schedule)


def _open_records(run: Run, state: TrainState, start_step: int) -> MetricWriter:
  """Records the run in its workdir (config.json) and opens its metrics."""
  config = run.config
  num_params = sum(x.size for x in jax.tree.leaves(state.params))
  workdir_lib.write_run_record(run.workdir, config, run.data_record, {
      "num_params": num_params, "steps_per_epoch": run.steps_per_epoch,
      "length_buckets": None if run.buckets is None else list(run.buckets.edges),
      **normalizer_record(run.model, config.get("norm")),
      # Versions, processor, XLA:CPU threads: what a rerun must match (environment.py).
      "environment": environment.describe(),
      # What a model that learned nothing scores: no part of the run's identity, so
      # a workdir written before it existed, or by another version of it, resumes.
      "trivial": run.task.trivial_baseline(run.dataset)}, resumed=start_step > 0)
  logging.info("Data: %s", json.dumps(run.data_record))
  logging.info("Model: %d parameters; %d steps per epoch; %d devices.", num_params,
               run.steps_per_epoch, run.mesh.size)
  writer = MetricWriter(run.workdir, config_lib.to_flat_dict(config), config.wandb,
                        resume_step=start_step)
  writer.summary({"num_params": num_params, "data/source": run.dataset.source,
                  "data/num_train": run.dataset.num_examples(run.task.train_split())})
  return writer


def _stop_before_training(signals: StopSignals, checkpointer: Checkpointer) -> None:
  """Stops between two phases of the set-up when a signal came during one: the
  model's initialization (its compilation) and a restore cannot be cut short."""
  latest = checkpointer.latest_step()
  signals.check("before training began, with nothing new to save. Rerun the same "
                "command to " + ("start the run." if latest is None else
                                 f"resume from the checkpoint at step {latest}."))


# --- train, evaluate, record ----------------------------------------------------------


class _Training:
  """The jitted functions, evaluators and records of one run, and its two phases:
  ``train_epoch`` (to the epoch's end or ``max_steps``, with the mid-epoch evaluations
  and timed checkpoints) and ``end_epoch`` (the epoch record and its checkpoint)."""

  def __init__(self, run: Run, checkpointer: Checkpointer, writer: MetricWriter,
               host: dict[str, Any], started: float):
    config = self.config = run.config
    self.run, self.task = run, run.task
    self.checkpointer, self.writer, self.host = checkpointer, writer, host
    # The run's wall time: what earlier processes spent up to the checkpoint resumed
    # from (a stretch past it that a kill lost is spent again, and counted again).
    self._wall_before, self._started = host.get("wall_seconds", 0.0), started
    # An evaluation beyond the data splits, for tasks that define one (skip-thoughts:
    # its encoder on SentEval), every periodic_eval_every_steps updates.
    self.periodic_every = config.get("periodic_eval_every_steps", 0)
    self.checkpoint_timer = CheckpointTimer(config.checkpoint_every_secs,
                                            checkpointer.latest_step() is not None)
    _, self.train_rng = seed_keys(config.seed)
    self.every_secs = config.get("progress_every_secs", 30.0)
    # The model select_on picks, for test at the evaluation validation selects.
    self.selected = (SelectedModel(config.select_on, run.workdir)
                     if config.get("select_on") else None)

    rep = parallel.replicated(run.mesh)
    self.train_chunk = jax.jit(make_train_chunk(make_train_step(run.task, run.model)),
                               donate_argnums=0, out_shardings=(rep, rep))
    with_population = lambda s: s.replace(
        batch_stats=finalize_epoch_statistics(s.batch_stats))
    self.finish_epoch_statistics = jax.jit(with_population, donate_argnums=0,
                                           out_shardings=rep)
    # Mid-epoch evaluations see the population statistics so far, on a copy: training
    # goes on accumulating into the live state.
    self.population_so_far = jax.jit(with_population, out_shardings=rep)
    # A bar only for evaluations long enough to wonder about.
    self.evaluate_splits = SplitEvaluator(
        jax.jit(make_eval_step(run.task, run.model), out_shardings=rep), run.dataset,
        config.eval_batch_size, run.mesh, run.buckets,
        functools.partial(Progress, every_secs=self.every_secs,
                          enabled=config.progress_bar, delay_secs=5.0))

    # Who to blame when the loss is not finite from the start (records.check_finite).
    self.divergence_suspect = records.normalizer_suspect(config.get("norm"),
                                                         config.get("norm_options"))
    self._executables: dict[tuple, Any] = {}  # Chunk shapes -> compiled train calls.
    self._order: tuple[int | None, Any] = (None, None)
    self._bar: Progress | None = None
    self._epoch_start = 0.0
    self.evaluation_due = False  # Whether the last call reached an evaluation step.

  def progress(self, start_step: int) -> Progress:
    """One count for the whole run, so that its end and the time left follow max_steps."""
    self._bar = Progress(self.run.epoch_label(start_step), total=self.run.total_steps,
                         initial=start_step, unit="step", every_secs=self.every_secs,
                         enabled=self.config.progress_bar)
    return self._bar

  def write(self, step: int, metrics: dict[str, Any]) -> None:
    self.writer.write(step, {**metrics, **self._times()})

  def _times(self) -> dict[str, float]:
    """The clocks every point carries; the wall clock also into the checkpoint's host."""
    self.host["wall_seconds"] = self._wall_before + time.time() - self._started
    return {"time/train_seconds": self.host["train_seconds"],
            "time/wall_seconds": self.host["wall_seconds"]}

  def _save(self, step: int, state) -> None:
    self._times()
    self.checkpointer.save(step, state, self.host)

  @contextlib.contextmanager
  def _off_the_epoch_clock(self) -> Iterator[None]:
    """Evaluation time is kept out of the epoch's training time."""
    self.host["epoch_seconds"] += time.time() - self._epoch_start
    yield
    self._epoch_start = time.time()

  def _hook(self, name: str, step: int, run) -> Any:
    """A task's own evaluation, which may take minutes (SentEval, retrieval)."""
    with stage(f"{self.config.experiment}: {name} at step {step}",
               every_secs=self.every_secs):
      return run()

  # --- train ---

  def train_epoch(self, state: TrainState, step: int, signals) -> tuple[TrainState, int]:
    """Trains from ``step`` to the epoch's end, or earlier to ``max_steps`` or a signal."""
    run, config, host = self.run, self.config, self.host
    epoch, in_epoch = divmod(step, run.steps_per_epoch)
    stop = self._epoch_stop(epoch)
    self._bar.set_description(run.epoch_label(step))
    self._epoch_start = time.time()
    self.evaluation_due = False
    while in_epoch < stop:
      k = min(config.steps_per_call, stop - in_epoch)
      state, out = self._train_call(state, step, epoch, in_epoch, k)
      before, step = step, step + k
      in_epoch += k
      if crossed_multiple(config.log_every_steps, before, step):
        # The call's last gradient norm, as the epoch records sample it: with one step
        # per call, the records pin each update's gradient (tests/test_golden_losses.py).
        self.write(step, {"epoch": step / run.steps_per_epoch,
                          "train/loss": float(np.mean(out["loss"])),
                          "train/grad_norm": float(out["grad_norm"][-1])})
      self.evaluation_due = run.schedule.due(before, step)
      if in_epoch < stop and self.evaluation_due:
        with self._off_the_epoch_clock():
          self._evaluate_mid_epoch(state, step)
      if crossed_multiple(self.periodic_every, before, step):
        with self._off_the_epoch_clock():
          self._periodic_evaluation(state, step)
      self._bar.update(
          k, loss=f"{float(np.mean(out['loss'])):.4f}",
          ex_per_s=f"{host['timed_examples'] / max(host['timed_seconds'], 1e-9):.0f}")
      if signals.received:
        break
      if self.checkpoint_timer.due() and in_epoch < stop:
        self._save(step, state)
        self.checkpoint_timer.saved()
    host["epoch_seconds"] += time.time() - self._epoch_start
    if signals.received and in_epoch < stop:
      self._save(step, state)
      self.checkpointer.wait()
      raise Interrupted(
          f"Stopped by {signals.received} at step {step} (epoch {epoch + 1}/"
          f"{run.num_epochs}) and saved a checkpoint there. Rerun the same command to "
          f"resume from step {step}.")
    return state, step

  def _epoch_stop(self, epoch: int) -> int:
    """Training in an epoch stops at its end, or earlier at max_steps."""
    spe = self.run.steps_per_epoch
    return min(spe, self.run.total_steps - epoch * spe)

  def _train_call(self, state: TrainState, step: int, epoch: int, in_epoch: int,
                  k: int) -> tuple[TrainState, Any]:
    """Runs ``k`` steps in one jitted call and adds them to the records."""
    run, config, host = self.run, self.config, self.host
    input_start = time.time()
    if self._order[0] != epoch:
      self._order = (epoch, batching.training_order(run.train_arrays, config.batch_size,
                                                    config.seed, epoch, run.buckets))
    chunk = batching.train_chunk(run.train_arrays, config.batch_size, config.seed, epoch,
                                 in_epoch, k, run.buckets, self._order[1])
    batches = parallel.shard_batch(chunk, run.mesh, 1)
    input_seconds = time.time() - input_start
    call = self._executable(state, batches, chunk, k)
    call_start = time.time()
    state, out = call(state, batches, self.train_rng)
    out = jax.device_get(out)
    call_seconds = time.time() - call_start
    try:
      records.check_finite(out, step, epoch, self.checkpointer.latest_step(),
                           self.divergence_suspect)
    except DivergenceError as e:
      # On the record, so that a comparison counts the run as a seed that stopped.
      self.writer.write(e.step, {defaults.DIVERGED_AT: e.step})
      raise
    records.add_call(host, out, k * config.batch_size)
    records.add_time(host, k * config.batch_size, call_seconds, input_seconds)
    return state, out

  def _executable(self, state: TrainState, batches, chunk, k: int):
    """The compiled train call for this chunk's shapes, compiling it on first sight:
    timed apart, so that the call itself, even the first, counts as training time."""
    shape = tuple(v.shape for v in chunk.values())
    if shape not in self._executables:
      start = time.time()
      self._executables[shape] = self.train_chunk.lower(state, batches,
                                                        self.train_rng).compile()
      seconds = time.time() - start
      self.host["compile_seconds"] += seconds
      logging.info(
          "Compiled the train step for %d steps%s in %.1f s (%d shapes so far).", k,
          "" if self.run.buckets is None else
          f" of {self.run.buckets.feature} length {chunk[self.run.buckets.feature].shape[2]}",
          seconds, len(self._executables))
    return self._executables[shape]

  # --- evaluate ---

  def _evaluate_mid_epoch(self, state: TrainState, step: int) -> None:
    spe = self.run.steps_per_epoch
    evaluated = self.population_so_far(state)
    scores = self.evaluate_splits(evaluated, self.config.eval_every_splits)
    if self.selected:
      self.selected.offer(step, scores, evaluated)
    self.write(step, {"epoch": step / spe,
                      **records.window_metrics(self.host["eval_window"]), **scores})
    self.host["eval_window"] = records.gradient_window()
    logging.info("step %d (epoch %.2f): %s", step, step / spe,
                 records.format_metrics(scores))

  def _periodic_evaluation(self, state: TrainState, step: int) -> None:
    scores = self._hook("periodic evaluation", step,
                        lambda: self.task.periodic_evaluation(
                            self.run.assembled, self.population_so_far(state),
                            self.run.workdir, step))
    if scores:  # A task may leave a step to its end_of_epoch.
      self.write(step, {"epoch": step / self.run.steps_per_epoch, **scores})
      logging.info("step %d: %s", step, records.format_metrics(scores))

  # --- record ---

  def end_epoch(self, state: TrainState, step: int,
                signals) -> tuple[TrainState, dict[str, float]]:
    """The epoch record at ``step`` (an epoch's end, or max_steps inside one), and the
    checkpoint saved with it."""
    run, config, host = self.run, self.config, self.host
    epoch = (step - 1) // run.steps_per_epoch
    epoch_done = step % run.steps_per_epoch == 0
    if epoch_done:
      state = self.finish_epoch_statistics(state)
      evaluated = state
    else:
      # max_steps ends the run inside this epoch: evaluate on the population statistics
      # so far and keep the live state (and the epoch's sums) for a later, longer run
      # to continue from.
      evaluated = self.population_so_far(state)
    metrics = records.epoch_metrics(host, epoch + 1 if epoch_done
                                    else step / run.steps_per_epoch)
    splits = tuple(config.eval_splits)
    if step == run.total_steps:
      splits += tuple(s for s in config.final_eval_splits if s not in splits)
    metrics.update(self.evaluate_splits(evaluated, splits))
    if self.selected:
      self.selected.offer(step, metrics, evaluated)
      if step == run.total_steps:
        selection_split = self.selected.metric.partition("/")[0]
        metrics.update(self.selected.evaluate(
            evaluated, self.evaluate_splits, [s for s in splits if s != selection_split]))
    # A run cut by max_steps inside an epoch has not reached the epoch's end.
    extra = self._hook("end of epoch" if epoch_done else "end of the run (max_steps)", step,
                       lambda: self.task.end_of_epoch(run.assembled, evaluated,
                                                      run.workdir, step, self.writer))
    if extra:
      metrics.update(extra)
    metrics.update(self._times())
    self.writer.write(step, metrics)
    logging.info("epoch %.4g: %s", metrics["epoch"], records.format_metrics(metrics))
    if epoch_done:
      host.update(records.epoch_sums())
    elif self.evaluation_due:
      # This record stands in for the mid-epoch evaluation due here: a longer run
      # continuing from it must count its gradient window as an uninterrupted one.
      host["eval_window"] = records.gradient_window()
    self._save(step, state)
    self.checkpoint_timer.saved()
    if signals.received and step < run.total_steps:
      self.checkpointer.wait()
      raise Interrupted(
          f"Stopped by {signals.received} after epoch {epoch + 1}/{run.num_epochs} and "
          f"saved a checkpoint at step {step}. Rerun the same command to resume.")
    return state, metrics
