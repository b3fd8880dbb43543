"""Resuming a run whose metrics.jsonl ends in a line a kill cut short."""

from __future__ import annotations

import json

import ml_collections
import pytest

from lnorm.errors import UserError
from lnorm.training.metrics_writer import MetricWriter, find_cut_line, read_metrics


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
