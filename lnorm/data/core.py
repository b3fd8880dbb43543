"""What every data source returns, and the errors every data source raises.

Datasets in lnorm are small enough to hold in host memory as NumPy arrays, which
makes batching deterministic from (seed, epoch) and resumption exact: see
``lnorm.data.batching``.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping

import numpy as np

from lnorm.errors import UserError

#: The environment variable that names the data directory.
DATA_DIR_ENV = "LNORM_DATA_DIR"


class DataError(UserError):
  """Base class: a data problem the user can fix. The message says how."""


class DatasetNotFoundError(DataError):
  """No copy of the dataset was found; the message lists where lnorm looked."""

  def __init__(self, dataset: str, looked: list[str], how_to_fix: str):
    self.dataset = dataset
    self.looked = looked
    self.how_to_fix = how_to_fix
    lines = [f"Could not find the {dataset} dataset. lnorm looked in:"]
    lines += [f"  - {place}" for place in looked]
    lines.append(how_to_fix)
    super().__init__("\n".join(lines))


class MalformedDataError(DataError):
  """A data file exists but is not in the expected format."""

  def __init__(self, path: str, problem: str, how_to_fix: str = ""):
    msg = f"Malformed data file {path}: {problem}."
    if how_to_fix:
      msg += f" {how_to_fix}"
    super().__init__(msg)


@dataclasses.dataclass
class Dataset:
  """A dataset held in memory: named splits of equally long NumPy arrays.

  Attributes:
    name: the dataset, e.g. 'mnist'.
    source: how it was obtained: 'tfds', 'files', 'embedded', 'derived' or
      'synthetic'. Synthetic data is for smoke runs only, and reports mark it.
    location: where it came from (a path, a TFDS builder name, a package).
    splits: split name -> feature name -> array with the examples on axis 0.
    notes: anything a reader of the results must know (e.g. 'JPEG re-encoding').
    info: dataset facts a model needs (e.g. {'num_classes': 10}).
    resolution: for source 'auto', what was tried before the source that was
      used, and why it was passed over; empty otherwise.
  """

  name: str
  source: str
  location: str
  splits: dict[str, dict[str, np.ndarray]]
  notes: str = ""
  info: dict[str, Any] = dataclasses.field(default_factory=dict)
  resolution: list[str] = dataclasses.field(default_factory=list)

  def __post_init__(self):
    for split, arrays in self.splits.items():
      sizes = {k: len(v) for k, v in arrays.items()}
      if len(set(sizes.values())) > 1:
        raise ValueError(f"{self.name}/{split}: features differ in length: {sizes}")

  def num_examples(self, split: str) -> int:
    arrays = self.splits[split]
    return len(next(iter(arrays.values()))) if arrays else 0

  def describe(self) -> dict[str, Any]:
    """The record written into config.json and reports."""
    return {
        "name": self.name,
        "source": self.source,
        "location": self.location,
        "num_examples": {s: self.num_examples(s) for s in self.splits},
        "synthetic": self.source == "synthetic",
        "notes": self.notes,
        "resolution": list(self.resolution),
    }


def data_dir(configured: str | None = None) -> str | None:
  """The data directory: the config's field if set, else $LNORM_DATA_DIR."""
  path = configured or os.environ.get(DATA_DIR_ENV)
  return os.path.abspath(os.path.expanduser(path)) if path else None


def option(config: Any, key: str, default: Any = None) -> Any:
  """``config.key``, or ``default`` when the config lacks the field or holds None.

  Data configs are ``ml_collections.ConfigDict``s, but plain dicts and None work
  too, so that tests and notebooks need not build one.
  """
  if config is None:
    return default
  value = config.get(key, None) if hasattr(config, "get") else getattr(config, key, None)
  return default if value is None else value


def take_fields(arrays: Mapping[str, np.ndarray], index: np.ndarray) -> dict[str, np.ndarray]:
  return {k: v[index] for k, v in arrays.items()}
