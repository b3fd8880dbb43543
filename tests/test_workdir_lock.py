"""One process per workdir, from the user's side: a second `lnorm train` (or sweep) on
a workdir in use stops at once and names the holder; a killed holder blocks nothing."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys

import pytest

from lnorm import cli
from lnorm.errors import UserError, WorkdirInUseError
from lnorm.training import workdir_lock
from tests.helpers import epoch_records, lnorm_subprocess, wait_for

SMOKE = "configs/perm_mnist.py:norm=ln,batch_size=8,smoke=true"
FAST = ["--config.progress_bar=false", "--config.hidden_sizes=16",
        "--config.eval_batch_size=500"]


def _holder_pid(workdir):
  try:
    with open(os.path.join(workdir, workdir_lock.LOCK_FILE)) as f:
      return json.load(f).get("pid")
  except (OSError, ValueError):
    return None



def test_second_train_on_a_busy_workdir_stops_and_a_killed_holder_blocks_nothing(tmp_path):
  workdir = str(tmp_path / "run")
  args = ["train", "--config", SMOKE, *FAST, "--workdir", workdir,
          "--config.num_epochs=50"]
  first = lnorm_subprocess(*args)
  try:
    assert wait_for(lambda: _holder_pid(workdir) == first.pid, poll=0.1), first.stderr
    second = lnorm_subprocess(*args)
    _, stderr = second.communicate(timeout=120)
    assert second.returncode == 2
    assert f"is in use by process {first.pid}" in stderr
    assert f"kill -TERM {first.pid}" in stderr and "another --workdir" in stderr
    assert "Traceback" not in stderr
    assert first.poll() is None  # The holder runs on, untouched.
  finally:
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
  # kill -9 leaves the lock file behind, but not the lock.
  assert os.path.exists(os.path.join(workdir, workdir_lock.LOCK_FILE))
  # Five updates past whatever the holder finished (on a fast machine it ends epochs,
  # and saves their checkpoints, before the kill), so that the rerun must train.
  target = max([r["step"] for r in epoch_records(workdir)], default=0) + 5
  rerun = lnorm_subprocess(*args[:-1], f"--config.max_steps={target}")
  _, stderr = rerun.communicate(timeout=300)
  assert rerun.returncode == 0, stderr
  assert [r["step"] for r in epoch_records(workdir)][-1] == target


def test_hold_names_the_holder_and_is_released_on_exit(tmp_path):
  workdir = str(tmp_path)
  with workdir_lock.hold(workdir, "lnorm train"):
    # Another process (not this one) is refused, whatever it runs.
    probe = subprocess.run(
        [sys.executable, "-c", "import sys; from lnorm.training import workdir_lock as w\n"
         "try:\n  w.hold(sys.argv[1], 'x').__enter__()\nexcept Exception as e:\n"
         "  print(type(e).__name__, e)", workdir],
        capture_output=True, text=True, timeout=60, check=True,
        env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert probe.stdout.startswith("WorkdirInUseError")
    assert f"process {os.getpid()} on " in probe.stdout and "(lnorm train, started" in probe.stdout
  with workdir_lock.hold(workdir, "lnorm train"):  # Released: held again at once.
    pass


def test_message_without_a_readable_holder_still_says_what_to_do():
  message = workdir_lock.in_use_message("/w", {})
  assert "in use by another process" in message and "SIGTERM" in message
  assert issubclass(WorkdirInUseError, UserError)


def test_second_sweep_on_a_busy_sweep_folder_stops_before_any_member(tmp_path, capsys):
  workdir = str(tmp_path / "sweep")
  os.makedirs(workdir)
  with workdir_lock.hold(workdir, "lnorm sweep other"):
    code = cli.main(["sweep", "--config", SMOKE, "--workdir", workdir,
                     "--grid", "seed=0,1", "--no-figures"])
  assert code == 2
  assert "is in use by process" in capsys.readouterr().err
  assert sorted(os.listdir(workdir)) == [workdir_lock.LOCK_FILE]  # No member started.


# --- workdir paths that cannot hold a run (issue 35, item 9) ------------------------------


def test_a_workdir_under_a_regular_file_is_a_clear_error(tmp_path, capsys):
  blocker = tmp_path / "file"
  blocker.write_text("x")
  assert cli.main(["train", "--config", SMOKE, "--workdir", str(blocker / "run")]) == 2
  err = capsys.readouterr().err
  assert f"{blocker} is a file, not a folder" in err and "--workdir" in err
  assert cli.main(["train", "--config", SMOKE, "--workdir", str(blocker)]) == 2
  assert f"--workdir {blocker} is a file" in capsys.readouterr().err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_workdir_is_a_clear_error(tmp_path, capsys):
  locked = tmp_path / "locked"
  locked.mkdir()
  locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
  try:
    assert cli.main(["train", "--config", SMOKE, "--workdir", str(locked / "run")]) == 2
    assert "permission denied" in capsys.readouterr().err
    assert cli.main(["train", "--config", SMOKE, "--workdir", str(locked)]) == 2
    assert "is not writable by you" in capsys.readouterr().err
  finally:
    locked.chmod(stat.S_IRWXU)


def test_report_out_makes_its_folder_and_refuses_what_cannot_be_written(tmp_path, capsys):
  from tests.test_data_pooling import FULL, write_run  # pylint: disable=g-import-not-at-top
  write_run(str(tmp_path / "runs" / "a"), FULL, "ln")
  out = tmp_path / "new" / "deeper" / "REPORT.md"
  assert cli.main(["report", str(tmp_path / "runs"), "--out", str(out)]) == 0
  assert out.read_text() == capsys.readouterr().out
  assert cli.main(["report", str(tmp_path / "runs"), "--out", str(tmp_path / "new")]) == 2
  assert f"--out {tmp_path / 'new'} is a folder: give a file name in it" in (
      capsys.readouterr().err)
  blocker = tmp_path / "file"
  blocker.write_text("x")
  assert cli.main(["report", str(tmp_path / "runs"), "--out", str(blocker / "R.md")]) == 2
  err = capsys.readouterr()
  assert f"{blocker} is a file, not a folder" in err.err and err.out == ""


def test_a_file_system_without_locks_warns_and_goes_on(tmp_path, monkeypatch, caplog):
  import errno  # pylint: disable=g-import-not-at-top

  def no_locks(fd, op):
    raise OSError(errno.ENOLCK, "No locks available")

  monkeypatch.setattr(workdir_lock.fcntl, "flock", no_locks)
  ran = []
  with workdir_lock.hold(str(tmp_path), "lnorm train"):
    ran.append(True)
  assert ran and "does not support locks" in caplog.text


# --- read-only, over-long and full (issue 45, item 4): one line each -----------------------


def test_a_workdir_on_a_read_only_file_system_is_one_line(tmp_path, capsys, monkeypatch):
  # Root writes through chmod, not through a read-only mount: the mount is what counts.
  import errno  # pylint: disable=g-import-not-at-top
  real_makedirs = os.makedirs

  def read_only_below(path, *args, **kwargs):
    if str(path).startswith(str(tmp_path / "ro")):
      raise OSError(errno.EROFS, "Read-only file system", str(path))
    return real_makedirs(path, *args, **kwargs)

  monkeypatch.setattr(workdir_lock.os, "makedirs", read_only_below)
  assert cli.main(["train", "--config", SMOKE, "--workdir", str(tmp_path / "ro" / "run")]) == 2
  err = capsys.readouterr().err
  assert err == (f"lnorm: error: --workdir {tmp_path / 'ro' / 'run'} cannot be made: it is on "
                 "a read-only file system. Choose a --workdir on a disk you can write to.\n")


def test_an_existing_workdir_on_a_read_only_mount_says_so(tmp_path, capsys, monkeypatch):
  real_statvfs = os.statvfs

  class ReadOnly:
    def __init__(self, path):
      self.f_flag = real_statvfs(path).f_flag | os.ST_RDONLY

  monkeypatch.setattr(workdir_lock.os, "statvfs", ReadOnly)
  assert cli.main(["train", "--config", SMOKE, "--workdir", str(tmp_path)]) == 2
  assert capsys.readouterr().err == (
      f"lnorm: error: --workdir {tmp_path} is on a read-only file system: choose a "
      "--workdir on a disk you can write to.\n")


@pytest.mark.parametrize("length, refused", [(255, False), (256, True), (300, True)])
def test_a_workdir_name_longer_than_the_file_system_allows_is_one_line(tmp_path, capsys,
                                                                       length, refused):
  name = "a" * length
  if not refused:  # At the limit: made.
    assert workdir_lock.make_workdir(str(tmp_path / name / "run")) == str(tmp_path / name / "run")
    return
  assert cli.main(["train", "--config", SMOKE, "--workdir", str(tmp_path / name)]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "Traceback" not in err
  assert (f"a folder name may have at most 255 bytes, and {'a' * 40}...{'a' * 40} has "
          f"{length}. Choose a shorter --workdir.") in err
  assert not os.path.exists(tmp_path / name[:255])


def test_a_name_counts_in_bytes_not_characters(tmp_path):
  # 128 two-byte letters: 128 characters, 256 bytes.
  with pytest.raises(UserError, match="at most 255 bytes, and .* has 256"):
    workdir_lock.make_workdir(str(tmp_path / ("é" * 128)))
