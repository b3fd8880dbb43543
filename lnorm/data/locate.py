"""Where lnorm looks for a dataset's files, and what it says when they are absent."""

from __future__ import annotations

import os

from lnorm.data import core


def search_dirs(data_dir: str | None, subdir: str) -> list[str]:
  """The folders searched for a dataset: ``<data_dir>/<subdir>``, then ``<data_dir>``."""
  if data_dir is None:
    return []
  return [os.path.join(data_dir, subdir), data_dir]


def unset_note() -> str:
  # No parentheses: it is an item of the list of places looked, which others bracket.
  return (f"no data directory: neither data_config.data_dir nor ${core.DATA_DIR_ENV} "
          "is set")


def how_to_fix(dataset: str, files: str, tfds_name: str | None = None) -> str:
  """The advice printed under the list of places looked."""
  lines = [
      "To fix this, do one of:",
      f"  - put {files} into <dir>/{dataset}/ or <dir> and set "
      f"{core.DATA_DIR_ENV}=<dir> or pass --config.data.data_dir=<dir>;",
  ]
  if tfds_name:
    lines.append(
        f"  - pass --config.data.source=tfds to download and prepare the TFDS "
        f"'{tfds_name}' builder (needs internet; TFDS may need "
        "`pip install tensorflow-cpu` to prepare it).")
  return "\n".join(lines)


def not_found(dataset: str, looked: list[str], files: str,
              tfds_name: str | None = None, data_dir: str | None = None) -> core.DatasetNotFoundError:
  looked = list(dict.fromkeys(looked))  # Unique, in order.
  if data_dir is None:
    looked.append(unset_note())
  return core.DatasetNotFoundError(dataset, looked, how_to_fix(dataset, files, tfds_name))


def find_or_raise(config, find_files, dataset: str, files: str,
                  tfds_name: str | None = None):
  """``(found, data_dir)``: the first local copy that ``find_files(data_dir)`` reports,
  or a DatasetNotFoundError listing every place it looked."""
  data_dir = core.data_dir(core.option(config, "data_dir"))
  found, looked = find_files(data_dir)
  if found is None:
    raise not_found(dataset, looked, files, tfds_name, data_dir)
  return found, data_dir
