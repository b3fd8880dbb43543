"""`lnorm train --dry-run` and `lnorm sweep --dry-run`: the resolved config, the data
each would load and the number of updates, without training or writing anything."""

from __future__ import annotations

import json
import os

from lnorm import cli
from lnorm import config as config_lib

SMOKE = "configs/perm_mnist.py:norm=ln,batch_size=8,smoke=true"


def test_train_dry_run_says_what_would_run_and_writes_nothing(tmp_path, capsys):
  workdir = tmp_path / "run"
  assert cli.main(["train", "--config", SMOKE, "--workdir", str(workdir), "--dry-run",
                   "--config.max_steps=700"]) == 0
  out = capsys.readouterr().out
  assert out.startswith("Dry run: nothing is trained or written.\nconfig:\n")
  assert "  norm = 'ln'\n" in out and "  max_steps = 700\n" in out
  assert "data: mnist from embedded (" in out and "): 4000 train, 500 validation, 500 test" in out
  # 4000 // 8 = 500 updates an epoch; 700 updates are 1.4 epochs.
  assert "updates: 700 (1.4 epochs of 500 updates at batch size 8, train split)" in out
  assert f"workdir: {workdir}: new" in out
  assert not workdir.exists()


def test_train_dry_run_tells_a_resume_from_a_refusal(tmp_path, capsys):
  workdir = tmp_path / "run"
  (workdir / "checkpoints" / "12").mkdir(parents=True)
  config = config_lib.load_config(SMOKE)
  with open(workdir / "config.json", "w") as f:
    json.dump({"config": config_lib.to_flat_dict(config)}, f)
  args = ["train", "--config", SMOKE, "--workdir", str(workdir), "--dry-run"]
  assert cli.main(args) == 0
  assert "resumes from the checkpoint at step 12" in capsys.readouterr().out
  assert cli.main([*args, "--config.optimizer.learning_rate=0.01"]) == 0
  assert ("REFUSED: The workdir %s holds a run of a different config "
          "(optimizer.learning_rate: 0.001 in the workdir, 0.01 now)" % workdir) in (
              capsys.readouterr().out)
  assert sorted(os.listdir(workdir)) == ["checkpoints", "config.json"]


def test_sweep_dry_run_lists_every_member_and_the_total(tmp_path, capsys):
  workdir = tmp_path / "sweep"
  assert cli.main(["sweep", "--config", SMOKE, "--workdir", str(workdir), "--dry-run",
                   "--grid", "batch_size=8,7"]) == 0
  out = capsys.readouterr().out
  assert "config (every member):\n" in out and "  norm = 'ln'\n" in out
  assert "member batch_size=8: batch_size=8\n" in out
  assert "updates: 500 (1 epoch of 500 updates at batch size 8, train split)" in out
  # 4000 // 7 = 571: the last partial batch is dropped.
  assert "member batch_size=7: batch_size=7\n" in out
  assert "updates: 571 (1 epoch of 571 updates at batch size 7, train split)" in out
  assert "2 members, 1071 updates in all." in out
  assert not workdir.exists()
