"""``lnorm sweep``: member names, printed commands, and a two-member sweep that runs,
resumes, skips finished members and writes its summary; ad-hoc grids, seeded random
search and their checks against the config, and a grid that ends with its selection."""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex

import pytest

from lnorm import cli
from lnorm import config as config_lib
from lnorm.sweeps import runner as sweep_lib
from lnorm.sweeps import space as sweep_space
from lnorm.commands import train as train_command
from lnorm.errors import ConfigError, UserError
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
  with pytest.raises(ConfigError, match="Available sweeps: cpu, figure6, gpu, paper, perm_mnist, seeds, "
                     "speed_b4"):
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
      log = f.read()
    assert "Resuming from the checkpoint at step 40" in log
    # The runner writes the member's output there; the member adds no copy of its own.
    assert log.count("Resuming from the checkpoint at step 40") == 1
    assert [r["step"] for r in epoch_records(os.path.join(workdir, name))] == [40, 80]
  assert epoch_records(os.path.join(workdir, "norm=ln"))[0] == first_epoch
  assert _summary_csv(workdir)["norm=ln"]["epochs"] == "2"

  # 3. Nothing left to do: finished members are skipped without starting a process.
  capsys.readouterr()
  assert cli.main(base + ["--config.num_epochs=2"]) == 0
  out = capsys.readouterr().out
  assert out.count("already finished, skipped") == 2
  assert "skipped" in _summary_csv(workdir)["norm=bn"]["status"]


# --- ad-hoc grids and random search -------------------------------------------------------


def _space(*argv):
  """The sweep space and members that `lnorm sweep ARGV` would run."""
  from lnorm.commands import sweep as sweep_command  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser()
  sweep_command.add_arguments(parser)
  args = parser.parse_args(["--workdir", "runs/x", *argv])
  space = sweep_command.build_space(args)
  return space, sweep_lib.space_members(space, "runs/x")


def test_grid_product_and_member_names():
  _, members = _space("--config", "configs/perm_mnist.py:norm=ln,batch_size=4",
                      "--grid", "optimizer.learning_rate=3e-4,1e-3,3e-3", "--grid", "seed=0,1")
  assert [m.name for m in members] == [
      f"optimizer.learning_rate={lr},seed={s}" for lr in ("3e-4", "1e-3", "3e-3")
      for s in (0, 1)]
  assert members[3].overrides == {"optimizer.learning_rate": "1e-3", "seed": "1"}
  assert members[3].workdir == os.path.join("runs/x", "optimizer.learning_rate=1e-3,seed=1")


def test_grid_crosses_a_named_sweep():
  _, members = _space("--config", "configs/perm_mnist.py", "--sweep", "perm_mnist",
                      "--grid", "seed=0,1")
  assert len(members) == 12
  assert [m.name for m in members[:3]] == [
      "norm=none,batch_size=128,seed=0", "norm=none,batch_size=128,seed=1",
      "norm=bn,batch_size=128,seed=0"]
  assert members[-1].overrides == {"norm": "ln", "batch_size": "4",
                                   "norm_options.bn.unbiased": "True", "steps_per_call": "64",
                                   "seed": "1"}
  with pytest.raises(UserError, match="norm is already set by the named sweep"):
    _space("--config", "configs/perm_mnist.py", "--sweep", "perm_mnist", "--grid", "norm=ln")


def test_grid_values_may_be_tuples():
  assert sweep_space.parse_grid("hidden_sizes=(100,100),(200,)") == (
      "hidden_sizes", ("(100,100)", "(200,)"))


def test_print_commands_of_an_ad_hoc_grid(capsys):
  assert cli.main(["sweep", "--config", "configs/perm_mnist.py:norm=ln,batch_size=4",
                   "--workdir", "runs/lr", "--grid", "optimizer.learning_rate=3e-4,1e-3",
                   "--grid", "seed=0,1", "--print-commands"]) == 0
  lines = capsys.readouterr().out.strip().splitlines()
  assert len(lines) == 4
  argv = shlex.split(lines[1])
  assert argv[5] == "runs/lr/optimizer.learning_rate=3e-4,seed=1"
  assert {"--config.optimizer.learning_rate=3e-4", "--config.seed=1",
          "--config.wandb.group=lr"} <= set(argv)


@pytest.mark.parametrize("flag, value, message", [
    ("--grid", "optimizer.learning_rat=3e-4,1e-3", "did you mean 'learning_rate'"),
    ("--grid", "optimzer.learning_rate=3e-4", "did you mean 'optimizer'"),
    ("--grid", "seed=0,one", "--grid seed=one: .*not a valid int"),
    ("--loguniform", "optimizer.learning_rat=1e-4:1e-2", "did you mean 'learning_rate'"),
    ("--uniform", "num_epochs=1:3", "an integer field takes --int"),
    ("--choice", "batch_size=4,four", "--choice batch_size=four: .*not a valid int"),
])
def test_a_bad_value_fails_before_anything_runs(tmp_path, capsys, flag, value, message):
  workdir = tmp_path / "sweep"
  extra = ["--random", "2"] if flag != "--grid" else []
  code = cli.main(["sweep", "--config", "configs/perm_mnist.py", "--workdir", str(workdir),
                   *extra, flag, value])
  err = capsys.readouterr().err
  assert code == 2
  assert "Traceback" not in err
  assert re.search(message, err), err
  assert not workdir.exists()  # Nothing ran, nothing was written.


@pytest.mark.parametrize("argv, message", [
    (["--grid", "seed"], "expected KEY=V1,V2"),
    (["--grid", "seed=0,0"], "repeats a value"),
    (["--random", "3"], "give at least one --uniform"),
    (["--loguniform", "optimizer.learning_rate=1e-4:1e-2"], "needs --random N"),
    (["--random", "2", "--loguniform", "optimizer.learning_rate=0:1e-2"], "must be positive"),
    (["--random", "2", "--uniform", "optimizer.learning_rate=1e-2:1e-4"], "LO < HI"),
    (["--random", "2", "--int", "seed=0:1.5"], "must be ints"),
    (["--grid", "seed=0,1", "--grid", "seed=2"], "seed is swept twice"),
    ([], "Nothing to sweep"),
])
def test_malformed_sweep_flags_get_clear_errors(capsys, argv, message):
  assert cli.main(["sweep", "--config", "configs/perm_mnist.py", "--workdir", "x",
                   "--print-commands", *argv]) == 2
  assert message in capsys.readouterr().err


def _random(seed=0, n=5, *more):
  return _space("--config", "configs/perm_mnist.py", "--random", str(n), "--random-seed",
                str(seed), "--loguniform", "optimizer.learning_rate=1e-4:1e-2",
                "--int", "num_epochs=1:3", *more)[1]


def test_random_draws_repeat_on_a_rerun_and_change_with_the_seed():
  first = [m.overrides for m in _random()]
  assert [m.overrides for m in _random()] == first
  other = [m.overrides for m in _random(seed=1)]
  assert [m["optimizer.learning_rate"] for m in other] != [
      m["optimizer.learning_rate"] for m in first]
  # A larger N keeps the first draws; another key does not change the others' draws.
  assert [m.overrides for m in _random(0, 8)][:5] == first
  with_choice = [m.overrides for m in _random(0, 5, "--choice", "norm=ln,bn")]
  assert [{k: v for k, v in m.items() if k != "norm"} for m in with_choice] == first
  assert len({m["optimizer.learning_rate"] for m in first}) == 5


def test_random_draws_cross_the_grid_and_name_every_drawn_key():
  members = _random(0, 2, "--grid", "seed=0,1")
  assert len(members) == 4
  lr = members[0].overrides["optimizer.learning_rate"]
  epochs = members[0].overrides["num_epochs"]
  assert members[1].overrides == {"optimizer.learning_rate": lr, "num_epochs": epochs,
                                  "seed": "1"}
  assert members[1].name == f"optimizer.learning_rate={lr},num_epochs={epochs},seed=1"


def test_log_uniform_draws_stay_inside_their_bounds_and_spread_in_log():
  d = sweep_space.parse_distribution("loguniform", "optimizer.learning_rate=1e-5:1e-1")
  space = sweep_space.SweepSpace(random=2000, distributions=[d], random_seed=3)
  values = [float(m["optimizer.learning_rate"]) for m in space.members()]
  assert min(values) >= 1e-5 and max(values) <= 1e-1
  # Log-uniform: a quarter of the draws in each decade-pair, e.g. about half below 1e-3
  # (a uniform draw would put 1% there).
  assert 0.45 < sum(v < 1e-3 for v in values) / len(values) < 0.55
  # The ends and the middle of the unit interval map to the bounds and the geometric mean.
  assert d.draw(0.0) == "1e-05" and d.draw(0.5) == "0.001" and float(d.draw(0.99999)) <= 0.1
  # Rounding to 4 significant digits never leaves the bounds.
  tight = sweep_space.Distribution("uniform", "x", low=0.123456, high=0.123457)
  assert all(0.123456 <= float(tight.draw(u)) <= 0.123457 for u in (0.0, 0.3, 0.999))


def test_int_and_choice_draws_cover_their_values():
  n = sweep_space.Distribution("int", "k", low=1, high=3)
  assert {n.draw(u / 100) for u in range(100)} == {"1", "2", "3"}
  c = sweep_space.Distribution("choice", "norm", values=("ln", "bn"))
  assert c.draw(0.0) == "ln" and c.draw(0.9999) == "bn"


def test_a_drawn_float_round_trips_through_the_name_the_override_and_the_config():
  for m in _random(4, 20):
    text = m.overrides["optimizer.learning_rate"]
    assert f"optimizer.learning_rate={text}," in m.name
    config = sweep_lib.member_config("configs/perm_mnist.py", m, {})
    assert config.optimizer.learning_rate == float(text)
    assert sweep_space.format_float(config.optimizer.learning_rate) == text
    assert len(text.replace("0.", "").replace("e-0", "").lstrip("0")) <= 6  # 4 digits.


def test_random_sweep_is_recorded_in_the_sweep_file(tiny_config, tmp_path):
  workdir = tmp_path / "rs"
  space = sweep_space.SweepSpace(
      grid=[("seed", ("0",))], random=1, random_seed=7,
      distributions=[sweep_space.parse_distribution("loguniform",
                                                    "optimizer.learning_rate=1e-4:1e-2")])
  members, _ = sweep_lib.prepare(tiny_config, space, str(workdir))
  workdir.mkdir()
  sweep_lib._write_sweep_file(str(workdir), tiny_config, None, space, members, {})  # pylint: disable=protected-access
  with open(workdir / "sweep.json") as f:
    record = json.load(f)
  assert record["random"] == {"n": 1, "seed": 7, "distributions": [
      {"kind": "loguniform", "key": "optimizer.learning_rate", "low": 1e-4, "high": 1e-2}]}
  assert record["grid"] == [["seed", ["0"]]]
  assert [m.name for m in sweep_lib.load_members(str(workdir))] == [members[0].name]


def test_ad_hoc_grid_runs_selects_and_skips(tiny_config, tmp_path, capsys):
  workdir = str(tmp_path / "lr")
  argv = ["sweep", "--config", tiny_config, "--workdir", workdir, "--grid",
          "optimizer.learning_rate=1e-3,1e-6", "--select", "validation/error",
          "--no-figures", "--config.num_epochs=1"]
  assert cli.main(argv) == 0
  out = capsys.readouterr().out
  assert "[sweep lr] (1/2) optimizer.learning_rate=1e-3: starting" in out
  rows = _summary_csv(workdir)
  assert set(rows) == {"optimizer.learning_rate=1e-3", "optimizer.learning_rate=1e-6"}
  # Adam at 1e-6 barely moves from chance in one epoch: 1e-3 is selected.
  assert "Selected: optimizer.learning_rate=1e-3." in out
  with open(os.path.join(workdir, "selection.json")) as f:
    selected = json.load(f)
  assert selected["selected"] == "optimizer.learning_rate=1e-3"
  run = selected["settings"][0]["runs"][0]
  records = epoch_records(os.path.join(workdir, "optimizer.learning_rate=1e-3"))
  assert run["test"]["test/error"] == records[0]["test/error"]
  with open(os.path.join(workdir, "sweep.json")) as f:
    assert json.load(f)["grid"] == [["optimizer.learning_rate", ["1e-3", "1e-6"]]]
  # The same command skips both members and selects again.
  assert cli.main(argv) == 0
  out = capsys.readouterr().out
  assert out.count("already finished, skipped") == 2 and "Selected:" in out
