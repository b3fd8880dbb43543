"""Compile everything first, then time one at a time: the device to itself.

A phase's items (an experiment's train call at one normalizer, the rows of one
experiment's recurrent layers) each run in a worker process of their own. Up to ``compilers`` of
them build and compile their programs at once; each then writes what compiling found
(``<name>.ready.json``) and waits. Once every item has compiled, or the time set aside
for compiling is spent, the driver lets them time one at a time, in the items' order:
while one times, the others wait on their standard input, so that nothing else
compiles, autotunes or runs on the device (the first GPU run timed while other
workers compiled, and one normalizer's calls split into two groups 3.5x apart). A
worker writes its result (``<name>.json``: one item of the record, or ``{"items":
[...]}``) and exits; one that is never told to time exits without timing when its
standard input closes.

The worker's side is :func:`serve`; both sides stamp the wall clock (``compiled_at``,
``timing_started_at``), so that a record shows the order held.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from typing import Any, Callable, Sequence

from lnorm.gpucheck import records as records_lib

#: What the driver writes to a worker's standard input to let it time.
GO = "go"
#: The wall-clock stamps (``time.time()``) :func:`serve` gives a worker's result, and
#: each of its items.
STAMPS = ("compiled_at", "timing_started_at", "timing_finished_at")


@dataclasses.dataclass(frozen=True)
class Job:
  """One worker: ``name`` names its files, ``key`` the item in the phase's record, and
  ``argv`` is its command (``--json`` and ``--ready`` are added)."""
  name: str
  key: dict[str, Any]
  argv: tuple[str, ...]


@dataclasses.dataclass
class _Worker:
  job: Job
  process: subprocess.Popen
  result: str
  ready: str
  log: str
  started: float


def _start(job: Job, work: str) -> _Worker:
  result, ready, log = (os.path.join(work, f"{job.name}.{ext}")
                        for ext in ("json", "ready.json", "log"))
  with open(log, "w") as f:
    process = subprocess.Popen([*job.argv, "--json", result, "--ready", ready],
                               stdin=subprocess.PIPE, stdout=f, stderr=subprocess.STDOUT,
                               text=True)
  return _Worker(job, process, result, ready, log, time.monotonic())


def _failed(worker: _Worker, why: str) -> dict[str, Any]:
  return {**worker.job.key, "error": f"{why}: {records_lib.log_tail(worker.log, 6)}",
          "seconds": time.monotonic() - worker.started}


def _stop(worker: _Worker) -> None:
  """Ends a worker: one waiting for its turn exits when its input closes."""
  try:
    worker.process.stdin.close()
    worker.process.wait(timeout=10)
  except (OSError, subprocess.TimeoutExpired):
    worker.process.kill()
    worker.process.wait()


def compile_all(record, jobs: Sequence[Job], *, work: str, deadline: float,
                compilers: int, timing_s: float) -> list[_Worker]:
  """Starts the jobs, ``compilers`` compiling at once, until each has compiled or the
  time left before ``deadline`` (``time.monotonic()``) is only what timing them takes,
  ``timing_s`` a job: a job starts only while that leaves time to time it too, and the
  ones still compiling are stopped when the ones compiled need the rest. Returns the
  compiled workers, waiting, in the jobs' order; what failed or was stopped goes to
  ``record``."""
  os.makedirs(work, exist_ok=True)
  order = {job.name: i for i, job in enumerate(jobs)}
  pending, compiling, ready = list(jobs), [], []
  left = lambda: deadline - time.monotonic()
  while pending or compiling:
    while (pending and len(compiling) < compilers
           and left() > timing_s * (len(ready) + len(compiling) + 1)):
      compiling.append(_start(pending.pop(0), work))
    for worker in list(compiling):
      if os.path.exists(worker.ready):
        compiling.remove(worker)
        ready.append(worker)
      elif worker.process.poll() is not None:
        compiling.remove(worker)
        record.add(_failed(worker, f"exit code {worker.process.returncode} while "
                                   "compiling"))
    if compiling and left() <= timing_s * (len(ready) + len(compiling)):
      for worker in compiling:
        worker.process.kill()
        worker.process.wait()
        record.add(_failed(worker, "stopped while compiling: the phase's time limit "
                                   "left only the time to time what had compiled"))
      compiling = []
    if pending and not compiling:  # None started, none will: the time is spent.
      if left() <= timing_s * (len(ready) + 1):
        for job in pending:
          record.add({**job.key, "error": "not run: the phase's time limit came first"})
        break
    time.sleep(0.05)
  return sorted(ready, key=lambda w: order[w.job.name])


def time_in_turn(record, workers: Sequence[_Worker], *, deadline: float) -> None:
  """Lets each compiled worker time, one at a time, adding its result to ``record``;
  at ``deadline`` the one timing is stopped and the rest are not timed."""
  for worker in workers:
    left = deadline - time.monotonic()
    if left <= 0:
      _stop(worker)
      record.add({**worker.job.key, "error": "compiled, not timed: the phase's time limit "
                                             "came first"})
      continue
    try:
      worker.process.stdin.write(GO + "\n")
      worker.process.stdin.close()
    except OSError:
      pass  # It died while waiting: its exit code and log say why.
    try:
      code = worker.process.wait(timeout=left)
    except subprocess.TimeoutExpired:
      worker.process.kill()
      worker.process.wait()
      record.add(_failed(worker, "stopped at the phase's time limit while timing"))
      continue
    if code == 0 and os.path.exists(worker.result):
      result = records_lib.read_json(worker.result)
      stamps = {k: result[k] for k in STAMPS if k in result}
      for item in result.pop("items", None) or [result]:  # A worker may time several.
        record.add({**worker.job.key, **item, **stamps})
    else:
      record.add(_failed(worker, f"exit code {code} while timing"))


def run(record, jobs: Sequence[Job], *, work: str, deadline: float, compilers: int,
        timing_s: float) -> None:
  """:func:`compile_all`, leaving ``timing_s`` a compiled job before ``deadline`` for
  the timing, then :func:`time_in_turn`."""
  workers = compile_all(record, jobs, work=work, deadline=deadline, compilers=compilers,
                        timing_s=timing_s)
  time_in_turn(record, workers, deadline=deadline)


def serve(prepare: Callable[[], tuple[dict[str, Any], Callable[[], dict[str, Any]]]],
          result: str, ready: str) -> int:
  """A worker's side: ``prepare()`` builds and compiles, returning what it found and
  the function that times; this writes the first to ``ready``, waits for its turn on
  standard input, then writes both to ``result``. Returns the exit code."""
  info, time_it = prepare()
  info = {**info, "compiled_at": time.time()}
  records_lib.write_json(ready, info)
  if sys.stdin.readline().strip() != GO:
    return 0  # Not timed: the phase's time was spent.
  started = time.time()
  timed = time_it()
  records_lib.write_json(result, {**info, **timed, "timing_started_at": started,
                                  "timing_finished_at": time.time()})
  return 0
