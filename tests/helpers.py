"""Helpers for tests that drive the lnorm command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Sequence

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def lnorm_subprocess(*args: str, **popen_kwargs) -> subprocess.Popen:
  """Starts ``python -m lnorm ARGS`` the way a user would, from outside the repo."""
  env = dict(os.environ, WANDB_MODE="disabled", PYTHONUNBUFFERED="1")
  env.update(popen_kwargs.pop("env", {}))
  return subprocess.Popen([sys.executable, "-m", "lnorm", *args], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          **popen_kwargs)


def epoch_records(workdir: str) -> list[dict]:
  path = os.path.join(workdir, "metrics.jsonl")
  if not os.path.exists(path):
    return []
  with open(path) as f:
    records = [json.loads(line) for line in f if line.strip()]
  return [r for r in records if "time/epoch_seconds" in r]


def run_record(workdir: str) -> dict:
  """The run's config.json: its config, data, model size and environment."""
  with open(os.path.join(workdir, "config.json")) as f:
    return json.load(f)


#: The variants a test of a recurrence runs in the suite: a normalizer of the mean and
#: variance (LN), of the second moment alone (RMSNorm), LN on the cell alone, none and
#: weight normalization, each its own code. The other per-example normalizers share
#: their code (the normalizer functions, and LN's tile code in the GPU kernels), and
#: run as extended cases (LNORM_EXTENDED=1, docs/testing.md).
DISTINCT_RECURRENCE_VARIANTS = ("ln", "rms", "ln_cell", "none", "wn")


def extended_beyond(variants: Sequence[str],
                    distinct: Sequence[str] = DISTINCT_RECURRENCE_VARIANTS) -> list:
  """``variants`` as pytest parameters, those not in ``distinct`` marked extended."""
  return [v if v in distinct else pytest.param(v, marks=pytest.mark.extended)
          for v in variants]
