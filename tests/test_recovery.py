"""A damaged or interrupted `lnorm train` recovers (issue 56, items 4 and 5), end to
end: a damaged checkpoint, a metrics.jsonl line cut short, and Ctrl-C at several
moments of the command, each rerun ending as an uninterrupted run ends."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal

import pytest

from lnorm import cli
from tests.helpers import lnorm_subprocess, wait_for

pytestmark = pytest.mark.slow

SMOKE = "configs/perm_mnist.py:norm=bn,batch_size=8,smoke=true"
# 500 steps an epoch, two epochs: checkpoints at steps 500 and 1000, and points every
# 100 steps, so that a resumption from 500 drops and logs again points it had logged.
ARGS = ["train", "--config", SMOKE, "--config.progress_bar=false",
        "--config.hidden_sizes=16", "--config.eval_batch_size=500",
        "--config.num_epochs=2", "--config.log_every_steps=100"]
#: What differs between two runs of the same numbers: the clocks.
TIMING = re.compile(r"^time/|per_sec$")


def _records(workdir):
  """metrics.jsonl's lines, timings left out; a line that does not parse fails."""
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    return [{k: v for k, v in json.loads(line).items() if not TIMING.search(k)}
            for line in f]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
  """A finished run: its workdir, to copy and damage, and its records."""
  workdir = str(tmp_path_factory.mktemp("finished") / "run")
  assert cli.main([*ARGS, "--workdir", workdir]) == 0
  return workdir, _records(workdir)


def _copy(finished, tmp_path):
  workdir = str(tmp_path / "run")
  shutil.copytree(finished[0], workdir)
  return workdir


def _truncate_an_array(step_dir):
  arrays = [os.path.join(root, name) for root, _, names in os.walk(step_dir)
            for name in names if os.path.basename(root) == "d"]
  with open(max(arrays, key=os.path.getsize), "r+b") as f:
    f.truncate(100)


def _warnings(caplog):
  return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]


def test_a_truncated_checkpoint_falls_back_to_the_one_before_and_ends_the_same(
    finished, tmp_path, caplog):
  workdir = _copy(finished, tmp_path)
  checkpoints = os.path.join(workdir, "checkpoints")
  _truncate_an_array(os.path.join(checkpoints, "1000"))
  with caplog.at_level("WARNING"):
    assert cli.main([*ARGS, "--workdir", workdir]) == 0
  (warning,) = _warnings(caplog)
  assert warning.startswith(f"The checkpoint at step 1000 ({checkpoints}/1000) is damaged "
                            "and does not restore (OUT_OF_RANGE: ")
  assert warning.endswith(f"it is moved aside to {checkpoints}/1000.damaged, and the run "
                          "resumes from the checkpoint at step 500.")
  assert _records(workdir) == finished[1]
  assert sorted(os.listdir(checkpoints)) == ["1000", "1000.damaged", "500"]


def test_every_checkpoint_damaged_is_one_line_naming_the_fix(finished, tmp_path, capsys):
  workdir = _copy(finished, tmp_path)
  for step in ("500", "1000"):
    _truncate_an_array(os.path.join(workdir, "checkpoints", step))
  assert cli.main([*ARGS, "--workdir", workdir]) == 2
  err = capsys.readouterr().err
  assert err.startswith(f"lnorm: error: No checkpoint of {workdir} restores (step 1000: ")
  assert err.endswith(f"To start the run over, delete {workdir}/checkpoints (or the whole "
                      "workdir) and rerun the same command.\n")
  assert err.count("\n") == 1


@pytest.mark.parametrize("keep, point", [
    (len('{"step": 1000, "epoch": 2'), "a point of step 1000"),
    # The line before it is the point logged at step 1000, before the epoch's record.
    (len('{"step": 10'), "the point after one of step 1000"),
], ids=["after the step", "inside the step"])
def test_a_cut_last_line_is_logged_again_and_the_record_is_whole(finished, tmp_path, caplog,
                                                                 keep, point):
  workdir = _copy(finished, tmp_path)
  path = os.path.join(workdir, "metrics.jsonl")
  with open(path) as f:
    lines = f.readlines()
  assert json.loads(lines[-1])["step"] == 1000  # The last epoch's record.
  with open(path, "w") as f:
    f.writelines(lines[:-1] + [lines[-1][:keep]])
  with caplog.at_level("WARNING"):
    assert cli.main([*ARGS, "--workdir", workdir]) == 0
  (warning,) = _warnings(caplog)
  assert warning == (
      f"Line {len(lines)} of {path} ({point}) was cut short, by a kill or a full disk "
      "while it was written: the run resumes from the checkpoint at step 500 and logs the "
      "steps after it again; the checkpoint at step 1000, after it, is deleted (the run "
      "saves it again).")
  # Every point once, the points 600 to 900 too, which came after the checkpoint.
  assert _records(workdir) == finished[1]


# --- Ctrl-C at every moment -------------------------------------------------------------



def _has_loaded_jax(proc, workdir):
  """JAX's core library is in the process: its garbage-collection callback, where a
  KeyboardInterrupt was lost, is registered next, and JAX's import goes on for
  seconds."""
  del workdir
  try:
    with open(f"/proc/{proc.pid}/maps") as f:
      return "jaxlib/_jax" in f.read()
  except FileNotFoundError:
    return False


def _is_loading_the_data(proc, workdir):
  """The log's first line is written just before the data loads."""
  del proc
  try:
    with open(os.path.join(workdir, "train.log")) as f:
      return "Compiled programs are cached" in f.read()
  except FileNotFoundError:
    return False


def _has_trained(proc, workdir):
  del proc
  path = os.path.join(workdir, "metrics.jsonl")
  return os.path.exists(path) and os.path.getsize(path) > 0


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc")
@pytest.mark.parametrize("moment", [_has_loaded_jax, _is_loading_the_data, _has_trained],
                         ids=["importing JAX", "loading the data", "training"])
def test_ctrl_c_at_any_moment_stops_with_the_resume_hint_and_the_rerun_resumes(
    tmp_path, caplog, moment):
  # A thousand epochs: a Ctrl-C that was lost would leave it training for minutes.
  workdir = str(tmp_path / "run")
  args = ["train", "--config", SMOKE, "--config.progress_bar=false",
          "--config.hidden_sizes=16", "--config.eval_batch_size=500",
          "--config.num_epochs=1000", "--config.log_every_steps=50", "--workdir", workdir]
  proc = lnorm_subprocess(*args)
  reached = wait_for(lambda: moment(proc, workdir), poll=0.005)
  proc.send_signal(signal.SIGINT)
  _, stderr = proc.communicate(timeout=120)
  assert reached, stderr
  assert proc.returncode == 130, stderr
  assert "Exception ignored" not in stderr and "Traceback" not in stderr, stderr
  last = stderr.strip().splitlines()[-1]
  assert last.startswith("lnorm: Stopped by SIGINT ") and "Rerun the same command to" in last
  if moment is _has_loaded_jax:
    assert last == ("lnorm: Stopped by SIGINT before training began; nothing was written. "
                    "Rerun the same command to continue.")
  saved = re.search(r"step (\d+)", last)  # Where it saved, if it had trained.
  assert bool(saved) == (moment is _has_trained) or moment is _is_loading_the_data, last
  # The same command, cut to a few more steps, resumes where it stopped.
  start = int(saved.group(1)) if saved else 0
  with caplog.at_level("INFO"):
    assert cli.main([*args, f"--config.max_steps={start + 50}"]) == 0
  assert (f"Resuming from the checkpoint at step {start}." in caplog.text) == bool(saved)
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    steps = [json.loads(line)["step"] for line in f]
  assert steps == sorted(steps) and steps[-1] == start + 50
