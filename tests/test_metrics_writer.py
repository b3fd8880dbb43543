"""Resuming a run whose metrics.jsonl ends in a line a kill cut short; the wandb mode
a run logs in, and a wandb that cannot reach its server."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import types

import ml_collections
import pytest

from lnorm.errors import ConfigError, UserError
from lnorm.training import metrics_writer
from lnorm.training.metrics_writer import MetricWriter, find_cut_line, read_metrics
from tests.helpers import REPO, lnorm_subprocess


def test_a_cut_short_last_line_does_not_stop_the_resume(tmp_path):
  path = tmp_path / "metrics.jsonl"
  lines = [json.dumps({"step": s, "train/loss": 1.0 / s}) for s in (10, 20, 30)]
  path.write_text("\n".join(lines) + '\n{"step": 40, "train/lo')  # Killed mid-write.
  assert [r["step"] for r in read_metrics(str(tmp_path))] == [10, 20, 30]
  wandb = ml_collections.ConfigDict({"mode": "disabled", "project": "p"})
  # Resuming from the checkpoint at step 20 keeps the points up to it, and the cut line goes.
  writer = MetricWriter(str(tmp_path), {}, wandb, resume_step=20)
  writer.write(30, {"train/loss": 0.5})
  assert [(r["step"], r["train/loss"]) for r in read_metrics(str(tmp_path))] == [
      (10, 1.0 / 10), (20, 1.0 / 20), (30, 0.5)]
  assert path.read_text().count("\n") == 3


def test_wandb_online_without_a_login_is_one_line_with_the_ways_out(tmp_path, monkeypatch):
  # No API key anywhere: wandb's own UsageError, raised by the real wandb.init.
  monkeypatch.setenv("HOME", str(tmp_path / "home"))
  monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "home" / ".config" / "wandb"))
  for name in ("WANDB_API_KEY", "WANDB_MODE", "NETRC"):
    monkeypatch.delenv(name, raising=False)
  wandb = ml_collections.ConfigDict({"mode": "online", "project": "p"})
  with pytest.raises(UserError) as e:
    MetricWriter(str(tmp_path), {}, wandb)
  assert str(e.value) == (
      "wandb could not start in online mode (wandb.mode=online in the config): No API key "
      "configured. Use `wandb login` to log in. To log in: `wandb login`, or set "
      "WANDB_API_KEY; or run without an account: --config.wandb.mode=offline (upload "
      "later with `wandb sync`) or --config.wandb.mode=disabled.")


# --- which wandb mode, and a start that cannot hang ---------------------------------------


@pytest.mark.parametrize("empty", ["", "  "])
def test_an_empty_wandb_mode_counts_as_unset(monkeypatch, tmp_path, empty):
  # `WANDB_MODE= lnorm train`: wandb itself refuses '' with a pydantic traceback.
  monkeypatch.setenv("HOME", str(tmp_path))  # No ~/.netrc with a key.
  monkeypatch.delenv("WANDB_API_KEY", raising=False)
  monkeypatch.setenv("WANDB_MODE", empty)
  assert metrics_writer.wandb_mode("auto") == (
      "offline", "wandb.mode is auto and no API key was found; upload with `wandb sync`")
  assert metrics_writer.wandb_mode("online") == ("online", "wandb.mode=online in the config")
  metrics_writer.import_wandb("offline", "")
  assert "WANDB_MODE" not in os.environ  # Gone before wandb reads it.


def test_a_wandb_mode_in_the_environment_is_checked_only_where_wandb_runs(monkeypatch):
  monkeypatch.setenv("WANDB_MODE", "ofline")
  # Disabled: wandb never reads the environment, so nothing there stops the run.
  assert metrics_writer.wandb_mode("disabled")[0] == "disabled"
  for configured in ("auto", "offline"):  # wandb reads it even when given a mode.
    with pytest.raises(ConfigError, match=r"^WANDB_MODE='ofline' in the environment is not a "
                       r"wandb mode \(did you mean 'offline'\?\): wandb reads it"):
      metrics_writer.wandb_mode(configured)
  for mode in metrics_writer.ENVIRONMENT_MODES:
    monkeypatch.setenv("WANDB_MODE", mode)
    assert metrics_writer.wandb_mode("auto")[0] == mode


def _unreachable_server(monkeypatch, tmp_path):
  """wandb.init replaced: online it fails as wandb does when its server does not answer
  in time; offline it starts. Returns the calls."""
  wandb = pytest.importorskip("wandb")
  calls = []

  def init(**arguments):
    calls.append(arguments)
    if arguments["mode"] == "online":
      raise wandb.errors.CommError("Timed out while retrying: Post \"http://10.0.0.1/graphql"
                                   "\": dial tcp: i/o timeout.\nConsider increasing ...")
    return types.SimpleNamespace(id=arguments["id"], settings=types.SimpleNamespace(
        sync_dir=str(tmp_path / "wandb" / "offline-run-1")))

  monkeypatch.setattr(wandb, "init", init)
  monkeypatch.setattr(wandb, "teardown", lambda: calls.append("teardown"))
  return calls


def test_online_without_network_waits_a_bounded_time_then_logs_offline(monkeypatch, tmp_path,
                                                                        caplog):
  monkeypatch.delenv("WANDB_INIT_TIMEOUT", raising=False)
  calls = _unreachable_server(monkeypatch, tmp_path)
  config = ml_collections.ConfigDict({"mode": "online", "project": "p"})
  with caplog.at_level(logging.INFO):
    run = metrics_writer.start_wandb(str(tmp_path), {"seed": 1}, config)
  online, teardown, offline = calls
  assert online["settings"].init_timeout == metrics_writer.INIT_TIMEOUT_SECONDS == 30.0
  assert teardown == "teardown"  # The failed run's id is free for the offline one.
  assert offline["mode"] == "offline" and offline["id"] == online["id"] == run.id
  assert {k: v for k, v in offline.items() if k != "mode"} == {
      k: v for k, v in online.items() if k not in ("mode", "settings")}
  warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
  assert warnings == [
      "wandb could not reach its server in online mode (Timed out while retrying: Post "
      "\"http://10.0.0.1/graphql\": dial tcp: i/o timeout), so this run logs offline: "
      f"upload it later with `wandb sync {tmp_path / 'wandb' / 'offline-run-1'}`."]


def test_wandbs_own_init_timeout_in_the_environment_wins(monkeypatch, tmp_path):
  monkeypatch.setenv("WANDB_INIT_TIMEOUT", "5")
  calls = _unreachable_server(monkeypatch, tmp_path)
  metrics_writer.start_wandb(str(tmp_path), {}, ml_collections.ConfigDict(
      {"mode": "online", "project": "p"}))
  assert calls[0]["settings"] is None  # Passed settings would override the variable.


#: Starts a MetricWriter in a process of its own, logs one point and closes.
_WRITER = """
import logging, sys
import ml_collections
from lnorm.training.metrics_writer import MetricWriter
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
wandb = ml_collections.ConfigDict({"mode": sys.argv[2], "project": "p"})
writer = MetricWriter(sys.argv[1], {}, wandb)
writer.write(1, {"train/loss": 0.5})
writer.close()
"""


def test_a_real_wandb_with_a_key_and_no_answer_from_its_server_logs_offline(tmp_path):
  """The real wandb, in a process of its own, pointed at a local port that accepts
  connections and never answers (what a dead network looks like to it), with a dummy
  key: nothing leaves the machine, and the process cannot hang the suite."""
  server = socket.socket()
  server.bind(("127.0.0.1", 0))
  server.listen(64)  # Never accepted: the kernel completes the handshakes, no reply.
  port = server.getsockname()[1]
  env = {k: v for k, v in os.environ.items()
         if not k.startswith("WANDB_") and "proxy" not in k.lower()}
  env.update(
      PYTHONPATH=REPO, HOME=str(tmp_path / "home"), NO_PROXY="*", WANDB_API_KEY="0" * 40,
      WANDB_BASE_URL=f"http://127.0.0.1:{port}",
      WANDB_INIT_TIMEOUT="2", WANDB__DISABLE_UPDATE_CHECK="true",
      WANDB_ERROR_REPORTING="false", WANDB_SILENT="true")
  workdir = tmp_path / "run"
  workdir.mkdir()
  try:
    done = subprocess.run([sys.executable, "-c", _WRITER, str(workdir), "online"], env=env,
                          capture_output=True, text=True, timeout=180)
  finally:
    server.close()
  assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
  warnings = [l for l in done.stderr.splitlines() if l.startswith("WARNING")]
  assert len(warnings) == 1, done.stderr[-3000:]
  assert warnings[0].startswith("WARNING wandb could not reach its server in online mode (")
  assert f"http://127.0.0.1:{port}/graphql" in warnings[0]
  run_id = (workdir / "wandb_id").read_text()
  offline = list((workdir / "wandb").glob(f"offline-run-*-{run_id}"))
  assert len(offline) == 1 and warnings[0].endswith(
      f"so this run logs offline: upload it later with `wandb sync {offline[0]}`.")
  assert [r["train/loss"] for r in read_metrics(str(workdir))] == [0.5]


@pytest.mark.slow
def test_lnorm_train_with_an_empty_wandb_mode_logs_as_if_unset(tmp_path):
  # The issue's `WANDB_MODE= lnorm train ...`: a pydantic traceback from wandb.
  env = {"WANDB_MODE": "", "HOME": str(tmp_path / "home"), "WANDB_API_KEY": "",
         "WANDB_SILENT": "true"}
  workdir = tmp_path / "run"
  process = lnorm_subprocess(
      "train", "--config", os.path.join(REPO, "configs/perm_mnist.py:smoke=true"),
      "--workdir", str(workdir), "--config.max_steps=1", "--config.progress_bar=false",
      env=env, cwd=tmp_path)
  _, err = process.communicate(timeout=300)
  assert process.returncode == 0 and "Traceback" not in err, err[-3000:]
  assert ("wandb: offline (wandb.mode is auto and no API key was found; upload with "
          "`wandb sync`).") in err
  assert list((workdir / "wandb").glob("offline-run-*"))


# --- a line cut short, found and repaired at resume (issue 56, item 4) -----------------


def _points(*steps):
  return "".join(json.dumps({"step": s, "train/loss": 1.0 / s}) + "\n" for s in steps)


@pytest.mark.parametrize("text, expected", [
    (_points(10, 20), None),
    ("", None),
    # Cut after the step: the lost point's step is read from the line's beginning.
    (_points(10, 20) + '{"step": 30, "train/lo', (3, 30, True)),
    # Cut inside the step: the lost point comes after the last whole one.
    (_points(10, 20) + '{"step": 3', (3, 20, False)),
    (_points(10, 20) + '{"st', (3, 20, False)),
    ('{"st', (1, 0, False)),
    # Bytes that are not text, and a line that is JSON but not a record.
    (_points(10) + "\udcff\n" + _points(20), (2, 10, False)),
    (_points(10, 20) + "[30]\n", (3, 20, False)),
    # Blank lines are not counted as cut; the first bad line is the one named.
    (_points(10) + "\n" + '{"step": 20, "x\n' + _points(30), (3, 20, True)),
], ids=["whole", "empty", "cut after the step", "cut in the step", "cut before the step",
        "only a cut line", "not text", "not a record", "in the middle"])
def test_the_first_line_that_is_not_a_whole_record_is_found(tmp_path, text, expected):
  path = tmp_path / "metrics.jsonl"
  path.write_bytes(text.encode("utf-8", "surrogateescape"))
  cut = find_cut_line(str(tmp_path))
  if expected is None:
    assert cut is None
    return
  number, step, known = expected
  assert (cut.number, cut.step, cut.step_known) == (number, step, known)
  assert cut.path == str(path)


def test_a_missing_file_has_no_cut_line(tmp_path):
  assert find_cut_line(str(tmp_path)) is None


def test_a_cut_line_names_its_step_or_the_step_it_follows(tmp_path):
  (tmp_path / "metrics.jsonl").write_text(_points(10) + '{"step": 20, "a')
  assert str(find_cut_line(str(tmp_path))) == (
      f"Line 2 of {tmp_path / 'metrics.jsonl'} (a point of step 20)")
  (tmp_path / "metrics.jsonl").write_text(_points(10) + '{"ste')
  assert str(find_cut_line(str(tmp_path))) == (
      f"Line 2 of {tmp_path / 'metrics.jsonl'} (the point after one of step 10)")


def test_resuming_drops_every_point_after_the_checkpoint_and_every_bad_line(tmp_path):
  # The checkpoint (step 20) is older than the last logged step (40), and a line in
  # between does not parse: each step is in the file once, the lines after 20 gone.
  path = tmp_path / "metrics.jsonl"
  path.write_text(_points(10, 20, 30) + "not json\n" + _points(40))
  wandb = ml_collections.ConfigDict({"mode": "disabled", "project": "p"})
  writer = MetricWriter(str(tmp_path), {}, wandb, resume_step=20)
  for step in (30, 40):  # Logged again by the resumed run.
    writer.write(step, {"train/loss": 2.0})
  assert path.read_text() == _points(10, 20) + "".join(
      json.dumps({"step": s, "train/loss": 2.0}) + "\n" for s in (30, 40))
