"""End-to-end runs through the CLI: a smoke run, exact resumption, and every bad-input
path a user can hit with `lnorm train`."""

from __future__ import annotations

import json
import os
import re
import signal

import pytest
import tensorflow_datasets as tfds

from lnorm import cli
from lnorm.training.defaults import DIVERGED_AT
from lnorm.training.metrics_writer import read_metrics
from tests.helpers import (epoch_records, lnorm_subprocess, metric_points, run_record,
                           wait_for)
from tests.test_data_load import write_mnist

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
  run = run_record(workdir)
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
  for r in mid:  # The default eval_every_splits: validation, and test to report.
    assert 0.0 < r["validation/error"] < 0.9 and 0.0 < r["test/error"] < 0.9
  (a,), (b,) = epoch_records(plain), epoch_records(probed)
  for key in ("train/nll", "test/nll", "validation/error"):
    assert a[key] == b[key], key


def test_evaluations_off_the_asked_steps_are_announced_and_fall_where_announced(tmp_path,
                                                                               caplog):
  # 500 updates per epoch in calls of 64: asked every 250, evaluated at 256 and 756.
  workdir = str(tmp_path / "run")
  with caplog.at_level("WARNING"):
    assert run_cli("train", "--config", SMOKE, *FAST, "--workdir", workdir,
                   "--config.steps_per_call=64", "--config.eval_every_steps=250",
                   "--config.num_epochs=2") == 0
  assert ("so the first evaluations fall at steps 256, 756, not 250, 750. To evaluate at "
          "exactly those steps, set --config.steps_per_call=50") in caplog.text
  mid = [r["step"] for r in metric_points(workdir) if "time/epoch_seconds" not in r]
  assert mid == [256, 756]




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
  started = wait_for(lambda: any(r["step"] > 500 for r in metric_points(workdir)))
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
    (["--config", "configs/perm_mnist.py:norm=layernorm"], "Valid choices: none, ln, rms, prms, dyt, scalenorm, ln_simple, bn, wn, bln, or "
     "your own as module:attribute"),
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


def test_a_data_directory_that_does_not_exist_stops_the_quick_start(tmp_path, capsys,
                                                                     monkeypatch):
  # The command: it trained on the embedded digits and exited 0.
  monkeypatch.setenv("LNORM_DATA_DIR", "/nonexistent")
  code = run_cli("train", "--config", "configs/perm_mnist.py:norm=ln", "--workdir",
                 str(tmp_path / "w"))
  err = capsys.readouterr().err
  assert code == 2, err
  assert ("the data directory /nonexistent (set by $LNORM_DATA_DIR) does not exist, so "
          "lnorm does not fall back to the copy shipped with it") in err
  assert "Traceback" not in err and not epoch_records(str(tmp_path / "w"))


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
  # The run's record says where it stopped, so that a comparison can count the seed.
  last = read_metrics(str(tmp_path / "w"))[-1]
  stopped_at = int(re.search(r"at training step (\d+)", err).group(1))
  assert last[DIVERGED_AT] == stopped_at and last["step"] == stopped_at


def test_python_dash_m_entry_point(tmp_path):
  proc = lnorm_subprocess("train", "--help", cwd=str(tmp_path))
  out, err = proc.communicate(timeout=60)
  assert proc.returncode == 0, err
  assert "--workdir" in out


# --- data integrity on resume ----------------------------------------------------------


def _read(path):
  with open(path) as f:
    return f.read()


def test_a_rerun_that_finds_other_data_is_refused_until_pinned(tmp_path, capsys,
                                                                monkeypatch):
  # The case: first no data directory (auto: the embedded 4k digits), then one
  # (auto: the files there). The rerun must not resume on other data.
  monkeypatch.delenv("LNORM_DATA_DIR", raising=False)
  monkeypatch.setenv("LNORM_CACHE_DIR", str(tmp_path / "cache"))
  workdir = str(tmp_path / "run")
  args = ["train", "--config", SMOKE, *FAST, "--workdir", workdir,
          "--config.steps_per_call=20", "--config.data.validation_size=100"]
  assert run_cli(*args, "--config.data.source=auto", "--config.max_steps=40") == 0
  before = {f: _read(os.path.join(workdir, f)) for f in ("config.json", "metrics.jsonl")}
  write_mnist(tmp_path / "data", n_train=400, n_test=50)
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  capsys.readouterr()
  code = run_cli(*args, "--config.data.source=auto", "--config.max_steps=80")
  err = capsys.readouterr().err
  assert code == 2 and "Traceback" not in err
  assert "source: 'embedded' in the workdir, 'files' now" in err
  assert "'train': 4000" in err and "'train': 300" in err
  assert "use a new --workdir" in err and "--config.data.source=embedded" in err
  # Nothing in the workdir changed: config.json still describes the data trained on.
  assert {f: _read(os.path.join(workdir, f)) for f in before} == before
  # Pinned to the source it started with, the run resumes on its own data.
  assert run_cli(*args, "--config.data.source=embedded", "--config.max_steps=80") == 0
  assert [r["step"] for r in epoch_records(workdir)] == [40, 80]
  with open(os.path.join(workdir, "config.json")) as f:
    assert json.load(f)["data"]["num_examples"]["train"] == 4000


def test_a_tfds_run_refuses_the_embedded_digits(tmp_path, capsys, monkeypatch):
  monkeypatch.delenv("LNORM_DATA_DIR", raising=False)
  workdir = str(tmp_path / "run")
  args = ["train", "--config", SMOKE, *FAST, "--workdir", workdir,
          "--config.data.validation_size=8", "--config.max_steps=4"]
  with tfds.testing.mock_data(num_examples=40, policy=tfds.testing.MockPolicy.USE_CODE):
    assert run_cli(*args, "--config.data.source=tfds") == 0
    assert run_cli(*args, "--config.data.source=tfds") == 0  # The same data: no conflict.
  capsys.readouterr()
  assert run_cli(*args, "--config.data.source=auto") == 2
  err = capsys.readouterr().err
  assert "source: 'tfds' in the workdir, 'embedded' now" in err
  assert "--config.data.source=tfds" in err


# --- an attempt killed before its first checkpoint; signals -----------------------------


def test_a_rerun_after_a_kill_before_the_first_checkpoint_says_it_starts_over(tmp_path):
  # Wide layers make the first epoch last seconds; no time-based checkpoint before it.
  args = ["train", "--config", SMOKE, *FAST, "--config.hidden_sizes=(1024,1024)",
          "--config.steps_per_call=1", "--config.log_every_steps=5",
          "--config.checkpoint_every_secs=1e6"]
  workdir = str(tmp_path / "run")
  proc = lnorm_subprocess(*args, "--workdir", workdir)
  started = wait_for(lambda: len(metric_points(workdir)) >= 1)
  proc.send_signal(signal.SIGKILL)
  _, stderr = proc.communicate(timeout=120)
  assert started, stderr
  checkpoints = os.path.join(workdir, "checkpoints")
  assert not os.path.isdir(checkpoints) or not [
      d for d in os.listdir(checkpoints) if d.isdigit()], "killed after a checkpoint"
  points = len(metric_points(workdir))
  rerun = lnorm_subprocess(*args, "--workdir", workdir, "--config.max_steps=10")
  _, stderr = rerun.communicate(timeout=300)
  assert rerun.returncode == 0, stderr
  assert "Starting from scratch" in stderr and "holds no checkpoint" in stderr
  assert f"config.json and metrics.jsonl with {points} point" in stderr
  assert [r["step"] for r in epoch_records(workdir)] == [10]


def test_ctrl_c_is_a_calm_stop_with_exit_code_130(tmp_path):
  args = ["train", "--config", SMOKE, *FAST, "--config.hidden_sizes=128",
          "--config.num_epochs=20", "--config.log_every_steps=50"]
  workdir = str(tmp_path / "run")
  proc = lnorm_subprocess(*args, "--workdir", workdir)
  started = wait_for(lambda: len(metric_points(workdir)) >= 1)
  proc.send_signal(signal.SIGINT)
  _, stderr = proc.communicate(timeout=120)
  assert started, stderr
  assert proc.returncode == 130, stderr
  assert "lnorm: Stopped by SIGINT at step" in stderr
  assert "saved a checkpoint" in stderr and "Rerun the same command to resume" in stderr
  assert "error" not in stderr.lower() and "Traceback" not in stderr


# --- progress, wandb mode and the gradient's record --------------------------------------


def test_progress_in_a_log_follows_max_steps_without_carriage_returns(tmp_path):
  # stderr is a pipe here, as in a log file: plain lines, not a bar. 600 steps are one
  # epoch and a fifth: "epoch 2/2", total 600.
  workdir = str(tmp_path / "run")
  proc = lnorm_subprocess(
      "train", "--config", SMOKE, *FAST, "--workdir", workdir, "--config.progress_bar=true",
      "--config.progress_every_secs=0", "--config.max_steps=600",
      "--config.steps_per_call=100", "--config.wandb.mode=disabled",
      env={"WANDB_MODE": "offline"})
  _, stderr = proc.communicate(timeout=300)
  assert proc.returncode == 0, stderr
  assert "\r" not in stderr
  assert "epoch 1/2: 100/600 steps (17%)" in stderr
  assert "epoch 2/2: 600/600 steps (100%)" in stderr
  assert {int(total) for total in re.findall(r"\d+/(\d+) steps", stderr)} == {600}
  # The config's wandb.mode wins over the environment's, and the log says so.
  assert ("wandb: disabled (wandb.mode=disabled in the config; WANDB_MODE=offline in "
          "the environment is ignored)") in stderr
  assert not os.path.exists(os.path.join(workdir, "wandb"))


def _records(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f if line.strip()]


def test_geometric_evaluations_carry_the_gradient_record_and_resume_exactly(tmp_path):
  args = ["train", "--config", SMOKE, *FAST, "--config.steps_per_call=8",
          "--config.eval_points_per_decade=3", "--config.eval_splits=('validation',)",
          "--config.optimizer.clip_global_norm=1.0"]
  straight, split = str(tmp_path / "straight"), str(tmp_path / "split")
  assert run_cli(*args, "--workdir", straight, "--config.max_steps=120") == 0
  assert run_cli(*args, "--workdir", split, "--config.max_steps=24") == 0
  assert run_cli(*args, "--workdir", split, "--config.max_steps=120") == 0
  mid = lambda w: [r for r in _records(w) if "time/epoch_seconds" not in r]
  # Points 1, 2, 5, 10, 22, 46 and 100, each at the first call boundary (8 steps a
  # call) at or past it.
  assert [r["step"] for r in mid(straight)] == [8, 16, 24, 48, 104]
  for r in mid(straight):
    assert 0.0 <= r["train/clipped_fraction"] <= 1.0 and r["train/grad_norm"] > 0
    assert "test/error" in r
  (end,) = epoch_records(straight)
  assert end["step"] == 120 and 0.0 < end["train/clipped_fraction"] <= 1.0
  assert "train/tensor_clipped_fraction" not in end  # That clip is off.
  # The resumed run evaluates where the straight one did, with the same record; its
  # end at step 24 stood in for the evaluation there.
  assert [r["step"] for r in mid(split)] == [8, 16, 48, 104]
  for a, b in zip(mid(split)[2:], mid(straight)[3:]):
    for key in ("train/grad_norm", "train/clipped_fraction", "test/nll"):
      assert a[key] == b[key], (a["step"], key)
