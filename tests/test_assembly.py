"""One run assembly (lnorm.training.assembly): one check of a config, the same for the
command line and for a program, and the schedule and state every user of a run reads."""

from __future__ import annotations

import json

import jax
import pytest

from configs import perm_mnist
from lnorm import cli
from lnorm import config as config_lib
from lnorm.errors import ConfigError, UserError
from lnorm.evaluation import bln_search
from lnorm.training import assembly, loop, run_files
from lnorm.training import task as task_lib
from lnorm.training.train_state import first_training_batch


def _smoke(**fields):
  config = perm_mnist.get_config("norm=ln,batch_size=7,smoke=true")
  for key, value in fields.items():
    config_lib.apply_overrides(config, {key: str(value)})
  return config


@pytest.mark.parametrize("field, value, message", [
    ("max_steps", -1, "max_steps=-1"),
    ("length_buckets.num", 0, "length_buckets.num=0"),
    ("length_buckets.group_steps", 0, "length_buckets.group_steps=0"),
])
def test_a_program_gets_the_checks_the_command_line_gets(tmp_path, field, value, message):
  # train_and_evaluate called directly, with no task checked by a caller.
  workdir = tmp_path / "run"
  with pytest.raises(ConfigError, match=message):
    loop.train_and_evaluate(_smoke(**{field: value}), str(workdir))
  assert not workdir.exists()  # Refused before the workdir is made.


def test_the_config_is_checked_once_per_train_command(tmp_path, monkeypatch):
  calls = []
  check = task_lib.check_config
  monkeypatch.setattr(task_lib, "check_config", lambda c: calls.append(1) or check(c))
  built = []
  load = task_lib.load_task
  monkeypatch.setattr(task_lib, "load_task", lambda c: built.append(1) or load(c))
  code = cli.main(["train", "--config", "configs/perm_mnist.py:norm=ln,batch_size=64,smoke=true",
                   "--workdir", str(tmp_path / "run"), "--config.max_steps=1",
                   "--config.progress_bar=false"])
  assert code == 0 and calls == [1] and built == [1]


def test_the_schedule_counts_a_partial_last_epoch():
  # 7 does not divide the smoke split: the last batch is dropped.
  config = _smoke(max_steps=0, num_epochs=2)
  run = assembly.assemble(config)
  n = run.dataset.num_examples(run.task.train_split())
  assert run.steps_per_epoch == n // 7 and run.total_steps == 2 * (n // 7)
  config = _smoke(max_steps=run.steps_per_epoch + 3)
  run = assembly.assemble(config)
  assert run.num_epochs == 2
  assert run.ends_epoch(run.steps_per_epoch) and not run.ends_epoch(run.steps_per_epoch + 1)
  assert run.is_last(run.steps_per_epoch + 3) and not run.is_last(run.steps_per_epoch)


def test_the_abstract_state_is_the_initial_states_structure():
  run = assembly.assemble(_smoke(max_steps=1))
  initial = run.initial_state()
  abstract = run.initializer.abstract(first_training_batch(run.config, run.train_arrays))
  # What a checkpoint restores into: every leaf, by path, with its shape and dtype.
  leaves = lambda tree: [(jax.tree_util.keystr(p), x.shape, x.dtype)
                         for p, x in jax.tree_util.tree_leaves_with_path(tree)]
  assert leaves(initial) == leaves(abstract) and len(leaves(initial)) > 5
  assert all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(abstract))


def test_a_trained_runs_config_is_read_in_one_place(tmp_path):
  with pytest.raises(UserError, match="config.json does not exist"):
    assembly.load_run_config(str(tmp_path))
  config = _smoke(max_steps=3)
  (tmp_path / run_files.CONFIG_FILE).write_text(
      json.dumps({"config": config_lib.to_flat_dict(config)}))
  loaded = assembly.load_run_config(str(tmp_path), {"batch_size": "5"})
  assert loaded.batch_size == 5 and loaded.max_steps == 3
  assert bln_search.load_run_config is assembly.load_run_config  # The old name works.


@pytest.mark.parametrize("command, message", [
    (["sample", "--text", "hi"], "has no sampler"),
    (["evaluate"], "has no sentence encoder"),
])
def test_an_experiment_without_an_ability_says_so(tmp_path, capsys, command, message):
  (tmp_path / run_files.CONFIG_FILE).write_text(
      json.dumps({"config": config_lib.to_flat_dict(_smoke())}))
  code = cli.main([command[0], "--workdir", str(tmp_path), *command[1:]])
  err = capsys.readouterr().err
  assert code == 2 and message in err and "Traceback" not in err, err


@pytest.mark.parametrize("command, experiment", [
    (["sample", "--text", "hi"], "handwriting"),
    (["evaluate"], "skip_thoughts"),
])
def test_a_trained_runs_command_checks_its_config_as_train_does(tmp_path, capsys, command,
                                                                 experiment):
  # A config no run could train with (max_steps below 0: defaults.check_values), in a
  # workdir whose experiment has the command's ability, so that only the check stops it.
  spec = f"configs/{experiment}.py:norm=ln,smoke=true"
  assert cli.main(["train", "--config", spec, "--workdir", str(tmp_path / "train"),
                   "--config.max_steps=-1"]) == 2
  refused = capsys.readouterr().err
  assert refused.count("\n") == 1 and "max_steps=-1" in refused, refused
  config = config_lib.load_config(spec)
  config.max_steps = -1
  (tmp_path / run_files.CONFIG_FILE).write_text(
      json.dumps({"config": config_lib.to_flat_dict(config)}))
  code = cli.main([command[0], "--workdir", str(tmp_path), *command[1:]])
  assert code == 2 and capsys.readouterr().err == refused


@pytest.mark.parametrize("experiment", task_lib.EXPERIMENTS)
def test_assembling_a_run_leaves_its_task_as_it_was(experiment):
  # A task describes its experiment: the data, model and schedule are the run's, and
  # a second run assembled from the same task gets nothing the first left behind.
  config = config_lib.load_config(f"configs/{experiment}.py:norm=ln,smoke=true")
  task = assembly.check(config)
  before = dict(vars(task))
  assembly.assemble_model(config, task=task)
  assert vars(task).keys() == before.keys()
  assert all(vars(task)[k] is v for k, v in before.items())
