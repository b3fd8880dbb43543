"""The training loop's parts on hand-computed cases: which steps the clips acted on,
the evaluation schedule, when checkpoints are due, and which wandb mode applies."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from lnorm.errors import ConfigError
from lnorm.training import defaults
from lnorm.training import checkpoint_policy, eval_schedule, records, steps
from lnorm.training.metrics_writer import wandb_mode
from lnorm.training.optim import clip_stages, make_optimizer


# --- clipping -----------------------------------------------------------------------------

# Gradients whose tensor norms are (5, 0), (1, 0), (1, 2), (0, 0.5).
GRADS = [
    {"w": np.array([3.0, 4.0]), "v": np.array([0.0])},
    {"w": np.array([0.6, 0.8]), "v": np.array([0.0])},
    {"w": np.array([1.0, 0.0]), "v": np.array([2.0])},
    {"w": np.array([0.0, 0.0]), "v": np.array([0.5])},
]


#: The metric each clip's fraction goes to -> its optimizer field.
FIELDS = {"clipped_fraction": "clip_global_norm", "tensor_clipped_fraction": "clip_tensor_norm"}


def indicators(grads, **thresholds):
  stages = clip_stages({FIELDS[k]: v for k, v in thresholds.items()})
  out = steps.clip_indicators(jax.tree.map(jnp.asarray, grads), stages)
  return {k: float(v) for k, v in out.items()}


def test_clip_stages_follow_the_optimizer_config():
  metrics = lambda config: [s.metric for s in clip_stages(config)]
  assert metrics({"clip_global_norm": 0.0, "clip_tensor_norm": 0.0}) == []
  assert metrics({"clip_global_norm": 5.0}) == ["clipped_fraction"]
  assert metrics({"clip_global_norm": 5.0, "clip_tensor_norm": 2.0}) == [
      "tensor_clipped_fraction", "clipped_fraction"]
  assert metrics({"clip_elementwise": {"w": 1.0}, "clip_global_norm": 5.0}) == [
      "elementwise_clipped_fraction", "clipped_fraction"]


def test_the_global_clip_sees_what_the_elementwise_clip_left():
  # (3, 4) clipped element-wise at 1 is (1, 1), of norm 1.41 under the global clip of 2.
  stages = clip_stages({"clip_elementwise": {"w": 1.0}, "clip_global_norm": 2.0})
  grads = {"w": jnp.array([3.0, 4.0]), "v": jnp.array([0.0])}
  out = steps.clip_indicators(grads, stages)
  assert {k: float(v) for k, v in out.items()} == {
      "elementwise_clipped_fraction": 1.0, "clipped_fraction": 0.0}
  small = {"w": jnp.array([0.5, -0.5]), "v": jnp.array([9.0])}  # v: no bound, norm 9.03
  out = steps.clip_indicators(small, stages)
  assert {k: float(v) for k, v in out.items()} == {
      "elementwise_clipped_fraction": 0.0, "clipped_fraction": 1.0}


def test_global_clip_acts_when_the_raw_norm_reaches_the_threshold():
  # Global norms 5, 1, sqrt(5) = 2.236 and 0.5 against a threshold of 2.
  assert [indicators(g, clipped_fraction=2.0) for g in GRADS] == [
      {"clipped_fraction": f} for f in (1.0, 0.0, 1.0, 0.0)]
  assert indicators(GRADS[0], clipped_fraction=5.0) == {"clipped_fraction": 1.0}  # optax: >=


def test_global_clip_sees_what_the_tensor_clip_left():
  # Tensor clip 1.5 caps the norms (5, 0) to (1.5, 0) and (1, 2) to (1, 1.5): global
  # norms 1.5 and 1.80, under 2, so the global clip never acts although the raw
  # gradients' norms 5 and 2.24 exceed it.
  got = [indicators(g, tensor_clipped_fraction=1.5, clipped_fraction=2.0) for g in GRADS]
  assert [g["tensor_clipped_fraction"] for g in got] == [1.0, 0.0, 1.0, 0.0]
  assert [g["clipped_fraction"] for g in got] == [0.0, 0.0, 0.0, 0.0]
  got = [indicators(g, tensor_clipped_fraction=1.5, clipped_fraction=1.6) for g in GRADS]
  assert [g["clipped_fraction"] for g in got] == [0.0, 0.0, 1.0, 0.0]


def test_indicators_agree_with_the_optimizer_itself():
  rng = np.random.default_rng(0)
  config = ml_collections.ConfigDict({"name": "sgd", "learning_rate": 1.0,
                                      "clip_global_norm": 2.5, "clip_tensor_norm": 2.0})
  tx = make_optimizer(config)
  tensor_only = make_optimizer(ml_collections.ConfigDict(
      {"name": "sgd", "learning_rate": 1.0, "clip_tensor_norm": 2.0}))
  seen = set()
  for _ in range(200):
    # Tensors of norms uniform in (0, 3).
    grads = {k: rng.normal(size=shape) for k, shape in (("a", (3,)), ("b", (2, 2)))}
    grads = {k: jnp.asarray(g * rng.uniform(0, 3) / np.linalg.norm(g))
             for k, g in grads.items()}
    flags = indicators(grads, clipped_fraction=2.5, tensor_clipped_fraction=2.0)
    update, _ = tx.update(grads, tx.init(grads))
    after_tensor, _ = tensor_only.update(grads, tensor_only.init(grads))
    tensor_acted = not all(np.allclose(after_tensor[k], -grads[k]) for k in grads)
    global_acted = not all(np.allclose(update[k], after_tensor[k]) for k in grads)
    assert flags == {"tensor_clipped_fraction": float(tensor_acted),
                     "clipped_fraction": float(global_acted)}
    seen.add((tensor_acted, global_acted))
  # The random cases reach every combination: neither, either and both clips.
  assert seen == {(False, False), (True, False), (False, True), (True, True)}


class _Point(nn.Module):
  """Two parameters, zero: with the loss 0.5 |param - target|^2 the gradient is
  -target."""

  @nn.compact
  def __call__(self, x, train=False):
    del x, train
    return {"w": self.param("w", nn.initializers.zeros, (2,)),
            "v": self.param("v", nn.initializers.zeros, (1,))}


class _PointTask:
  rng_streams = ()

  def model_inputs(self, batch):
    return (batch["w"],)

  def loss_and_metrics(self, outputs, batch):
    loss = 0.5 * (jnp.sum(jnp.square(outputs["w"] - batch["w"][0]))
                  + jnp.sum(jnp.square(outputs["v"] - batch["v"][0])))
    return loss, {"loss": loss[None]}


def test_every_step_of_a_fused_call_counts_towards_the_clipped_fraction():
  model, task = _Point(), _PointTask()
  params = model.init(jax.random.key(0), None)["params"]
  # Learning rate 0: the parameters stay at zero, so step i's gradient is -GRADS[i].
  state = steps.TrainState.create(apply_fn=model.apply, params=params, tx=optax.sgd(0.0),
                                 batch_stats={})
  step = steps.make_train_step(task, model, clip_stages({"clip_tensor_norm": 1.5,
                                                        "clip_global_norm": 1.6}))
  chunk = jax.jit(steps.make_train_chunk(step))
  batches = {k: jnp.asarray(np.stack([g[k] for g in GRADS]))[:, None] for k in ("w", "v")}
  host = records.initial()
  for _ in range(2):  # Two calls of 4 steps.
    state, out = chunk(state, batches, jax.random.key(1))
    out = jax.device_get(out)
    np.testing.assert_array_equal(out["clips"]["tensor_clipped_fraction"], [1, 0, 1, 0])
    np.testing.assert_array_equal(out["clips"]["clipped_fraction"], [0, 0, 1, 0])
    # The norms are measured at the call's last step only: its gradient's norm is 0.5.
    np.testing.assert_allclose(out["grad_norm"], [0, 0, 0, 0.5])
    records.add_call(host, out, examples=4)
  metrics = records.epoch_metrics(host, epoch=1.0)
  assert metrics["train/tensor_clipped_fraction"] == 0.5
  assert metrics["train/clipped_fraction"] == 0.25
  assert metrics["train/grad_norm"] == pytest.approx(0.5)
  window = records.window_metrics(host["eval_window"])
  assert window == {"train/grad_norm": pytest.approx(0.5), "train/clipped_fraction": 0.25,
                    "train/tensor_clipped_fraction": 0.5}
  assert records.window_metrics(records.gradient_window()) == {}


def test_no_clip_no_fraction():
  model, task = _Point(), _PointTask()
  params = model.init(jax.random.key(0), None)["params"]
  state = steps.TrainState.create(apply_fn=model.apply, params=params, tx=optax.sgd(0.0),
                                 batch_stats={})
  step = jax.jit(steps.make_train_step(task, model, []))
  _, out = step(state, {k: jnp.asarray(GRADS[0][k])[None] for k in ("w", "v")},
                jax.random.key(1))
  assert out["clips"] == {} and float(out["grad_norm"]) == pytest.approx(5.0)


# --- the evaluation schedule ------------------------------------------------------------


def test_geometric_steps():
  assert defaults.geometric_steps(3, 1000) == [1, 2, 5, 10, 22, 46, 100, 215, 464, 1000]
  assert defaults.geometric_steps(1, 999) == [1, 10, 100]
  # Dense schedules keep each step once.
  assert defaults.geometric_steps(10, 10) == [1, 2, 3, 4, 5, 6, 8, 10]
  assert defaults.geometric_steps(0, 1000) == []


def due_steps(schedule, steps_per_call, last):
  return [after for before in range(0, last, steps_per_call)
          if schedule.due(before, after := before + steps_per_call)]


def test_schedule_with_one_step_per_call():
  schedule = eval_schedule.EvalSchedule(every_steps=0, points_per_decade=3, last_step=300)
  assert due_steps(schedule, 1, 300) == [1, 2, 5, 10, 22, 46, 100, 215]


def test_schedule_evaluates_at_the_first_call_boundary_at_or_past_each_point():
  schedule = eval_schedule.EvalSchedule(every_steps=0, points_per_decade=3, last_step=300)
  # Calls of 8 steps end at 8 (past 1, 2, 5), 16 (10), 24 (22), 48 (46), 104 (100) and
  # 216 (215).
  assert due_steps(schedule, 8, 300) == [8, 16, 24, 48, 104, 216]


def test_schedule_adds_to_eval_every_steps():
  schedule = eval_schedule.EvalSchedule(every_steps=100, points_per_decade=1, last_step=300)
  assert due_steps(schedule, 1, 300) == [1, 10, 100, 200, 300]
  assert due_steps(schedule, 20, 300) == [20, 100, 200, 300]


def test_schedule_refuses_negative_values():
  with pytest.raises(ConfigError, match="eval_points_per_decade=-1"):
    eval_schedule.EvalSchedule(every_steps=0, points_per_decade=-1, last_step=10)


# --- checkpoints ------------------------------------------------------------------------


class _Clock:
  def __init__(self):
    self.now = 0.0

  def __call__(self):
    return self.now


def test_the_first_checkpoint_comes_within_a_minute_later_ones_at_the_interval():
  clock = _Clock()
  timer = checkpoint_policy.CheckpointTimer(300.0, have_checkpoint=False, clock=clock)
  clock.now = checkpoint_policy.FIRST_CHECKPOINT_SECS
  assert not timer.due()
  clock.now += 0.1
  assert timer.due()
  timer.saved()
  clock.now += 299.0
  assert not timer.due()
  clock.now += 1.1
  assert timer.due()


def test_a_resumed_run_keeps_the_interval_and_a_short_interval_stays_short():
  clock = _Clock()
  resumed = checkpoint_policy.CheckpointTimer(300.0, have_checkpoint=True, clock=clock)
  clock.now = 100.0
  assert not resumed.due()
  clock = _Clock()
  frequent = checkpoint_policy.CheckpointTimer(5.0, have_checkpoint=False, clock=clock)
  clock.now = 5.1
  assert frequent.due()


# --- wandb ------------------------------------------------------------------------------


def test_an_explicit_wandb_mode_wins_over_the_environment(monkeypatch):
  monkeypatch.setenv("WANDB_MODE", "online")
  mode, why = wandb_mode("disabled")
  assert mode == "disabled"
  assert why == ("wandb.mode=disabled in the config; WANDB_MODE=online in the "
                 "environment is ignored")


def test_auto_follows_the_environment_then_the_credentials(monkeypatch, tmp_path):
  monkeypatch.setenv("WANDB_MODE", "disabled")
  assert wandb_mode("auto") == (
      "disabled", "WANDB_MODE=disabled in the environment, as wandb.mode is auto")
  monkeypatch.delenv("WANDB_MODE")
  monkeypatch.delenv("WANDB_API_KEY", raising=False)
  monkeypatch.setenv("HOME", str(tmp_path))
  assert wandb_mode("auto")[0] == "offline"
  monkeypatch.setenv("WANDB_API_KEY", "x")
  assert wandb_mode("auto")[0] == "online"
  assert wandb_mode("offline") == ("offline", "wandb.mode=offline in the config")
