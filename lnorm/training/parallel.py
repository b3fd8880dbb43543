"""Data parallelism over every device through one ``jax.sharding.Mesh``.

The batch is sharded over the 'data' axis and the train state is replicated. Because
the step is a single jit over global arrays, BN and BLN statistics are reductions
over the *global* batch: XLA inserts the cross-device reductions, so there is no
per-device drift and no pmean to forget. The processes of a multi-process job (joined
by ``lnorm.training.distributed``) decide together with :func:`gather_from_processes`.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from lnorm.errors import ConfigError


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


def gather_from_processes(local: np.ndarray) -> np.ndarray:
  """Every process's ``local`` (the same shape on each), stacked by process index: a
  collective, so every process must call it at the same point. One process: no
  communication."""
  local = np.asarray(local)
  if jax.process_count() == 1:
    return local[None]
  return np.asarray(multihost_utils.process_allgather(local))
