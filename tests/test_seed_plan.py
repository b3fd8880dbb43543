"""The rule's seeds and the records it judges (rule version 3): the pilot sized by the
minutes seed 0's records measured, every verdict on exactly the planned seeds with
later seeds shown apart, and records made under rule version 2 re-judged rather than
refused, on perm_mnist records written here (no training, no JAX)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from lnorm.analysis import claims
from lnorm.analysis import rule
from lnorm.analysis import runs as runs_lib
from lnorm.sweeps import benchmark as bench
from lnorm.sweeps import benchmark_suite as suite
from tests.test_rule import decay, perm_mnist_config, write_run

pytestmark = pytest.mark.quick

E = suite.BY_NAME["perm_mnist"]
(B4,) = E.scales["cpu"].variants
CURRENT = suite.member_hash(E, "cpu", B4)
V2 = next(old for old, new in suite.RULE_V2_HASHES.items() if new == CURRENT)


def record(records, norm, seed, values, benchmark_hash=CURRENT, seconds_per_update=0.1,
           **changed):
  """A perm_mnist record of its command's config (1,000 updates; 0.1 s of wall time an
  update: 1.7 minutes, a third of it training), carrying ``benchmark_hash``;
  ``seconds_per_update`` None: a record made before lnorm recorded the wall time."""
  path = write_run(records / "perm_mnist", norm, seed, values, experiment="perm_mnist",
                   **perm_mnist_config(norm, seed, benchmark_hash=benchmark_hash, **changed))
  with open(os.path.join(path, "metrics.jsonl")) as f:
    points = [json.loads(line) for line in f]
  with open(os.path.join(path, "metrics.jsonl"), "w") as f:
    for p in points:
      if seconds_per_update is not None:
        p["time/wall_seconds"] = seconds_per_update * p["step"]
        p["time/train_seconds"] = seconds_per_update * p["step"] / 3
      f.write(json.dumps(p) + "\n")
  return path


def report_of(records, seeds=range(5)):
  (plan,) = bench.plans([E], "cpu", "unused", ["none", "ln", "bn"], list(seeds))
  return bench.build_report([plan], str(records), "cpu")


def by_key(report):
  return {v.claim.key: v for v in report.verdicts}


# --- the pilot --------------------------------------------------------------------------------


def test_the_pilot_size_at_its_threshold():
  assert rule.pilot_size(None) == rule.MIN_SEEDS == 3  # Nothing measured yet.
  assert rule.pilot_size(4.99) == 5
  assert rule.pilot_size(5.0) == 3  # "Under 5 minutes".


def test_the_pilot_is_sized_by_the_wall_minutes_seed_0_recorded(tmp_path):
  for s in range(5):
    for norm in ("none", "ln", "bn"):
      # Seed 0's ln 0.32 s an update (5.3 min), none and bn 0.1 (1.7): a mean of 2.9.
      # Seeds 1 to 4 are slow (10 min): the pilot is fixed by seed 0 alone.
      record(tmp_path, norm, s, decay(200, s),
             seconds_per_update=(0.32 if norm == "ln" else 0.1) if s == 0 else 0.6)
  runs = runs_lib.load_runs([str(tmp_path / "perm_mnist")])
  plan = bench.seed_plan(E, "cpu", runs)
  assert plan.minutes == pytest.approx((5.333 + 2 * 1.667) / 3, abs=1e-3)
  assert plan.pilot == (0, 1, 2, 3, 4)
  slow = [r for r in runs if not (r.config["seed"] == 0 and r.config["norm"] != "ln")]
  plan = bench.seed_plan(E, "cpu", slow)  # Seed 0's ln alone: 5.3 minutes.
  assert plan.minutes == pytest.approx(5.333, abs=1e-3) and plan.pilot == (0, 1, 2)


def test_a_seed_0_record_without_its_wall_time_leaves_the_smaller_pilot(tmp_path):
  """Records made before lnorm recorded the wall time show their training time, a
  lower bound: under 5 minutes of it does not show a member under 5 minutes."""
  for norm in ("none", "ln", "bn"):
    record(tmp_path, norm, 0, decay(200, 0),
           seconds_per_update=None if norm == "bn" else 0.1)
  runs = runs_lib.load_runs([str(tmp_path / "perm_mnist")])
  plan = bench.seed_plan(E, "cpu", runs)
  assert plan.minutes is None and plan.pilot == (0, 1, 2)
  # Shown beside it: the training minutes (bn's 1.7, and a third of 1.7 for the others).
  assert plan.training_minutes == pytest.approx((1.667 + 2 * 1.667 / 3) / 3, abs=1e-3)
  plan = bench.seed_plan(E, "cpu", [r for r in runs if r.config["norm"] != "bn"])
  assert plan.minutes == pytest.approx(1.667, abs=1e-3) and len(plan.pilot) == 5
  assert plan.training_minutes == pytest.approx(1.667 / 3, abs=1e-3)


def test_an_experiment_runs_the_seeds_its_neediest_claim_plans_from_its_pilot(
    tmp_path, monkeypatch):
  records = tmp_path / "results"
  assert bench.seeds_by_power(E, "cpu", str(records)) == [0, 1, 2]  # Nothing measured.
  for s in (0, 1, 2, 3, 4, 9):  # Seed 9 is no part of the pilot.
    for norm in ("none", "ln", "bn"):
      record(records, norm, s, decay(200, s))
  seen = []
  monkeypatch.setattr(claims, "planned_seeds", lambda ev, pilot: seen.append(
      (ev.seeds, pilot)) or {"perm_mnist_ln_vs_bn_b4": 7, "perm_mnist_ln_vs_none_b4": 6}[
          ev.claim.key])
  assert bench.seeds_by_power(E, "cpu", str(records)) == [0, 1, 2, 3, 4, 5, 6]
  assert seen == [(5, 5), (5, 5)]  # Planned from the five pilot seeds alone.


# --- the planned seeds and the others ------------------------------------------------------------


def test_each_verdict_judges_the_planned_seeds_and_later_seeds_are_exploratory(tmp_path):
  """LN twice as fast on the five pilot seeds (which plan no more); two seeds added
  after looking, where LN is far slower, change no verdict and are shown apart."""
  planned, added = tmp_path / "planned", tmp_path / "added"
  for root in (planned, added):
    for s in range(5):
      record(root, "none", s, decay(200, s, noise=0.002))
      record(root, "ln", s, decay(100, 10 + s, noise=0.002))
  for s in (5, 6):
    record(added, "none", s, decay(200, s, noise=0.002))
    record(added, "ln", s, decay(800, 10 + s, noise=0.002))
  key = "perm_mnist_ln_vs_none_b4"
  report = report_of(added, range(7))
  alone, more = by_key(report_of(planned))[key], by_key(report)[key]
  assert more.verdict == alone.verdict and alone.verdict.verdict == claims.REPRODUCED
  assert more.beyond_plan == (5, 6) and not alone.beyond_plan
  assert more.plan.planned == (0, 1, 2, 3, 4)
  # The headline reads the planned seeds too.
  assert {r.norm: r.runs for r in report.rows} == {"none": 5, "ln": 5}
  text = report.markdown()
  assert "  - exploratory, with seeds 5, 6 beyond the plan (no verdict): updates ratio" in text
  assert "| perm_mnist_ln_vs_none_b4 | a 10% saving | 5 (1.7 min) | 5 | 5 | 5 | 5, 6 |" in text
  # On all seven, LN against none would not be reproduced (p = 0.24): no verdict reads it.
  assert "updates ratio 0.73 [0.41, 1.31] (paired, 7 seeds)" in text


def test_a_verdict_on_fewer_seeds_than_planned_says_so_in_the_table(tmp_path):
  for s in range(5):
    record(tmp_path, "none", s, decay(200, s, noise=0.002))
    record(tmp_path, "ln", s, decay(100, 10 + s, noise=0.002))
    if s < 4:
      record(tmp_path, "bn", s, decay(400, s, noise=0.002))
  report = report_of(tmp_path)
  assert "| perm_mnist_ln_vs_bn_b4 | a 10% saving | 5 (1.7 min) | pilot not complete | 5 | " \
         "4 | — |" in report.markdown()


# --- records of other rules and settings ---------------------------------------------------------


def test_records_made_under_rule_2_are_rejudged_not_refused(tmp_path):
  for s in range(3):
    for norm, scale in (("none", 200), ("ln", 100), ("bn", 400)):
      record(tmp_path, norm, s, decay(scale, s, noise=0.002), benchmark_hash=V2)
  report = report_of(tmp_path, range(3))
  assert report.refused == {"perm_mnist": []}
  v = by_key(report)["perm_mnist_ln_vs_none_b4"]
  assert v.rejudged and v.verdict.verdict == claims.REPRODUCED
  text = report.markdown()
  assert "(Re-judged under version 3: records made under version 2.)" in text
  assert ("2 claims are judged on records made under rule version 2, re-judged under "
          "version 3, which was fixed after those records were made and seen") in text
  # Such a record is a finished member: the suite does not train it again.
  (plan,) = bench.plans([E], "cpu", "unused", ["ln"], [0])
  _, configs = plan.prepare_all({})
  config = configs[plan.members[0].name]
  written = tmp_path / "perm_mnist" / "norm=ln,seed=0"
  assert bench.has_records(str(written), config)
  record(tmp_path / "other", "ln", 0, decay(100, 0), benchmark_hash="0000000000000000")
  assert not bench.has_records(str(tmp_path / "other" / "perm_mnist" / "norm=ln,seed=0"),
                               config)


def test_records_of_another_rule_or_setting_are_refused_by_name(tmp_path):
  for s in range(3):
    for norm, scale in (("none", 200), ("ln", 100), ("bn", 400)):
      # ln seed 2 carries a hash no rule gave this setting; bn seed 1, rule 2's hash
      # with a config its command no longer runs.
      stale = {("ln", 2): {"benchmark_hash": "0000000000000000"},
               ("bn", 1): {"benchmark_hash": V2, "eval_every_steps": 250}}.get((norm, s), {})
      record(tmp_path, norm, s, decay(scale, s), **stale)
  report = report_of(tmp_path, range(3))
  assert report.refused == {"perm_mnist": ["norm=bn,seed=1", "norm=ln,seed=2"]}
  assert report.drift["perm_mnist"] == {"norm=bn,seed=1": ["eval_every_steps: 250 -> 500"]}
  assert [v.verdict.verdict for v in report.verdicts] == [rule.REFUSED] * 2 + [rule.NOT_RUN] * 2
  assert "rerun norm=bn,seed=1, norm=ln,seed=2" in (
      report.verdicts[0].verdict.why)
  assert {r.norm: r.runs for r in report.rows} == {"none": 3, "ln": 2, "bn": 2}
  judged = bench.build_report(bench.plans([E], "cpu", "unused", ["none", "ln", "bn"],
                                          [0, 1, 2]), str(tmp_path), "cpu", ignore_rule=True)
  assert judged.verdicts[0].verdict.verdict != rule.REFUSED
  assert "Not a verdict of record" in judged.markdown()


def test_a_stale_record_on_the_baseline_side_refuses_only_the_claims_it_is_in(tmp_path):
  for s in range(3):
    for norm, scale in (("none", 200), ("ln", 100), ("bn", 400)):
      stale = {"benchmark_hash": "0000000000000000"} if (norm, s) == ("none", 1) else {}
      record(tmp_path, norm, s, decay(scale, s, noise=0.002), **stale)
  verdicts = by_key(report_of(tmp_path, range(3)))
  assert verdicts["perm_mnist_ln_vs_none_b4"].verdict.verdict == rule.REFUSED
  assert "rerun norm=none,seed=1" in verdicts[
      "perm_mnist_ln_vs_none_b4"].verdict.why
  assert verdicts["perm_mnist_ln_vs_bn_b4"].verdict.verdict == claims.REPRODUCED


def test_every_committed_record_is_of_rule_2_or_of_its_setting_now():
  """The version-2 hashes the committed records carry map to their settings' hashes
  now (a setting changed since would leave its records stale, named by the report)."""
  root = os.path.join(os.path.dirname(os.path.dirname(__file__)), "results", "cpu")
  current = {suite.member_hash(e, "cpu", v) for e in suite.SUITE
             for v in e.scales["cpu"].variants}
  found = set()
  for folder, _, files in os.walk(root):
    if "config.json" in files:
      with open(os.path.join(folder, "config.json")) as f:
        found.add(json.load(f)["config"]["benchmark_hash"])
  assert found and {suite.current_hash(h) for h in found} <= current
  assert np.all([suite.RULE_V2_HASHES[h] in current for h in found & set(suite.RULE_V2_HASHES)])
