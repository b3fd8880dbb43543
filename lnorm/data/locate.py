"""Where lnorm looks for a dataset's files, and what it says when they are absent."""

from __future__ import annotations

import os

from lnorm.data import core


def search_dirs(data_dir: str | None, subdir: str) -> list[str]:
  """The folders searched for a dataset: ``<data_dir>/<subdir>``, then ``<data_dir>``."""
  if data_dir is None:
    return []
  return [os.path.join(data_dir, subdir), data_dir]


#: How a training command is told the data directory. Commands outside training
#: (``lnorm evaluate --data-dir``) pass their own flag: the advice must name one the
#: command accepts.
CONFIG_FLAG = "--config.data.data_dir=<dir>"


def unset_note(setting: str = "data_config.data_dir") -> str:
  # No parentheses: it is an item of the list of places looked, which others bracket.
  return f"no data directory: neither {setting} nor ${core.DATA_DIR_ENV} is set"


def how_to_fix(dataset: str, files: str, tfds_name: str | None = None,
               flag: str = CONFIG_FLAG, subdir: str | None = None) -> str:
  """The advice printed under the list of places looked."""
  lines = [
      "To fix this, do one of:",
      f"  - put {files} into <dir>/{subdir or dataset}/ or <dir> and set "
      f"{core.DATA_DIR_ENV}=<dir> or pass {flag};",
  ]
  if tfds_name:
    lines.append(
        f"  - pass --config.data.source=tfds to download and prepare the TFDS "
        f"'{tfds_name}' builder (needs internet; TFDS may need "
        "`pip install tensorflow-cpu` to prepare it).")
  return "\n".join(lines)


def not_found(dataset: str, looked: list[str], files: str,
              tfds_name: str | None = None, data_dir: str | None = None,
              flag: str = CONFIG_FLAG, subdir: str | None = None) -> core.DatasetNotFoundError:
  """``flag`` is how the command at hand takes a data directory; ``subdir`` the
  folder under it the files go in (default: the dataset's name)."""
  looked = list(dict.fromkeys(looked))  # Unique, in order.
  if data_dir is None:
    looked.append(unset_note(flag.split("=")[0].split(" ")[0] if flag != CONFIG_FLAG
                             else "data_config.data_dir"))
  return core.DatasetNotFoundError(dataset, looked,
                                   how_to_fix(dataset, files, tfds_name, flag, subdir))


def find_or_raise(config, find_files, dataset: str, files: str,
                  tfds_name: str | None = None):
  """``(found, data_dir)``: the first local copy that ``find_files(data_dir)`` reports,
  or a DatasetNotFoundError listing every place it looked."""
  data_dir = core.data_dir(core.option(config, "data_dir"))
  found, looked = find_files(data_dir)
  if found is None:
    raise not_found(dataset, looked, files, tfds_name, data_dir)
  return found, data_dir
