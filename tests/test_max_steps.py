"""Training measured in updates: ``max_steps`` ends a run inside an epoch, a rerun
resumes it, raising it extends the run exactly as if it had never stopped; and
``time/train_seconds`` is on every point, cumulative across resumes."""

from __future__ import annotations

import json
import os

import jax
import pytest

from lnorm import cli
from lnorm.training import defaults
from tests.helpers import epoch_records

# 4,000 digits at batch 8: 500 steps per epoch.
SMOKE = ["--config", "configs/perm_mnist.py:norm=bn,batch_size=8,smoke=true",
         "--config.progress_bar=false", "--config.hidden_sizes=16",
         "--config.eval_batch_size=500", "--config.steps_per_call=20",
         "--config.eval_every_steps=100", "--config.eval_splits=('validation',)",
         "--config.final_eval_splits=('test',)"]
COMPARED = ("train/nll", "train/error", "train/grad_norm", "validation/nll",
            "validation/error", "test/nll")


def _train(workdir, *extra):
  return cli.main(["train", *SMOKE, "--workdir", workdir, *extra])


def _records(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """A run stopped by max_steps=300 inside its first epoch, then extended to 1,200
  updates (past num_epochs=1), beside an uninterrupted 1,200-update run. All share
  one XLA compilation cache."""
  root = tmp_path_factory.mktemp("max_steps")
  old = {k: getattr(jax.config, k) for k in (
      "jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")}
  jax.config.update("jax_compilation_cache_dir", str(root / "xla_cache"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
  straight, split = str(root / "straight"), str(root / "split")
  assert _train(straight, "--config.max_steps=1200") == 0
  assert _train(split, "--config.max_steps=300") == 0
  stopped = _records(split)
  assert _train(split, "--config.max_steps=300") == 0  # The same command again.
  rerun = _records(split)
  assert _train(split, "--config.max_steps=1200") == 0
  for k, v in old.items():
    jax.config.update(k, v)
  return {"straight": straight, "split": split, "stopped": stopped, "rerun": rerun}


@pytest.mark.slow
def test_max_steps_stops_inside_an_epoch_with_a_final_record(runs):
  stopped = runs["stopped"]
  assert [r["step"] for r in stopped] == [100, 200, 300]
  *mid, end = stopped
  assert all("time/epoch_seconds" not in r for r in mid)
  # The end: an epoch record of the partial epoch, with every split evaluated.
  assert end["epoch"] == pytest.approx(0.6) and "time/epoch_seconds" in end
  for key in ("train/nll", "validation/error", "test/error", "train/examples_per_sec"):
    assert key in end, key
  assert 0.0 < end["test/error"] < 0.5
  assert defaults.is_complete({"num_epochs": 1, "max_steps": 300}, [end])
  # Rerunning the finished run trains nothing and leaves the log as it was.
  assert runs["rerun"] == stopped


@pytest.mark.slow
def test_raising_max_steps_extends_the_run_exactly(runs):
  extended, straight = epoch_records(runs["split"]), epoch_records(runs["straight"])
  # max_steps overrides num_epochs=1: epochs 1 and 2, then 0.4 of the third.
  assert [r["epoch"] for r in straight] == [1, 2, pytest.approx(2.4)]
  assert [r["step"] for r in straight] == [500, 1000, 1200]
  # The extended run keeps the record of its earlier end, then continues the epoch.
  assert [r["step"] for r in extended] == [300, 500, 1000, 1200]
  for a, b in zip(extended[1:], straight):
    assert set(a) == set(b)
    for key in COMPARED:
      if key in a:
        assert a[key] == b[key], (a["step"], key, a[key], b[key])
  # The test split's curve is the same, the first run's end at step 300 evaluating
  # what the uninterrupted run's mid-epoch evaluation did.
  curve = lambda w: [(r["step"], r["test/nll"]) for r in _records(w) if "test/nll" in r]
  assert curve(runs["split"]) == curve(runs["straight"])
  assert [s for s, _ in curve(runs["straight"])] == [100, 200, 300, 400, 600, 700, 800,
                                                      900, 1100, 1200]
  # final_eval_splits are evaluated where each run ended, and only there.
  assert [r["step"] for r in extended if "test/nll" in r] == [300, 1200]


@pytest.mark.slow
def test_train_seconds_on_every_point_and_cumulative(runs):
  for workdir in (runs["straight"], runs["split"]):
    records = _records(workdir)
    seconds = [r["time/train_seconds"] for r in records]
    assert all(s > 0 for s in seconds), seconds
    assert seconds == sorted(seconds), seconds
  # Carried across the resume: the extended run's clock starts where the first stopped.
  first_end = runs["stopped"][-1]["time/train_seconds"]
  after = [r["time/train_seconds"] for r in _records(runs["split"]) if r["step"] > 300]
  assert min(after) > first_end


def test_is_complete_follows_max_steps_else_num_epochs():
  records = [{"step": 500, "epoch": 1}, {"step": 700, "epoch": 1.4}]
  assert not defaults.is_complete({"num_epochs": 1}, [])
  assert defaults.is_complete({"num_epochs": 1, "max_steps": 700}, records)
  assert not defaults.is_complete({"num_epochs": 1, "max_steps": 701}, records)
  assert defaults.is_complete({"num_epochs": 1, "max_steps": 0}, records)
  assert not defaults.is_complete({"num_epochs": 2, "max_steps": 0}, records)
  assert defaults.is_complete({"num_epochs": 1}, records)  # config.json before max_steps
  assert defaults.total_steps({"num_epochs": 3, "max_steps": 0}, 500) == 1500
  assert defaults.total_steps({"num_epochs": 3, "max_steps": 40}, 500) == 40


@pytest.mark.slow
def test_checkpoint_without_train_seconds_still_resumes(tmp_path):
  """A checkpoint written before ``train_seconds`` existed resumes with the clock at
  zero."""
  workdir = str(tmp_path / "old")
  assert _train(workdir, "--config.max_steps=40", "--config.eval_every_steps=0") == 0
  host_file = os.path.join(workdir, "checkpoints", "40", "host", "metadata")
  with open(host_file) as f:
    host = json.load(f)
  del host["train_seconds"]
  with open(host_file, "w") as f:
    json.dump(host, f)
  assert _train(workdir, "--config.max_steps=80", "--config.eval_every_steps=0") == 0
  first, second = epoch_records(workdir)
  assert second["step"] == 80
  assert 0 < second["time/train_seconds"]


def test_negative_max_steps_is_refused(tmp_path, capsys):
  assert _train(str(tmp_path / "w"), "--config.max_steps=-5") == 2
  err = capsys.readouterr().err
  assert "max_steps=-5: it is the run's length in updates" in err and "Traceback" not in err
  assert not (tmp_path / "w").exists()  # Refused before the workdir or the data.
