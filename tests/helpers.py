"""Helpers for tests that drive the lnorm command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Sequence

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: What tests/conftest.py adds to XLA_FLAGS unless LNORM_TEST_XLA_OPT=default.
UNOPTIMIZED_XLA_FLAG = "--xla_backend_optimization_level=0"


def lnorm_subprocess(*args: str, **popen_kwargs) -> subprocess.Popen:
  """Starts ``python -m lnorm ARGS`` the way a user would, from outside the repo."""
  env = dict(os.environ, WANDB_MODE="disabled", PYTHONUNBUFFERED="1")
  env.update(popen_kwargs.pop("env", {}))
  return subprocess.Popen([sys.executable, "-m", "lnorm", *args], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          **popen_kwargs)


def metric_points(workdir: str) -> list[dict]:
  """The points ``workdir``'s metrics.jsonl holds so far ([] before it exists): whole
  lines only, since a run still going may be writing its last."""
  try:
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
      return [json.loads(line) for line in f if line.endswith("\n")]
  except FileNotFoundError:
    return []


def epoch_records(workdir: str) -> list[dict]:
  return [r for r in metric_points(workdir) if "time/epoch_seconds" in r]


def wait_for(condition, timeout: float = 120.0, poll: float = 0.02) -> bool:
  """Whether ``condition()`` came true within ``timeout`` seconds, asked every
  ``poll`` seconds."""
  deadline = time.time() + timeout
  while time.time() < deadline:
    if condition():
      return True
    time.sleep(poll)
  return False


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


def train_xla_flags(flags: str | None = None) -> str:
  """The XLA_FLAGS lnorm train records, started with ``flags`` (the suite's own,
  tests/conftest.py, by default): those and the GPU determinism flag it adds."""
  flags = os.environ.get("XLA_FLAGS", "") if flags is None else flags
  if "xla_gpu_deterministic_ops" in flags:
    return flags
  return f"{flags} --xla_gpu_deterministic_ops=true".strip()


def xla_flags_as_users_run() -> str:
  """XLA_FLAGS without the suite's own optimization level: for a subprocess that must
  compile (and time) as a user's run does."""
  return " ".join(f for f in os.environ.get("XLA_FLAGS", "").split()
                  if f != UNOPTIMIZED_XLA_FLAG)


def xla_flags_with_devices(devices: int) -> str:
  """XLA_FLAGS for a subprocess with ``devices`` emulated CPU devices, keeping the
  suite's own flags (tests/conftest.py)."""
  return f"{os.environ.get('XLA_FLAGS', '')} " \
         f"--xla_force_host_platform_device_count={devices}".strip()
