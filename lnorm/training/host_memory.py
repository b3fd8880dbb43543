"""Keep freed host memory in the process, so that a jitted step does not page-fault.

XLA:CPU gives each execution of a compiled program one block for all its
temporaries: 80 MB for the train step that ``scripts/bench_rnn.py`` times for the
LSTM, 170 MB for the LN-LSTM. glibc's malloc serves a block that large with ``mmap``
(XLA's worker threads allocate from arenas too small to hold it at all) and unmaps it
when the step ends, so every step maps fresh memory and the kernel zero-fills each
page the step touches: 20,000 to 43,000 page faults per step, and 15 to 20% of the
step's time on the machine of docs/performance.md.

:func:`keep_freed_memory` has glibc serve every thread from the main heap, never use
``mmap`` for large blocks, and keep freed memory for the next allocation instead of
returning it to the system. The price is that the process holds on to its peak host
memory until it exits. The ``lnorm`` command applies it when it starts, and so do the
benchmark scripts; ``LNORM_KEEP_FREED_MEMORY=0`` turns it off.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

#: Set to 0 to leave glibc's malloc at its defaults.
ENV = "LNORM_KEEP_FREED_MEMORY"

# mallopt parameters, from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8
_SETTINGS = ((_M_ARENA_MAX, 1), (_M_MMAP_THRESHOLD, 1 << 30), (_M_TRIM_THRESHOLD, 1 << 30))

_applied = False


def _glibc():
  """The process's C library if it is glibc, else None."""
  if not sys.platform.startswith("linux"):
    return None
  try:
    libc = ctypes.CDLL(None)
    libc.gnu_get_libc_version  # Only glibc has it; musl's mallopt does nothing.
    return libc
  except (OSError, AttributeError):
    return None


def keep_freed_memory() -> bool:
  """Configure glibc's malloc as described in the module docstring.

  Call it before JAX starts its CPU client (its first computation), whose threads
  would otherwise already have arenas of their own. Returns whether it applied: False
  with ``LNORM_KEEP_FREED_MEMORY=0``, or where the C library is not glibc.
  """
  if os.environ.get(ENV, "1") == "0":
    return False
  libc = _glibc()
  if libc is None:
    return False
  global _applied
  _applied = all(libc.mallopt(option, value) == 1 for option, value in _SETTINGS)
  logging.getLogger(__name__).debug("glibc malloc keeps freed memory: %s", _applied)
  return _applied


def applied() -> bool:
  """Whether :func:`keep_freed_memory` has configured this process (for records)."""
  return _applied
