"""SIGTERM to ``lnorm sweep`` and ``lnorm benchmark`` (a cluster's preemption,
``timeout``): the command passes it to the running member, which saves; it starts no
other member, exits with 130 and says so; the rerun resumes and ends where an
uninterrupted sweep ends. Real processes, with the signal at several points of a
sweep: mid-epoch, at a member's last epoch, between members; and, in-process, at the
exact moment between two members."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from lnorm.sweeps import benchmark as bench
from lnorm.sweeps import runner
from lnorm.sweeps.space import SweepSpace
from tests.helpers import epoch_records, lnorm_subprocess, metric_points, wait_for
from tests.test_benchmark_suite import TOY, _fake_train

# 500 updates per epoch, two epochs (~0.3 s each): long enough to land inside one.
CONFIG = "configs/perm_mnist.py:norm=bn,batch_size=8,smoke=true"
FAST = ["--config.progress_bar=false", "--config.hidden_sizes=128",
        "--config.eval_batch_size=500", "--config.num_epochs=2",
        "--config.log_every_steps=50"]
SEEDS = ("0", "1", "2")
COMPARED = ("train/nll", "train/error", "validation/nll", "test/nll", "test/error")


def _sweep(workdir):
  return lnorm_subprocess("sweep", "--config", CONFIG, "--workdir", workdir, *FAST,
                          "--grid", f"seed={','.join(SEEDS)}", "--no-figures")




@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
  """The same sweep, run to its end without a signal: what a resumed one must equal."""
  workdir = str(tmp_path_factory.mktemp("reference") / "sweep")
  proc = _sweep(workdir)
  _, stderr = proc.communicate(timeout=600)
  assert proc.returncode == 0, stderr
  return {s: epoch_records(os.path.join(workdir, f"seed={s}")) for s in SEEDS}


def _first_member_mid_epoch(workdir, out):
  del out
  # A running loss at step 50 of the first epoch's 500.
  return wait_for(lambda: any(p.get("step", 0) < 500 for p in metric_points(
      os.path.join(workdir, "seed=0"))), timeout=180, poll=0.01)


def _first_member_at_its_last_epoch(workdir, out):
  del out
  # The record of the last epoch is on disk: the member ends its run normally.
  return wait_for(lambda: len(epoch_records(os.path.join(workdir, "seed=0"))) == 2,
                  timeout=180, poll=0.01)


def _between_members(workdir, out):
  del workdir
  # The sweep reports the first member done: the second is about to start.
  return wait_for(lambda: "seed=0: done" in "".join(out), timeout=180, poll=0.01)


@pytest.mark.slow
@pytest.mark.parametrize("when", [
    _first_member_mid_epoch,
    # The same resume from other points: extended cases.
    pytest.param(_first_member_at_its_last_epoch, marks=pytest.mark.extended),
    pytest.param(_between_members, marks=pytest.mark.extended)],
                         ids=["mid-epoch", "at-the-last-epoch", "between-members"])
def test_sigterm_stops_the_sweep_and_the_rerun_resumes_it_exactly(tmp_path, uninterrupted,
                                                                   when):
  workdir = str(tmp_path / "sweep")
  proc = _sweep(workdir)
  out: list[str] = []
  reader = threading.Thread(target=lambda: out.extend(iter(proc.stdout.readline, "")))
  reader.start()
  reached = when(workdir, out)
  proc.send_signal(signal.SIGTERM)
  _, stderr = proc.communicate(timeout=180)
  reader.join()
  assert reached, stderr

  assert proc.returncode == 130, stderr
  assert "Sweep sweep was stopped by SIGTERM with " in stderr, stderr
  assert "Rerun the same command to resume." in stderr
  assert "Traceback" not in stderr
  # No member after the one the signal found (or the one starting as it came) ran on.
  finished = [s for s in SEEDS if len(epoch_records(os.path.join(workdir, f"seed={s}"))) == 2]
  assert finished in ([], ["0"]), finished
  assert not metric_points(os.path.join(workdir, "seed=2")), "the sweep went on to a third member"
  assert "seed=1: done" not in "".join(out)

  rerun = _sweep(workdir)
  _, stderr = rerun.communicate(timeout=600)
  assert rerun.returncode == 0, stderr
  for s in SEEDS:
    resumed = epoch_records(os.path.join(workdir, f"seed={s}"))
    assert [r["step"] for r in resumed] == [r["step"] for r in uninterrupted[s]], s
    for a, b in zip(resumed, uninterrupted[s]):
      for key in COMPARED:
        assert a[key] == b[key], (s, key, a[key], b[key])


# --- the moment between two members, in-process --------------------------------------------


def _finished_member(calls, signal_after=None):
  """Stands in for ``runner._run_member``: every member finishes at once; after the
  member named ``signal_after`` the process sends itself SIGTERM, as a scheduler would
  between two members."""
  fake = _fake_train(calls)

  def run_member(config_spec, member, extra, sweep_name, stream, signals):
    outcome = fake(config_spec, member, extra, sweep_name, stream, signals)
    if member.name == signal_after:
      os.kill(os.getpid(), signal.SIGTERM)
    return outcome

  return run_member


def test_a_sigterm_between_members_starts_no_other(tmp_path, monkeypatch):
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  calls = []
  monkeypatch.setattr(runner, "_run_member", _finished_member(calls, signal_after="seed=0"))
  space = SweepSpace(grid=[("seed", ["0", "1", "2"])])
  with pytest.raises(runner.Interrupted) as e:
    runner.run_sweep("configs/perm_mnist.py:smoke=true", space, str(tmp_path / "w"),
                     figures=False)
  assert calls == ["w,seed=0"]
  assert str(e.value) == ("Sweep w was stopped by SIGTERM with 1 of 3 members finished; "
                          "seed=1, seed=2 left (an interrupted member saved a checkpoint). "
                          "Rerun the same command to resume.")
  assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # The handler is put back.
  # The rerun skips the finished member and runs the other two.
  monkeypatch.setattr(runner, "_run_member", _finished_member(calls))
  calls.clear()
  summary = runner.run_sweep("configs/perm_mnist.py:smoke=true", space,
                             str(tmp_path / "w"), figures=False)
  assert calls == ["w,seed=1", "w,seed=2"]
  assert [r["status"] for r in summary.rows] == ["skipped", "finished", "finished"]


def test_a_sigterm_after_the_last_member_still_exits_as_stopped(tmp_path, monkeypatch):
  # The member was in its last epoch and finished: the sweep has nothing left, but it
  # was asked to stop, and a scheduler must see it did not end normally.
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  calls = []
  monkeypatch.setattr(runner, "_run_member", _finished_member(calls, signal_after="seed=1"))
  with pytest.raises(runner.Interrupted, match="with 2 of 2 members finished; none left"):
    runner.run_sweep("configs/perm_mnist.py:smoke=true",
                     SweepSpace(grid=[("seed", ["0", "1"])]), str(tmp_path / "w"),
                     figures=False)


def test_a_member_started_just_after_the_signal_gets_it_at_once():
  # The signal came after the sweep's check and before the process existed.
  with runner.stop_signals() as signals:
    with signals:  # Entered again (a benchmark's sweep): the same handler.
      os.kill(os.getpid(), signal.SIGTERM)
    assert signals.received == "SIGTERM"
    proc = signals.start([sys.executable, "-c", "import time; time.sleep(60)"])
    assert signals.wait(proc) == -signal.SIGTERM
  assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_signal_reaches_the_members_running():
  with runner.stop_signals() as signals:
    proc = signals.start([sys.executable, "-c", "import time; time.sleep(60)"])
    os.kill(os.getpid(), signal.SIGTERM)
    assert signals.wait(proc) == -signal.SIGTERM


def test_a_member_killed_by_the_sweeps_signal_counts_as_interrupted(tmp_path, monkeypatch):
  # SIGTERM ends a member at once while it starts up (nothing to save yet): exit -15.
  member_program = tmp_path / "member.sh"
  member_program.write_text("#!/bin/sh\nkill -TERM $$\n")
  member_program.chmod(0o755)
  monkeypatch.setattr(sys, "executable", str(member_program))
  signals = runner.stop_signals()
  signals.received = "SIGTERM"
  member = runner.Member("seed=0", {"seed": "0"}, str(tmp_path / "m"))
  outcome = runner._run_member("c.py", member, {}, "s", False, signals)  # pylint: disable=protected-access
  assert (outcome.status, outcome.returncode) == ("interrupted", -signal.SIGTERM)
  signals.received = None  # Without the sweep's signal: failed.
  outcome = runner._run_member("c.py", member, {}, "s", False, signals)  # pylint: disable=protected-access
  assert outcome.status == "failed"


# --- lnorm benchmark ----------------------------------------------------------------------


def test_a_sigterm_between_benchmark_members_saves_records_and_stops(tmp_path, monkeypatch):
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  calls = []
  monkeypatch.setattr(runner, "_run_member", _finished_member(calls, signal_after="seed=0"))
  (plan,) = bench.plans([TOY], "cpu", str(tmp_path / "runs"))
  records = str(tmp_path / "results")
  with runner.stop_signals() as signals, pytest.raises(runner.Interrupted):
    bench.run(plan, records, signals=signals)
  assert calls == ["norm=none,seed=0"]  # Not norm=ln,seed=0, next in the plan.
  assert os.listdir(os.path.join(records, "perm_mnist")) == ["norm=none,seed=0"]


@pytest.mark.slow
def test_lnorm_benchmark_stops_on_sigterm_mid_member(tmp_path):
  args = ["benchmark", "--experiments", "perm_mnist", "--norms", "none,ln", "--seeds", "0",
          "--workdir", str(tmp_path / "runs"), "--records", str(tmp_path / "records"),
          "--no-wandb", "--config.data.source=embedded", *FAST[:4],
          "--config.eval_every_steps=0"]
  proc = lnorm_subprocess(*args)
  runs = os.path.join(tmp_path, "runs", "cpu", "perm_mnist")
  # The suite's cpu setting is a variant (batch_size=4), which names the member's folder.
  member = os.path.join(runs, "batch_size=4,norm=none", "seed=0")
  reached = wait_for(lambda: any(p.get("step", 0) > 0 for p in metric_points(member)),
                     timeout=180, poll=0.01)
  proc.send_signal(signal.SIGTERM)
  _, stderr = proc.communicate(timeout=180)
  assert reached, stderr
  assert proc.returncode == 130, stderr
  assert "stopped by SIGTERM with 0 of 1 members finished" in stderr
  assert os.listdir(runs) == ["batch_size=4,norm=none"]
  # What is left to run: both members, the first from its checkpoint.
  out = subprocess.run([sys.executable, "-m", "lnorm", *args, "--print-commands"],
                       capture_output=True, text=True, check=True).stdout
  assert len(out.splitlines()) == 2
  assert os.path.isdir(os.path.join(member, "checkpoints"))
