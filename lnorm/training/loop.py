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

``train_seeds(config, seeds, workdirs)`` trains several seeds of one config in one
compiled program: their states stacked on a leading seed axis (parameters, optimizer
state, BN's batch statistics), each seed's batches in its own data order and its own
step keys, under ``jax.vmap`` (``steps.train_chunk_over_seeds``). The loop's schedule
(calls, evaluations, checkpoints) is the seeds' common one; everything a run records
is each seed's own: its workdir, ``config.json``, ``metrics.jsonl``, checkpoints (of
its own state, as a run of that seed alone saves them: either resumes the other),
evaluations, ``select_on`` model and task hooks. A seed whose loss or gradient norm is
not finite stops alone, its record ending as a run's alone does, and is dropped from
the stack at that call; the others go on. Every clock a seed records is its share of
the process's: each second divided among the seeds it was spent on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import time
from typing import Any, Iterator, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from lnorm import config as config_lib
from lnorm.data import batching
from lnorm.errors import ConfigError, DivergenceError, Interrupted
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
from lnorm.training import run_files
from lnorm.training import workdir as workdir_lib
from lnorm.training.checkpoint import Checkpointer
from lnorm.training.checkpoint_policy import CheckpointDecisions, CheckpointTimer, resume
from lnorm.training.eval_schedule import EvalSchedule, crossed_multiple, misalignment
from lnorm.training.metrics_writer import MetricWriter
from lnorm.training.selected_model import SelectedModel
from lnorm.training.stop_signals import StopSignals
from lnorm.training.steps import (SplitEvaluator, eval_step_over_seeds, make_eval_step,
                                  make_train_chunk, make_train_step,
                                  train_chunk_over_seeds)
from lnorm.training.task import Task
from lnorm.training.train_state import (TrainState, as_stack, keep_seeds, seed_keys,
                                        seed_of, stack_seeds)


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
  return _train([config], [workdir], task, signals, together=False)[0]


def train_seeds(config: ml_collections.ConfigDict, seeds: Sequence[int],
                workdirs: Sequence[str], task: Task | None = None,
                signals: StopSignals | None = None) -> list[dict[str, float]]:
  """Trains ``config`` at each of ``seeds`` into its workdir (``workdirs``, in the same
  order) in one compiled program, each seed's run as ``train_and_evaluate`` would
  train it alone (see the module's docstring); resumes each from its checkpoint.

  ``task`` and ``signals`` as for ``train_and_evaluate``. Returns each seed's final
  epoch's logged metrics. A seed that stopped on a value that was not finite ends
  its own run only; once the others are done, a ``DivergenceError`` names every such
  seed.
  """
  if signals is None:
    with StopSignals() as signals:
      return train_seeds(config, seeds, workdirs, task, signals)
  check_seeds_together(config)
  configs = seed_configs(config, seeds)
  if len(workdirs) != len(configs):
    raise ConfigError(f"{len(seeds)} seeds and {len(workdirs)} workdirs: every seed "
                      "trains into a workdir of its own.")
  if len(set(map(os.path.abspath, workdirs))) < len(workdirs):
    raise ConfigError("Two seeds were given one workdir: every seed trains into a "
                      "workdir of its own (put {seed} in the workdir's path).")
  outcomes = _train(configs, workdirs, task, signals, together=True)
  stopped = [(c.seed, o) for c, o in zip(configs, outcomes)
             if isinstance(o, DivergenceError)]
  if stopped:
    finished = len(configs) - len(stopped)
    raise DivergenceError(
        f"{len(stopped)} of {len(configs)} seeds stopped on a value that was not finite "
        f"(their records end with {defaults.DIVERGED_AT}), and {finished} trained to "
        "their end. " + " ".join(f"Seed {seed}: {e}" for seed, e in stopped),
        step=stopped[0][1].step)
  return outcomes


def check_seeds_together(config: ml_collections.ConfigDict) -> None:
  """Refuses, in one line, a config whose seeds cannot train together."""
  problem = defaults.seeds_together_problem(config)
  if problem:
    raise ConfigError(f"Seeds of this config cannot train together: {problem}. Train "
                      "them one at a time, or set --config.length_buckets.num=1.")


def seed_configs(config: ml_collections.ConfigDict,
                 seeds: Sequence[int]) -> list[ml_collections.ConfigDict]:
  """``config`` at each of ``seeds``: a run of one of them is a run of ``config`` with
  that ``seed``, its wandb name's ``{seed}`` (``run_files.SEED_FIELD``) that seed.
  Seeds are distinct non-negative integers."""
  seeds = [int(s) for s in seeds]
  if not seeds or len(set(seeds)) < len(seeds) or min(seeds) < 0:
    raise ConfigError(f"Seeds {', '.join(map(str, seeds)) or '(none)'}: give distinct "
                      "non-negative integers, at least one.")
  out = []
  for seed in seeds:
    seeded = config.copy_and_resolve_references()
    seeded.seed = seed
    name = seeded.wandb.get("name")
    if name:
      seeded.wandb.name = run_files.with_seed(name, seed)
    out.append(seeded)
  return out


def _train(configs: Sequence[ml_collections.ConfigDict], workdirs: Sequence[str],
           task: Task | None, signals: StopSignals,
           together: bool) -> list[dict[str, float] | DivergenceError]:
  """Each config's run in its workdir, stacked (``together``) or the one run alone;
  what each ended with: its last epoch record, or for a seed that stopped, why."""
  started = time.time()
  runs = set_up_seeds(configs, [os.path.abspath(w) for w in workdirs], task, signals)
  with contextlib.ExitStack() as cleanup:
    checkpointers = [Checkpointer(run.workdir) for run in runs]
    for checkpointer in checkpointers:
      cleanup.callback(checkpointer.close)
    _stop_before_training(signals, checkpointers)
    clock = _SharedClock(started)
    members = []
    for run, checkpointer in zip(runs, checkpointers):
      state = run.initial_state()
      state, host, start_step = resume(checkpointer, state, run.workdir)
      checkpointer.check_room(state)  # Before an epoch is trained that could not be saved.
      writer = _open_records(run, state, start_step,
                             [r.config.seed for r in runs] if together else None)
      cleanup.callback(writer.close)
      members.append(_Member(run, checkpointer, writer, host, state, start_step,
                             label=f"seed {run.config.seed}: " if together else ""))
    _stop_before_training(signals, checkpointers)
    for group in _by_start_step(members):
      _Training(group, clock, together).train(signals)
    for m in members:
      if m.diverged:
        continue
      if not m.last_metrics:  # Already complete: a rerun returns what the run ended with.
        m.last_metrics = records.last_epoch_record(m.run.workdir)
      m.writer.summary({f"final/{k}": v for k, v in m.last_metrics.items()})
    return [m.diverged or m.last_metrics for m in members]


def _by_start_step(members: Sequence["_Member"]) -> list[list["_Member"]]:
  """The seeds in groups that start at one step, the earliest first: seeds saved
  together resume together, and one that a run alone took further trains apart."""
  groups: dict[int, list[_Member]] = {}
  for m in members:
    groups.setdefault(m.start_step, []).append(m)
  if len(groups) > 1:
    logging.warning(
        "The seeds resume from different steps (%s): each group of seeds at one step "
        "trains in turn.", "; ".join(
            f"step {step}: seed{'s' if len(g) > 1 else ''} "
            f"{', '.join(str(m.run.config.seed) for m in g)}"
            for step, g in sorted(groups.items())))
  return [groups[step] for step in sorted(groups)]


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
  return set_up_seeds([config], [workdir], task, signals)[0]


def set_up_seeds(configs: Sequence[ml_collections.ConfigDict], workdirs: Sequence[str],
                 task: Task | None = None,
                 signals: StopSignals | None = None) -> list[Run]:
  """``set_up`` of configs that differ in their seed only (``seed_configs``), each
  into its workdir: the data loaded and the model built once, for all of them."""
  config = configs[0]
  process.set_up(config)
  compilation_cache.enable()
  task = task or assembly.check(config)
  for warning in task.run_warnings():
    logging.warning(warning)
  for seeded, workdir in zip(configs, workdirs):
    os.makedirs(workdir, exist_ok=True)
    workdir_lib.check_workdir(workdir, seeded)
  with (signals.interruptible("while the data loaded, before training began. Rerun the "
                              "same command to continue.")
        if signals else contextlib.nullcontext()):
    assembled = assembly.assemble(config, task=task)
  data_record = workdir_lib.data_record(assembled.dataset)
  for workdir in workdirs:
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
  # Each seed's run is its config's, with its task (a hook may read the seed there).
  return [Run(assembled if seeded is config and task.config is config
              else assembled.for_seed(seeded), workdir, data_record, schedule)
          for seeded, workdir in zip(configs, workdirs)]


def _open_records(run: Run, state: TrainState, start_step: int,
                  together: Sequence[int] | None = None) -> MetricWriter:
  """Records the run in its workdir (config.json) and opens its metrics; ``together``:
  the seeds it trains with in one program, itself included, if any."""
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
      "trivial": run.task.trivial_baseline(run.dataset),
      # Its clocks are its share of the process's (no part of its identity either).
      **({} if together is None else {"seeds_together": list(together)})},
      resumed=start_step > 0)
  logging.info("Data: %s", json.dumps(run.data_record))
  logging.info("Model: %d parameters; %d steps per epoch; %d devices.", num_params,
               run.steps_per_epoch, run.mesh.size)
  writer = MetricWriter(run.workdir, config_lib.to_flat_dict(config), config.wandb,
                        resume_step=start_step, several=together is not None)
  writer.summary({"num_params": num_params, "data/source": run.dataset.source,
                  "data/num_train": run.dataset.num_examples(run.task.train_split())})
  return writer


def _stop_before_training(signals: StopSignals,
                          checkpointers: Sequence[Checkpointer]) -> None:
  """Stops between two phases of the set-up when a signal came during one: the
  model's initialization (its compilation) and a restore cannot be cut short."""
  latest = [c.latest_step() for c in checkpointers]
  if all(step is None for step in latest):
    what = "start the run." if len(latest) == 1 else "start the runs."
  elif len(latest) == 1:
    what = f"resume from the checkpoint at step {latest[0]}."
  else:
    what = "resume each seed from its checkpoint."
  signals.check("before training began, with nothing new to save. Rerun the same "
                "command to " + what)


# --- train, evaluate, record ----------------------------------------------------------


class _SharedClock:
  """The process's wall time, each second split evenly among the seeds it is spent
  on (``active``): what each seed's ``time/wall_seconds`` adds. Time before any seed
  is active (the set-up) goes to the first ones."""

  def __init__(self, start: float):
    self._last = start
    self.active: list[_Member] = []

  def tick(self) -> None:
    if not self.active:
      return
    now = time.time()
    share = (now - self._last) / len(self.active)
    for member in self.active:
      member.wall_seconds += share
    self._last = now

  def spend_on(self, members: Sequence["_Member"]) -> None:
    self.tick()
    self.active = list(members)


class _Member:
  """One seed's run in its workdir, and what it keeps apart from the seeds it trains
  with: its checkpoints, its records (``host``, the sums saved with each checkpoint),
  its step keys, its data order and the model its ``select_on`` keeps."""

  def __init__(self, run: Run, checkpointer: Checkpointer, writer: MetricWriter,
               host: dict[str, Any], state: TrainState, start_step: int, label: str):
    self.run, self.checkpointer, self.writer, self.host = run, checkpointer, writer, host
    self.state, self.start_step, self.label = state, start_step, label
    config = run.config
    _, self.train_rng = seed_keys(config.seed)
    # The run's wall time: what earlier processes spent up to the checkpoint resumed
    # from (a stretch past it that a kill lost is spent again, and counted again).
    self.wall_seconds = host.get("wall_seconds", 0.0)
    # The model select_on picks, for test at the evaluation validation selects.
    self.selected = (SelectedModel(config.select_on, run.workdir)
                     if config.get("select_on") else None)
    self.last_metrics: dict[str, float] = {}
    self.diverged: DivergenceError | None = None
    self._order: tuple[int | None, Any] = (None, None)

  def train_chunk(self, epoch: int, in_epoch: int, k: int,
                  buckets: batching.LengthBuckets | None) -> dict[str, np.ndarray]:
    """Its ``k`` batches from step ``in_epoch`` of ``epoch``, in its own data order;
    trimmed to their length bucket when ``buckets`` is given."""
    run, config = self.run, self.run.config
    if self._order[0] != epoch:
      self._order = (epoch, batching.training_order(run.train_arrays, config.batch_size,
                                                    config.seed, epoch, run.buckets))
    return batching.train_chunk(run.train_arrays, config.batch_size, config.seed, epoch,
                                in_epoch, k, buckets, self._order[1])


class _Training:
  """The jitted functions, evaluators and records of one run, or of seeds trained
  together (``together``: their states stacked), and its two phases: ``train_epoch``
  (to the epoch's end or ``max_steps``, with the mid-epoch evaluations and timed
  checkpoints) and ``end_epoch`` (the epoch records and their checkpoints)."""

  def __init__(self, members: Sequence[_Member], clock: _SharedClock, together: bool):
    run = self.run = members[0].run  # The schedule, data and model the seeds share.
    config = self.config = run.config
    self.members, self.together = list(members), together
    self.clock = clock
    clock.spend_on(self.members)
    # An evaluation beyond the data splits, for tasks that define one (skip-thoughts:
    # its encoder on SentEval), every periodic_eval_every_steps updates.
    self.periodic_every = config.get("periodic_eval_every_steps", 0)
    # The same on every process of a job: a save or a stop that one process decided
    # alone would leave the others waiting for it (checkpoint_policy). The seeds save
    # together, so one decision serves them all; the preemption sync point it asks is
    # the process's, whichever seed's checkpointer asks it.
    self.decisions = CheckpointDecisions(CheckpointTimer(
        config.checkpoint_every_secs,
        all(m.checkpointer.latest_step() is not None for m in members)),
        members[0].checkpointer)
    self.every_secs = config.get("progress_every_secs", 30.0)

    rep = parallel.replicated(run.mesh)
    # The members' states, held once: stacked when they train together (``axes``:
    # which arrays have the seed axis).
    self.state, self.axes = self._stacked_states()
    train_chunk = make_train_chunk(make_train_step(run.task, run.model))
    eval_step = make_eval_step(run.task, run.model)
    with_population = lambda s: s.replace(
        batch_stats=finalize_epoch_statistics(s.batch_stats))
    if together:
      train_chunk = train_chunk_over_seeds(train_chunk, self.axes)
      eval_step = eval_step_over_seeds(eval_step, self.axes)
      with_population = jax.vmap(with_population, in_axes=(self.axes,),
                                 out_axes=self.axes)
    self.train_chunk = jax.jit(train_chunk, donate_argnums=0, out_shardings=(rep, rep))
    self.finish_epoch_statistics = jax.jit(with_population, donate_argnums=0,
                                           out_shardings=rep)
    # Mid-epoch evaluations see the population statistics so far, on a copy: training
    # goes on accumulating into the live state.
    self.population_so_far = jax.jit(with_population, out_shardings=rep)
    # A bar only for evaluations long enough to wonder about.
    self.evaluate_splits = SplitEvaluator(
        jax.jit(eval_step, out_shardings=rep), run.dataset,
        config.eval_batch_size, run.mesh, run.buckets,
        functools.partial(Progress, every_secs=self.every_secs,
                          enabled=config.progress_bar, delay_secs=5.0))

    # Who to blame when the loss is not finite from the start (records.check_finite).
    self.divergence_suspect = records.normalizer_suspect(config.get("norm"),
                                                         config.get("norm_options"))
    self.train_rngs = self._train_rngs()
    self._executables: dict[tuple, Any] = {}  # Chunk shapes -> compiled train calls.
    self._bar: Progress | None = None
    self._epoch_start = 0.0
    self.evaluation_due = False  # Whether the last call reached an evaluation step.

  def train(self, signals: StopSignals) -> None:
    """Trains the members from their start step to the run's end (or a signal)."""
    step, state = self.members[0].start_step, self.state
    self.state = None  # Donated to the first train call.
    with self.progress(step):
      while step < self.run.total_steps and self.members:
        state, step = self.train_epoch(state, step, signals)
        if self.members:
          state = self.end_epoch(state, step, signals)

  def _stacked_states(self) -> tuple[TrainState, Any]:
    states = [m.state for m in self.members]
    for m in self.members:
      m.state = None  # Held once, in the stack.
    if not self.together:
      return states[0], None
    stacked, axes = stack_seeds(states)
    return jax.device_put(stacked, parallel.replicated(self.run.mesh)), axes

  # --- the seeds ---

  @property
  def _share(self) -> float:
    """Each member's share of the time the seeds spend together."""
    return 1.0 / max(len(self.members), 1)

  def _train_rngs(self) -> jax.Array:
    """The members' step keys, stacked when they train together."""
    if not self.together:
      return self.members[0].train_rng
    return jnp.stack([m.train_rng for m in self.members])

  def _state_of(self, state: TrainState, index: int) -> TrainState:
    """The state of the member at ``index``, as its run alone would hold it."""
    return seed_of(state, self.axes, index) if self.together else state

  def _each(self, values: Any) -> list[Any]:
    """``values`` (a pytree of host arrays, or floats) as each member's: the member's
    row of every array with a seed axis."""
    if not self.together:
      return [values]
    return [jax.tree.map(lambda x, i=i: x[i] if np.ndim(x) else x, values)
            for i in range(len(self.members))]

  def progress(self, start_step: int) -> Progress:
    """One count for the whole run, so that its end and the time left follow max_steps."""
    self._bar = Progress(self.run.epoch_label(start_step), total=self.run.total_steps,
                         initial=start_step, unit="step", every_secs=self.every_secs,
                         enabled=self.config.progress_bar)
    return self._bar

  def write(self, member: _Member, step: int, metrics: dict[str, Any]) -> None:
    member.writer.write(step, {**metrics, **self._times(member)})

  def _times(self, member: _Member) -> dict[str, float]:
    """The clocks every point carries; the wall clock also into the checkpoint's host."""
    self.clock.tick()
    member.host["wall_seconds"] = member.wall_seconds
    return {"time/train_seconds": member.host["train_seconds"],
            "time/wall_seconds": member.host["wall_seconds"]}

  def _save(self, step: int, state) -> None:
    for i, m in enumerate(self.members):
      self._times(m)
      m.checkpointer.save(step, self._state_of(state, i), m.host)

  def _add_epoch_seconds(self) -> None:
    share = (time.time() - self._epoch_start) * self._share
    for m in self.members:
      m.host["epoch_seconds"] += share

  @contextlib.contextmanager
  def _off_the_epoch_clock(self) -> Iterator[None]:
    """Evaluation time is kept out of the epoch's training time."""
    self._add_epoch_seconds()
    yield
    self._epoch_start = time.time()

  def _hook(self, member: _Member, name: str, step: int, run) -> Any:
    """A task's own evaluation, which may take minutes (SentEval, retrieval)."""
    with stage(f"{self.config.experiment}: {member.label}{name} at step {step}",
               every_secs=self.every_secs):
      return run()

  # --- train ---

  def train_epoch(self, state: TrainState, step: int, signals) -> tuple[TrainState, int]:
    """Trains from ``step`` to the epoch's end, or earlier to ``max_steps`` or a signal."""
    run, config = self.run, self.config
    epoch, in_epoch = divmod(step, run.steps_per_epoch)
    stop = self._epoch_stop(epoch)
    self._bar.set_description(run.epoch_label(step))
    self._epoch_start = time.time()
    self.evaluation_due = False
    while in_epoch < stop and self.members:
      k = min(config.steps_per_call, stop - in_epoch)
      state, outs = self._train_call(state, step, epoch, in_epoch, k)
      before, step = step, step + k
      in_epoch += k
      if not self.members:  # Every seed stopped on a value that was not finite.
        break
      if crossed_multiple(config.log_every_steps, before, step):
        # The call's last gradient norm, as the epoch records sample it: with one step
        # per call, the records pin each update's gradient (tests/test_golden_losses.py).
        for m, out in zip(self.members, outs):
          self.write(m, step, {"epoch": step / run.steps_per_epoch,
                               "train/loss": float(np.mean(out["loss"])),
                               "train/grad_norm": float(out["grad_norm"][-1])})
      self.evaluation_due = run.schedule.due(before, step)
      if in_epoch < stop and self.evaluation_due:
        with self._off_the_epoch_clock():
          self._evaluate_mid_epoch(state, step)
      if crossed_multiple(self.periodic_every, before, step):
        with self._off_the_epoch_clock():
          self._periodic_evaluation(state, step)
      host = self.members[0].host
      self._bar.update(
          k, loss=f"{float(np.mean([np.mean(out['loss']) for out in outs])):.4f}",
          ex_per_s=f"{host['timed_examples'] / max(host['timed_seconds'], 1e-9):.0f}")
      decision = self.decisions.after_call(step, signals)
      if decision.stop:
        break
      if decision.save and in_epoch < stop:
        self._save(step, state)
        self.decisions.saved()
    self._add_epoch_seconds()
    if self.decisions.stop and in_epoch < stop and self.members:
      self._save(step, state)
      for m in self.members:
        m.checkpointer.wait()
      where = "there" if len(self.members) == 1 else "there in every seed's workdir"
      raise Interrupted(
          f"Stopped by {self.decisions.stop} at step {step} (epoch {epoch + 1}/"
          f"{run.num_epochs}) and saved a checkpoint {where}. Rerun the same command to "
          f"resume from step {step}.")
    return state, step

  def _epoch_stop(self, epoch: int) -> int:
    """Training in an epoch stops at its end, or earlier at max_steps."""
    spe = self.run.steps_per_epoch
    return min(spe, self.run.total_steps - epoch * spe)

  def _train_call(self, state: TrainState, step: int, epoch: int, in_epoch: int,
                  k: int) -> tuple[TrainState, list[Any]]:
    """Runs ``k`` steps in one jitted call and adds them to each member's records;
    returns the members' outputs. A seed whose values are not finite is dropped."""
    run, config = self.run, self.config
    input_start = time.time()
    if self.together:
      # Each seed's batches in its own order; with length buckets, all trimmed to the
      # widest seed's bucket, so that they stack.
      chunk = {key: np.stack(values) for key, values in _transposed(
          [m.train_chunk(epoch, in_epoch, k, None) for m in self.members]).items()}
      if run.buckets is not None:
        chunk = run.buckets.trim(chunk, time_axis=3)
    else:
      chunk = self.members[0].train_chunk(epoch, in_epoch, k, run.buckets)
    batches = parallel.shard_batch(chunk, run.mesh, 2 if self.together else 1)
    input_seconds = time.time() - input_start
    call = self._executable(state, batches, chunk, k)
    call_start = time.time()
    state, out = call(state, batches, self.train_rngs)
    out = jax.device_get(out)
    call_seconds = time.time() - call_start
    share, outs, stopped = self._share, self._each(out), []
    for i, (m, member_out) in enumerate(zip(self.members, outs)):
      try:
        records.check_finite(member_out, step, epoch, m.checkpointer.latest_step(),
                             self.divergence_suspect)
      except DivergenceError as e:
        # On the record, so that a comparison counts the run as a seed that stopped.
        m.writer.write(e.step, {defaults.DIVERGED_AT: e.step})
        if not self.together:
          raise
        logging.error("%s%s", m.label, e)
        m.diverged = e
        stopped.append(i)
        continue
      records.add_call(m.host, member_out, k * config.batch_size)
      records.add_time(m.host, k * config.batch_size, call_seconds * share,
                       input_seconds * share)
    if stopped:
      keep = [i for i in range(len(self.members)) if i not in stopped]
      self.clock.tick()  # The seeds that stopped had their share up to here.
      self.members = [self.members[i] for i in keep]
      outs = [outs[i] for i in keep]
      state = keep_seeds(state, self.axes, keep) if keep else state
      self.train_rngs = self._train_rngs()
      self.clock.spend_on(self.members)
    return state, outs

  def _executable(self, state: TrainState, batches, chunk, k: int):
    """The compiled train call for this chunk's shapes, compiling it on first sight:
    timed apart, so that the call itself, even the first, counts as training time."""
    shape = tuple(v.shape for v in chunk.values())
    if shape not in self._executables:
      start = time.time()
      self._executables[shape] = self.train_chunk.lower(state, batches,
                                                        self.train_rngs).compile()
      seconds = time.time() - start
      for m in self.members:
        m.host["compile_seconds"] += seconds * self._share
      buckets = self.run.buckets
      time_axis = 3 if self.together else 2  # [S,] K, B, T, ...
      logging.info(
          "Compiled the train step for %d steps%s%s in %.1f s (%d shapes so far).", k,
          "" if buckets is None else
          f" of {buckets.feature} length {chunk[buckets.feature].shape[time_axis]}",
          f", {len(self.members)} seeds together" if self.together else "",
          seconds, len(self._executables))
    return self._executables[shape]

  # --- evaluate ---

  def _evaluate_mid_epoch(self, state: TrainState, step: int) -> None:
    spe = self.run.steps_per_epoch
    evaluated = self.population_so_far(state)
    all_scores = self._each(self.evaluate_splits(evaluated, self.config.eval_every_splits))
    for i, (m, scores) in enumerate(zip(self.members, all_scores)):
      scores = _floats(scores)
      if m.selected:
        m.selected.offer(step, scores, self._state_of(evaluated, i))
      self.write(m, step, {"epoch": step / spe,
                           **records.window_metrics(m.host["eval_window"]), **scores})
      m.host["eval_window"] = records.gradient_window()
      logging.info("%sstep %d (epoch %.2f): %s", m.label, step, step / spe,
                   records.format_metrics(scores))

  def _periodic_evaluation(self, state: TrainState, step: int) -> None:
    evaluated = self.population_so_far(state)
    for i, m in enumerate(self.members):
      scores = self._hook(m, "periodic evaluation", step,
                          lambda m=m, i=i: m.run.task.periodic_evaluation(
                              m.run.assembled, self._state_of(evaluated, i),
                              m.run.workdir, step))
      if scores:  # A task may leave a step to its end_of_epoch.
        self.write(m, step, {"epoch": step / self.run.steps_per_epoch, **scores})
        logging.info("%sstep %d: %s", m.label, step, records.format_metrics(scores))

  def _evaluate_one(self, state: TrainState, splits: Sequence[str]) -> dict[str, float]:
    """``splits`` evaluated on one member's own state (its ``select_on`` model)."""
    if not self.together:
      return self.evaluate_splits(state, splits)
    scores = self.evaluate_splits(as_stack(state, self.axes), splits)
    return {k: float(v[0]) for k, v in scores.items()}

  # --- record ---

  def end_epoch(self, state: TrainState, step: int, signals) -> TrainState:
    """Each member's epoch record at ``step`` (an epoch's end, or max_steps inside
    one), and the checkpoints saved with them."""
    run, config = self.run, self.config
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
    splits = tuple(config.eval_splits)
    if step == run.total_steps:
      splits += tuple(s for s in config.final_eval_splits if s not in splits)
    all_scores = self._each(self.evaluate_splits(evaluated, splits))
    for i, (m, scores) in enumerate(zip(self.members, all_scores)):
      host = m.host
      metrics = records.epoch_metrics(host, epoch + 1 if epoch_done
                                      else step / run.steps_per_epoch)
      metrics.update(_floats(scores))
      member_state = self._state_of(evaluated, i)
      if m.selected:
        m.selected.offer(step, metrics, member_state)
        if step == run.total_steps:
          selection_split = m.selected.metric.partition("/")[0]
          metrics.update(m.selected.evaluate(
              member_state, self._evaluate_one, [s for s in splits if s != selection_split]))
      # A run cut by max_steps inside an epoch has not reached the epoch's end.
      extra = self._hook(m, "end of epoch" if epoch_done else "end of the run (max_steps)",
                         step, lambda m=m, s=member_state: m.run.task.end_of_epoch(
                             m.run.assembled, s, m.run.workdir, step, m.writer))
      if extra:
        metrics.update(extra)
      metrics.update(self._times(m))
      m.writer.write(step, metrics)
      logging.info("%sepoch %.4g: %s", m.label, metrics["epoch"],
                   records.format_metrics(metrics))
      if epoch_done:
        host.update(records.epoch_sums())
      elif self.evaluation_due:
        # This record stands in for the mid-epoch evaluation due here: a longer run
        # continuing from it must count its gradient window as an uninterrupted one.
        host["eval_window"] = records.gradient_window()
      m.last_metrics = metrics
    self._save(step, state)
    self.decisions.saved()
    if self.decisions.at_epoch_end(signals).stop and step < run.total_steps:
      for m in self.members:
        m.checkpointer.wait()
      raise Interrupted(
          f"Stopped by {self.decisions.stop} after epoch {epoch + 1}/{run.num_epochs} and "
          f"saved a checkpoint at step {step}. Rerun the same command to resume.")
    return state


def _transposed(chunks: Sequence[dict[str, np.ndarray]]) -> dict[str, list[np.ndarray]]:
  """The members' chunks as one list of arrays per feature, in the members' order."""
  return {key: [c[key] for c in chunks] for key in chunks[0]}


def _floats(scores: dict[str, Any]) -> dict[str, float]:
  """A member's row of the evaluations, as the floats a run alone logs."""
  return {k: float(v) for k, v in scores.items()}
