r"""Time a config's jitted train step against this machine's matmul rate.

Each experiment's ``scripts/<name>_flops.py`` counts its train step's matmul FLOPs
analytically and builds a batch of the configured shapes; this module does the rest,
the same way for every experiment: compile the harness's own train step (timed
apart), time steps after a warm-up, measure the float32 matmul rate with one large
square matmul, and report the share of that rate a step achieves (1.0: as fast as a
big matmul). Wall and process-CPU times are both given: on a shared machine the CPU
time is the fairer clock.

It also holds what every benchmark script's ``--json PATH`` record shares: the machine
and library versions the figures were measured with, and the writing of the file.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import pathlib
import platform
import sys
import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections

from lnorm import config as config_lib
from lnorm.training import host_memory
from lnorm.training.steps import TrainState, make_train_step
from lnorm.training.optim import make_optimizer
from lnorm.training.task import Task


def train_step_flops(forward_macs: int) -> int:
  """A train step's FLOPs from its forward multiply-accumulates: 2 FLOPs per MAC, and
  the backward pass costs twice the forward."""
  return 3 * 2 * forward_macs


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
                       matmul_reps: int = 10) -> dict[str, Any]:
  """Compile and time ``make_train_step(task, model)`` on ``batch``; ``flops`` is the
  step's analytic matmul count (see ``train_step_flops``)."""
  key = jax.random.key(config.seed)
  init_rngs = {"params": key, **{name: key for name in task.rng_streams}}
  variables = jax.jit(lambda rngs: model.init(rngs, *task.model_inputs(batch), train=True))(
      init_rngs)
  state = TrainState.create(apply_fn=model.apply, params=variables["params"],
                            tx=make_optimizer(config.optimizer),
                            batch_stats=variables.get("batch_stats", {}))

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
  rate_wall, rate_cpu = matmul_rate(matmul_size, matmul_reps)
  return {
      "norm": config.get("norm"), "batch_size": config.batch_size,
      "devices": str(jax.devices()),
      "parameters": sum(x.size for x in jax.tree.leaves(variables["params"])),
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
  affinity = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
              else None)
  return {
      "cpu_count": os.cpu_count(),
      # The cores this process may run on: fewer than cpu_count under taskset or a
      # container's CPU set, and the figures depend on it.
      "cpu_affinity_count": affinity,
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
