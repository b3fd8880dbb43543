"""Seeds trained together (``loop.train_seeds``, ``lnorm train --seeds``): each seed's
records equal its run alone (within 1e-5 over the first 50 updates, every logged
value), a seed that diverges stops alone, a seed's workdir resumes by either path, and
the verdicts read from either set of records are the same.

The runs are smoke-sized (embedded or synthetic data), one update per call and each
logged, so that every update's loss and gradient norm is compared.
"""

from __future__ import annotations

import math
import os
import shlex

import ml_collections
import numpy as np
import pytest

from lnorm import cli
from lnorm import config as config_lib
from lnorm.analysis import claims
from lnorm.analysis import runs as runs_lib
from lnorm.data import core as data_core
from lnorm.errors import DivergenceError
from lnorm.sweeps import runner
from lnorm.training import defaults
from lnorm.training import loop
from tests.helpers import metric_points
from tests.test_sweep import TINY_CONFIG  # perm-MNIST shrunk to seconds, as a user writes it

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Every seed's run to ``max_steps``, one update per call, each logged; evaluated at
#: the end only (fields a config lacks are skipped).
OVERRIDES = {
    "log_every_steps": "1",
    "steps_per_call": "1",
    "eval_every_steps": "0",
    "eval_points_per_decade": "0",
    "periodic_eval_every_steps": "0",
    "progress_bar": "false",
    "sample_text": "",
}
#: The brief's bound: float32 rounding, over the first 50 updates.
RTOL = 1e-5
UPDATES = 50


def smoke_config(spec: str, max_steps: int = UPDATES, **changed):
  config = config_lib.load_config(f"{REPO}/configs/{spec},smoke=true")
  overrides = {**OVERRIDES, "max_steps": str(max_steps),
               **{k: str(v) for k, v in changed.items()}}
  config_lib.apply_overrides(config, {k: v for k, v in overrides.items() if k in config})
  return config



def is_compared(key: str, value) -> bool:
  """A logged number that is the model's, not a clock's."""
  return (isinstance(value, (int, float)) and not key.startswith("time/")
          and key != "train/examples_per_sec")


def largest_difference(alone: list[dict], together: list[dict]) -> float:
  """The largest relative difference of two runs' records, which must log the same
  points with the same keys."""
  assert [p["step"] for p in alone] == [p["step"] for p in together]
  worst = 0.0
  for a, b in zip(alone, together):
    assert a.keys() == b.keys(), (a.keys() ^ b.keys())
    for key, value in a.items():
      if is_compared(key, value):
        worst = max(worst, abs(b[key] - value) / max(abs(value), 1e-12))
  return worst


def train_alone(config, seed: int, workdir: str):
  seeded = config.copy_and_resolve_references()
  seeded.seed = seed
  return loop.train_and_evaluate(seeded, workdir)


@pytest.fixture(autouse=True)
def _smoke_data_only(monkeypatch):
  monkeypatch.delenv(data_core.DATA_DIR_ENV, raising=False)


# --- equivalence ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("spec,seeds", [
    # BN at batch 4: each seed's batch statistics are its own.
    ("perm_mnist.py:norm=bn,batch_size=4", (0, 1, 2)),
    # Recurrent (LN-GRU encoder and decoders): extended, since BLN-IMDB's is recurrent too.
    pytest.param("skip_thoughts.py:norm=ln", (0, 2), marks=pytest.mark.extended),
    # Recurrent (a two-layer LSTM), with dropout (inputs and recurrent, one mask per
    # review) from each seed's own keys.
    ("bln_imdb.py:norm=bln", (3, 1)),
], ids=["perm_mnist_bn_b4", "skip_thoughts", "bln_imdb_dropout"])
def test_each_seed_together_equals_its_run_alone(spec, seeds, tmp_path):
  config = smoke_config(spec)
  finals = loop.train_seeds(config, seeds, [str(tmp_path / f"together{s}") for s in seeds])
  for seed, final in zip(seeds, finals):
    alone = train_alone(config, seed, str(tmp_path / f"alone{seed}"))
    records = metric_points(str(tmp_path / f"alone{seed}"))
    assert sum("train/grad_norm" in p for p in records) > UPDATES  # Every update logged.
    together = metric_points(str(tmp_path / f"together{seed}"))
    assert largest_difference(records, together) <= RTOL
    assert final.keys() == alone.keys()
  # Not the same run copied: the seeds' losses differ.
  first_losses = {metric_points(str(tmp_path / f"together{s}"))[0]["train/loss"]
                  for s in seeds}
  assert len(first_losses) == len(seeds)


def test_one_seed_through_the_stacked_path_differs_from_its_run_alone_in_rounding(
    tmp_path):
  """Not bit for bit (K=1 through jax.vmap is another program: XLA may order a sum of
  the stacked arrays, the gradient norm's squares, otherwise), but within rounding."""
  config = smoke_config("perm_mnist.py:norm=bn,batch_size=7", max_steps=30,
                        hidden_sizes="(8,)")
  loop.train_seeds(config, [1], [str(tmp_path / "together")])
  train_alone(config, 1, str(tmp_path / "alone"))
  alone = metric_points(str(tmp_path / "alone"))
  together = metric_points(str(tmp_path / "together"))
  assert largest_difference(alone, together) <= RTOL


# --- a seed that diverges -------------------------------------------------------------


def test_a_seed_that_diverges_stops_alone_and_the_others_train_on(tmp_path, monkeypatch):
  config = smoke_config("perm_mnist.py:norm=ln,batch_size=7", max_steps=30,
                        hidden_sizes="(8,)")
  seeds, poisoned, at_call = (0, 1, 2), 1, 12
  # Seed 1's loss reads as not finite from its 12th update on, as a run's that blew up.
  each, calls = loop._Training._each, []

  def poisoned_each(self, values):
    out = each(self, values)
    if isinstance(values, dict) and "grad_norm" in values:
      calls.append(1)
      for m, member_out in zip(self.members, out):
        if m.run.config.seed == poisoned and len(calls) >= at_call:
          member_out["loss"] = np.full_like(member_out["loss"], np.nan)
    return out

  monkeypatch.setattr(loop._Training, "_each", poisoned_each)
  with pytest.raises(DivergenceError, match=r"1 of 3 seeds stopped .* Seed 1: "):
    loop.train_seeds(config, seeds, [str(tmp_path / f"s{s}") for s in seeds])
  monkeypatch.undo()
  stopped = metric_points(str(tmp_path / f"s{poisoned}"))
  # As a run alone records it: the step its bad update started from.
  assert stopped[-1] == {"step": at_call - 1, defaults.DIVERGED_AT: at_call - 1}
  assert sum("train/loss" in p for p in stopped) == at_call - 1
  assert defaults.has_diverged(stopped)
  for seed in (0, 2):
    train_alone(config, seed, str(tmp_path / f"alone{seed}"))
    assert largest_difference(metric_points(str(tmp_path / f"alone{seed}")),
                              metric_points(str(tmp_path / f"s{seed}"))) <= RTOL


# --- resume ---------------------------------------------------------------------------


def test_a_seed_workdir_resumes_by_either_command(tmp_path):
  """Trained together to update 20, seed 1 goes on alone to 45; seed 0, trained alone
  to 20, goes on together with seed 2 (which starts at 0): each ends as a run alone
  stopped at 20 and resumed to 45 does (the same records, update 20's record of the
  short run's end among them)."""
  short = smoke_config("perm_mnist.py:norm=bn,batch_size=7", max_steps=20,
                       hidden_sizes="(8,)")
  full = smoke_config("perm_mnist.py:norm=bn,batch_size=7", max_steps=45,
                      hidden_sizes="(8,)")
  loop.train_seeds(short, [1, 2], [str(tmp_path / "s1"), str(tmp_path / "junk")])
  train_alone(full, 1, str(tmp_path / "s1"))
  train_alone(short, 0, str(tmp_path / "s0"))
  loop.train_seeds(full, [0, 2], [str(tmp_path / "s0"), str(tmp_path / "s2")])
  for seed in (0, 1):
    train_alone(short, seed, str(tmp_path / f"alone{seed}"))
    train_alone(full, seed, str(tmp_path / f"alone{seed}"))
  train_alone(full, 2, str(tmp_path / "alone2"))
  for seed in (0, 1, 2):
    assert largest_difference(metric_points(str(tmp_path / f"alone{seed}")),
                              metric_points(str(tmp_path / f"s{seed}"))) <= RTOL


# --- the verdicts ---------------------------------------------------------------------


@pytest.mark.slow
def test_the_verdicts_from_seeds_together_are_those_from_runs_alone(tmp_path):
  """ln against none on perm-MNIST's smoke: every seed's records, trained either way,
  give the same evidence and verdict."""
  seeds = (0, 1, 2)
  for norm in ("none", "ln"):
    config = smoke_config(f"perm_mnist.py:norm={norm},batch_size=7", max_steps=60,
                          hidden_sizes="(8,)", eval_every_steps=10,
                          eval_splits="('validation',)")
    loop.train_seeds(config, seeds, [str(tmp_path / "together" / f"norm={norm},seed={s}")
                                     for s in seeds])
    for s in seeds:
      train_alone(config, s, str(tmp_path / "alone" / f"norm={norm},seed={s}"))
  claim = claims.Claim("c", "faster", "test", "ln", "none")
  judged = []
  for root in ("alone", "together"):
    evidence = claims.judge(runs_lib.load_runs([str(tmp_path / root)]), "perm_mnist",
                            claim, "validation/error")
    (verdict,) = claims.decide([evidence])
    judged.append((verdict.verdict, evidence.estimate))
  assert judged[0] == judged[1]
  assert judged[0][0] not in (claims.NOT_RUN, claims.NOT_TESTABLE)


# --- the command line -----------------------------------------------------------------


@pytest.mark.parametrize("argv,message", [
    (["--seeds", "0,1", "--workdir", "runs/x"], "put {seed} in --workdir"),
    (["--workdir", "runs/x/seed={seed}"], "which --seeds fills in"),
    (["--seeds", "0,1", "--workdir", "runs/{seed}", "--config.seed=3"],
     "drop --config.seed"),
    (["--seeds", "0,0", "--workdir", "runs/{seed}"], "distinct"),
])
def test_train_refuses_seeds_it_cannot_place(argv, message, capsys):
  code = cli.main(["train", "--config", f"{REPO}/configs/perm_mnist.py:smoke=true",
                   "--dry-run", *argv])
  assert code == 2
  err = capsys.readouterr().err
  assert message in err and len(err.strip().splitlines()) == 1, err


def test_train_refuses_seeds_of_a_config_with_length_buckets():
  config = smoke_config("perm_mnist.py:norm=ln")
  config.length_buckets = ml_collections.ConfigDict({"num": 3})
  with pytest.raises(Exception, match="cannot train together.*length_buckets.num=1"):
    loop.check_seeds_together(config)


def test_relative_difference_helper_bites():
  a = [{"step": 1, "train/loss": 1.0, "time/wall_seconds": 3.0}]
  b = [{"step": 1, "train/loss": 1.0 + 2e-5, "time/wall_seconds": 9.0}]
  assert math.isclose(largest_difference(a, b), 2e-5, rel_tol=1e-6)


# --- sweeps and the benchmark: groups of seeds ---------------------------------------


def test_a_sweep_prints_one_command_per_group_of_seeds(capsys):
  assert cli.main(["sweep", "--config", f"{REPO}/configs/perm_mnist.py:smoke=true",
                   "--workdir", "runs/s", "--grid", "norm=ln,bn", "--grid", "seed=0,1,2,3,4",
                   "--seeds-per-process", "2", "--print-commands"]) == 0
  lines = [shlex.split(line) for line in capsys.readouterr().out.strip().splitlines()]
  # Five seeds two at a time: 2 + 2 + 1 a normalizer, each normalizer apart.
  groups = [(argv[argv.index("--config.norm=ln") if "--config.norm=ln" in argv else
                  argv.index("--config.norm=bn")],
             argv[argv.index("--seeds") + 1] if "--seeds" in argv else None)
            for argv in lines]
  assert groups == [("--config.norm=ln", "0,1"), ("--config.norm=ln", "2,3"),
                    ("--config.norm=ln", None), ("--config.norm=bn", "0,1"),
                    ("--config.norm=bn", "2,3"), ("--config.norm=bn", None)]
  together, alone = lines[0], lines[2]
  assert together[together.index("--workdir") + 1] == "runs/s/norm=ln,seed={seed}"
  assert not any(a.startswith("--config.seed=") for a in together)
  # A group of one is the member's own command, its seed in its config.
  assert alone[alone.index("--workdir") + 1] == "runs/s/norm=ln,seed=4"
  assert "--config.seed=4" in alone


def test_seeds_of_a_config_with_length_buckets_are_not_grouped():
  members = [runner.Member(f"seed={s}", {"seed": str(s)}, f"runs/s/seed={s}")
             for s in range(3)]
  bucketed = smoke_config("perm_mnist.py:norm=ln")
  bucketed.length_buckets = ml_collections.ConfigDict({"num": 3})
  plain = smoke_config("perm_mnist.py:norm=ln")
  assert runner.seed_groups(members, 3, configs={m.name: bucketed for m in members}) == [
      [m] for m in members]
  assert runner.seed_groups(members, 3, configs={m.name: plain for m in members}) == [
      members]
  # --config.seed on the command fixes every member's seed: nothing to group.
  assert runner.seed_groups(members, 3, extra={"seed": "1"}) == [[m] for m in members]


@pytest.mark.parametrize("command", ["sweep", "benchmark"])
def test_seeds_per_process_below_one_is_refused(command, capsys):
  argv = ([command, "--config", f"{REPO}/configs/perm_mnist.py", "--workdir", "x",
           "--grid", "seed=0,1"] if command == "sweep" else [command])
  assert cli.main([*argv, "--seeds-per-process", "0", "--print-commands"]) == 2
  err = capsys.readouterr().err
  assert "--seeds-per-process 0: train at least 1 seed" in err


@pytest.mark.slow
def test_a_sweep_trains_its_seeds_in_groups_each_into_its_workdir(tmp_path, capsys):
  config = tmp_path / "tiny.py"
  config.write_text(TINY_CONFIG)
  workdir = tmp_path / "sweep"
  assert cli.main(["sweep", "--config", str(config), "--workdir", str(workdir),
                   "--grid", "seed=0,1,2", "--seeds-per-process", "2",
                   "--no-figures"]) == 0
  out = capsys.readouterr().out
  assert "seed={seed} (seeds 0, 1 together): starting" in out
  for seed in (0, 1, 2):
    member = workdir / f"seed={seed}"
    log = (member / "train.log").read_text()
    assert ("--seeds 0,1" in log) == (seed < 2)
    assert f"seed={seed}: done" in out
    assert metric_points(str(member))[-1]["step"] == 40
  # A rerun finds every member finished.
  assert cli.main(["sweep", "--config", str(config), "--workdir", str(workdir),
                   "--grid", "seed=0,1,2", "--seeds-per-process", "2",
                   "--no-figures"]) == 0
  assert capsys.readouterr().out.count("already finished, skipped") == 3
