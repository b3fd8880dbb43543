"""Helpers for tests that drive the lnorm command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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
