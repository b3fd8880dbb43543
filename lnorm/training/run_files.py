"""The files of a run directory, named in one place: the training side writes them,
``lnorm.analysis`` reads them."""

from __future__ import annotations

import contextlib
import json
import logging
import os
from typing import Any, Iterator

METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.json"
#: ``lnorm bln-search``'s result: every BLN inference configuration, the selected one.
BLN_SEARCH_FILE = "bln_search.json"
#: The run's log: every run's, whether ``lnorm train`` ran it alone or a sweep did.
LOG_FILE = "train.log"
#: Set to 0 when the process's whole output already goes to the workdir's LOG_FILE:
#: ``lnorm sweep`` writes its members' output there itself (tracebacks included).
LOG_FILE_ENV = "LNORM_TRAIN_LOG"


#: In a workdir's path (and a wandb name), the seed of a run that trains several
#: seeds into a workdir each (``lnorm train --seeds``): runs/ln/seed={seed}.
SEED_FIELD = "{seed}"


def with_seed(pattern: str, seed: int) -> str:
  """``pattern`` with its :data:`SEED_FIELD` replaced by ``seed``."""
  return pattern.replace(SEED_FIELD, str(seed))


def read_jsonl(path: str) -> list[dict[str, Any]]:
  """The records of a JSON-lines file; [] if it does not exist."""
  if not os.path.exists(path):
    return []
  out = []
  with open(path) as f:
    for line in f:
      if line.strip():
        try:
          out.append(json.loads(line))
        except json.JSONDecodeError:  # A line cut short by a kill: ignore it.
          pass
  return out


@contextlib.contextmanager
def log_file(workdir: str) -> Iterator[str | None]:
  """Appends this process's log records to ``<workdir>/train.log`` while it lasts,
  formatted as on the console; yields the file's path, None when it is not written
  (``$LNORM_TRAIN_LOG=0``, or a workdir that cannot be made: the run's own checks
  then say why)."""
  if os.environ.get(LOG_FILE_ENV, "1") == "0":
    yield None
    return
  path = os.path.join(workdir, LOG_FILE)
  try:
    os.makedirs(workdir, exist_ok=True)
    handler = logging.FileHandler(path, mode="a", encoding="utf-8")
  except OSError:
    yield None
    return
  root = logging.getLogger()
  console = next((h for h in root.handlers if h.formatter is not None), None)
  handler.setFormatter(console.formatter if console else logging.Formatter(
      "%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S"))
  root.addHandler(handler)
  try:
    yield path
  finally:
    root.removeHandler(handler)
    handler.close()
