"""lnorm.training.host_memory: with it, a large block freed and allocated again does not fault
its pages in again. Each case runs in a fresh interpreter, since malloc's settings
are for the whole process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lnorm.training import host_memory

# In a worker thread, as XLA's threads do, allocates, fills and frees a 96 MB block
# (the size of an RNN step's temporaries) three times with the C library's malloc,
# and prints the page faults of the last round.
_PROBE = """
import ctypes, resource, threading
from lnorm.training import host_memory
print(host_memory.keep_freed_memory())
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
faults = []
def rounds():
  for _ in range(3):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = libc.malloc(96 << 20)
    ctypes.memset(block, 1, 96 << 20)
    libc.free(block)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
thread = threading.Thread(target=rounds)
thread.start()
thread.join()
print(faults[-1])
"""


def _probe(**env) -> tuple[str, int]:
  out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                       check=True, env={**os.environ, **env}).stdout.split()
  return out[0], int(out[1])


@pytest.mark.skipif(host_memory._glibc() is None, reason="glibc's malloc only")
def test_freed_memory_is_reused_without_page_faults():
  applied, faults = _probe()
  assert applied == "True"
  # 96 MB is 24,576 pages of 4 KiB: without the setting each round faults them all.
  assert faults < 1000
  applied, faults = _probe(**{host_memory.ENV: "0"})
  assert applied == "False"
  assert faults > 20000
