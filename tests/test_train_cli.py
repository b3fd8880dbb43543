"""End-to-end runs through the CLI: a smoke run, exact resumption, and every bad-input
path a user can hit with `lnorm train`."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from lnorm import cli
from tests.helpers import epoch_records, lnorm_subprocess

SMOKE = "configs/perm_mnist.py:norm=bn,batch_size=8,smoke=true"
# Small, fast and long enough to be interrupted: 500 steps per epoch.
FAST = ["--config.progress_bar=false", "--config.hidden_sizes=16",
        "--config.eval_batch_size=500"]


def run_cli(*args) -> int:
  return cli.main(list(args))


def test_one_epoch_smoke_run(tmp_path, capsys):
  workdir = str(tmp_path / "run")
  assert run_cli("train", "--config", SMOKE, "--workdir", workdir, *FAST) == 0
  (record,) = epoch_records(workdir)
  assert record["epoch"] == 1 and record["step"] == 500
  for key in ("train/nll", "train/error", "validation/error", "test/error", "test/nll",
              "train/grad_norm", "train/examples_per_sec"):
    assert key in record
  assert record["test/error"] < 0.5  # It learned something from 4,000 real digits.
  with open(os.path.join(workdir, "config.json")) as f:
    run = json.load(f)
  assert run["data"]["source"] == "embedded"
  assert run["data"]["num_examples"] == {"train": 4000, "validation": 500, "test": 500}
  assert run["config"]["norm"] == "bn"
  assert os.path.isdir(os.path.join(workdir, "checkpoints"))
  # Rerunning a finished run trains nothing more and reports the same result.
  assert run_cli("train", "--config", SMOKE, "--workdir", workdir, *FAST) == 0
  assert epoch_records(workdir) == [record]


def test_mid_epoch_evaluation_leaves_training_unchanged(tmp_path):
  # BN: the mid-epoch evaluation must use population statistics without finalizing
  # the live state's, so the epoch's results equal those of a run without it.
  plain, probed = str(tmp_path / "plain"), str(tmp_path / "probed")
  args = ["train", "--config", SMOKE, *FAST, "--config.steps_per_call=8"]
  assert run_cli(*args, "--workdir", plain) == 0
  assert run_cli(*args, "--workdir", probed, "--config.eval_every_steps=200") == 0
  with open(os.path.join(probed, "metrics.jsonl")) as f:
    records = [json.loads(line) for line in f if line.strip()]
  mid = [r for r in records if "time/epoch_seconds" not in r]
  assert [r["step"] for r in mid] == [200, 400]
  assert [r["epoch"] for r in mid] == [0.4, 0.8]
  for r in mid:
    assert 0.0 < r["test/error"] < 0.9 and "validation/error" not in r
  (a,), (b,) = epoch_records(plain), epoch_records(probed)
  for key in ("train/nll", "test/nll", "validation/error"):
    assert a[key] == b[key], key


def _points(workdir):
  try:
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
      return [json.loads(line) for line in f if line.endswith("\n")]
  except FileNotFoundError:
    return []


def _wait_for(predicate, timeout=120.0):
  deadline = time.time() + timeout
  while time.time() < deadline:
    if predicate():
      return True
    time.sleep(0.02)
  return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_resume_after_kill_equals_uninterrupted_run(tmp_path, sig):
  # 128 hidden units: epochs slow enough (~0.3 s) to be interrupted inside one.
  args = ["train", "--config", SMOKE, *FAST, "--config.hidden_sizes=128",
          "--config.num_epochs=3", "--config.checkpoint_every_secs=0.05",
          "--config.log_every_steps=50"]
  reference = str(tmp_path / "reference")
  assert run_cli(*args, "--workdir", reference) == 0

  workdir = str(tmp_path / "interrupted")
  proc = lnorm_subprocess(*args, "--workdir", workdir)
  # Kill it in the middle of the second epoch, as soon as it logged a step there.
  started = _wait_for(lambda: any(r["step"] > 500 for r in _points(workdir)))
  proc.send_signal(sig)
  _, stderr = proc.communicate(timeout=120)
  assert started, stderr
  assert len(epoch_records(workdir)) < 3, "the run finished before it was killed"
  if sig == signal.SIGTERM:
    assert proc.returncode == 130, stderr
    assert "Rerun the same command to resume" in stderr
  else:
    assert proc.returncode == -signal.SIGKILL

  assert run_cli(*args, "--workdir", workdir) == 0
  resumed, uninterrupted = epoch_records(workdir), epoch_records(reference)
  assert [r["step"] for r in resumed] == [r["step"] for r in uninterrupted]
  for a, b in zip(resumed, uninterrupted):
    for key in ("train/nll", "train/error", "validation/nll", "test/nll", "test/error"):
      assert a[key] == b[key], (key, a[key], b[key])


@pytest.mark.parametrize("args, message", [
    (["--config", "configs/perm_mnist.py:norm=layernorm"], "Valid choices: none, ln, bn, wn, bln"),
    (["--config", SMOKE, "--config.experiment=mnist_cnn"], "Unknown experiment 'mnist_cnn'"),
    (["--config", SMOKE, "--config.optimizer.name=adamax"], "Unknown optimizer 'adamax'"),
    (["--config", SMOKE, "--config.num_epoch=3"], "did you mean 'num_epochs'"),
    (["--config", SMOKE, "--config.data.source=files", "--config.data.data_dir=/nonexistent"],
     "/nonexistent"),
])
def test_bad_input_exits_with_a_clear_message(tmp_path, capsys, args, message):
  code = run_cli("train", "--workdir", str(tmp_path / "w"), *args, *FAST)
  err = capsys.readouterr().err
  assert code == 2
  assert message in err
  assert "Traceback" not in err


def test_missing_dataset_says_where_it_looked(tmp_path, capsys, monkeypatch):
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "empty"))
  code = run_cli("train", "--workdir", str(tmp_path / "w"), "--config", SMOKE, *FAST,
                 "--config.data.source=files")
  err = capsys.readouterr().err
  assert code == 2
  assert str(tmp_path / "empty") in err and "LNORM_DATA_DIR" in err


def test_workdir_of_another_config_is_refused(tmp_path, capsys):
  workdir = str(tmp_path / "run")
  assert run_cli("train", "--config", SMOKE, "--workdir", workdir, *FAST) == 0
  code = run_cli("train", "--config", SMOKE.replace("norm=bn", "norm=ln"), "--workdir",
                 workdir, *FAST)
  err = capsys.readouterr().err
  assert code == 2
  assert "holds a run of a different config" in err and "norm: 'bn' in the workdir" in err
  # Fields that do not change results may differ: training longer resumes the run.
  assert run_cli("train", "--config", SMOKE, "--workdir", workdir, *FAST,
                 "--config.num_epochs=2") == 0
  assert [r["epoch"] for r in epoch_records(workdir)] == [1, 2]


def test_divergence_stops_with_the_step(tmp_path, capsys):
  code = run_cli("train", "--config", SMOKE.replace("norm=bn", "norm=none"), "--workdir",
                 str(tmp_path / "w"), *FAST, "--config.optimizer.learning_rate=1e30")
  err = capsys.readouterr().err
  assert code == 2
  assert "became nan at training step" in err.lower() or "became inf" in err.lower()
  assert "learning_rate" in err


def test_python_dash_m_entry_point(tmp_path):
  proc = lnorm_subprocess("train", "--help", cwd=str(tmp_path))
  out, err = proc.communicate(timeout=60)
  assert proc.returncode == 0, err
  assert "--workdir" in out
