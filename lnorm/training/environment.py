"""What a rerun must match to reproduce a run's numbers: its numerical environment.

XLA:CPU splits a large reduction (a matmul's, a sum's) across its thread pool, whose
size is the number of cores it sees: the same command then sums in another order on a
machine with more cores, or when ``taskset`` pins it to fewer, and the last bits of a
loss differ, then grow over thousands of updates. (That is how the handwriting
records stopped being reproducible: their reruns differed from the first evaluation.)
:func:`fix_cpu_threads` gives the pool one thread unless the user chose a size, so a
CPU run's numbers depend on the command and the versions below, not on the machine's
load or core count; GPU runs are unaffected. :func:`describe` is what ``config.json``
records of it, so that a rerun that differs can be told apart from a defect.
"""

from __future__ import annotations

import os
import platform
from importlib import metadata
from typing import Any

#: XLA:CPU's thread-pool size (PJRT's CPU client reads it when it starts).
THREADS_ENV = "PJRT_NPROC"


def fix_cpu_threads() -> None:
  """One XLA:CPU thread unless ``$PJRT_NPROC`` says otherwise; call before JAX starts."""
  os.environ.setdefault(THREADS_ENV, "1")


def _version(package: str) -> str | None:
  try:
    return metadata.version(package)
  except metadata.PackageNotFoundError:
    return None


def _cpu_model() -> str:
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine()


def describe() -> dict[str, Any]:
  """The versions, the processor and the thread count a run's numbers depend on."""
  return {
      "python": platform.python_version(),
      **{name: _version(name) for name in ("jax", "jaxlib", "flax", "optax", "numpy")},
      "machine": platform.machine(),
      "cpu": _cpu_model(),
      "xla_cpu_threads": os.environ.get(THREADS_ENV),
  }
