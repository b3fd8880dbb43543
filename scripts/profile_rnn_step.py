"""Where the RNN train step's time goes: profiled per HLO op, summed by loop and kind.

    export XLA_FLAGS=--xla_cpu_multi_thread_eigen=false     # see below
    taskset -c 0 python scripts/profile_rnn_step.py         # lstm, ln_lstm, ln_lstm_scan
    taskset -c 0 python scripts/profile_rnn_step.py --rows ln_lstm --top 15

Runs the train step that ``bench_rnn.py`` times (its models, sizes and inputs: the
jitted ``value_and_grad`` of ``sum(h^2)/B``) under ``jax.profiler.trace``, reads the
duration of every HLO instruction the trace records, and adds them up by where the
instruction runs (the forward loop over time, the backward loop, or the rest of the
program) and by what it is (a matmul, that is a dot or a fusion around one, or any
other op). ``--top`` also lists the costliest instructions.

Profile with one thread. XLA:CPU runs a library matmul asynchronously when it has a
thread pool, and the trace then charges the matmul's time to whichever op waits for
it. With ``--xla_cpu_multi_thread_eigen=false`` on one core each op's time is its
own, and the parts add up to about the step's wall time (to more where XLA runs
independent ops side by side on the one core).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # scripts/ is not a package
import bench_rnn  # noqa: E402  (the models and train step that bench_rnn.py times)
from lnorm.training import process  # noqa: E402
import hlo_rnn_step  # noqa: E402  (the HLO parser and the loops over time)

ROWS = ("lstm", "ln_lstm", "ln_lstm_scan")
PARTS = ("forward loop", "backward loop", "outside the loops")


def classify(hlo_text: str) -> dict[str, tuple[str, bool]]:
  """HLO instruction name -> (part of the program, whether it runs a matmul)."""
  computations, entry = hlo_rnn_step.parse_hlo(hlo_text)
  forward, backward, _ = hlo_rnn_step.recurrence_loops(computations, entry)
  part_of = {}
  for part, loop in (("forward loop", forward), ("backward loop", backward)):
    body = hlo_rnn_step.loop_body(loop)
    for computation, _ in hlo_rnn_step.walk(computations, [body]):
      part_of.setdefault(computation, part)
  kinds = {}
  for computation, instructions in computations.items():
    for ins in instructions:
      called = [i for _, i in hlo_rnn_step.walk(computations, ins.called)]
      matmul = ins.opcode in ("dot", "convolution") or (
          ins.opcode == "fusion" and any(i.opcode in ("dot", "convolution") for i in called))
      kinds[ins.name] = (part_of.get(computation, "outside the loops"), matmul)
  return kinds


def op_durations(trace_dir: str) -> collections.Counter:
  """Total ns per event name over every thread of the host plane."""
  (path,) = [os.path.join(d, f) for d, _, files in os.walk(trace_dir) for f in files
             if f.endswith(".xplane.pb")]
  totals = collections.Counter()
  for plane in jax.profiler.ProfileData.from_file(path).planes:
    for line in plane.lines:
      for event in line.events:
        totals[event.name] += event.duration_ns
  return totals


def profile_row(name: str, args, x) -> tuple[dict, list, float]:
  """(ms per step by (part, matmul), the costliest instructions, wall ms per step)."""
  runs = args.runs
  model, apply = bench_rnn.jax_models(args.hidden, args.unroll, naive=False)[name]
  step, params = bench_rnn.train_step(model, x, apply)
  compiled = step.lower(params, x).compile()
  kinds = classify(compiled.as_text())
  for _ in range(2):
    jax.block_until_ready(compiled(params, x))
  start = time.perf_counter()
  for _ in range(runs):
    jax.block_until_ready(compiled(params, x))
  wall_ms = (time.perf_counter() - start) * 1e3 / runs
  with tempfile.TemporaryDirectory() as trace_dir:
    with jax.profiler.trace(trace_dir):
      for _ in range(runs):
        jax.block_until_ready(compiled(params, x))
    durations = op_durations(trace_dir)
  # Only instructions of this program count: a while loop's own event would count its
  # body twice, and the runtime's events (executing, waiting) are not ops.
  per_part = collections.Counter()
  ops = []
  for op, ns in durations.items():
    if op not in kinds or op.startswith("while"):
      continue
    ms = ns / 1e6 / runs
    per_part[kinds[op]] += ms
    ops.append((ms, op, *kinds[op]))
  return per_part, sorted(ops, reverse=True), wall_ms


def report(name: str, per_part: dict, ops: list, wall_ms: float, top: int) -> str:
  lines = [f"\n### {name}\n", "| part | matmuls (ms) | other ops (ms) | both (ms) |",
           "|---|---|---|---|"]
  for part in PARTS:
    mm, other = per_part.get((part, True), 0.0), per_part.get((part, False), 0.0)
    lines.append(f"| {part} | {mm:.1f} | {other:.1f} | {mm + other:.1f} |")
  mm = sum(v for (_, is_mm), v in per_part.items() if is_mm)
  other = sum(v for (_, is_mm), v in per_part.items() if not is_mm)
  lines.append(f"| all ops | {mm:.1f} | {other:.1f} | {mm + other:.1f} |")
  lines.append(f"\nwall time per step outside the profiler: {wall_ms:.1f} ms")
  if top:
    lines.append(f"\ncostliest {top} instructions (ms per step, part, matmul):")
    lines += [f"  {ms:7.2f}  {op}  ({part}{', matmul' if is_mm else ''})"
              for ms, op, part, is_mm in ops[:top]]
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  bench_rnn.add_shape_arguments(parser)
  parser.add_argument("--rows", nargs="+", default=list(ROWS),
                      help="rows of bench_rnn.py to profile (default: %(default)s)")
  parser.add_argument("--runs", type=int, default=5, help="profiled steps per row")
  parser.add_argument("--top", type=int, default=0, help="also list the N costliest ops")
  args = parser.parse_args(argv)
  process.set_up()  # As `lnorm train` runs: one XLA:CPU thread ($PJRT_NPROC), freed memory kept.
  print(f"batch {args.batch}, steps {args.steps}, input {args.input}, hidden "
        f"{args.hidden}, unroll {args.unroll}; jax {jax.__version__} on "
        f"{jax.devices()[0].platform}, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}, "
        f"{len(os.sched_getaffinity(0))} core(s) available")
  x = jnp.asarray(bench_rnn.random_inputs(args))
  for name in args.rows:
    print(report(name, *profile_row(name, args, x), args.top))


if __name__ == "__main__":
  main()
