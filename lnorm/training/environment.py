"""What a rerun must match to reproduce a run's numbers: its numerical environment.

XLA:CPU splits a large reduction (a matmul's, a sum's) across its thread pool, whose
size is the number of cores it sees: the same command then sums in another order on a
machine with more cores, or when ``taskset`` pins it to fewer, and the last bits of a
loss differ, then grow over thousands of updates. (That is how the handwriting
records stopped being reproducible: their reruns differed from the first evaluation.)
:func:`fix_cpu_threads` gives the pool one thread unless the user chose a size, so a
CPU run's numbers depend on the command and the versions below, not on the machine's
load or core count; :func:`fix_gpu_determinism` asks XLA:GPU for deterministic kernels. :func:`describe` is what ``config.json``
records of it, so that a rerun that differs can be told apart from a defect.
"""

from __future__ import annotations

import os
import platform
from importlib import metadata
from typing import Any

#: XLA:CPU's thread-pool size (PJRT's CPU client reads it when it starts).
THREADS_ENV = "PJRT_NPROC"
#: Set to 0 to let XLA:GPU use its faster, nondeterministic kernels.
GPU_DETERMINISM_ENV = "LNORM_GPU_DETERMINISTIC"
_GPU_DETERMINISTIC_FLAG = "--xla_gpu_deterministic_ops=true"


def fix_cpu_threads() -> None:
  """One XLA:CPU thread unless ``$PJRT_NPROC`` says otherwise; call before JAX starts."""
  os.environ.setdefault(THREADS_ENV, "1")


def fix_gpu_determinism() -> None:
  """Deterministic XLA:GPU kernels unless ``$LNORM_GPU_DETERMINISTIC=0``; call before JAX.

  XLA:GPU's default reductions and scatters accumulate in whatever order the GPU's
  threads finish: two runs of the same Figure 6 member on an H100 (the GPU check's
  records) differed from the first logged update (train loss 0.209916 against
  0.209977). The flag costs some speed in scatter-heavy steps; CPU runs ignore it."""
  if os.environ.get(GPU_DETERMINISM_ENV, "1") == "0":
    return
  flags = os.environ.get("XLA_FLAGS", "")
  if "xla_gpu_deterministic_ops" not in flags:
    os.environ["XLA_FLAGS"] = f"{flags} {_GPU_DETERMINISTIC_FLAG}".strip()


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
      "xla_flags": os.environ.get("XLA_FLAGS", ""),
  }
