"""The files of a run directory, named in one place: the training side writes them,
``lnorm.analysis`` reads them."""

from __future__ import annotations

import json
import os
from typing import Any

METRICS_FILE = "metrics.jsonl"
CONFIG_FILE = "config.json"


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
