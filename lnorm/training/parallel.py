"""Data parallelism over every device through one ``jax.sharding.Mesh``.

The batch is sharded over the 'data' axis and the train state is replicated. Because
the step is a single jit over global arrays, BN and BLN statistics are reductions
over the *global* batch: XLA inserts the cross-device reductions, so there is no
per-device drift and no pmean to forget.
"""

from __future__ import annotations

import logging
import os

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from lnorm.errors import ConfigError

#: Environment variables that announce a multi-process launch.
_DISTRIBUTED_ENV = ("JAX_COORDINATOR_ADDRESS", "COORDINATOR_ADDRESS")
#: Set by Cloud TPU on every worker of a pod slice: a comma-separated host list.
_TPU_HOSTS_ENV = ("TPU_WORKER_HOSTNAMES", "TPU_PROCESS_ADDRESSES")


def launched_as_multi_process() -> bool:
  """True when the environment says this process is one of several."""
  if any(v in os.environ for v in _DISTRIBUTED_ENV) or os.environ.get("LNORM_DISTRIBUTED") == "1":
    return True
  if int(os.environ.get("SLURM_NTASKS", "1")) > 1:
    return True
  return any("," in os.environ.get(v, "") for v in _TPU_HOSTS_ENV)


def maybe_initialize_distributed() -> None:
  """Joins a multi-host job when the launcher set the usual variables.

  On a TPU pod slice and under SLURM, ``jax.distributed.initialize()`` finds its
  settings itself; elsewhere set JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and
  JAX_PROCESS_ID. Must run before anything touches a JAX device: even
  ``jax.process_count()`` starts the backends, after which joining is impossible.
  """
  if not launched_as_multi_process() or jax.distributed.is_initialized():
    return
  kwargs = {}
  if "JAX_NUM_PROCESSES" in os.environ:
    kwargs["num_processes"] = int(os.environ["JAX_NUM_PROCESSES"])
    kwargs["process_id"] = int(os.environ["JAX_PROCESS_ID"])
  if "JAX_COORDINATOR_ADDRESS" in os.environ:
    kwargs["coordinator_address"] = os.environ["JAX_COORDINATOR_ADDRESS"]
  try:
    jax.distributed.initialize(**kwargs)
  except RuntimeError as e:
    if "before" not in str(e):
      raise
    raise ConfigError(
        "This process is one of a multi-process job, but JAX was already in use before "
        "lnorm could join the job. Call lnorm.training.parallel."
        "maybe_initialize_distributed() before any other JAX call.") from e
  logging.info("Joined a %d-process job as process %d.", jax.process_count(),
               jax.process_index())


def make_mesh() -> Mesh:
  return Mesh(np.asarray(jax.devices()), ("data",))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def batch_sharding(mesh: Mesh, leading_axes: int = 0) -> NamedSharding:
  """Shards the batch axis, which follows ``leading_axes`` axes (e.g. 1 for [K, B])."""
  return NamedSharding(mesh, P(*([None] * leading_axes), "data"))


def check_batch_size(batch_size: int, mesh: Mesh) -> None:
  n = mesh.size
  if batch_size % n:
    raise ConfigError(
        f"The batch size {batch_size} does not divide over {n} devices. The config's "
        f"batch_size is the global batch; use a multiple of {n}, or run on fewer "
        "devices (e.g. CUDA_VISIBLE_DEVICES).")


def process_slice(global_size: int) -> slice:
  """This process's contiguous share of a global batch."""
  per_process = global_size // jax.process_count()
  start = jax.process_index() * per_process
  return slice(start, start + per_process)


def shard_batch(batch: dict[str, np.ndarray], mesh: Mesh, leading_axes: int = 0):
  """Global arrays from host batches; each process contributes its own slice."""
  sharding = batch_sharding(mesh, leading_axes)

  def put(x):
    if jax.process_count() == 1:
      return jax.device_put(x, sharding)
    local = x[(slice(None),) * leading_axes + (process_slice(x.shape[leading_axes]),)]
    return jax.make_array_from_process_local_data(sharding, local, x.shape)

  return jax.tree.map(put, batch)
