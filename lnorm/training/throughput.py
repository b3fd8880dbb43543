r"""Time a config's jitted train step against this machine's matmul rate.

Each experiment counts its train step's matmul FLOPs beside its model
(``Task.forward_macs``); ``lnorm flops`` (``measure_config``) does the rest, the same
way for every experiment: take the training batches of each padded shape the loop
computes (one per length bucket), compile the harness's own train step (timed apart),
time steps after a warm-up, measure the float32 matmul rate with one large square
matmul, and report the share of that rate a step achieves (1.0: as fast as a big
matmul). Wall and process-CPU times are both given: on a shared machine the CPU time
is the fairer clock.

It also holds what every benchmark script's ``--json PATH`` record shares: the machine
and library versions the figures were measured with, and the writing of the file.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import pathlib
import platform
import statistics
import sys
import time
from typing import Any, Callable, Iterator, Mapping, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from lnorm import config as config_lib
from lnorm.data import batching
from lnorm.rnn import cells
from lnorm.training import assembly
from lnorm.training import environment
from lnorm.training import host_memory
from lnorm.training.steps import make_train_step
from lnorm.training.task import Task
from lnorm.training.train_state import TrainStateInitializer


def time_calls(fn: Callable[[], Any], n: int) -> tuple[float, float]:
  """(wall seconds, process CPU seconds) per call over ``n`` calls."""
  wall, cpu = time.perf_counter(), time.process_time()
  for _ in range(n):
    jax.block_until_ready(fn())
  return (time.perf_counter() - wall) / n, (time.process_time() - cpu) / n


def matmul_rate(size: int = 2048, reps: int = 10) -> tuple[float, float]:
  """float32 FLOP/s of a jitted ``size x size`` matmul: (per wall second, per CPU second)."""
  a = jax.random.normal(jax.random.key(0), (size, size), jnp.float32)
  b = jax.random.normal(jax.random.key(1), (size, size), jnp.float32)
  matmul = jax.jit(lambda a, b: a @ b)
  jax.block_until_ready(matmul(a, b))
  wall, cpu = time_calls(lambda: matmul(a, b), reps)
  flops = 2 * size ** 3
  return flops / wall, flops / cpu


def parse_args(description: str, default_config: str,
               add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
               argv: Sequence[str] | None = None,
               ) -> tuple[argparse.Namespace, ml_collections.ConfigDict]:
  """The flags every benchmark script shares, plus ``--config.x=y`` overrides."""
  host_memory.keep_freed_memory()  # As `lnorm train` runs.
  parser = argparse.ArgumentParser(description=description)
  parser.add_argument("--config", default=default_config)
  parser.add_argument("--steps", type=int, default=5, help="Timed training steps.")
  parser.add_argument("--matmul_size", type=int, default=2048)
  parser.add_argument("--matmul_reps", type=int, default=10)
  if add_arguments:
    add_arguments(parser)
  argv, overrides = config_lib.split_config_overrides(
      sys.argv[1:] if argv is None else list(argv))
  args = parser.parse_args(argv)
  config = config_lib.load_config(args.config)
  config_lib.apply_overrides(config, overrides)
  return args, config


def measure_train_step(task: Task, model, config: ml_collections.ConfigDict, batch,
                       *, flops: int, steps: int = 5, matmul_size: int = 2048,
                       matmul_reps: int = 10,
                       rate: tuple[float, float] | None = None) -> dict[str, Any]:
  """Compile and time ``make_train_step(task, model)`` on ``batch``; ``flops`` is the
  step's analytic matmul count (``Task.train_step_flops``). ``rate``: the matmul rate
  (wall, CPU) if already measured, else measured here."""
  key = jax.random.key(config.seed)
  state = TrainStateInitializer(config, task, model).from_scratch(batch)

  wall, cpu = time.perf_counter(), time.process_time()
  compiled = jax.jit(make_train_step(task, model)).lower(state, batch, key).compile()
  compile_wall, compile_cpu = time.perf_counter() - wall, time.process_time() - cpu
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, list) else cost
  xla_flops = float(cost.get("flops", float("nan"))) if cost else float("nan")

  holder = {"state": compiled(state, batch, key)[0]}  # The warm-up step.

  def one_step():
    holder["state"], out = compiled(holder["state"], batch, key)
    return out["loss"]

  step_wall, step_cpu = time_calls(one_step, steps)
  rate_wall, rate_cpu = rate or matmul_rate(matmul_size, matmul_reps)
  return {
      "norm": config.get("norm"), "batch_size": config.batch_size,
      "devices": str(jax.devices()),
      "parameters": sum(x.size for x in jax.tree.leaves(state.params)),
      "compile_seconds_wall": round(compile_wall, 2),
      "compile_seconds_cpu": round(compile_cpu, 2),
      "step_seconds_wall": step_wall, "step_seconds_cpu": step_cpu,
      "train_step_matmul_flops": flops,
      # XLA counts the body of a while loop (an nn.scan over time) once, not per step,
      # so for the recurrent models it is far below the analytic count.
      "xla_cost_analysis_flops": xla_flops,
      "matmul_flops_per_sec_wall": rate_wall, "matmul_flops_per_sec_cpu": rate_cpu,
      "ratio_wall": (flops / rate_wall) / step_wall,
      "ratio_cpu": (flops / rate_cpu) / step_cpu,
  }


def training_batches(config: ml_collections.ConfigDict, arrays: Mapping[str, np.ndarray],
                     buckets: batching.LengthBuckets | None) -> list[dict[str, np.ndarray]]:
  """A training batch of each padded shape the loop computes: the first batch, or with
  length buckets the first of each bucket in the first epoch's order, shortest first."""
  order = batching.training_order(arrays, config.batch_size, config.seed, 0, buckets)
  by_shape: dict[tuple, dict[str, np.ndarray]] = {}
  for step in range(batching.steps_per_epoch(len(order), config.batch_size)):
    chunk = batching.train_chunk(arrays, config.batch_size, config.seed, 0, step, 1,
                                 buckets, order)
    batch = {k: v[0] for k, v in chunk.items()}
    by_shape.setdefault(tuple(v.shape for v in batch.values()), batch)
    if buckets is None or len(by_shape) == len(buckets.edges):
      break
  return [by_shape[shape] for shape in sorted(by_shape)]


def measure_config(config: ml_collections.ConfigDict, *, steps: int = 5,
                   matmul_size: int = 2048, matmul_reps: int = 10) -> dict[str, Any]:
  """``lnorm flops``: for each padded batch shape of ``config``'s training (its data
  loaded as ``lnorm train`` loads it), the train step's matmul FLOPs, its measured time
  and its share of the matmul rate; and their means over the shapes (each length
  bucket takes about the same share of the steps)."""
  run = assembly.assemble(config)
  task, dataset, model = run.task, run.dataset, run.model
  rate = matmul_rate(matmul_size, matmul_reps)
  rows = []
  for batch in training_batches(config, run.train_arrays, run.buckets):
    flops = task.train_step_flops(dataset, batch)
    report = measure_train_step(task, model, config, jax.tree.map(jnp.asarray, batch),
                                flops=flops, steps=steps, rate=rate)
    rows.append({"shapes": {k: list(v.shape) for k, v in batch.items()}, **report,
                 "examples_per_sec_wall": config.batch_size / report["step_seconds_wall"]})
  mean = {k: float(np.mean([r[k] for r in rows]))
          for k in ("train_step_matmul_flops", "step_seconds_wall", "step_seconds_cpu",
                    "ratio_wall", "ratio_cpu", "examples_per_sec_wall")}
  return {"experiment": config.experiment, "norm": config.get("norm"),
          "batch_size": config.batch_size, "data": dataset.source, "rows": rows,
          "mean_over_shapes": mean}


@contextlib.contextmanager
def scanned_recurrences() -> Iterator[None]:
  """Recurrent layers scan their cells step by step instead of running the fused
  recurrences (``lnorm.rnn.fused``), for models built and compiled inside.

  flax wraps a Module's properties in its own descriptor (``wrapped`` holds the
  property): a test for a bare property found none, and this context changed
  nothing (tests/test_flops.py holds it now)."""

  def is_property(attribute) -> bool:
    return isinstance(attribute, property) or isinstance(getattr(attribute, "wrapped", None),
                                                         property)

  classes = [c for c in vars(cells).values()
             if isinstance(c, type) and is_property(c.__dict__.get("fusable"))]
  if not classes:
    raise RuntimeError("No recurrent cell class of lnorm.rnn.cells has a fusable property "
                       "to turn off: scanned_recurrences would change nothing.")
  saved = {c: c.__dict__["fusable"] for c in classes}
  for c in classes:
    c.fusable = property(lambda self: False)
  try:
    yield
  finally:
    for c, fusable in saved.items():
      c.fusable = fusable


def _step_runner(task: Task, model, config: ml_collections.ConfigDict, batch) -> Callable:
  """A compiled, warmed-up train step: each call of the result takes one step."""
  key = jax.random.key(config.seed)
  state = TrainStateInitializer(config, task, model).from_scratch(batch)
  compiled = jax.jit(make_train_step(task, model)).lower(state, batch, key).compile()
  holder = {"state": compiled(state, batch, key)[0]}

  def run():
    holder["state"], out = compiled(holder["state"], batch, key)
    jax.block_until_ready(out["loss"])
  run()
  return run


def time_rounds(steps_by_name: Mapping[str, Callable[[], Any]], *, rounds: int | None = None,
                stop: Callable[[dict[str, list[float]]], Any] | None = None,
                ) -> dict[str, dict[str, list[float]]]:
  """name -> {"wall": [...], "cpu": [...]}: every round's seconds of one call of each
  step, the calls interleaved one of each per round so that a shared machine's load
  falls on every contender alike, each round starting one name further on (so that
  no name always follows the same one). Runs ``rounds`` rounds, or until
  ``stop(cpu seconds by name)`` returns something true after a round. Each callable
  takes one step and waits for it (``_step_runner``)."""
  if (rounds is None) == (stop is None):
    raise ValueError("give either rounds or stop")
  names = list(steps_by_name)
  times = {name: {"wall": [], "cpu": []} for name in names}
  done = 0
  while True:
    for name in names[done % len(names):] + names[:done % len(names)]:
      start_wall, start_cpu = time.perf_counter(), time.process_time()
      steps_by_name[name]()
      times[name]["wall"].append(time.perf_counter() - start_wall)
      times[name]["cpu"].append(time.process_time() - start_cpu)
    done += 1
    if (done >= rounds) if stop is None else stop(
        {name: t["cpu"] for name, t in times.items()}):
      return times


def round_robin(steps_by_name: Mapping[str, Callable[[], Any]],
                rounds: int) -> dict[str, tuple[float, float]]:
  """name -> (median wall, median CPU seconds) of a call over ``rounds`` rounds of
  :func:`time_rounds`."""
  times = time_rounds(steps_by_name, rounds=rounds)
  return {name: (statistics.median(t["wall"]), statistics.median(t["cpu"]))
          for name, t in times.items()}


def compare_scan(config: ml_collections.ConfigDict, steps: int = 5) -> dict[str, Any]:
  """Median wall seconds of the train step with its recurrences fused and scanned,
  timed in alternation (one of each per round) so that a shared machine's load falls
  on both; on the config's first training batch."""
  run = assembly.assemble(config)  # Its model is the fused one.
  batch = jax.tree.map(jnp.asarray, training_batches(config, run.train_arrays, None)[0])
  fused = _step_runner(run.task, run.model, config, batch)
  with scanned_recurrences():
    scanned = _step_runner(run.task, run.task.build_model(run.dataset), config, batch)
  medians = {name: wall for name, (wall, _) in
             round_robin({"fused": fused, "scanned": scanned}, steps).items()}
  return {"experiment": config.experiment, "norm": config.get("norm"),
          "step_seconds_wall_median": medians,
          "fused_over_scanned": medians["fused"] / medians["scanned"]}


def compare_norms(config: ml_collections.ConfigDict, norms: Sequence[str],
                  steps: int | None = 20,
                  stop: Callable[[dict[str, list[float]]], Any] | None = None,
                  ) -> dict[str, Any]:
  """The train step with each of ``norms`` in place of the config's normalizer, timed
  round-robin (:func:`time_rounds`: ``steps`` rounds, or until ``stop`` says so) so
  that a shared machine's load falls on all alike: every round's wall and CPU
  seconds, and each one's medians with their ratios to the first name's.

  Every model trains on the same batch: the first training batch of the first norm's
  run (the data do not depend on the normalizer). ``lnorm flops --compare-norms``.
  """
  runners, batch = {}, None
  for norm in norms:
    variant = config.copy_and_resolve_references()
    variant.norm = norm
    run = assembly.assemble(variant)
    if batch is None:
      batch = jax.tree.map(jnp.asarray,
                           training_batches(variant, run.train_arrays, None)[0])
    runners[norm] = _step_runner(run.task, run.model, variant, batch)
  seconds = time_rounds(runners, rounds=None if stop else steps, stop=stop)
  medians = {norm: {clock: statistics.median(t[clock]) for clock in t}
             for norm, t in seconds.items()}
  base = medians[norms[0]]
  rows = [{"norm": norm, "step_seconds_wall_median": m["wall"],
           "step_seconds_cpu_median": m["cpu"],
           "wall_over_baseline": m["wall"] / base["wall"],
           "cpu_over_baseline": m["cpu"] / base["cpu"]} for norm, m in medians.items()]
  return {"experiment": config.experiment, "baseline": norms[0],
          "rounds": len(seconds[norms[0]]["cpu"]), "batch_size": config.batch_size,
          "shapes": {k: list(v.shape) for k, v in batch.items()}, "rows": rows,
          "seconds": seconds}


def add_json_flag(parser: argparse.ArgumentParser) -> None:
  """The ``--json PATH`` flag of the benchmark scripts, named alike in each."""
  parser.add_argument("--json", metavar="PATH", default=None,
                      help="also write the rows, ratios, arguments and machine to "
                           "this JSON file")


def _version(distribution: str) -> str | None:
  """An installed distribution's version, None when it is not installed."""
  try:
    return importlib.metadata.version(distribution)
  except importlib.metadata.PackageNotFoundError:
    return None


def machine_record() -> dict[str, Any]:
  """What a timing depends on besides the code: cores, platform, JAX devices, versions.

  Timings from two machines, or from one machine before and after an upgrade, can
  only be compared with this next to them. The versions come from the installed
  distributions' metadata, so torch is reported without importing it (None when it
  is not installed).
  """
  affinity = (sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
              else None)
  return {
      "cpu_count": os.cpu_count(),
      # The cores this process may run on: fewer than cpu_count under taskset or a
      # container's CPU set, and the figures depend on it.
      "cpu_affinity_count": None if affinity is None else len(affinity),
      "cpu_affinity": affinity,
      # The processor's family, model and instruction sets: what XLA:CPU compiles for.
      **environment.cpu_description(),
      "xla_cpu_threads": os.environ.get(environment.THREADS_ENV),
      "platform": platform.platform(),
      "jax_backend": jax.default_backend(),
      "jax_devices": [str(d) for d in jax.devices()],
      # XLA's CPU threading flags change the timings as much as the core count does.
      "xla_flags": os.environ.get("XLA_FLAGS"),
      # Whether freed host memory was kept (lnorm.training.host_memory): page faults otherwise.
      "keeps_freed_host_memory": host_memory.applied(),
      "versions": {"python": platform.python_version(),
                   **{name: _version(name)
                      for name in ("jax", "jaxlib", "flax", "numpy", "torch")}},
  }


def bench_record(args: argparse.Namespace, rows: Sequence[dict[str, Any]],
                 ratios: Sequence[dict[str, Any]]) -> dict[str, Any]:
  """A benchmark script's ``--json`` record: the machine, the parsed arguments, one
  dict per timed row (``name`` and its figures) and one per printed ratio
  (``numerator``, ``denominator``, ``value``)."""
  return {"machine": machine_record(), "args": vars(args), "rows": list(rows),
          "ratios": list(ratios)}


def write_json(path: str | os.PathLike, record: dict[str, Any]) -> None:
  """Writes ``record`` to ``path`` as indented JSON, creating its directory."""
  path = pathlib.Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(record, indent=2) + "\n")
