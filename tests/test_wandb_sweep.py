"""``lnorm sweep --wandb-sweep``: the wandb sweep configuration it writes (parsed as
YAML), and the command line ``wandb agent`` builds from it, built here with wandb's
own functions and run offline on a tiny config."""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys

import pytest
import yaml
from wandb.sdk.launch.sweeps import utils as wandb_sweep_utils

from lnorm import cli
from lnorm.sweeps import wandb_sweep
from tests.helpers import REPO, epoch_records

TINY_CONFIG = '''
from configs import perm_mnist

def get_config(arg=None):
  c = perm_mnist.get_config("smoke=true")
  c.hidden_sizes = (8,)
  c.batch_size = 100
  c.steps_per_call = 40
  return c
'''


def _write_sweep(tmp_path, *argv):
  path = tmp_path / "sweep.yaml"
  assert cli.main(["sweep", "--wandb-sweep", str(path), *argv]) == 0
  with open(path) as f:
    return yaml.safe_load(f)


def test_a_grid_becomes_a_wandb_grid_sweep(tmp_path):
  config = _write_sweep(
      tmp_path, "--config", "configs/perm_mnist.py:norm=ln,batch_size=4", "--workdir",
      "runs/lr", "--grid", "optimizer.learning_rate=3e-4,1e-3,3e-3", "--grid", "seed=0,1",
      "--select", "validation/error", "--config.num_epochs=2")
  assert config["method"] == "grid"
  assert config["metric"] == {"name": "validation/error", "goal": "minimize"}
  assert config["parameters"] == {
      "optimizer.learning_rate": {"values": [0.0003, 0.001, 0.003]},  # Numbers, typed.
      "seed": {"values": [0, 1]},
      "num_epochs": {"value": 2},  # The sweep command's own override: a constant.
  }
  assert config["program"] == "lnorm.sweeps.wandb_sweep"
  # wandb's documented macros: ${env} ${interpreter} ${program} ... ${args}.
  assert config["command"] == [
      "${env}", "${interpreter}", "-m", "${program}", "--config",
      "configs/perm_mnist.py:norm=ln,batch_size=4", "--workdir", "runs/lr",
      "--name-keys", "optimizer.learning_rate,seed", "${args}"]
  assert config["project"] == "lnorm" and config["name"] == "lr"
  assert "run_cap" not in config
  assert (tmp_path / "sweep.yaml").read_text().startswith("# A wandb sweep written by")


def test_random_search_keeps_its_distributions(tmp_path):
  config = _write_sweep(
      tmp_path, "--config", "configs/perm_mnist.py", "--workdir", "runs/rs", "--random", "5",
      "--loguniform", "optimizer.learning_rate=1e-4:1e-2", "--uniform",
      "optimizer.clip_global_norm=0:5", "--int", "num_epochs=1:3", "--choice", "norm=ln,bn",
      "--grid", "seed=0,1", "--select", "validation/accuracy")
  assert config["method"] == "random"
  assert config["metric"]["goal"] == "maximize"  # Read from the name, as lnorm compare does.
  assert config["parameters"] == {
      "seed": {"values": [0, 1]},
      "optimizer.learning_rate": {"distribution": "log_uniform_values", "min": 1e-4,
                                  "max": 1e-2},
      "optimizer.clip_global_norm": {"distribution": "uniform", "min": 0.0, "max": 5.0},
      "num_epochs": {"distribution": "int_uniform", "min": 1, "max": 3},
      "norm": {"values": ["ln", "bn"]},
  }
  assert config["run_cap"] == 10  # The members `lnorm sweep` would run: 5 draws x 2 seeds.
  keys = config["command"][config["command"].index("--name-keys") + 1]
  assert keys == "optimizer.learning_rate,optimizer.clip_global_norm,num_epochs,norm,seed"


def test_a_named_sweep_becomes_one_categorical_parameter(tmp_path):
  config = _write_sweep(tmp_path, "--config", "configs/perm_mnist.py", "--sweep",
                        "perm_mnist", "--workdir", "runs/fig6", "--select", "validation/error")
  assert config["parameters"]["sweep_member"]["values"][-1] == "norm=ln,batch_size=4"
  assert config["command"][-3:] == ["--sweep", "perm_mnist", "${args}"]
  # The member's overrides are looked up in the config file when the run starts.
  args = argparse.Namespace(config="configs/perm_mnist.py", workdir="runs/fig6",
                            name_keys="sweep_member", sweep="perm_mnist")
  argv, workdir = wandb_sweep.train_command(
      args, {"sweep_member": "norm=bn,batch_size=4"}, run_id=None)
  assert workdir == os.path.join("runs/fig6", "norm=bn,batch_size=4")
  assert {"--config.norm=bn", "--config.batch_size=4",
          "--config.norm_options.bn.unbiased=True"} <= set(argv)


def test_wandb_sweep_needs_a_metric_and_valid_keys(tmp_path, capsys):
  base = ["sweep", "--config", "configs/perm_mnist.py", "--workdir", "x", "--wandb-sweep",
          str(tmp_path / "s.yaml")]
  assert cli.main(base + ["--grid", "seed=0,1"]) == 2
  assert "needs --select METRIC" in capsys.readouterr().err
  assert cli.main(base + ["--grid", "sed=0,1", "--select", "validation/error"]) == 2
  assert "did you mean 'seed'" in capsys.readouterr().err
  assert not (tmp_path / "s.yaml").exists()


def test_a_second_wandb_run_with_the_same_parameters_gets_its_own_workdir(tmp_path):
  root = str(tmp_path)
  params = {"optimizer.learning_rate": "0.001", "seed": "0", "num_epochs": "2"}
  keys = ["optimizer.learning_rate", "seed"]
  first = wandb_sweep.run_workdir(root, params, keys, "run1")
  assert first == os.path.join(root, "optimizer.learning_rate=0.001,seed=0")
  os.makedirs(first)
  with open(os.path.join(first, "wandb_id"), "w") as f:
    f.write("run1")
  assert wandb_sweep.run_workdir(root, params, keys, "run1") == first  # Resumed by wandb.
  assert wandb_sweep.run_workdir(root, params, keys, "run2") == first + "_run2"
  assert wandb_sweep.run_workdir(root, params, keys, None) == first  # By hand.


def _agent_command(config, values):
  """The command `wandb agent` runs for one run with these parameter values, made the
  way the agent makes it (wandb/wandb_agent.py): wandb's macro expansion, with
  ${interpreter} this test's Python rather than the `python` on the PATH."""
  command = wandb_sweep_utils.create_sweep_command(list(config["command"]))
  macros = wandb_sweep_utils.create_sweep_command_args(
      {"args": {k: {"value": v} for k, v in values.items()}})
  macros.update(env=["/usr/bin/env"], interpreter=[sys.executable],
                program=[config["program"]])
  argv = []
  for part in map(str, command):
    is_macro = part.startswith("${") and part.endswith("}")
    argv += (macros.get(part[2:-1]) or []) if is_macro else [part]
  return argv


def test_the_agent_command_trains_into_a_workdir_per_run_as_the_agents_run(tmp_path):
  config_file = tmp_path / "tiny.py"
  config_file.write_text(TINY_CONFIG)
  config = _write_sweep(
      tmp_path, "--config", str(config_file), "--workdir", "runs/lr", "--grid",
      "optimizer.learning_rate=1e-3,1e-2", "--grid", "seed=0,1", "--select",
      "validation/error", "--config.num_epochs=1")
  argv = _agent_command(config, {"optimizer.learning_rate": 0.01, "seed": 1, "num_epochs": 1})
  assert argv[:4] == ["/usr/bin/env", sys.executable, "-m", "lnorm.sweeps.wandb_sweep"]
  assert argv[-3:] == ["--optimizer.learning_rate=0.01", "--seed=1", "--num_epochs=1"]
  env = dict(os.environ, WANDB_MODE="offline", WANDB_RUN_ID="agentrun01", WANDB_SILENT="true",
             PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
  done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                        timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  workdir = tmp_path / "runs" / "lr" / "optimizer.learning_rate=0.01,seed=1"
  assert [r["epoch"] for r in epoch_records(str(workdir))] == [1]
  with open(workdir / "config.json") as f:
    flat = json.load(f)["config"]
  assert (flat["optimizer.learning_rate"], flat["seed"], flat["num_epochs"]) == (0.01, 1, 1)
  # The wandb run lnorm train opened is the agent's run.
  assert (workdir / "wandb_id").read_text() == "agentrun01"
  assert glob.glob(str(workdir / "wandb" / "offline-run-*-agentrun01"))
  # And the run is there for `lnorm report --select`.
  assert cli.main(["report", str(tmp_path / "runs" / "lr"), "--select",
                   "validation/error"]) == 0


@pytest.mark.parametrize("bad", [["oops"], ["--seed"]])
def test_the_agent_entry_rejects_arguments_that_are_not_parameters(bad, capsys):
  assert wandb_sweep.main(["--config", "configs/perm_mnist.py", "--workdir", "x", *bad]) == 2
  assert "--KEY=VALUE" in capsys.readouterr().err
