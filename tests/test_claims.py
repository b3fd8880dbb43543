"""The benchmark's intervals and verdicts (lnorm.analysis.claims) on metric logs
written here, whose numbers are worked out by hand (no training, no JAX)."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from lnorm.analysis import claims
from lnorm.analysis import compare
from lnorm.analysis import runs as runs_lib
from lnorm.training.defaults import DIVERGED_AT

#: Student's t quantile 0.975 with 2 and 4 degrees of freedom (tables).
T2, T4 = 4.302652729911275, 2.7764451051977987


def write_run(root, norm, seed, reach_at=None, metric="test/error", values=None,
              evaluations=50, extra=None):
  """A toy run evaluated every 10 updates for ``evaluations`` points, the last an epoch
  end: 1.0 until update ``reach_at``, 0.2 from there (never with None); or ``values``.
  Training time 0.1 s per update, so time ratios equal update ratios."""
  path = os.path.join(root, f"norm={norm},seed={seed}")
  os.makedirs(path)
  config = {"experiment": "toy", "norm": norm, "seed": seed, "num_epochs": 1, **(extra or {})}
  with open(os.path.join(path, "config.json"), "w") as f:
    json.dump({"config": config, "data": {}}, f)
  if values is None:
    values = [0.2 if reach_at is not None and 10 * i >= reach_at else 1.0
              for i in range(1, evaluations + 1)]
  with open(os.path.join(path, "metrics.jsonl"), "w") as f:
    for i, v in enumerate(values, 1):
      record = {"step": 10 * i, "epoch": i / len(values), metric: v,
                "time/train_seconds": i}
      if i == len(values):
        record.update({"time/epoch_seconds": 5.0, "train/loss": 0.5})
      f.write(json.dumps(record) + "\n")
  return path


def baseline(root, seeds=(0, 1, 2)):
  for s in seeds:  # Every baseline seed reaches its best, 0.2, at update 400.
    write_run(root, "none", s, reach_at=400)


def load(root):
  return runs_lib.load_runs([str(root)])


# --- intervals ---------------------------------------------------------------------------


def test_ratio_interval_is_a_t_interval_on_the_logs():
  ratios = [0.5, 0.55, 0.45]
  logs = np.log(ratios)
  half = T2 * logs.std(ddof=1) / math.sqrt(3)
  got = claims.ratio_interval(ratios)
  assert got.n == 3
  assert got.estimate == pytest.approx(math.exp(logs.mean()))  # The geometric mean.
  assert got.low == pytest.approx(math.exp(logs.mean() - half))
  assert got.high == pytest.approx(math.exp(logs.mean() + half))
  # Symmetric in speed-up and slow-down: the reciprocal ratios give the reciprocal interval.
  inverse = claims.ratio_interval([1 / r for r in ratios])
  assert inverse.low == pytest.approx(1 / got.high)


def test_intervals_of_one_seed_and_of_agreeing_seeds():
  one = claims.ratio_interval([0.7])
  assert one.estimate == pytest.approx(0.7) and math.isnan(one.low)
  assert one.text() == "0.70 (1 seed)"
  same = claims.ratio_interval([0.5, 0.5, 0.5, 0.5, 0.5])
  assert (same.low, same.high) == pytest.approx((0.5, 0.5))
  assert claims.ratio_interval([]) is None


def test_mean_interval_with_five_seeds():
  values = [0.031, 0.029, 0.035, 0.030, 0.033]
  got = claims.mean_interval(values)
  half = T4 * np.std(values, ddof=1) / math.sqrt(5)
  assert got.estimate == pytest.approx(np.mean(values))
  assert (got.low, got.high) == pytest.approx((np.mean(values) - half, np.mean(values) + half))
  assert got.text(".3g") == f"{np.mean(values):.3g} [{got.low:.3g}, {got.high:.3g}]"


def test_difference_interval_is_welchs():
  a, b = [0.30, 0.31, 0.29], [0.40, 0.45, 0.35, 0.41]
  got = claims.difference_interval(a, b)
  va, vb = np.var(a, ddof=1) / 3, np.var(b, ddof=1) / 4
  dof = (va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 3)  # Welch-Satterthwaite.
  from scipy import stats  # The quantile only; the interval itself is computed above.
  half = stats.t.ppf(0.975, dof) * math.sqrt(va + vb)
  assert got.estimate == pytest.approx(np.mean(a) - np.mean(b))
  assert (got.low, got.high) == pytest.approx((got.estimate - half, got.estimate + half))
  assert claims.difference_interval([0.3], b) is None


# --- speed verdicts on constructed records ----------------------------------------------------


def judge(root, norm="ln", against="none", **kw):
  return claims.judge(load(root), "toy", norm, against, **kw)


def test_a_clear_effect_is_reproduced(tmp_path):
  baseline(tmp_path)
  for s, at in enumerate((200, 220, 180)):  # Ratios 0.5, 0.55, 0.45 of update 400.
    write_run(tmp_path, "ln", s, reach_at=at)
  v = judge(tmp_path)
  assert v.verdict == claims.REPRODUCED
  assert "3/3 seeds reached" in v.why and v.why.startswith("test/error: ")


def test_no_effect_is_not_reproduced(tmp_path):
  baseline(tmp_path)
  for s, at in enumerate((390, 400, 410)):  # Ratios 0.975, 1, 1.025: no saving.
    write_run(tmp_path, "ln", s, reach_at=at)
  assert judge(tmp_path).verdict == claims.NOT_REPRODUCED


def test_a_noisy_effect_is_inconclusive(tmp_path):
  baseline(tmp_path)
  for s, at in enumerate((100, 400, 200)):  # Ratios 0.25, 1, 0.5: the interval spans 1.
    write_run(tmp_path, "ln", s, reach_at=at)
  v = judge(tmp_path)
  assert v.verdict == claims.INCONCLUSIVE
  interval = claims.ratio_interval([0.25, 1.0, 0.5])
  assert interval.low < 1 - claims.NO_EFFECT_MARGIN and interval.high > 1


def test_a_seed_that_never_reaches_the_target(tmp_path):
  baseline(tmp_path)
  write_run(tmp_path, "ln", 0, reach_at=200)
  write_run(tmp_path, "ln", 1, reach_at=220)
  write_run(tmp_path, "ln", 2, reach_at=None)
  v = judge(tmp_path)
  # The two that reached it are fast, but not every seed got there.
  assert v.verdict == claims.INCONCLUSIVE and "2/3 seeds reached" in v.why


def diverge(path, at_step):
  """Ends the run at ``path`` as lnorm train does when the loss stops being finite:
  its records up to ``at_step``, then the record of the stop."""
  metrics = os.path.join(path, "metrics.jsonl")
  with open(metrics) as f:
    kept = [line for line in f if json.loads(line)["step"] < at_step]
  with open(metrics, "w") as f:
    f.writelines(kept + [json.dumps({"step": at_step, DIVERGED_AT: at_step}) + "\n"])


def test_a_seed_that_diverged_counts_as_never_reaching(tmp_path):
  baseline(tmp_path)
  for s, at in enumerate((200, 220, 180)):
    write_run(tmp_path, "ln", s, reach_at=at)
  diverge(write_run(tmp_path, "ln", 3, reach_at=None), at_step=0)  # Before any evaluation.
  v = judge(tmp_path)
  assert v.verdict == claims.INCONCLUSIVE and "3/4 seeds reached" in v.why
  rows = {r.norm: r for r in claims.headline_rows(load(tmp_path))}
  assert (rows["ln"].reached, rows["ln"].runs, rows["ln"].diverged) == (3, 4, 1)
  text = claims.headline_markdown(list(rows.values()))
  assert "| toy | ln | test/error | 3/4 (1 diverged) | " in text


def test_a_baseline_seed_that_diverged_midway_keeps_its_best_so_far(tmp_path):
  baseline(tmp_path, seeds=(0, 1))
  # Its best before the stop, 1.0, enters the target: mean of 0.2, 0.2 and 1.0.
  diverge(write_run(tmp_path, "none", 2, reach_at=None), at_step=155)
  for s in range(3):
    write_run(tmp_path, "ln", s, reach_at=200)
  (comparison,) = compare.compare(load(tmp_path), "test/error")
  assert comparison.target == pytest.approx(1.4 / 3)
  notes = " ".join(compare.notes(comparison))
  assert "counted as never reaching the target: norm=none (norm=none,seed=2) (step 155)" in notes


def test_most_seeds_never_reaching_the_target_is_not_reproduced(tmp_path):
  baseline(tmp_path)
  write_run(tmp_path, "ln", 0, reach_at=100)
  write_run(tmp_path, "ln", 1, reach_at=None)
  write_run(tmp_path, "ln", 2, reach_at=None)
  v = judge(tmp_path)
  assert v.verdict == claims.NOT_REPRODUCED and v.why.endswith("1/3 seeds reached the target")


def test_two_seeds_are_too_few(tmp_path):
  baseline(tmp_path)
  for s, at in enumerate((200, 200)):
    write_run(tmp_path, "ln", s, reach_at=at)
  v = judge(tmp_path)
  assert v.verdict == claims.INCONCLUSIVE and "2 and 3 seeds" in v.why


def test_no_runs_of_the_claimed_norm_yet(tmp_path):
  baseline(tmp_path)
  v = judge(tmp_path, norm="rms")
  assert (v.verdict, v.why) == (claims.NOT_RUN, "no finished rms runs yet")


def test_the_claim_against_another_normalizer(tmp_path):
  # LN against BN (not the table's baseline): BN's own best is the target.
  baseline(tmp_path)
  for s in range(3):
    write_run(tmp_path, "bn", s, reach_at=300)
    write_run(tmp_path, "ln", s, reach_at=150)
  v = judge(tmp_path, against="bn")
  assert v.verdict == claims.REPRODUCED and "0.50 [0.50, 0.50]" in v.why


# --- final-value verdicts -------------------------------------------------------------------


@pytest.mark.parametrize("bln, verdict", [
    ((0.30, 0.31, 0.29), claims.REPRODUCED),
    ((0.50, 0.52, 0.49), claims.NOT_REPRODUCED),
    ((0.30, 0.50, 0.41), claims.INCONCLUSIVE),
])
def test_final_verdicts_on_a_loss(tmp_path, bln, verdict):
  for s, (a, b) in enumerate(zip(bln, (0.40, 0.41, 0.39))):
    write_run(tmp_path, "bln", s, metric="validation/loss", values=[0.9, a, a + 0.1])
    write_run(tmp_path, "bn", s, metric="validation/loss", values=[0.9, b, b + 0.1])
  v = claims.judge(load(tmp_path), "toy", "bln", "bn", kind="final")
  assert v.verdict == verdict


def test_final_verdict_on_an_accuracy_points_the_other_way(tmp_path):
  for s, (a, b) in enumerate(zip((0.70, 0.71, 0.69), (0.60, 0.61, 0.59))):
    write_run(tmp_path, "bln", s, metric="validation/accuracy", values=[0.5, a])
    write_run(tmp_path, "bn", s, metric="validation/accuracy", values=[0.5, b])
  assert claims.judge(load(tmp_path), "toy", "bln", "bn",
                      kind="final").verdict == claims.REPRODUCED


def test_where_selects_the_batch_size(tmp_path):
  for s in range(3):  # At batch 25 BLN is better; at batch 1 it is worse.
    for b, (x, y) in ((25, (0.3, 0.4)), (1, (0.5, 0.4))):
      write_run(tmp_path / f"b{b}", "bln", s, metric="validation/loss", values=[0.9, x + s / 100],
                extra={"batch_size": b})
      write_run(tmp_path / f"b{b}", "bn", s, metric="validation/loss", values=[0.9, y + s / 100],
                extra={"batch_size": b})
  runs = load(tmp_path)
  assert claims.judge(runs, "toy", "bln", "bn", "final",
                      {"batch_size": "25"}).verdict == claims.REPRODUCED
  assert claims.judge(runs, "toy", "bln", "bn", "final",
                      {"batch_size": "1"}).verdict == claims.NOT_REPRODUCED
  assert claims.judge(runs, "toy", "bln", "bn", "final").why == (
      "the runs differ in more than the normalizer and seed")


# --- the headline table ------------------------------------------------------------------------


def test_headline_rows_by_value(tmp_path):
  baseline(tmp_path)
  for s, at in enumerate((200, 220, 180)):
    write_run(tmp_path, "ln", s, reach_at=at)
  write_run(tmp_path, "rms", 0, reach_at=None)
  write_run(tmp_path, "rms", 1, reach_at=300)
  rows = {r.norm: r for r in claims.headline_rows(load(tmp_path))}
  assert list(rows) == ["none", "ln", "rms"]
  none, ln, rms = rows["none"], rows["ln"], rows["rms"]
  assert (none.reached, none.runs) == (3, 3)
  assert (none.steps.estimate, none.best.estimate) == pytest.approx((1.0, 0.2))
  assert (ln.reached, ln.runs) == (3, 3)
  assert ln.steps.estimate == pytest.approx((0.5 * 0.55 * 0.45) ** (1 / 3))
  assert ln.seconds.estimate == pytest.approx(ln.steps.estimate)  # 0.1 s per update.
  assert (rms.reached, rms.runs) == (1, 2) and rms.steps.text() == "0.75 (1 seed)"
  # rms's bests: 1.0 (never) and 0.2.
  assert rms.best.estimate == pytest.approx(0.6)
  text = claims.headline_markdown(claims.headline_rows(load(tmp_path)))
  assert "| toy | none (baseline) | test/error | 3/3 | 1.00 [1.00, 1.00] |" in text
  assert f"| toy | rms | test/error | 1/2 | 0.75 (1 seed) | 0.75 (1 seed) | " in text


def test_a_named_metric_replaces_the_reports_choice(tmp_path):
  # On test/error (the report's choice) ln is no faster; on validation/score (named,
  # lower is better by its name) it reaches the baseline's best in half the updates.
  for s in range(3):
    for norm, at in (("none", 400), ("ln", 200)):
      path = write_run(tmp_path, norm, s, reach_at=400)
      with open(os.path.join(path, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
      for r in records:
        r["validation/score"] = 0.2 if r["step"] >= at else 1.0
      with open(os.path.join(path, "metrics.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
  runs = load(tmp_path)
  default = {r.norm: r for r in claims.headline_rows(runs)}
  named = {r.norm: r for r in claims.headline_rows(runs, {"toy": "validation/score"})}
  assert default["ln"].metric == "test/error" and default["ln"].steps.estimate == pytest.approx(1)
  assert named["ln"].metric == "validation/score"
  assert named["ln"].steps.estimate == pytest.approx(0.5)
  assert claims.judge(runs, "toy", "ln", "none", metric="validation/score").verdict == (
      claims.REPRODUCED)
  missing = claims.headline_rows(runs, {"toy": "validation/nothing"})
  assert all("logged no validation/nothing" in r.problem for r in missing)
