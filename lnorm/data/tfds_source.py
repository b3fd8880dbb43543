"""Reading a TFDS builder into NumPy arrays without TensorFlow.

``tfds.data_source`` reads the builder's ArrayRecord files by random access and
decodes with NumPy, so it works without TensorFlow once a dataset is prepared.
Preparing (downloading and writing the records) may still need TensorFlow for some
builders; the error then says so. tensorflow-datasets itself is optional: without it
the 'auto' source passes TFDS over, and asking for the 'tfds' source says to install it.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from typing import Callable, Sequence

import numpy as np

from lnorm.data import core

_log = logging.getLogger(__name__)
_CHUNK = 1024


def is_prepared(name: str, data_dir: str | None) -> bool:
  """True when the builder's files already exist locally (nothing to download).

  Where the builder has no folder at all, the answer is no without asking TFDS: TFDS
  would log "Variant folder ~/tensorflow_datasets/mnist/3.0.1 has no
  dataset_info.json", which reads like a broken install when it only means that the
  dataset was never downloaded (source 'auto' then moves on to the local files).
  """
  folder = _builder_folder(name, data_dir)
  if folder is not None and not os.path.isdir(folder):
    _log.info("TFDS '%s' is not prepared: no %s folder", name, folder)
    return False
  if not installed():
    _log.info("TFDS '%s' is passed over: tensorflow-datasets is not installed", name)
    return False
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  absl = logging.getLogger("absl")
  level = absl.level
  absl.setLevel(logging.ERROR)  # Its warnings about incomplete folders: said below.
  try:
    prepared = tfds.builder(name, data_dir=data_dir).is_prepared()
  except Exception as e:  # pylint: disable=broad-except
    _log.info("TFDS builder %s unavailable: %s", name, e)
    return False
  finally:
    absl.setLevel(level)
  if not prepared:
    _log.info("TFDS '%s' is not prepared: %s holds no complete copy", name, folder)
  return prepared


def installed() -> bool:
  """Whether tensorflow-datasets can be imported: it is optional, and only the TFDS
  source needs it."""
  try:
    return importlib.util.find_spec("tensorflow_datasets") is not None
  except (ImportError, ValueError):  # ValueError: a module entry without a spec.
    return False


#: What to do without tensorflow-datasets.
NOT_INSTALLED_FIX = ("`pip install tensorflow-datasets` for the TFDS source, or use "
                     "--config.data.source=files with the dataset's files in your data "
                     "directory.")


def _default_dir() -> str:
  return os.environ.get("TFDS_DATA_DIR", "~/tensorflow_datasets")


def _builder_folder(name: str, data_dir: str | None) -> str | None:
  """The local folder TFDS prepares builder ``name`` in (``imdb_reviews/plain_text``:
  ``<dir>/imdb_reviews``); None for a remote place such as gs://, which only TFDS can
  look into."""
  root = data_dir or _default_dir()
  if "://" in root:
    return None
  return os.path.join(os.path.expanduser(root), name.split("/")[0])


def where(name: str, data_dir: str | None) -> str:
  return f"TFDS '{name}' prepared in {data_dir or _default_dir()}"


def read_splits(name: str, splits: Sequence[str], data_dir: str | None, download: bool,
                convert: Callable[[list[dict]], dict[str, np.ndarray]],
                dataset: str) -> dict[str, dict[str, np.ndarray]]:
  """split -> arrays, each split's examples passed through ``convert``.

  Raises DatasetNotFoundError when ``download`` is off and the builder is not
  prepared, and DataError when TFDS fails otherwise.
  """
  if not download and not is_prepared(name, data_dir):
    why = "not prepared" if installed() else "tensorflow-datasets is not installed"
    raise core.DatasetNotFoundError(
        dataset, [f"TFDS '{name}' in {data_dir or _default_dir()}: {why}"],
        "Pass --config.data.source=tfds to let TFDS download and prepare it."
        if installed() else NOT_INSTALLED_FIX)
  try:
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise core.DataError(f"The TFDS source of {dataset} is asked for, but "
                         f"tensorflow-datasets is not installed ({e}): "
                         f"{NOT_INSTALLED_FIX}") from e
  out = {}
  for split in splits:
    try:
      source = tfds.data_source(name, split=split, data_dir=data_dir, download=download)
    except (ImportError, ModuleNotFoundError) as e:
      raise core.DataError(
          f"TFDS could not prepare '{name}' without TensorFlow ({e}). Either "
          "`pip install tensorflow-cpu` and retry, or use --config.data.source=files "
          "with the dataset's files in your data directory.") from e
    except NotImplementedError as e:
      # A dataset prepared earlier in the TFRecord format cannot be read by random access.
      raise core.DatasetNotFoundError(
          dataset, [where(name, data_dir) + f": {e}"],
          "Re-prepare it with file_format='array_record' in another TFDS data_dir "
          "(--config.data.tfds_data_dir), or use --config.data.source=files.") from e
    except Exception as e:  # pylint: disable=broad-except
      hint = ("`pip install tensorflow-cpu` (TFDS needs TensorFlow to prepare some "
              "datasets) or " if "tensorflow" in str(e).lower() else "")
      raise core.DataError(
          f"TFDS failed to load '{name}' split '{split}': {type(e).__name__}: {e}. "
          f"Try {hint}--config.data.source=files.") from e
    out[split] = convert(_read_all(source))
  return out


def _read_all(source) -> list[dict]:
  """Every example of a data source, in order, reading in chunks where possible."""
  n = len(source)
  examples = []
  batched = hasattr(source, "__getitems__")
  for start in range(0, n, _CHUNK):
    keys = list(range(start, min(n, start + _CHUNK)))
    if batched:
      try:
        examples.extend(source.__getitems__(keys))
        continue
      except TypeError:
        # tfds.testing.mock_data's source lacks batched reads; read one by one.
        batched = False
    examples.extend(source[i] for i in keys)
  return examples


def stack(examples: list[dict], key: str, dtype=None) -> np.ndarray:
  arr = np.stack([np.asarray(ex[key]) for ex in examples]) if examples else np.zeros((0,))
  return arr.astype(dtype) if dtype is not None else arr


def text(value) -> str:
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)
