"""A sweep's selected setting has one name, the whole setting, wherever it is printed:
the `lnorm sweep --select` summary and `lnorm report --select` on the same folder.
Members are written here as finished runs, so the sweep trains nothing."""

from __future__ import annotations

import csv
import json
import os
import re

from lnorm import cli
from lnorm.sweeps import runner as sweep_lib
from lnorm.sweeps.space import SweepSpace, parse_distribution, parse_grid

CONFIG = "configs/perm_mnist.py:norm=ln"
DATA = {"name": "mnist", "source": "files", "num_examples": {"train": 10}, "fingerprint": "a" * 32}


def finish_members(space, workdir, score):
  """Writes every member as a finished one-epoch run; ``score(overrides)`` is its
  validation error."""
  members, configs = sweep_lib.prepare(CONFIG, space, workdir, {"num_epochs": "1"})
  for m in members:
    os.makedirs(m.workdir)
    flat = {k: v for k, v in _flat(configs[m.name]).items()}
    with open(os.path.join(m.workdir, "config.json"), "w") as f:
      json.dump({"config": flat, "data": DATA}, f)
    error = score(m.overrides)
    with open(os.path.join(m.workdir, "metrics.jsonl"), "w") as f:
      f.write(json.dumps({"step": 10, "epoch": 1, "time/epoch_seconds": 1.0,
                          "validation/error": error, "test/error": error + 0.01}) + "\n")
  return members


def _flat(config):
  from lnorm import config as config_lib  # pylint: disable=g-import-not-at-top
  return config_lib.to_flat_dict(config)


def selected(text):
  return re.search(r"Selected: (\S+)\.", text).group(1)


def both_selections(capsys, workdir, sweep_args):
  assert cli.main(["sweep", "--config", CONFIG, "--workdir", workdir, *sweep_args,
                   "--config.num_epochs=1", "--select", "validation/error",
                   "--no-figures"]) == 0
  from_sweep = capsys.readouterr().out
  assert "already finished, skipped" in from_sweep  # Nothing trained.
  assert cli.main(["report", workdir, "--select", "validation/error"]) == 0
  from_report = selected(capsys.readouterr().out)
  # The folder above the sweep's names it alike.
  assert cli.main(["report", os.path.dirname(workdir), "--select", "validation/error"]) == 0
  assert selected(capsys.readouterr().out) == from_report
  return selected(from_sweep), from_report


def test_random_search_over_two_fields_names_both_alike_in_sweep_and_report(tmp_path, capsys):
  workdir = str(tmp_path / "random")
  args = ["--random", "3", "--loguniform", "optimizer.learning_rate=1e-4:1e-2",
          "--uniform", "optimizer.clip_global_norm=0.5:5", "--grid", "seed=0,1"]
  space = SweepSpace(grid=[parse_grid("seed=0,1")], random=3, distributions=[
      parse_distribution("loguniform", "optimizer.learning_rate=1e-4:1e-2"),
      parse_distribution("uniform", "optimizer.clip_global_norm=0.5:5")])
  # The best draw is the one with the largest clip: not the one the first key orders.
  finish_members(space, workdir, lambda o: 1.0 / float(o["optimizer.clip_global_norm"]))
  best = max(space.draws(), key=lambda d: float(d["optimizer.clip_global_norm"]))
  in_sweep, in_report = both_selections(capsys, workdir, args)
  expected = (f"optimizer.learning_rate={best['optimizer.learning_rate']},"
              f"optimizer.clip_global_norm={best['optimizer.clip_global_norm']}")
  assert in_sweep == in_report == expected


def test_a_grid_value_keeps_the_form_it_was_typed_in_everywhere(tmp_path, capsys):
  workdir = str(tmp_path / "grid")
  args = ["--grid", "optimizer.learning_rate=3e-4,1e-3"]
  space = SweepSpace(grid=[parse_grid("optimizer.learning_rate=3e-4,1e-3")])
  finish_members(space, workdir, lambda o: {"3e-4": 0.1, "1e-3": 0.2}[o["optimizer.learning_rate"]])
  assert both_selections(capsys, workdir, args) == ("optimizer.learning_rate=3e-4",) * 2
  with open(os.path.join(workdir, "sweep.json")) as f:
    assert json.load(f)["setting_keys"] == ["optimizer.learning_rate"]


def test_best_is_one_thing_in_the_summary_and_the_selection(tmp_path, capsys):
  # The best validation error came at a mid-epoch evaluation (0.05 at step 5), better
  # than the epoch end's 0.2: summary.csv and the selection both take it.
  workdir = str(tmp_path / "grid")
  args = ["--grid", "optimizer.learning_rate=3e-4,1e-3"]
  space = SweepSpace(grid=[parse_grid("optimizer.learning_rate=3e-4,1e-3")])
  members = finish_members(space, workdir, lambda o: 0.2)
  with open(os.path.join(members[0].workdir, "metrics.jsonl"), "a") as f:
    f.write(json.dumps({"step": 5, "epoch": 0.5, "validation/error": 0.05}) + "\n")
  in_sweep, _ = both_selections(capsys, workdir, args)
  assert in_sweep == "optimizer.learning_rate=3e-4"
  with open(os.path.join(workdir, sweep_lib.SUMMARY_FILE)) as f:
    rows = {r["member"]: r for r in csv.DictReader(f)}
  assert float(rows["optimizer.learning_rate=3e-4"]["best validation/error"]) == 0.05
  assert float(rows["optimizer.learning_rate=3e-4"]["final validation/error"]) == 0.2
  assert float(rows["optimizer.learning_rate=1e-3"]["best validation/error"]) == 0.2
  assert sweep_lib.BEST_MEANS in sweep_lib.summarize(members).table()
  assert "over every evaluation" in sweep_lib.BEST_MEANS
