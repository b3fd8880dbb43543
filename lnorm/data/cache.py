"""A cache of decoded arrays, kept outside the repository and the data directory.

Decoding 60k JPEGs or tokenising 50k reviews takes seconds that every run would
otherwise pay again. The cache lives in the user's cache folder (:func:`cache_dir`),
never in the data directory: that folder is the user's own, often shared with
colleagues or read-only by policy, and lnorm only reads it.

An entry is keyed by the content of its source files (a digest of their bytes, and
for a folder of every file's relative name and bytes: not sizes and times, which a
copy can keep while the bytes change), by the source code of the modules that decode
it (a digest of each module's text, so any edit to the decoder invalidates its entries
without anyone remembering to bump a version), and by an optional version string for
what the code does not show (e.g. the version of the image library). A changed file or
decoder never serves stale arrays, and a moved or copied data directory reuses its
entries.
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
XDG_CACHE_ENV = "XDG_CACHE_HOME"

#: For ``--help``: where the cache lives, how big it gets, how to clear it.
HELP = (
    "Data cache: decoded datasets (CIFAR-10's images, IMDB's tokens, IAM-OnDB's strokes, "
    f"cloze questions) are kept as .npz files in ${CACHE_DIR_ENV} if set, else "
    f"${XDG_CACHE_ENV}/lnorm, else ~/.cache/lnorm; never in the "
    "data directory. Per dataset: 185 MB for CIFAR-10, 93 MB for IAM-OnDB, 55 MB for "
    "IMDB; 78 MB of .npz plus 41 MB of CBT-format text for the CBT-style questions built "
    "from the books (attentive_reader.py:scale=cpu). An edited decoder or data "
    "file adds a new entry beside the old one. To clear it, delete the folder (or any "
    ".npz in it): entries are rebuilt when next needed.")

_log = logging.getLogger(__name__)


def cache_dir(config=None, data_dir: str | None = None) -> str:
  """Where decoded arrays are cached: ``data_config.cache_dir`` (a field of the data
  API, for tests and notebooks), else $LNORM_CACHE_DIR, else $XDG_CACHE_HOME/lnorm,
  else ~/.cache/lnorm.

  Never inside the data directory, whatever its permissions: ``data_dir`` is not
  consulted (it is accepted so that callers may pass their data config's).
  """
  del data_dir
  configured = core.option(config, "cache_dir") or os.environ.get(CACHE_DIR_ENV)
  if configured:
    return os.path.abspath(os.path.expanduser(configured))
  xdg = os.environ.get(XDG_CACHE_ENV, "")
  # The XDG specification: a relative path in the variable is invalid and ignored.
  base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "lnorm")


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
  """A digest of a file's bytes; of every file's relative name and bytes below a
  directory (in sorted order, so that the walk's order does not matter)."""
  if not os.path.isdir(source_path):
    return _file_digest(source_path)
  h = hashlib.sha256()
  for root, dirs, names in os.walk(source_path):
    dirs.sort()
    for name in sorted(names):
      path = os.path.join(root, name)
      h.update(os.path.relpath(path, source_path).encode() + b"\0")
      h.update(_file_digest(path).encode())
  return h.hexdigest()


def _file_digest(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.file_digest(f, "sha256").hexdigest()


def key_path(directory: str, kind: str, source_path: str | Sequence[str], version: str = "",
             *, decoder: Sequence[types.ModuleType]) -> str:
  """The cache file for ``source_path`` (a file or directory, or several: their
  content is the key, not their path) decoded by the modules ``decoder`` (their source
  is part of the key) under ``version`` (what the source does not show, such as a
  library version)."""
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
