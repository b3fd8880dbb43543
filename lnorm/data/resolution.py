"""Choosing a data source: the one asked for, or under 'auto' the first that works."""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Sequence

from lnorm.data import core

#: A source: (data_config, auto) -> Dataset. Under auto it must not download.
Source = Callable[[Any, bool], core.Dataset]

_log = logging.getLogger(__name__)


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
