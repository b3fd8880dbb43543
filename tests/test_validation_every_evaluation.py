"""Decisions are taken on validation only: every evaluation during training of each
experiment of the benchmark, at its cpu setting, scores the validation split (test
may ride along as a reported number, never alone).

Each experiment's cpu-setting config of the suite runs at its smoke size for three
updates with an evaluation after each (its task's own validation, for
order-embeddings), and every evaluation it records must carry a ``validation/``
metric: a config that evaluates test alone mid-run (as DRAW's and perm-MNIST's did)
fails here."""

from __future__ import annotations

import json
import os

import pytest

from lnorm import cli
from lnorm.sweeps import benchmark_suite as suite

#: What the smoke run changes in a cpu setting: its length, and the evaluation after
#: every update; the data source stays the smoke config's (synthetic or embedded).
SHORT = {"max_steps": "3", "eval_every_steps": "1", "steps_per_call": "1",
         "progress_bar": "false"}
#: Keys of a record that are no evaluation of a held-out split.
NOT_EVALUATED = ("step", "epoch")
NOT_EVALUATED_PREFIXES = ("train/", "time/", "stopped/")


def _smoke_args(experiment: suite.Experiment) -> list[str]:
  setting = experiment.scales["cpu"]
  overrides = {**setting.overrides, **setting.variants[0], "norm": "none", **SHORT}
  overrides.pop("data.source", None)
  if experiment.name == "order_embeddings":  # It validates in its task's hook.
    overrides["periodic_eval_every_steps"] = "1"
  if experiment.name == "attentive_reader":  # One length bucket: a quarter of the compiles.
    overrides["length_buckets.num"] = "1"
  spec = setting.config + ("," if ":" in setting.config else ":") + "smoke=true"
  return ["--config", spec, *(f"--config.{k}={v}" for k, v in overrides.items())]


def _evaluations(workdir: str) -> tuple[list[dict], list[dict]]:
  """(mid-run evaluations, epoch records) of a run."""
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    points = [json.loads(line) for line in f if line.strip()]
  epochs = [p for p in points if "time/epoch_seconds" in p]
  evaluated = [p for p in points if "time/epoch_seconds" not in p and any(
      k not in NOT_EVALUATED and not k.startswith(NOT_EVALUATED_PREFIXES) for k in p)]
  return evaluated, epochs


@pytest.mark.slow
@pytest.mark.parametrize("name", [e.name for e in suite.SUITE])
def test_every_evaluation_of_the_cpu_setting_scores_validation(name, tmp_path):
  workdir = str(tmp_path / name)
  assert cli.main(["train", *_smoke_args(suite.BY_NAME[name]), "--workdir", workdir]) == 0
  evaluated, epochs = _evaluations(workdir)
  assert evaluated, "no evaluation during training: the test would pass vacuously"
  for point in evaluated + epochs:
    assert any(k.startswith("validation/") for k in point), (
        f"{name} evaluated at step {point['step']} without the validation split: "
        f"{sorted(point)}")
