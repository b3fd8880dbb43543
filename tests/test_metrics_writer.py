"""Resuming a run whose metrics.jsonl ends in a line a kill cut short."""

from __future__ import annotations

import json

import ml_collections
import pytest

from lnorm.errors import UserError
from lnorm.training.metrics_writer import MetricWriter, read_metrics


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
