"""Mistakes caught before any compute, from the user's side: bad config values stop
`lnorm train` before its data loads (no workdir is made), and a sweep's bad grid or
choice value stops it before its first member runs, in every mode."""

from __future__ import annotations


import pytest

from lnorm import cli
from lnorm.errors import ConfigError
from lnorm.training import defaults

SMOKE = "configs/perm_mnist.py:norm=ln,batch_size=8,smoke=true"


@pytest.mark.parametrize("override, message", [
    ("optimizer.learning_rate=-0.001", "optimizer.learning_rate=-0.001: it is the step size "
                                       "and must be > 0"),
    ("optimizer.learning_rate=0", "optimizer.learning_rate=0.0: it is the step size and must be > 0"),
    ("batch_size=0", "batch_size=0: it is the examples per update and must be >= 1"),
    ("max_steps=-1", "max_steps=-1: it is the run's length in updates (0: num_epochs "
                     "epochs) and must be >= 0"),
    ("eval_batch_size=0", "eval_batch_size=0"),
    ("steps_per_call=0", "steps_per_call=0"),
    ("optimizer.clip_global_norm=-1", "optimizer.clip_global_norm=-1.0"),
    ("optimizer.learning_rate=nan", "optimizer.learning_rate=nan"),
    ("num_epochs=0", "num_epochs=0 and max_steps=0: the run would train nothing"),
    ("norm=lnn", "Normalizer 'lnn' is not available"),
    ("seed=-1", "seed=-1: it seeds initialisation, data order and dropout and must be an "
                "integer from 0 to 4294967295. Set --config.seed=0, or another seed in "
                "that range."),
    ("seed=4294967296", "seed=4294967296: it seeds initialisation"),
    ("data.seed=-2", "data.seed=-2: it seeds the held-out splits and subsets"),
    ("data.source=synthetic", "Unknown data source 'synthetic' for the mnist dataset. Its "
                              "sources: auto, tfds, files, embedded"),
    ("data.name=mnsit", "Unknown dataset 'mnsit' (did you mean 'mnist'?)"),
    ("wandb.mode=disable", "wandb.mode='disable' is not a wandb mode (did you mean "
                           "'disabled'?). Set --config.wandb.mode to one of auto, online, "
                           "offline, disabled."),
])
def test_train_refuses_bad_values_before_the_data_and_the_workdir(tmp_path, capsys,
                                                                  override, message):
  workdir = tmp_path / "run"
  # A data directory that does not exist: loading the data would fail differently.
  code = cli.main(["train", "--config", SMOKE, "--workdir", str(workdir),
                   f"--config.{override}", "--config.data.data_dir=/nonexistent"])
  err = capsys.readouterr().err
  assert code == 2 and message in err, err
  assert "Traceback" not in err and not workdir.exists()


def test_the_edges_pass():
  from lnorm import config as config_lib  # pylint: disable=g-import-not-at-top
  config = config_lib.load_config(SMOKE)
  config_lib.apply_overrides(config, {"batch_size": "1", "max_steps": "0", "num_epochs": "1",
                                      "optimizer.learning_rate": "1e-12",
                                      "optimizer.clip_global_norm": "0"})
  defaults.check_values(config)
  config_lib.apply_overrides(config, {"num_epochs": "0", "max_steps": "1"})
  defaults.check_values(config)  # max_steps alone sets the length.
  config_lib.apply_overrides(config, {"seed": "4294967295", "data.seed": "0"})
  defaults.check_values(config)  # The largest seed and the smallest.
  for mode in defaults.WANDB_MODES:
    config_lib.apply_overrides(config, {"wandb.mode": mode})
    defaults.check_values(config)
  with pytest.raises(ConfigError, match="checkpoint_every_secs=0.0"):
    config_lib.apply_overrides(config, {"checkpoint_every_secs": "0"})
    defaults.check_values(config)


def test_a_wandb_mode_in_the_environment_that_wandb_refuses_stops_train_first(
    tmp_path, capsys, monkeypatch):
  # wandb's own refusal was a pydantic traceback after the data had loaded.
  monkeypatch.setenv("WANDB_MODE", "disable")
  workdir = tmp_path / "run"
  code = cli.main(["train", "--config", SMOKE, "--workdir", str(workdir),
                   "--config.data.data_dir=/nonexistent"])
  err = capsys.readouterr().err
  assert code == 2 and err == (
      "lnorm: error: WANDB_MODE='disable' in the environment is not a wandb mode (did you "
      "mean 'disabled'?): wandb reads it whatever the config says. Set it to online, "
      "offline or disabled, or unset it.\n"), err
  assert not workdir.exists()


@pytest.mark.parametrize("how", ["config", "environment"])
def test_a_smoke_run_stops_on_a_data_directory_that_does_not_exist(tmp_path, capsys,
                                                                   monkeypatch, how):
  # smoke=true reads MNIST's embedded digits, and ignored the misspelt directory.
  missing = tmp_path / "nope"
  flags = [f"--config.data.data_dir={missing}"] if how == "config" else []
  if how == "environment":
    monkeypatch.setenv("LNORM_DATA_DIR", str(missing))
  code = cli.main(["train", "--config", SMOKE, "--workdir", str(tmp_path / "run"), *flags])
  err = capsys.readouterr().err
  setting = (f"data_dir '{missing}' in the config" if how == "config" else "$LNORM_DATA_DIR")
  assert code == 2 and err.startswith(
      "lnorm: error: Could not find the mnist dataset. lnorm looked in:\n"
      f"  - the data directory {missing} (set by {setting}) does not exist\n"), err
  assert "Traceback" not in err


@pytest.mark.parametrize("mode", [[], ["--print-commands"],
                                  ["--wandb-sweep", "sweep.yaml", "--select", "validation/error"]])
def test_a_bad_grid_value_stops_a_sweep_before_its_first_member(tmp_path, capsys, mode):
  workdir = tmp_path / "sweep"
  code = cli.main(["sweep", "--config", SMOKE, "--workdir", str(workdir),
                   "--grid", "norm=ln,lnn", *mode])
  out, err = capsys.readouterr()
  assert code == 2
  assert "--grid norm=lnn: Normalizer 'lnn' is not available" in err
  assert "lnorm train" not in out  # No command printed, not even the valid member's.
  assert not workdir.exists() and not (tmp_path / "sweep.yaml").exists()


def test_bad_choice_and_range_values_stop_a_random_sweep(tmp_path, capsys):
  base = ["sweep", "--config", SMOKE, "--workdir", str(tmp_path / "s"), "--random", "2"]
  assert cli.main([*base, "--choice", "batch_size=8,0"]) == 2
  assert "--choice batch_size=0: batch_size=0: it is the examples per update" in (
      capsys.readouterr().err)
  assert cli.main([*base, "--uniform", "optimizer.learning_rate=-1e-3:1e-3"]) == 2
  assert "--uniform optimizer.learning_rate=-0.001: optimizer.learning_rate=-0.001" in (
      capsys.readouterr().err)
  assert not (tmp_path / "s").exists()


def test_a_named_sweep_member_is_checked_whole(tmp_path):
  # A named sweep's members come from the config file, not from flags: each member's
  # whole config is checked too.
  from lnorm.sweeps import runner  # pylint: disable=g-import-not-at-top
  from lnorm.sweeps.space import SweepSpace  # pylint: disable=g-import-not-at-top
  space = SweepSpace(named=[{"norm": "ln"}, {"norm": "ln", "batch_size": "0"}])
  with pytest.raises(ConfigError, match=r"Sweep member batch_size=0: batch_size=0: it is"):
    runner.prepare(SMOKE, space, str(tmp_path / "s"))
  assert not (tmp_path / "s").exists()
