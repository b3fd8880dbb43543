r"""What splitting each experiment's paper batch over several devices costs, measured
on emulated CPU devices.

  taskset -c 1 python scripts/bench_data_parallel.py [--experiments draw,perm_mnist] \
      [--devices 1,2,4] [--updates 4] [--json runs/data_parallel.json]

For each experiment (its config's defaults: the paper's batch and model, the headline
normalizer) and each device count N, a worker process of its own
(``XLA_FLAGS=--xla_force_host_platform_device_count=N`` must be set before JAX starts)
builds the model at the config's size on the synthetic data the GPU check uses
(``lnorm.gpucheck.steps``; perm-MNIST's are the MNIST files: set ``$LNORM_DATA_DIR``),
shards the batch over ``Mesh('data')`` of N devices and replicates the state, as
``lnorm train`` does, and times the same jitted call (the chunk of ``steps_per_call``
updates, state donated) over ``--updates`` updates after one warm-up call. The step
time is the fastest call's: on a shared machine other processes only ever add time,
and they add more to a longer call (the record keeps the median and the slowest).

**This measures overheads, not speed-ups.** Emulated devices share the cores the
process is given: pinned to one core (taskset), N devices run one after another, so N
devices can only be slower than one. The ratio t(N) / t(1) says how much of a step
every device pays in full instead of sharing: per-operation costs (a recurrence's
thousands of small operations each run N times, on N batches N times smaller), the
smaller batch's lower efficiency, and the all-reduce (a memory copy here; NVLink or a
network on real devices). From it, ``duplicated`` = (t(N)/t(1) - 1) / (N - 1): 0 when
the work divides perfectly, 1 when each device does a whole step's work anyway. On N
real devices with the same cost structure, the step could at best take
t(1) * (duplicated + (1 - duplicated) / N): ``bound`` is that speed-up. A GPU's
per-operation cost differs from a CPU's; docs/parallel.md reads these figures beside
the GPU check's step times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Any, Sequence

#: The experiments measured by default: every registered one whose paper-size step
#: takes seconds, not minutes, on one CPU core (skip-thoughts' and the Transformer's
#: take minutes; docs/parallel.md reads them from the GPU check instead).
DEFAULT_EXPERIMENTS = ("perm_mnist", "order_embeddings", "draw", "handwriting",
                       "attentive_reader", "bln_cifar", "bln_imdb")


def measure(experiment: str, updates: int) -> dict[str, Any]:
  """The worker: one experiment's sharded train call on every device it sees."""
  # pylint: disable=g-import-not-at-top  (JAX starts here, with the worker's XLA_FLAGS)
  import jax
  import numpy as np
  from lnorm import config as config_lib
  from lnorm.errors import ConfigError
  from lnorm.gpucheck import steps as gpu_steps
  from lnorm.gpucheck import timing
  from lnorm.training import lowering, parallel, process
  from lnorm.training.steps import make_train_chunk, make_train_step
  from lnorm.training.train_state import TrainStateInitializer

  config = config_lib.load_config(f"{config_lib.CONFIGS_DIR / experiment}.py")
  process.set_up(config)
  mesh = parallel.make_mesh()
  k, b = config.steps_per_call, config.batch_size
  row = {"experiment": experiment, "norm": config.get("norm"), "batch_size": b,
         "steps_per_call": k, "devices": mesh.size}
  try:
    parallel.check_batch_size(b, mesh)
  except ConfigError:
    return {**row, "error": f"batch {b} does not divide over {mesh.size} devices"}
  task, dataset, model = lowering.synthetic_model(config, gpu_steps.timing_data_config(config))
  split = dataset.splits[task.train_split()]
  rows = np.random.default_rng(config.seed).integers(0, len(next(iter(split.values()))),
                                                     size=(k, b))
  batches = parallel.shard_batch({name: values[rows] for name, values in split.items()},
                                 mesh, 1)
  state = TrainStateInitializer(config, task, model, mesh).from_scratch(
      {name: values[rows[0]] for name, values in split.items()})
  rep = parallel.replicated(mesh)
  call = jax.jit(make_train_chunk(make_train_step(task, model)), donate_argnums=0,
                 out_shardings=(rep, rep))
  rng = jax.random.key(config.seed)
  holder = {"state": state}

  def one_call():
    holder["state"], out = call(holder["state"], batches, rng)
    return out

  timed = timing.time_repeats(one_call, repeats=max(1, -(-updates // k)), warmup=1)
  return {**row, "per_device_batch": b // mesh.size, "step_s": timed.min_s / k,
          "call": timed.record()}


def _run_worker(experiment: str, devices: int, updates: int) -> dict[str, Any]:
  env = dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") +
                                    f" --xla_force_host_platform_device_count={devices}"))
  proc = subprocess.run([sys.executable, __file__, "--worker", experiment,
                         "--updates", str(updates)], env=env, capture_output=True,
                        text=True, check=False)
  lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
  if proc.returncode or not lines:
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"experiment": experiment, "devices": devices,
            "error": f"exit code {proc.returncode}: {last[:200]}"}
  return json.loads(lines[-1])


def with_ratios(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
  """Each row with t(N)/t(1), the share duplicated and the speed-up bound (see the
  module), against the same experiment's one-device row."""
  one = {r["experiment"]: r["step_s"] for r in rows if r["devices"] == 1 and "step_s" in r}
  out = []
  for r in rows:
    r = dict(r)
    if "step_s" in r and r["experiment"] in one and r["devices"] > 1:
      n, ratio = r["devices"], r["step_s"] / one[r["experiment"]]
      duplicated = min(1.0, max(0.0, (ratio - 1) / (n - 1)))
      r.update(ratio=ratio, duplicated=duplicated,
               bound=1 / (duplicated + (1 - duplicated) / n))
    out.append(r)
  return out


def table(rows: Sequence[dict[str, Any]]) -> str:
  lines = ["| experiment | norm | batch | devices | per device | step | t(N)/t(1) | "
           "duplicated | bound on N real devices |", "|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    if "error" in r:
      lines.append(f"| {r['experiment']} | {r.get('norm', '')} | {r.get('batch_size', '')} "
                   f"| {r['devices']} | — | {r['error']} | | | |")
      continue
    extra = ("| 1.00 | — | — |" if r["devices"] == 1 else
             f"| {r['ratio']:.2f} | {r['duplicated']:.2f} | {r['bound']:.2f}x |")
    lines.append(f"| {r['experiment']} | {r['norm']} | {r['batch_size']} | {r['devices']} "
                 f"| {r['per_device_batch']} | {r['step_s'] * 1e3:.1f} ms {extra}")
  return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--experiments", default=",".join(DEFAULT_EXPERIMENTS))
  parser.add_argument("--devices", default="1,2,4")
  parser.add_argument("--updates", type=int, default=4,
                      help="timed updates per measurement, after one warm-up call")
  parser.add_argument("--worker", metavar="EXPERIMENT", default=None, help=argparse.SUPPRESS)
  # pylint: disable=g-import-not-at-top  (the parent stays free of JAX's devices)
  from lnorm.training import throughput
  throughput.add_json_flag(parser)
  args = parser.parse_args(argv)
  if args.worker:
    print(json.dumps(measure(args.worker, args.updates)))
    return 0
  rows = []
  for experiment in args.experiments.split(","):
    for devices in (int(n) for n in args.devices.split(",")):
      rows.append(_run_worker(experiment, devices, args.updates))
      print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
  rows = with_ratios(rows)
  print(table(rows))
  if args.json:
    throughput.write_json(args.json, throughput.bench_record(args, rows, [
        {"numerator": f"{r['experiment']} on {r['devices']} devices",
         "denominator": f"{r['experiment']} on 1 device", "value": r["ratio"]}
        for r in rows if "ratio" in r]))
  return 0


if __name__ == "__main__":
  sys.exit(main())
