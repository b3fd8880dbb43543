"""The ``fig6`` phase: a paper's figure at the paper's scale, through the benchmark.

The figure is the one an experiment's spec declares for the GPU check
(``GpuBenchmark``: LN paper Figure 6's left panel, permutation-invariant MNIST at
batch 128 for the config's 20 epochs, with no normalizer, BN and LN), run by
``lnorm benchmark --experiments <it> --scale paper --variants <its variant>`` (its
public command: the members, their records and the verdicts are the benchmark's),
with the spec's dotted overrides (:data:`OVERRIDES`: MNIST's files).

Seeds run in waves, one seed of the three normalizers at once (separate processes on
the one device), while the time left allows another wave as long as the first took:
whole seeds, never a seed with one normalizer missing. ``lnorm benchmark --report-only``
then prints the headline table and the verdicts of the runs, which the record keeps
beside each member's ``config.json`` and ``metrics.jsonl`` (the files of the
benchmark's records, which ``python -m lnorm.gpucheck collect`` writes back out).
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from typing import Any, Sequence

from lnorm.analysis import specs
from lnorm.gpucheck import records as records_lib

_BENCHMARK = specs.with_gpu_benchmark()
#: The experiment, and its figure as its spec declares it for the GPU check.
EXPERIMENT = _BENCHMARK.name
NORMS = _BENCHMARK.gpu.benchmark.norms
SEEDS = _BENCHMARK.gpu.benchmark.seeds
#: The rehearsal's: two waves, the fewest that pass through the time budget between them.
TOY_SEEDS = SEEDS[:2]
#: One of the suite's paper-scale variants of the experiment, as --variants takes it.
VARIANT = _BENCHMARK.gpu.benchmark.variant
OVERRIDES = dict(_BENCHMARK.gpu.benchmark.overrides)
#: The rehearsal's toy runs, on top.
TOY_OVERRIDES = dict(_BENCHMARK.gpu.benchmark.toy_overrides)


def overrides(toy: bool) -> dict[str, str]:
  return {**OVERRIDES, **(TOY_OVERRIDES if toy else {})}


def benchmark_argv(norms: Sequence[str], seeds: Sequence[int], *, records: str, workdir: str,
                   toy: bool, report_only: bool = False) -> list[str]:
  """The ``lnorm benchmark`` command line of one wave (or of the report)."""
  argv = [sys.executable, "-m", "lnorm", "benchmark", "--experiments", EXPERIMENT,
          "--scale", "paper", "--norms", ",".join(norms),
          "--seeds", ",".join(map(str, seeds)), "--variants", VARIANT, "--records", records,
          "--workdir", workdir, "--no-wandb"]
  if report_only:
    argv.append("--report-only")
  return argv + [f"--config.{k}={v}" for k, v in overrides(toy).items()]


def _run_wave(seed: int, *, records: str, workdir: str, logs: str, toy: bool,
              parallel: bool, timeout: float) -> list[dict[str, Any]]:
  """One seed of every normalizer, in one process each: at once on a device, one after
  another on a CPU. Returns each process's outcome."""
  outcomes, processes = [], []
  for norm in NORMS:
    log = os.path.join(logs, f"fig6.seed{seed}.{norm}.log")
    argv = benchmark_argv([norm], [seed], records=records, workdir=workdir, toy=toy)
    with open(log, "w") as f:
      process = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
    processes.append((norm, process, log))
    if not parallel:
      _wait(process, timeout)
  for norm, process, log in processes:
    code = _wait(process, timeout)
    outcomes.append({"seed": seed, "norm": norm, "exit_code": code,
                     **({} if code == 0 else {"log_tail": records_lib.log_tail(log)})})
  return outcomes


def _wait(process: subprocess.Popen, timeout: float) -> int | None:
  try:
    return process.wait(timeout=max(timeout, 0.1))
  except subprocess.TimeoutExpired:
    process.kill()
    process.wait()
    return None


def member_records(records: str) -> dict[str, dict[str, Any]]:
  """The benchmark's records under ``records/<experiment>``: member name -> file name ->
  text (``config.json``, ``metrics.jsonl`` or its ``.gz`` as base64)."""
  root = os.path.join(records, EXPERIMENT)
  out: dict[str, dict[str, Any]] = {}
  if not os.path.isdir(root):
    return out
  for member in sorted(os.listdir(root)):
    folder = os.path.join(root, member)
    files = {}
    for name in sorted(os.listdir(folder)):
      with open(os.path.join(folder, name), "rb") as f:
        data = f.read()
      files[name] = ({"base64": base64.b64encode(data).decode()} if name.endswith(".gz")
                     else data.decode())
    out[member] = files
  return out


def run(record, *, toy: bool, work: str, deadline: float, parallel: bool) -> None:
  """Runs the waves until the time left would not hold another, then the report."""
  records, workdir = os.path.join(work, "records"), os.path.join(work, "runs")
  os.makedirs(records, exist_ok=True)
  record.set("experiment", EXPERIMENT)
  record.set("variant", VARIANT)
  record.set("overrides", overrides(toy))
  done, wave_seconds = [], None
  for seed in TOY_SEEDS if toy else SEEDS:
    left = deadline - time.monotonic()
    if wave_seconds is not None and left < 1.15 * wave_seconds + 15:
      record.note(f"seed {seed} not run: {left:.0f} s left, a wave took "
                  f"{wave_seconds:.0f} s")
      break
    start = time.monotonic()
    outcomes = _run_wave(seed, records=records, workdir=workdir, logs=work, toy=toy,
                         parallel=parallel, timeout=left - 15)
    wave_seconds = time.monotonic() - start
    record.add({"wave": seed, "seconds": wave_seconds, "members": outcomes})
    if any(o["exit_code"] != 0 for o in outcomes):
      record.note(f"seed {seed}'s wave did not finish every member: no further seeds")
      break
    done.append(seed)
    record.set("members", member_records(records))
  if done:
    report = subprocess.run(
        benchmark_argv(NORMS, done, records=records, workdir=workdir, toy=toy,
                       report_only=True),
        capture_output=True, text=True, timeout=max(deadline - time.monotonic(), 30))
    record.set("report", report.stdout.strip())
    if report.returncode != 0:
      record.note(f"the report exited with {report.returncode}: {report.stderr[-2000:]}")
  record.set("seeds_done", done)
  record.set("members", member_records(records))
