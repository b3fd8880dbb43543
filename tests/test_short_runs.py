"""A short `lnorm train` from the user's side: a training time even when every call
compiled, the run's log in its workdir, no "end of epoch" for a run cut inside one, and
the compiled programs kept for a rerun."""

from __future__ import annotations

import contextlib
import json
import logging
import os

import jax
import pytest

from lnorm import cli
from lnorm.training import compilation_cache
from lnorm.training import loop
from lnorm.training import run_files

# 4,000 digits at batch 128: 31 steps an epoch. Three updates in calls of two: a call of
# 2 steps and one of 1, each of a shape of its own, so each compiles.
SHORT = ["--config", "configs/perm_mnist.py:norm=bn,smoke=true", "--config.hidden_sizes=(9,)",
         "--config.progress_bar=false", "--config.steps_per_call=2",
         "--config.max_steps=3", "--config.eval_batch_size=500",
         "--config.wandb.mode=disabled"]


def _records(workdir):
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
  """One three-update run, with the names of the stages it reported and the JAX cache
  hits of a rerun of the same config into a second workdir."""
  root = tmp_path_factory.mktemp("short")
  stages = []
  real_stage = loop.stage

  @contextlib.contextmanager
  def recording_stage(name, **kwargs):
    stages.append(name)
    with real_stage(name, **kwargs):
      yield

  hits = []
  jax.monitoring.register_event_listener(
      lambda event, **kw: hits.append(event) if event.endswith("cache_hits") else None)
  loop.stage = recording_stage
  root_logger = logging.getLogger()
  level = root_logger.level
  root_logger.setLevel(logging.INFO)  # As `lnorm` sets it; pytest leaves WARNING.
  try:
    first = str(root / "first")
    assert cli.main(["train", *SHORT, "--workdir", first]) == 0
    before_rerun = len(hits)
    rerun = str(root / "rerun")
    assert cli.main(["train", *SHORT, "--workdir", rerun]) == 0
  finally:
    loop.stage = real_stage
    root_logger.setLevel(level)
  return {"first": first, "rerun": rerun, "stages": stages,
          "rerun_hits": len(hits) - before_rerun}


def test_every_call_compiled_and_the_run_still_has_a_training_time(short_run):
  last = _records(short_run["first"])[-1]
  assert last["step"] == 3
  assert last["time/train_seconds"] > 0
  assert last["train/examples_per_sec"] > 0
  assert last["time/compile_seconds"] > 0


def test_a_plain_train_leaves_its_log_in_the_workdir(short_run):
  path = os.path.join(short_run["first"], run_files.LOG_FILE)
  with open(path) as f:
    log = f.read()
  assert "Compiled the train step for 2 steps" in log
  assert "Compiled the train step for 1 steps" in log
  assert "epoch 0.09677: epoch=0.09677" in log  # The record of the run's end (3/31).
  # The handler is gone after the run: nothing more reaches the file.
  logging.getLogger("lnorm.test").warning("after the run")
  with open(path) as f:
    assert f.read() == log


def test_a_run_cut_by_max_steps_does_not_say_end_of_epoch(short_run):
  assert {s for s in short_run["stages"] if "end of" in s} == {
      "perm_mnist: end of the run (max_steps) at step 3"}
  with open(os.path.join(short_run["first"], run_files.LOG_FILE)) as f:
    assert "end of epoch" not in f.read()


def test_a_rerun_of_the_same_config_loads_its_programs_from_the_cache(short_run):
  # The train calls of both shapes, the evaluation and the statistics, at least.
  assert short_run["rerun_hits"] >= 3
  assert os.listdir(os.path.join(os.environ["LNORM_CACHE_DIR"], compilation_cache.SUBDIR))


def test_the_log_file_can_be_turned_off_and_a_missing_folder_is_made(tmp_path, monkeypatch):
  workdir = tmp_path / "new" / "run"
  with run_files.log_file(str(workdir)) as path:
    logging.getLogger("lnorm.test").warning("into the file")
  assert path == str(workdir / "train.log")
  assert "into the file" in (workdir / "train.log").read_text()
  monkeypatch.setenv(run_files.LOG_FILE_ENV, "0")
  with run_files.log_file(str(tmp_path / "off")) as path:
    logging.getLogger("lnorm.test").warning("nowhere")
  assert path is None and not (tmp_path / "off").exists()


def test_a_log_file_under_a_regular_file_is_skipped_not_a_traceback(tmp_path):
  blocker = tmp_path / "file"
  blocker.write_text("")
  with run_files.log_file(str(blocker / "run")) as path:
    pass
  assert path is None


@pytest.fixture
def jax_cache_config():
  keys = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
          "jax_persistent_cache_min_entry_size_bytes")
  saved = {k: getattr(jax.config, k) for k in keys}
  yield
  for k, v in saved.items():
    jax.config.update(k, v)


def test_the_cache_goes_to_lnorms_cache_folder_and_keeps_small_programs(
    tmp_path, monkeypatch, jax_cache_config):
  jax.config.update("jax_compilation_cache_dir", None)
  monkeypatch.setenv("LNORM_CACHE_DIR", str(tmp_path / "cache"))
  monkeypatch.delenv(compilation_cache.ENV, raising=False)
  assert compilation_cache.enable() == str(tmp_path / "cache" / "jax")
  assert jax.config.jax_compilation_cache_dir == str(tmp_path / "cache" / "jax")
  assert jax.config.jax_persistent_cache_min_compile_time_secs == 0
  assert jax.config.jax_persistent_cache_min_entry_size_bytes == -1


@pytest.mark.parametrize("off", ["0", "off", "False"])
def test_the_cache_can_be_turned_off(off, tmp_path, monkeypatch, jax_cache_config):
  jax.config.update("jax_compilation_cache_dir", None)
  monkeypatch.setenv(compilation_cache.ENV, off)
  assert compilation_cache.enable() is None
  assert jax.config.jax_compilation_cache_dir is None


def test_a_cache_folder_chosen_for_jax_itself_is_kept(tmp_path, monkeypatch,
                                                      jax_cache_config):
  jax.config.update("jax_compilation_cache_dir", str(tmp_path / "mine"))
  monkeypatch.setenv("LNORM_CACHE_DIR", str(tmp_path / "cache"))
  assert compilation_cache.enable() == str(tmp_path / "mine")
  assert jax.config.jax_compilation_cache_dir == str(tmp_path / "mine")
