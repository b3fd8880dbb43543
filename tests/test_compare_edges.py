"""``lnorm compare`` (and the normalizer table built on it) at its edges: equal best
values at two steps, a value exactly at the target, a baseline seed that logged no
finite value, a metric logged once, a higher-is-better metric with ties."""

from __future__ import annotations

import math

import pytest

from lnorm.analysis import compare
from lnorm.analysis import runs as runs_lib
from lnorm.errors import UserError
from tests.test_compare import by_setting, curve, write_run


def _compare(root, metric="test/error", **kw):
  (c,) = compare.compare(runs_lib.load_runs([str(root)]), metric, **kw)
  return c


def test_equal_best_values_at_two_steps_reach_at_the_first(tmp_path):
  write_run(str(tmp_path / "none"), {"norm": "none"}, curve([0.5, 0.3, 0.4, 0.3]))
  write_run(str(tmp_path / "ln"), {"norm": "ln"}, curve([0.3, 0.3, 0.3, 0.2]))
  c = _compare(tmp_path)
  assert c.target == 0.3
  (none,), (ln,) = by_setting(c)["norm=none"].runs, by_setting(c)["norm=ln"].runs
  assert (none.step, none.value, none.best) == (100, 0.3, 0.3)
  # A value exactly at the target reaches it: the first of three equal ones.
  assert (ln.step, ln.value) == (50, 0.3)
  assert ln.step_ratio == pytest.approx(0.5)
  assert none.seconds == pytest.approx(10.0) and ln.seconds_ratio == pytest.approx(0.5)


def test_higher_is_better_ties_reach_at_the_first(tmp_path):
  write_run(str(tmp_path / "none"), {"norm": "none"},
            curve([0.7, 0.8, 0.8, 0.75], metric="validation/accuracy"))
  write_run(str(tmp_path / "ln"), {"norm": "ln"},
            curve([0.79, 0.8, 0.9, 0.9], metric="validation/accuracy"))
  c = _compare(tmp_path, "validation/accuracy")
  assert c.target == 0.8 and not c.lower_is_better
  assert by_setting(c)["norm=none"].runs[0].step == 100
  assert by_setting(c)["norm=ln"].runs[0].step == 100  # 0.79 is not 0.8.


def test_a_baseline_seed_without_a_finite_value_is_left_out_of_the_target(tmp_path):
  write_run(str(tmp_path / "none0"), {"norm": "none", "seed": 0},
            curve([math.nan, math.inf, math.nan, math.nan]))
  write_run(str(tmp_path / "none1"), {"norm": "none", "seed": 1}, curve([0.5, 0.4, 0.45, 0.6]))
  write_run(str(tmp_path / "ln0"), {"norm": "ln", "seed": 0}, curve([0.45, 0.35, 0.3, 0.3]))
  c = _compare(tmp_path)
  assert c.target == pytest.approx(0.4)  # Seed 1's best alone, not a NaN mean.
  none = by_setting(c)["norm=none"]
  seed0 = next(r for r in none.runs if r.run.config["seed"] == 0)
  assert seed0.best is None and not seed0.reached and seed0.nonfinite == 4
  assert len(none.reached) == 1 and none.stat("best").n == 1
  assert none.stat("best").mean == pytest.approx(0.4)
  ln = by_setting(c)["norm=ln"].runs[0]
  assert (ln.step, ln.step_ratio) == (100, pytest.approx(1.0))


def test_nan_between_values_is_skipped_not_taken_as_best(tmp_path):
  # min() over a list holding NaN depends on where the NaN is: it must never be seen.
  write_run(str(tmp_path / "none"), {"norm": "none"}, curve([math.nan, 0.4, 0.3, math.nan]))
  write_run(str(tmp_path / "ln"), {"norm": "ln"}, curve([0.5, math.nan, 0.2, 0.1]))
  c = _compare(tmp_path)
  assert c.target == pytest.approx(0.3)
  ln = by_setting(c)["norm=ln"].runs[0]
  assert (ln.best, ln.step, ln.nonfinite) == (0.1, 150, 1)


def test_every_baseline_seed_without_a_finite_value_is_a_clear_error(tmp_path):
  write_run(str(tmp_path / "none"), {"norm": "none"}, curve([math.nan, math.nan]))
  write_run(str(tmp_path / "ln"), {"norm": "ln"}, curve([0.5, 0.4]))
  with pytest.raises(UserError, match="logged no finite test/error"):
    _compare(tmp_path)


def test_a_metric_logged_once(tmp_path):
  write_run(str(tmp_path / "none"), {"norm": "none"}, curve([0.4]))
  write_run(str(tmp_path / "ln"), {"norm": "ln"}, curve([0.3]))
  c = _compare(tmp_path)
  assert c.target == 0.4
  none, ln = by_setting(c)["norm=none"], by_setting(c)["norm=ln"]
  assert none.runs[0].step == ln.runs[0].step == 50
  assert none.runs[0].last_step == 50
  assert ln.stat("step_ratio").mean == 1.0 and ln.stat("step_ratio").std == 0.0
  assert "1/1" in c.table()


def test_a_field_lnorm_gained_between_runs_does_not_split_them(tmp_path):
  # Seed 0 of each recorded before a new normalizer's options existed, LN's seed 1
  # after, at the one default value: LN's two seeds are one setting against the
  # baseline, not seed 1 left out for want of a baseline.
  write_run(str(tmp_path / "none0"), {"norm": "none", "seed": 0}, curve([0.5, 0.4, 0.3, 0.3]))
  write_run(str(tmp_path / "ln0"), {"norm": "ln", "seed": 0}, curve([0.4, 0.3, 0.2, 0.2]))
  write_run(str(tmp_path / "ln1"), {"norm": "ln", "seed": 1, "norm_options.dyt.alpha_init": 0.5},
            curve([0.3, 0.3, 0.2, 0.2]))
  c = _compare(tmp_path)
  assert set(by_setting(c)) == {"norm=none", "norm=ln"}
  ln = by_setting(c)["norm=ln"].runs
  assert sorted(r.step_ratio for r in ln) == [pytest.approx(1 / 3), pytest.approx(2 / 3)]


def test_a_newer_field_with_two_recorded_values_still_separates(tmp_path):
  write_run(str(tmp_path / "none"), {"norm": "none"}, curve([0.5, 0.4, 0.3, 0.3]))
  write_run(str(tmp_path / "a"), {"norm": "dyt", "norm_options.dyt.alpha_init": 0.5},
            curve([0.4, 0.3, 0.2, 0.2]))
  write_run(str(tmp_path / "b"), {"norm": "dyt", "norm_options.dyt.alpha_init": 0.2},
            curve([0.4, 0.3, 0.2, 0.2]))
  comparisons = compare.compare(runs_lib.load_runs([str(tmp_path)]), "test/error")
  # Two values of the field are two settings, never one pooled group of two seeds.
  pooled = [setting for c in comparisons for setting in by_setting(c).values()
            if len(setting.runs) > 1]
  assert not pooled
