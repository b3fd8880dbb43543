"""A cache of decoded arrays, kept outside the repository and the (read-only) data.

Decoding 60k JPEGs or tokenising 50k reviews takes seconds that every run would
otherwise pay again. An entry is keyed by the source archive's path, size and
modification time (of every file inside, for a folder), by the source code of the modules that decode it (a digest of
each module's text, so any edit to the decoder invalidates its entries without anyone
remembering to bump a version), and by an optional version string for what the code
does not show (e.g. the version of the image library). A changed archive or decoder
never serves stale arrays.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import marshal
import os
import tempfile
import types
from typing import Sequence

import numpy as np

from lnorm.data import core

CACHE_DIR_ENV = "LNORM_CACHE_DIR"
_log = logging.getLogger(__name__)


def cache_dir(config, data_dir: str | None) -> str:
  """data_config.cache_dir, else $LNORM_CACHE_DIR, else <data_dir>/.lnorm_cache if
  the data directory is writable, else ~/.cache/lnorm."""
  configured = core.option(config, "cache_dir") or os.environ.get(CACHE_DIR_ENV)
  if configured:
    return os.path.abspath(os.path.expanduser(configured))
  if data_dir and _writable(data_dir):
    return os.path.join(data_dir, ".lnorm_cache")
  return os.path.join(os.path.expanduser("~"), ".cache", "lnorm")


def _writable(path: str) -> bool:
  # os.access is always true for root, so also honour a directory marked
  # read-only by its mode (a shared, read-only data copy must stay untouched).
  try:
    marked = os.stat(path).st_mode & 0o222
  except OSError:
    return False
  return bool(marked) and os.access(path, os.W_OK)


def enabled(config) -> bool:
  return bool(core.option(config, "use_cache", True))


def code_fingerprint(decoder: Sequence[types.ModuleType]) -> str:
  """A digest of the source of the ``decoder`` modules: editing any function in them
  changes it. Modules rather than functions, so that rebinding a name (a test's
  monkeypatch, a wrapper) cannot move the key to whichever module defined the stand-in."""
  h = hashlib.sha1()
  for module in sorted(decoder, key=lambda m: m.__name__):
    if not isinstance(module, types.ModuleType):
      raise TypeError(f"decoder takes modules, got {module!r}; pass the module that defines it.")
    h.update(module.__name__.encode())
    try:
      h.update(inspect.getsource(module).encode())
    except (OSError, TypeError):
      # No source shipped (a .pyc-only install): the compiled code still changes with it.
      for value in vars(module).values():
        if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
          h.update(marshal.dumps(value.__code__))
  return h.hexdigest()


def _identity(source_path: str) -> str:
  """Path, size and modification time of a file; of every file below a directory (a
  directory's own size and time do not change when a file inside it is edited)."""
  files = [source_path]
  if os.path.isdir(source_path):
    files = sorted(os.path.join(root, name) for root, _, names in os.walk(source_path)
                   for name in names)
  parts = [os.path.abspath(source_path)]
  for path in files:
    st = os.stat(path)
    parts.append(f"{os.path.relpath(path, source_path)}:{st.st_size}:{st.st_mtime_ns}")
  return "|".join(parts)


def key_path(directory: str, kind: str, source_path: str | Sequence[str], version: str = "",
             *, decoder: Sequence[types.ModuleType]) -> str:
  """The cache file for ``source_path`` (a file or directory, or several) decoded by
  the modules ``decoder`` (their source is part of the key) under ``version`` (what
  the source does not show, such as a library version)."""
  sources = [source_path] if isinstance(source_path, str) else list(source_path)
  ident = "|".join([*map(_identity, sources), version, code_fingerprint(decoder)])
  digest = hashlib.sha1(ident.encode()).hexdigest()[:16]
  return os.path.join(directory, f"{kind}-{digest}.npz")


def load(path: str) -> dict[str, np.ndarray] | None:
  """The cached arrays, or None when absent or unreadable (then it is rebuilt)."""
  if not os.path.exists(path):
    return None
  try:
    with np.load(path, allow_pickle=False) as npz:
      return {k: npz[k] for k in npz.files}
  except (OSError, ValueError) as e:
    _log.warning("Ignoring unreadable cache file %s: %s", path, e)
    return None


def save(path: str, arrays: dict[str, np.ndarray]) -> None:
  """Writes atomically; a failure only costs the next run the decoding time."""
  tmp = None
  try:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
      np.savez(f, **arrays)
    os.chmod(tmp, 0o644)  # mkstemp makes it private; a shared cache must be readable.
    os.replace(tmp, path)
    _log.info("Cached decoded arrays in %s", path)
  except OSError as e:
    _log.warning("Could not write cache file %s: %s", path, e)
    if tmp is not None and os.path.exists(tmp):
      os.remove(tmp)
