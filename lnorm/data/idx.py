"""A strict reader for the IDX format of the MNIST files (LeCun et al.).

Layout: two zero bytes, a type code, the number of dimensions, then each dimension
as a big-endian int32, then the data in C order, big-endian. Files may be gzipped.
Every inconsistency is reported with the file's name, because a half-downloaded
file otherwise shows up much later as a shape error or as a bad accuracy.
"""

from __future__ import annotations

import gzip
import zlib

import numpy as np

from lnorm.data.core import MalformedDataError

_DTYPES = {
    0x08: np.dtype("u1"),
    0x09: np.dtype("i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_GZIP_MAGIC = b"\x1f\x8b"
_REDOWNLOAD = "Download the file again."


def read_bytes(path: str) -> bytes:
  """The file's content, gunzipped if it is gzip (by content, not by name)."""
  with open(path, "rb") as f:
    raw = f.read()
  if raw[:2] != _GZIP_MAGIC:
    return raw
  try:
    return gzip.decompress(raw)
  except (OSError, EOFError, zlib.error) as e:
    raise MalformedDataError(path, f"corrupt or truncated gzip data ({e})", _REDOWNLOAD) from e


def parse(data: bytes, path: str) -> np.ndarray:
  """The array held in IDX bytes ``data``; ``path`` names the file in errors."""
  if len(data) < 4:
    raise MalformedDataError(path, f"too short for an IDX header ({len(data)} bytes)",
                             _REDOWNLOAD)
  if data[0] != 0 or data[1] != 0:
    raise MalformedDataError(
        path, f"bad magic number 0x{data[:4].hex()}: an IDX file starts with two zero "
        "bytes", "Is it an IDX file (e.g. train-images-idx3-ubyte)?")
  code, ndim = data[2], data[3]
  if code not in _DTYPES:
    raise MalformedDataError(path, f"unknown IDX type code 0x{code:02x}")
  if ndim == 0:
    raise MalformedDataError(path, "IDX header declares 0 dimensions")
  header = 4 + 4 * ndim
  if len(data) < header:
    raise MalformedDataError(path, f"truncated header: {ndim} dimensions need {header} "
                             f"bytes, file holds {len(data)}", _REDOWNLOAD)
  dims = tuple(int(d) for d in np.frombuffer(data, ">u4", count=ndim, offset=4))
  dtype = _DTYPES[code]
  expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
  held = len(data) - header
  shape = "x".join(map(str, dims))
  if held < expected:
    raise MalformedDataError(path, f"truncated: header says {shape} of {dtype.name} "
                             f"({expected} bytes of data), file holds {held} bytes of data",
                             _REDOWNLOAD)
  if held > expected:
    raise MalformedDataError(path, f"{held - expected} unexpected bytes after the "
                             f"{shape} data the header declares")
  arr = np.frombuffer(data, dtype, offset=header).reshape(dims)
  return arr.astype(dtype.newbyteorder("="))


def read(path: str) -> np.ndarray:
  """The array in the IDX file at ``path`` (gzipped or not)."""
  return parse(read_bytes(path), path)
