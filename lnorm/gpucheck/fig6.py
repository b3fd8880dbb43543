"""The ``fig6`` phase: a paper's figure at the paper's scale, through the benchmark, and
one of its members trained twice.

The figure is the one an experiment's spec declares for the GPU check
(``GpuBenchmark``: LN paper Figure 6's left panel, permutation-invariant MNIST at
batch 128 for the config's 20 epochs, with no normalizer, BN and LN), run by
``lnorm benchmark --experiments <it> --scale paper --variants <its variant>`` (its
public command: the members, their records and the verdicts are the benchmark's),
with the spec's dotted overrides (:data:`OVERRIDES`: MNIST's files).

Every member runs alone on the device, one after another, so that its training time
(the records' ``time/train_seconds``, which the verdicts' time ratios read) is its
own. Seeds run in waves, each seed's normalizers in turn, while the time left allows
another wave as long as the first took: whole seeds, never a seed with one normalizer
missing. After the first wave, the spec's ``rerun`` normalizer's member of that seed
runs again, by the same command into records of its own, and the two records are
compared value by value (:func:`compare_records`: every logged value but the clocks);
the GPU's reruns differed before ``lnorm`` asked XLA for deterministic kernels.
``lnorm benchmark --report-only`` then prints the headline table and the verdicts of
the runs, which the record keeps beside each member's ``config.json`` and
``metrics.jsonl`` (the files of the benchmark's records, which ``python -m
lnorm.gpucheck collect`` writes back out).
"""

from __future__ import annotations

import base64
import math
import os
import subprocess
import sys
import time
from typing import Any, Sequence

from lnorm.analysis import runs
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
#: The normalizer whose first seed's member runs twice.
RERUN = _BENCHMARK.gpu.benchmark.rerun
#: Logged values that measure the machine, not the run: left out of the comparison.
CLOCKS = ("time/", "train/examples_per_sec")


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


def _run_member(norm: str, seed: int, *, records: str, workdir: str, log: str, toy: bool,
                timeout: float) -> dict[str, Any]:
  """One member, alone on the device: its outcome."""
  argv = benchmark_argv([norm], [seed], records=records, workdir=workdir, toy=toy)
  with open(log, "w") as f:
    process = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
  code = _wait(process, timeout)
  return {"seed": seed, "norm": norm, "exit_code": code,
          **({} if code == 0 else {"log_tail": records_lib.log_tail(log)})}


def _run_wave(seed: int, *, records: str, workdir: str, logs: str, toy: bool,
              deadline: float) -> list[dict[str, Any]]:
  """One seed of every normalizer, one member after another. Returns each outcome."""
  return [_run_member(norm, seed, records=records, workdir=workdir, toy=toy,
                      log=os.path.join(logs, f"fig6.seed{seed}.{norm}.log"),
                      timeout=deadline - time.monotonic() - 15)
          for norm in NORMS]


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


def _clocks(key: str) -> bool:
  return key.startswith(CLOCKS)


def compare_records(first: Sequence[dict[str, Any]],
                    second: Sequence[dict[str, Any]]) -> dict[str, Any]:
  """Two runs' logged points compared value by value, the clocks (:data:`CLOCKS`)
  left out: how many values were compared, how many differ, the first that does
  (its step, key and both values) and the largest relative difference. Points are
  matched by their place; a point or key only one run has counts as a difference."""
  compared, differing, first_difference, largest = 0, 0, None, 0.0
  for i in range(max(len(first), len(second))):
    a = first[i] if i < len(first) else {}
    b = second[i] if i < len(second) else {}
    for key in sorted((set(a) | set(b)) - {"step"}):
      if _clocks(key):
        continue
      compared += 1
      x, y = a.get(key), b.get(key)
      same = x == y or (isinstance(x, float) and isinstance(y, float)
                        and math.isnan(x) and math.isnan(y))
      if same:
        continue
      differing += 1
      if first_difference is None:
        first_difference = {"point": i, "step": a.get("step", b.get("step")), "key": key,
                            "first": x, "second": y}
      if isinstance(x, (int, float)) and isinstance(y, (int, float)):
        largest = max(largest, abs(x - y) / max(abs(x), abs(y), 1e-30))
  return {"points": [len(first), len(second)], "values_compared": compared,
          "values_differing": differing, "identical": differing == 0 and compared > 0,
          "first_difference": first_difference, "largest_relative_difference": largest}


def rerun(record, seed: int, *, records: str, work: str, toy: bool,
          deadline: float) -> None:
  """The :data:`RERUN` normalizer's member of ``seed`` again, by the same command into
  records of its own, compared value by value with the first (``record["rerun"]``)."""
  again = os.path.join(work, "rerun_records")
  outcome = _run_member(RERUN, seed, records=again, workdir=os.path.join(work, "rerun_runs"),
                        log=os.path.join(work, f"fig6.rerun.seed{seed}.{RERUN}.log"),
                        toy=toy, timeout=deadline - time.monotonic() - 15)
  result: dict[str, Any] = {"norm": RERUN, "seed": seed, "outcome": outcome}
  if outcome["exit_code"] == 0:
    (member,) = os.listdir(os.path.join(again, EXPERIMENT))  # The one it ran.
    result["member"] = member
    result.update(compare_records(
        runs.read_records(os.path.join(records, EXPERIMENT, member)),
        runs.read_records(os.path.join(again, EXPERIMENT, member))))
  record.set("rerun", result)


def run(record, *, toy: bool, work: str, deadline: float) -> None:
  """Runs the waves, the rerun after the first, until the time left would not hold
  another wave; then the report."""
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
                         deadline=deadline)
    wave_seconds = time.monotonic() - start
    record.add({"wave": seed, "seconds": wave_seconds, "members": outcomes})
    if any(o["exit_code"] != 0 for o in outcomes):
      record.note(f"seed {seed}'s wave did not finish every member: no further seeds")
      break
    done.append(seed)
    record.set("members", member_records(records))
    if len(done) == 1:
      rerun(record, seed, records=records, work=work, toy=toy, deadline=deadline)
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
