"""``lnorm sweep``: member names, printed commands, and a two-member sweep that runs,
resumes, skips finished members and writes its summary."""

from __future__ import annotations

import argparse
import csv
import json
import os
import shlex

import pytest

from lnorm import cli
from lnorm import config as config_lib
from lnorm import sweep as sweep_lib
from lnorm.commands import train as train_command
from lnorm.errors import ConfigError
from tests.helpers import epoch_records

# A config file of the kind users write: perm_mnist shrunk to seconds, and a sweep.
TINY_CONFIG = '''
from configs import perm_mnist

def get_config(arg=None):
  c = perm_mnist.get_config("smoke=true")
  c.hidden_sizes = (8,)
  c.batch_size = 100
  c.steps_per_call = 40  # One call per epoch of the 4,000 embedded digits.
  return c

def get_sweep(name=None):
  sweeps = {"tiny": [{"norm": "ln"}, {"norm": "bn"}]}
  return sweeps if name is None else sweeps[name]
'''


@pytest.fixture
def tiny_config(tmp_path):
  path = tmp_path / "tiny.py"
  path.write_text(TINY_CONFIG)
  return str(path)


def test_member_names_leave_out_what_other_keys_determine():
  grid = sweep_lib.load_sweep("configs/perm_mnist.py", "perm_mnist")
  members = sweep_lib.make_members(grid, "runs/fig6")
  assert [m.name for m in members] == [
      "norm=none,batch_size=128", "norm=bn,batch_size=128", "norm=ln,batch_size=128",
      "norm=none,batch_size=4", "norm=bn,batch_size=4", "norm=ln,batch_size=4"]
  # At batch 4 BN uses the unbiased variance, as in the paper.
  assert all(m.overrides["norm_options.bn.unbiased"] == str(m.overrides["batch_size"] == "4")
             for m in members)
  assert sweep_lib.load_sweep("configs/perm_mnist.py", "figure6") == grid


def test_unknown_sweep_lists_the_available_ones():
  with pytest.raises(ConfigError, match="Available sweeps: cpu, figure6, paper, perm_mnist, seeds"):
    sweep_lib.load_sweep("configs/perm_mnist.py", "figure7")


def test_print_commands(capsys):
  assert cli.main(["sweep", "--config", "configs/perm_mnist.py", "--sweep", "perm_mnist",
                   "--workdir", "runs/fig6", "--print-commands",
                   "--config.num_epochs=2"]) == 0
  lines = capsys.readouterr().out.strip().splitlines()
  assert len(lines) == 6
  argv = shlex.split(lines[4])
  assert argv[:6] == ["lnorm", "train", "--config", "configs/perm_mnist.py", "--workdir",
                      "runs/fig6/norm=bn,batch_size=4"]
  assert {"--config.norm=bn", "--config.batch_size=4", "--config.norm_options.bn.unbiased=True",
          "--config.num_epochs=2", "--config.wandb.group=perm_mnist"} <= set(argv)
  # Every line is a `lnorm train` command line whose config loads.
  for line in lines:
    rest, overrides = config_lib.split_config_overrides(shlex.split(line)[1:])
    assert rest[0] == "train"
    parser = argparse.ArgumentParser()
    train_command.add_arguments(parser)
    args = parser.parse_args(rest[1:])
    config = config_lib.load_config(args.config)
    config_lib.apply_overrides(config, overrides)
    assert config.num_epochs == 2


def test_print_commands_rejects_a_bad_override(capsys):
  assert cli.main(["sweep", "--config", "configs/perm_mnist.py", "--sweep", "perm_mnist",
                   "--workdir", "x", "--print-commands", "--config.num_epoch=2"]) == 2
  assert "num_epochs" in capsys.readouterr().err


def _fake_run(workdir, seed, errors):
  os.makedirs(workdir)
  with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
    for epoch, err in enumerate(errors, 1):
      f.write(json.dumps({"step": epoch * 10, "epoch": epoch, "train/loss": 1.0 / epoch,
                          "time/epoch_seconds": 1.0, "test/error": err}) + "\n")
  del seed


def test_summary_over_seeds_gives_mean_and_spread(tmp_path):
  grid = [{"norm": n, "seed": str(s)} for n in ("ln", "bn") for s in (0, 1, 2)]
  members = sweep_lib.make_members(grid, str(tmp_path))
  assert members[0].name == "norm=ln,seed=0"
  finals = {"ln": (0.10, 0.12, 0.14), "bn": (0.20, 0.20, 0.20)}
  for m in members:
    err = finals[m.overrides["norm"]][int(m.overrides["seed"])]
    _fake_run(m.workdir, m.overrides["seed"], [0.5, err - 0.05, err])  # best = err - 0.05
  summary = sweep_lib.summarize(members, {m.name: {"num_epochs": 3} for m in members})
  by_setting = {g["setting"]: g for g in summary.grouped}
  assert set(by_setting) == {"norm=ln", "norm=bn"}
  assert by_setting["norm=ln"]["final test/error mean"] == pytest.approx(0.12)
  assert by_setting["norm=ln"]["final test/error std"] == pytest.approx(0.02)
  assert by_setting["norm=ln"]["best test/error mean"] == pytest.approx(0.07)
  assert by_setting["norm=bn"]["final test/error std"] == pytest.approx(0.0)
  assert "0.12 ± 0.02" in summary.table()
  paths = summary.write(str(tmp_path))
  assert [os.path.basename(p) for p in paths] == ["summary.csv", "summary_by_setting.csv"]


def _summary_csv(workdir):
  with open(os.path.join(workdir, "summary.csv")) as f:
    return {row["member"]: row for row in csv.DictReader(f)}


def test_two_member_sweep_runs_resumes_and_skips(tiny_config, tmp_path, capsys):
  workdir = str(tmp_path / "sweep")
  base = ["sweep", "--config", tiny_config, "--sweep", "tiny", "--workdir", workdir]

  # 1. Both members run (as two worker processes) and are summarised.
  assert cli.main(base + ["--parallel", "2", "--config.num_epochs=1"]) == 0
  out = capsys.readouterr().out
  for name in ("norm=ln", "norm=bn"):
    assert [r["epoch"] for r in epoch_records(os.path.join(workdir, name))] == [1]
    assert f"{name}: done" in out
  rows = _summary_csv(workdir)
  assert set(rows) == {"norm=ln", "norm=bn"} and rows["norm=bn"]["status"] == "finished"
  assert float(rows["norm=bn"]["final test/error"]) < 0.9
  with open(os.path.join(workdir, "norm=bn", "config.json")) as f:
    flat = json.load(f)["config"]
  assert flat["wandb.group"] == "tiny" and flat["norm"] == "bn"
  assert os.path.exists(os.path.join(workdir, "figures", "curves.png"))
  first_epoch = epoch_records(os.path.join(workdir, "norm=ln"))[0]

  # 2. One more epoch: both members resume from their checkpoints (sequentially).
  assert cli.main(base + ["--config.num_epochs=2"]) == 0
  for name in ("norm=ln", "norm=bn"):
    with open(os.path.join(workdir, name, "train.log")) as f:
      assert "Resuming from the checkpoint at step 40" in f.read()
    assert [r["step"] for r in epoch_records(os.path.join(workdir, name))] == [40, 80]
  assert epoch_records(os.path.join(workdir, "norm=ln"))[0] == first_epoch
  assert _summary_csv(workdir)["norm=ln"]["epochs"] == "2"

  # 3. Nothing left to do: finished members are skipped without starting a process.
  capsys.readouterr()
  assert cli.main(base + ["--config.num_epochs=2"]) == 0
  out = capsys.readouterr().out
  assert out.count("already finished, skipped") == 2
  assert "skipped" in _summary_csv(workdir)["norm=bn"]["status"]
