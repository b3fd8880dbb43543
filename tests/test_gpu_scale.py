"""The benchmark's ``gpu`` scale (issue 60): every speed claim's evaluation grid is
finer than the claim's margin, by construction from each setting's schedule, and the
bound that checks it holds for the loop's own evaluation steps."""

from __future__ import annotations

import math

import pytest

from lnorm import config as config_lib
from lnorm.analysis import specs
from lnorm.training import eval_schedule
from lnorm.training import experiments

MARGIN = math.log(1 / 0.9)  # The rule's default speed margin.


def _config(setting: specs.Setting, variant):
  config = config_lib.load_config(setting.config)
  config_lib.apply_overrides(config, {**setting.overrides, **variant})
  return config


def _claims_metric_points(config) -> list[int]:
  """The updates at (or just before) which the claims' metric is evaluated: a task's
  own periodic evaluation where the setting uses one (order-embeddings' R-sum), else
  the loop's mid-epoch schedule; the run's end either way."""
  last = config.max_steps
  periodic = config.get("periodic_eval_every_steps", 0)
  if periodic:
    # One schedule for the metric: a mid-epoch one beside it would be another's.
    assert not config.eval_every_steps and not config.get("eval_points_per_decade", 0)
    return specs.evaluation_points(last, periodic)
  return specs.evaluation_points(last, config.eval_every_steps,
                                 config.get("eval_points_per_decade", 0))


@pytest.mark.parametrize("experiment", list(experiments.EXPERIMENTS))
def test_every_speed_claims_grid_is_finer_than_its_margin_from_2_percent_of_the_run(
    experiment):
  """The floor of a speed claim's interval is the mean log-width of the brackets its
  crossings lie in: every bracket a gpu setting can make after DENSE_FROM of its run
  is narrower than the claim's margin, whatever variant and epoch length."""
  spec = specs.spec(experiment)
  setting = spec.scales["gpu"]
  speed = [c for c in spec.claims_at("gpu") if c.kind == "speed"]
  if not speed:
    pytest.skip(f"{experiment} has no speed claim")
  for variant in setting.variants:
    config = _config(setting, variant)
    assert config.max_steps > 0, "a gpu speed setting gives its length in updates"
    start = math.ceil(specs.DENSE_FROM * config.max_steps)
    widest = specs.widest_bracket(_claims_metric_points(config), config.steps_per_call,
                                  start)
    for c in speed:
      assert widest < c.margin, (experiment, variant, c.key, widest)


def test_the_cpu_scales_grids_were_as_coarse_as_the_margin():
  """The bound reads the cpu scale's perm-MNIST at batch 4 (validation every 500 of
  13,750 updates, 64 a call) as coarser than the margin: what the gpu scale fixes."""
  spec = specs.spec("perm_mnist")
  config = _config(spec.scales["cpu"], spec.scales["cpu"].variants[0])
  last = 13_750
  widest = specs.widest_bracket(specs.evaluation_points(last, config.eval_every_steps),
                                config.steps_per_call, math.ceil(specs.DENSE_FROM * last))
  assert widest > MARGIN


def _loop_evaluations(points_per_decade, every, steps_per_call, steps_per_epoch, last):
  """The steps the loop evaluates at, as ``lnorm.training.loop`` schedules them: the
  mid-epoch evaluations and every epoch's end (the run's end among them)."""
  schedule = eval_schedule.EvalSchedule(every, points_per_decade, last)
  mid = eval_schedule.mid_epoch_steps(schedule, steps_per_call, steps_per_epoch, last,
                                      last)
  ends = list(range(steps_per_epoch, last, steps_per_epoch)) + [last]
  return sorted(set(mid) | set(ends))


@pytest.mark.parametrize("points_per_decade, every, steps_per_call, steps_per_epoch, last", [
    (30, 0, 8, 13_750, 13_750),  # perm-MNIST at batch 4: one epoch, 8 updates a call.
    (30, 0, 2, 429, 8_580),  # At batch 128: 20 epochs of 429, 2 a call.
    (30, 0, 7, 333, 5_000),  # A call that divides neither the epoch nor a point.
    (5, 200, 1, 1_000, 1_600),  # Few points a decade, and every 200 besides.
    (0, 16, 3, 78, 9_360),  # Every 16 alone (order-embeddings' periodic R-sum).
])
def test_the_bound_holds_for_the_loops_own_evaluations(points_per_decade, every,
                                                       steps_per_call, steps_per_epoch,
                                                       last):
  """widest_bracket is an upper bound of every bracket the loop makes, and a tight
  one from the first point on: within a call's length of the widest bracket made."""
  steps = _loop_evaluations(points_per_decade, every, steps_per_call, steps_per_epoch, last)
  points = specs.evaluation_points(last, every, points_per_decade)
  for start in (1, 50, math.ceil(0.02 * last), last // 3):
    made = max(math.log(b / a) for a, b in zip(steps, steps[1:]) if a >= start)
    bound = specs.widest_bracket(points, steps_per_call, start)
    assert made <= bound + 1e-12, (start, made, bound)
    if start >= points[0]:  # Before the first point the bound assumes one at start.
      assert bound <= made + math.log(1 + 2 * steps_per_call / start) + 1e-12


def test_the_gpu_scale_evaluates_at_geometric_points_alone():
  assert specs.dense_evaluations() == {"eval_points_per_decade": "30", "eval_every_steps": "0"}
  # Points 10^(1/30) apart: a log-width of 0.077, below the margin of 0.105.
  assert math.log(10) / specs.GPU_POINTS_PER_DECADE < MARGIN
