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
import re
import subprocess
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


def device_slug(kind: str) -> str:
  """A device kind as a folder name, the one results/gpu/<device>/ uses (the GPU
  check's records, the gpu scale's benchmark records):
  'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
  slug = re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-")
  return slug or "unknown-device"


def _version(package: str) -> str | None:
  try:
    return metadata.version(package)
  except metadata.PackageNotFoundError:
    return None


#: Where Linux describes the processor.
CPUINFO = "/proc/cpuinfo"
#: The instruction-set flags that decide the code XLA:CPU emits: LLVM compiles each
#: jitted function for the host's features, so the vector width and fused
#: multiply-add change how a sum is split and rounded. Two machines that both call
#: themselves "AMD EPYC", one with AVX-512 and one without, run different code.
_ISA_FLAGS = re.compile(r"(sse4_[12]|avx|avx2|fma|f16c|avx512\w*|avx_?vnni\w*|avx_ifma"
                        r"|avx_ne_convert|amx\w*|asimd\w*|sve\w*)")


def parse_cpuinfo(text: str) -> dict[str, Any]:
  """The first processor of a ``/proc/cpuinfo`` listing: its name, vendor, family,
  model and stepping (x86's fields; None where the listing has none, as on ARM) and
  its instruction-set flags that matter to XLA (:data:`_ISA_FLAGS`).

  Keys are matched whole: x86 lists ``model`` (a number) before ``model name``, so a
  prefix match would take the number for the name."""
  fields: dict[str, str] = {}
  for line in text.splitlines():
    if not line.strip():
      if fields:
        break  # The first processor's block ends; the others repeat it.
      continue
    key, sep, value = line.partition(":")
    if sep:
      fields.setdefault(key.strip(), value.strip())
  flags = (fields.get("flags") or fields.get("Features") or "").split()
  return {"cpu": fields.get("model name") or platform.processor() or platform.machine(),
          "cpu_vendor": fields.get("vendor_id"), "cpu_family": fields.get("cpu family"),
          "cpu_model": fields.get("model"), "cpu_stepping": fields.get("stepping"),
          "cpu_isa": sorted(f for f in set(flags) if _ISA_FLAGS.fullmatch(f))}


def cpu_description(path: str = CPUINFO) -> dict[str, Any]:
  """:func:`parse_cpuinfo` of this machine (of nothing where ``path`` cannot be read:
  the name then comes from ``platform``)."""
  try:
    with open(path) as f:
      text = f.read()
  except OSError:
    text = ""
  return parse_cpuinfo(text)


def describe() -> dict[str, Any]:
  """The versions, the processor (its instruction sets included) and the thread
  count a run's numbers depend on."""
  return {
      "python": platform.python_version(),
      **{name: _version(name) for name in ("jax", "jaxlib", "flax", "optax", "numpy")},
      "machine": platform.machine(),
      **cpu_description(),
      "xla_cpu_threads": os.environ.get(THREADS_ENV),
      "xla_flags": os.environ.get("XLA_FLAGS", ""),
  }


#: The folders whose code decides a run's numbers: a change to docs or tests does not.
CODE_FOLDERS = ("lnorm", "experiments", "configs")
#: How many changed files a record names; the count is always given.
_CHANGED_SHOWN = 20


def _git(root: str, *args: str) -> str:
  # --no-optional-locks: runs that start together must not race for the index lock.
  return subprocess.run(["git", "--no-optional-locks", "-C", root, *args], check=True,
                        capture_output=True, text=True, timeout=30).stdout


def code_revision(root: str | None = None) -> dict[str, Any]:
  """The code a run trains with: the git commit of the checkout ``lnorm`` is imported
  from (``root``: its parent folder) and whether CODE_FOLDERS differ from that commit
  (edited, added or deleted files, untracked ones included). Without git (an
  installed package, or no ``git`` command) the commit is None and ``why`` says so."""
  # lnorm/training/environment.py -> the folder that holds lnorm/.
  root = root or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  if not os.path.exists(os.path.join(root, ".git")):  # A folder, or a worktree's file.
    return {"commit": None, "why": f"{root} is not a git checkout (an installed package?)"}
  try:
    commit = _git(root, "rev-parse", "HEAD").strip()
    changed = _git(root, "status", "--porcelain", "--untracked-files=all", "--",
                   *CODE_FOLDERS).splitlines()
  except FileNotFoundError:
    return {"commit": None, "why": "the git command is not installed"}
  except (subprocess.SubprocessError, OSError) as e:
    detail = getattr(e, "stderr", "") or str(e)
    return {"commit": None, "why": f"git could not read {root}: {detail.strip()[:200]}"}
  paths = [line[3:] for line in changed]
  return {"commit": commit, "dirty": bool(paths), "changed_files": len(paths),
          "changed": paths[:_CHANGED_SHOWN]}
