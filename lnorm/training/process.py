"""A process that runs lnorm, set up in one function every entry point calls.

:func:`set_up` without a config, first thing (``lnorm``'s command line, the GPU
check's workers, the benchmark scripts): before JAX starts its CPU client, XLA:CPU's
thread pool of one thread and XLA:GPU's deterministic kernels (``environment``: what
a rerun must match), and freed host memory kept in the process (``host_memory``).
With the config a command runs, as soon as it is loaded: the multi-host job joined
(before any other JAX call touches a device) and the config's matmul precision. Each
step is idempotent, so a command and the library function it calls may both call it.
"""

from __future__ import annotations

import ml_collections

from lnorm.training import environment
from lnorm.training import host_memory


def set_up(config: ml_collections.ConfigDict | None = None) -> None:
  """Sets up this process for lnorm, and for ``config`` when given (see the module)."""
  host_memory.keep_freed_memory()
  environment.fix_cpu_threads()  # Reruns reproduce records whatever the core count,
  environment.fix_gpu_determinism()  # and on a GPU whatever order its threads finish in.
  if config is None:
    return
  # pylint: disable=g-import-not-at-top  (JAX: not before a config asks for it)
  import jax
  from lnorm.training import distributed
  distributed.join_from_environment()
  precision = config.get("matmul_precision", "default")
  if precision != "default":
    jax.config.update("jax_default_matmul_precision", precision)
