"""Data sources: ``load(name, data_config)`` -> an in-memory ``Dataset``.

Datasets and their sources ('auto' tries the listed order):

  mnist            tfds -> files -> embedded   train/validation/test
  binarized_mnist  tfds -> files -> derived    train/validation/test
  cifar10          tfds -> files               train/validation/test (+ 'synthetic')
  imdb             tfds -> files               train/validation/test (+ 'synthetic')
  books            files                       train/validation (+ 'synthetic')
  book_chars       files                       train/validation/test (+ 'synthetic')
  image_captions   files                       train/validation/test (+ 'synthetic')
  iamondb          files -> strokes_npy        train/validation/test (+ 'synthetic')
  cloze            files                       train/validation/test (+ 'cbt', 'cbt_books',
                                               'cloze_books', 'synthetic')

Under 'auto', TFDS is used only if the dataset is already prepared locally; it
never downloads. Synthetic data is never chosen by 'auto'.
"""

from __future__ import annotations

import logging
from typing import Any

from lnorm.config import did_you_mean
from lnorm.data import binarized_mnist
from lnorm.data import book_chars
from lnorm.data import books
from lnorm.data import cifar10
from lnorm.data import cloze
from lnorm.data import image_captions
from lnorm.data import iamondb
from lnorm.data import imdb
from lnorm.data import mnist
from lnorm.data.core import DATA_DIR_ENV
from lnorm.data.core import DataError
from lnorm.data.core import Dataset
from lnorm.data.core import DatasetNotFoundError
from lnorm.data.core import MalformedDataError
from lnorm.data.core import data_dir
from lnorm.data.core import option
from lnorm.data.resolution import UnknownDataChoiceError
from lnorm.data.resolution import check_source as _check_source
from lnorm.data.resolution import resolve

_log = logging.getLogger(__name__)

#: name -> module with SOURCES (source name -> loader) and AUTO (the 'auto' order).
DATASETS = {
    "mnist": mnist,
    "binarized_mnist": binarized_mnist,
    "cifar10": cifar10,
    "imdb": imdb,
    "books": books,
    "book_chars": book_chars,
    "iamondb": iamondb,
    "image_captions": image_captions,
    "cloze": cloze,
}


def sources(name: str) -> tuple[str, ...]:
  """The valid values of data_config.source for dataset ``name``."""
  return ("auto", *_module(name).SOURCES)


def check_source(name: str, source: str) -> None:
  """Refuses, before any data loads, a dataset or a source of it that lnorm lacks."""
  _check_source(name, source, list(_module(name).SOURCES))


def load(name: str, data_config: Any = None) -> Dataset:
  """Loads dataset ``name`` as configured by ``data_config`` (a ConfigDict or dict).

  Common fields (all optional): source ('auto'), data_dir (None: $LNORM_DATA_DIR),
  validation_size, seed (0), subset_fraction (1.0), tfds_data_dir (None: TFDS's
  default), cache_dir, use_cache (True); dataset modules document their own.
  """
  module = _module(name)
  source = option(data_config, "source", "auto")
  ds = resolve(name, source, module.SOURCES, module.AUTO, data_config)
  sizes = ", ".join(f"{s} {ds.num_examples(s)}" for s in ds.splits)
  via = f" (auto: {'; '.join(ds.resolution)})" if ds.resolution else ""
  _log.info("Loaded %s from source %s at %s: %s%s%s", name, ds.source, ds.location, sizes,
            f"; note: {ds.notes}" if ds.notes else "", via)
  return ds


def _module(name: str):
  if name not in DATASETS:
    raise UnknownDataChoiceError(
        f"Unknown dataset {name!r}{did_you_mean(str(name), DATASETS)}; valid datasets: "
        f"{', '.join(DATASETS)}. Set --config.data.name to one of them.")
  return DATASETS[name]


__all__ = [
    "DATA_DIR_ENV", "DATASETS", "DataError", "Dataset", "DatasetNotFoundError",
    "MalformedDataError", "UnknownDataChoiceError", "check_source", "data_dir", "load",
    "sources",
]
