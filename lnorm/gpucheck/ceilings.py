"""The ``device`` phase: what the device is, and the two ceilings every step is
measured against.

* The matmul rate: one large square matmul of random values, float32 at JAX's default
  precision (TF32 on an NVIDIA GPU since Ampere, which is what ``lnorm train`` uses
  unless ``matmul_precision`` says otherwise), float32 at ``highest`` (full float32),
  and bfloat16. FLOPs are ``2 n^3``.
* The device-to-device copy bandwidth: ``x + 1`` over a large float32 array, which
  reads and writes every element once; bytes count both.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
from typing import Any, Callable

import jax
import jax.numpy as jnp

from lnorm.gpucheck import timing
from lnorm.training import environment
from lnorm.training import throughput

#: Distributions whose versions the record gives (None: not installed).
VERSIONED = ("jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "flax", "optax",
             "orbax-checkpoint", "numpy", "ml-collections", "torch", "nvidia-cudnn-cu13",
             "nvidia-cudnn-cu12")

#: Sizes: the paper-size check, and the rehearsal's toy sizes on a CPU.
SIZES = {
    False: {"matmul": 8192, "copy_elements": 2 ** 28, "repeats": 20, "warmup": 3},
    True: {"matmul": 256, "copy_elements": 2 ** 20, "repeats": 3, "warmup": 1},
}


def versions() -> dict[str, str | None]:
  out = {}
  for name in VERSIONED:
    try:
      out[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      out[name] = None
  return out


#: A device kind as its folder's name under results/gpu/ (one definition, shared with
#: the benchmark's gpu records).
device_slug = environment.device_slug


def nvidia_smi() -> dict[str, str] | None:
  """The GPU's name, driver, memory and maximum SM clock as nvidia-smi gives them; None
  where there is no nvidia-smi."""
  fields = ("name", "driver_version", "memory.total", "clocks.max.sm")
  try:
    out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}",
                          "--format=csv,noheader"], capture_output=True, text=True,
                         timeout=20, check=True).stdout
  except (OSError, subprocess.SubprocessError):
    return None
  first = out.strip().splitlines()[0] if out.strip() else ""
  values = [v.strip() for v in first.split(",")]
  return dict(zip(fields, values)) if len(values) == len(fields) else {"raw": out.strip()}


def device_record() -> dict[str, Any]:
  """The device JAX computes on, its driver and the versions of what runs on it."""
  device = jax.devices()[0]
  try:
    stats = device.memory_stats() or {}
  except Exception:  # pylint: disable=broad-except  (not every backend has them)
    stats = {}
  kind = device.device_kind
  return {
      "device_kind": kind, "slug": device_slug(kind), "platform": device.platform,
      "backend": jax.default_backend(), "device_count": jax.device_count(),
      "memory_bytes": stats.get("bytes_limit"), "nvidia_smi": nvidia_smi(),
      "versions": versions(),
  }


#: A measurement: (the call, what its record holds given its timing).
Measurement = tuple[Callable[[], Any], Callable[[timing.Timing], dict[str, Any]]]


def matmul_rate(size: int, dtype, precision: str | None) -> Measurement:
  """TFLOP/s of a jitted ``size x size`` matmul of random values."""
  a = jax.random.normal(jax.random.key(0), (size, size), jnp.float32).astype(dtype)
  b = jax.random.normal(jax.random.key(1), (size, size), jnp.float32).astype(dtype)
  matmul = jax.jit(lambda a, b: jnp.matmul(a, b, precision=precision))
  return (lambda: matmul(a, b)), lambda t: {
      "size": size, "dtype": jnp.dtype(dtype).name, "precision": precision or "default",
      "tflops": 2 * size ** 3 / t.median_s / 1e12, **t.record()}


def copy_bandwidth(elements: int) -> Measurement:
  """GB/s of ``x + 1`` over ``elements`` random float32 values, counting the bytes read
  and the bytes written."""
  x = jax.random.normal(jax.random.key(2), (elements,), jnp.float32)
  add_one = jax.jit(lambda x: x + 1.0)
  moved = 2 * elements * 4
  return (lambda: add_one(x)), lambda t: {
      "elements": elements, "bytes_moved": moved, "gb_per_s": moved / t.median_s / 1e9,
      **t.record()}


def run(record, toy: bool) -> None:
  """Fills the ``device`` phase's record (:class:`lnorm.gpucheck.records.PhaseRecord`):
  every program compiled (its first call) before any is timed."""
  size = SIZES[toy]
  record.set("device", device_record())
  measurements = {
      name: matmul_rate(size["matmul"], dtype, precision)
      for name, dtype, precision in (("matmul_float32_default", jnp.float32, None),
                                     ("matmul_float32_highest", jnp.float32, "highest"),
                                     ("matmul_bfloat16", jnp.bfloat16, None))}
  measurements["copy"] = copy_bandwidth(size["copy_elements"])
  for call, _ in measurements.values():
    timing.jax_sync(call())
  for name, (call, result) in measurements.items():
    t = timing.time_repeats(call, repeats=size["repeats"], warmup=size["warmup"])
    record.add({"name": name, **result(t)})


#: The environment variables besides XLA_FLAGS that change how JAX runs a program.
_XLA_ENVIRONMENT = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
                    environment.THREADS_ENV, environment.GPU_DETERMINISM_ENV)


def xla_environment() -> dict[str, Any]:
  """The XLA flags this process runs under (``lnorm train``'s: ``process.set_up`` adds
  the deterministic GPU kernels) and the environment variables that change how JAX
  runs a program, unset ones as None."""
  return {"xla_flags": os.environ.get("XLA_FLAGS", ""),
          **{name: os.environ.get(name) for name in _XLA_ENVIRONMENT}}


def machine() -> dict[str, Any]:
  """The host's record (cores, platform, versions), as every benchmark script gives it."""
  return throughput.machine_record()
