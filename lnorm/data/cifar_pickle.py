"""Reading the official CIFAR-10 python pickles (``cifar-10-batches-py``), from a
directory or from ``cifar-10-python.tar.gz``.

Each batch is a dict with b'data' uint8 [N, 3072] (the 1024 red, then green, then
blue values of a 32x32 image, row-major) and b'labels'. Unpickling runs code, so
only the NumPy array constructors and plain containers are allowed.
"""

from __future__ import annotations

import codecs
import importlib
import io
import os
import pickle
import tarfile

import numpy as np

from lnorm.data.core import MalformedDataError

FOLDER = "cifar-10-batches-py"
ARCHIVE = "cifar-10-python.tar.gz"
BATCHES = {"train": tuple(f"data_batch_{i}" for i in range(1, 6)), "test": ("test_batch",)}


class _SafeUnpickler(pickle.Unpickler):
  """Allows the globals a pickled NumPy array needs, nothing else."""

  # (numpy core submodule, name); pickles name them under numpy.core (NumPy 1) or
  # numpy._core (NumPy 2).
  _NUMPY_CORE = {("multiarray", "_reconstruct"), ("multiarray", "scalar"),
                 ("numeric", "_frombuffer")}

  def find_class(self, module, name):
    if module == "numpy" and name in ("ndarray", "dtype"):
      return getattr(np, name)
    if module == "_codecs" and name == "encode":  # Python 3 bytes in protocol 2.
      return codecs.encode
    for prefix in ("numpy._core.", "numpy.core."):
      sub = module[len(prefix):] if module.startswith(prefix) else None
      if (sub, name) in self._NUMPY_CORE:
        try:
          return getattr(importlib.import_module("numpy._core." + sub), name)
        except ImportError:  # NumPy 1.
          return getattr(importlib.import_module("numpy.core." + sub), name)
    raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")


def parse_batch(data: bytes, where: str) -> dict[str, np.ndarray]:
  """{'image' uint8 [N, 32, 32, 3], 'label' int32 [N]} from one pickled batch."""
  try:
    batch = _SafeUnpickler(io.BytesIO(data), encoding="bytes").load()
  except Exception as e:  # Unpickling garbage raises many types.
    raise MalformedDataError(where, f"not a CIFAR-10 python pickle ({e})") from e
  if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
    keys = sorted(batch) if isinstance(batch, dict) else type(batch).__name__
    raise MalformedDataError(where, f"expected a dict with b'data' and b'labels', got {keys}")
  pixels = np.asarray(batch[b"data"])
  labels = np.asarray(batch[b"labels"])
  if pixels.dtype != np.uint8 or pixels.ndim != 2 or pixels.shape[1] != 3072:
    raise MalformedDataError(where, f"b'data' is {pixels.dtype} {pixels.shape}, expected "
                             "uint8 [N, 3072]")
  if labels.shape != (len(pixels),):
    raise MalformedDataError(where, f"{len(labels)} labels for {len(pixels)} images")
  if len(labels) and (labels.min() < 0 or labels.max() > 9):
    raise MalformedDataError(where, "labels outside 0..9")
  # Stored channel-major (CHW); models want HWC.
  images = pixels.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
  return {"image": np.ascontiguousarray(images), "label": labels.astype(np.int32)}


def read_dir(folder: str) -> dict[str, dict[str, np.ndarray]]:
  out = {}
  for split, names in BATCHES.items():
    parts = []
    for name in names:
      path = os.path.join(folder, name)
      if not os.path.isfile(path):
        raise MalformedDataError(folder, f"missing batch file {name}")
      with open(path, "rb") as f:
        parts.append(parse_batch(f.read(), path))
    out[split] = _concat(parts)
  return out


def read_tar(path: str) -> dict[str, dict[str, np.ndarray]]:
  wanted = {n: s for s, names in BATCHES.items() for n in names}
  found = {}
  try:
    with tarfile.open(path, "r:*") as tf:
      for member in tf:
        base = os.path.basename(member.name)
        if member.isfile() and base in wanted and member.name.endswith(f"{FOLDER}/{base}"):
          found[base] = parse_batch(tf.extractfile(member).read(), f"{path}:{member.name}")
  except (tarfile.TarError, OSError, EOFError) as e:
    raise MalformedDataError(path, f"not a readable tar archive ({e})") from e
  missing = [n for n in wanted if n not in found]
  if missing:
    raise MalformedDataError(path, f"archive lacks {FOLDER}/{', '.join(missing)}")
  return {s: _concat([found[n] for n in names]) for s, names in BATCHES.items()}


def _concat(parts):
  return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
