"""Data parallelism: 4 emulated CPU devices, and two processes joined by
jax.distributed, train exactly like 1 device; a run killed on 4 devices resumes from
its (sharded) checkpoint as if it had never stopped.

Each run is a subprocess because XLA_FLAGS must be set before JAX starts.
"""

from __future__ import annotations

import json
import os
import signal
import time
import types

import pytest

from tests.helpers import (epoch_records, lnorm_subprocess, metric_points,
                           xla_flags_with_devices)

# BN at batch 40: 10 examples per device, so per-device statistics would show at once.
SMOKE = "configs/perm_mnist.py:norm=bn,batch_size=40,smoke=true"
ARGS = ["--config.hidden_sizes=16", "--config.num_epochs=3", "--config.log_every_steps=10",
        "--config.progress_bar=false", "--config.eval_batch_size=500"]
COMPARED = ("train/loss", "train/nll", "train/error", "train/grad_norm", "validation/nll",
            "validation/error", "test/nll", "test/error")
TOLERANCE = 1e-5


def _train(workdir: str, devices: int, *extra: str):
  env = {"XLA_FLAGS": xla_flags_with_devices(devices)}
  return lnorm_subprocess("train", "--config", SMOKE, *ARGS, *extra, "--workdir", workdir,
                          env=env)



def max_difference(a: list[dict], b: list[dict]) -> float:
  """The largest |a - b| over the compared metrics of matching points."""
  assert [p["step"] for p in a] == [p["step"] for p in b]
  worst = 0.0
  for p, q in zip(a, b):
    for k in COMPARED:
      if k in p or k in q:
        worst = max(worst, abs(p[k] - q[k]))
  return worst


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """An uninterrupted run on 1 and on 4 devices, side by side."""
  root = tmp_path_factory.mktemp("parallel")
  dirs = {n: str(root / f"devices{n}") for n in (1, 4)}
  procs = {n: _train(d, n) for n, d in dirs.items()}
  for n, p in procs.items():
    _, stderr = p.communicate(timeout=600)
    assert p.returncode == 0, stderr
  return dirs


def test_four_devices_match_one_device(runs):
  for n, d in runs.items():
    with open(os.path.join(d, "config.json")) as f:
      assert json.load(f)["devices"]["count"] == n
  one, four = metric_points(runs[1]), metric_points(runs[4])
  assert len(epoch_records(runs[4])) == 3
  assert len(four) > 3  # Intra-epoch losses too, every 10 steps.
  assert max_difference(one, four) < TOLERANCE


def test_kill_and_resume_on_four_devices(runs, tmp_path):
  workdir = str(tmp_path / "killed")
  extra = ("--config.checkpoint_every_secs=0.05",)
  proc = _train(workdir, 4, *extra)
  deadline = time.time() + 300
  # Kill it inside the second epoch (100 steps per epoch).
  while time.time() < deadline and not any(
      p.get("step", 0) > 100 for p in metric_points(workdir)):
    if proc.poll() is not None:
      break
    time.sleep(0.02)
  proc.send_signal(signal.SIGTERM)
  _, stderr = proc.communicate(timeout=300)
  assert proc.returncode == 130, stderr
  assert len(epoch_records(workdir)) < 3, "the run finished before it was killed"

  resumed = _train(workdir, 4, *extra)
  _, stderr = resumed.communicate(timeout=600)
  assert resumed.returncode == 0, stderr
  assert "Resuming from the checkpoint" in stderr
  assert max_difference(epoch_records(workdir), epoch_records(runs[4])) < TOLERANCE


def test_batch_size_must_divide_over_devices():
  from lnorm.errors import ConfigError  # pylint: disable=g-import-not-at-top
  from lnorm.training import parallel  # pylint: disable=g-import-not-at-top
  four_devices = types.SimpleNamespace(size=4)  # Only the mesh's size is read.
  parallel.check_batch_size(40, four_devices)
  with pytest.raises(ConfigError, match="batch size 42 does not divide over 4 devices"):
    parallel.check_batch_size(42, four_devices)


def test_two_process_job_matches_one_device(runs, tmp_path):
  """Two processes joined through JAX_COORDINATOR_ADDRESS & co. (jax.distributed),
  one CPU device each, sharing one workdir, train exactly like one device."""
  import socket  # pylint: disable=g-import-not-at-top
  with socket.socket() as s:  # A free port for the coordinator.
    s.bind(("localhost", 0))
    port = s.getsockname()[1]
  workdir = str(tmp_path / "two_processes")
  procs = [lnorm_subprocess(
      "train", "--config", SMOKE, *ARGS, "--workdir", workdir,
      env={"XLA_FLAGS": xla_flags_with_devices(1),
           "JAX_COORDINATOR_ADDRESS": f"localhost:{port}", "JAX_NUM_PROCESSES": "2",
           "JAX_PROCESS_ID": str(i)}) for i in range(2)]
  for i, p in enumerate(procs):
    _, stderr = p.communicate(timeout=600)
    assert p.returncode == 0, stderr
    assert f"Joined a 2-process job as process {i}" in stderr
  with open(os.path.join(workdir, "config.json")) as f:
    assert json.load(f)["devices"] == {"count": 2, "platform": "cpu", "processes": 2}
  assert max_difference(metric_points(runs[1]), metric_points(workdir)) < TOLERANCE
