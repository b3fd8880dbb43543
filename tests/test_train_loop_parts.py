"""The training loop's parts on hand-computed cases: which steps the clips acted on,
the evaluation schedule, when checkpoints are due, what a run resumes from, the records
and their times, the evaluation of splits, and which wandb mode applies."""

from __future__ import annotations

import types

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from lnorm.data.core import Dataset
from lnorm.errors import ConfigError, DivergenceError
from lnorm.training import defaults
from lnorm.training import (assembly, checkpoint, checkpoint_policy, eval_schedule, loop,
                            parallel, records, steps)
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

  def loss_and_metrics(self, outputs, batch, model):
    del model  # Unused.
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


@pytest.mark.parametrize("every, per_call, expected", [
    (256, 64, None),  # A multiple: every evaluation where asked.
    (64, 64, None),  # At the threshold: equal.
    (65, 64, [128, 192, 256]),  # Just past it: the next call ends.
    (250, 64, [256, 512, 768]),  # The case.
])
def test_misalignment_says_where_the_evaluations_fall(every, per_call, expected):
  note = eval_schedule.misalignment(every, per_call, steps_per_epoch=10_000,
                                    total_steps=20_000)
  if expected is None:
    assert note is None
    return
  asked = ", ".join(str(every * i) for i in (1, 2, 3))
  assert note == (
      f"eval_every_steps={every} with steps_per_call={per_call}: the loop evaluates between "
      f"jitted calls of {per_call} updates, at the first call end at or after each multiple "
      f"of {every}, so the first evaluations fall at steps {', '.join(map(str, expected))}, "
      f"not {asked}. To evaluate at exactly those steps, set --config.steps_per_call="
      f"{max(d for d in range(1, per_call + 1) if every % d == 0)} (a divisor of {every}).")


def test_misalignment_of_a_run_shorter_than_one_call():
  # max_steps=10 in calls of 64: the one call ends the run, and 5 is never evaluated.
  assert eval_schedule.misalignment(5, 64, steps_per_epoch=1000, total_steps=10).endswith(
      "so the first evaluations fall at no step before the run's end at step 10, not 5. "
      "To evaluate at exactly those steps, set --config.steps_per_call=5 (a divisor of 5).")
  assert eval_schedule.misalignment(0, 64, 1000, 10) is None  # No schedule, nothing to say.
  # Multiples at epoch ends are the epoch records': not asked of the mid-epoch schedule.
  assert eval_schedule.misalignment(100, 64, steps_per_epoch=100, total_steps=1000) is None


def test_mid_epoch_steps_restart_their_calls_at_each_epoch():
  # Epochs of 500 in calls of 64: 448 then a call of 52 ends the epoch; epoch 2's calls
  # end at 564, ..., 756 (past 750).
  schedule = eval_schedule.EvalSchedule(250, 0, 1000)
  assert eval_schedule.mid_epoch_steps(schedule, 64, 500, 1000, until=1000) == [256, 756]


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


# --- the records ------------------------------------------------------------------------


def test_crossed_multiple_on_its_edges():
  assert not eval_schedule.crossed_multiple(0, 0, 100)  # 0: never.
  assert eval_schedule.crossed_multiple(5, 4, 5)  # Lands on it.
  assert not eval_schedule.crossed_multiple(5, 5, 9)  # Left it behind.
  assert eval_schedule.crossed_multiple(5, 9, 10)
  assert eval_schedule.crossed_multiple(3, 0, 7)  # Passed two at once: still one.


def test_every_call_counts_towards_the_training_time_and_the_throughput():
  host = records.initial()
  records.add_time(host, examples=24, call_seconds=0.5, input_seconds=0.25)
  records.add_time(host, examples=12, call_seconds=0.25, input_seconds=0.0)
  assert (host["timed_examples"], host["timed_seconds"]) == (36, 0.75)
  assert host["train_seconds"] == 1.0  # Input assembly counts towards training time.
  metrics = records.epoch_metrics(host, epoch=0.5)
  assert metrics["train/examples_per_sec"] == 48.0
  assert "time/compile_seconds" not in metrics  # Only when something compiled.
  host["compile_seconds"] = 3.0
  assert records.epoch_metrics(host, epoch=0.5)["time/compile_seconds"] == 3.0
  assert "train/examples_per_sec" not in records.epoch_metrics(records.initial(), 1)


def _call(losses, grad_norm=1.0):
  k = len(losses)
  return {"loss": np.array(losses, np.float32), "grad_norm": np.array([0.0] * (k - 1) + [grad_norm]),
          "param_norm": np.ones(k), "update_norm": np.ones(k), "sums": {}, "clips": {}}


def test_check_finite_names_the_first_bad_step_and_what_went_bad():
  records.check_finite(_call([1.0, 2.0, 3.0]), step=10, epoch=0, last_checkpoint=None)
  with pytest.raises(DivergenceError, match=r"loss became nan at training step 11 \(epoch 3\)"):
    records.check_finite(_call([1.0, np.nan, np.inf]), step=10, epoch=2, last_checkpoint=8)
  with pytest.raises(DivergenceError, match="gradient norm became inf at training step 12.*"
                     "checkpoint is at step 8"):
    records.check_finite(_call([1.0, 2.0, 3.0], grad_norm=np.inf), step=10, epoch=0,
                         last_checkpoint=8)


SUSPECT = "The likely cause is the normalizer my_norms:f: ..."


@pytest.mark.parametrize("step, losses, grad_norm, blamed", [
    (0, [np.nan, 1.0], 1.0, "before any update"),  # The initial model: not the rate.
    (0, [1.0, np.nan], 1.0, "first call"),  # After one update, in the first call.
    (0, [1.0, 2.0], np.nan, "first call"),  # A gradient that is not finite at once.
    (2, [np.nan, 1.0], 1.0, "rate"),  # A later call: the learning rate, as before.
])
def test_check_finite_blames_the_normalizer_only_at_the_start(step, losses, grad_norm,
                                                             blamed):
  with pytest.raises(DivergenceError) as e:
    records.check_finite(_call(losses, grad_norm), step=step, epoch=0, last_checkpoint=None,
                         suspect=SUSPECT)
  message = str(e.value)
  assert ("This is before any update, so the learning rate is not the cause: the initial "
          f"model's loss is not finite. {SUSPECT}" in message) == (blamed == "before any update")
  assert (f"{SUSPECT} If it is not that, lower the learning rate" in message) == (
      blamed == "first call")
  assert message.count("learning rate") == 1
  assert message.endswith("No checkpoint was saved yet: a rerun starts over.")


def test_check_finite_without_a_suspect_keeps_the_learning_rate_advice():
  with pytest.raises(DivergenceError, match=r"step 0 \(epoch 1\)\. This is before any "
                     r"update.*Check the model's inputs and its normalizer\."):
    records.check_finite(_call([np.nan]), step=0, epoch=0, last_checkpoint=None)
  with pytest.raises(DivergenceError, match=r"step 1 \(epoch 1\)\. Lower the learning rate"):
    records.check_finite(_call([1.0, np.nan]), step=0, epoch=0, last_checkpoint=None)


@pytest.mark.parametrize("norm, options, expected", [
    ("none", {}, None),
    ("ln", {"ln": {"eps": 1e-5}}, None),  # A positive eps: nothing points at it.
    ("rms", {"rms": {"eps": 0.0}}, "norm=rms with norm_options.rms.eps=0"),
    ("rms", {"rms": {"eps": 1e-12}}, None),  # Tiny but positive.
    ("my_norms:f", {}, "the normalizer my_norms:f: on an all-zero row"),
])
def test_the_normalizer_suspected_of_a_loss_that_is_not_finite(norm, options, expected):
  suspect = records.normalizer_suspect(norm, options)
  assert (suspect is None) == (expected is None)
  if expected:
    assert expected in suspect


def test_the_last_epoch_record_skips_mid_epoch_points(tmp_path):
  (tmp_path / "metrics.jsonl").write_text(
      '{"step": 31, "epoch": 1, "time/epoch_seconds": 2.0, "test/error": 0.25}\n'
      '{"step": 40, "epoch": 1.29, "test/error": 0.2}\n')
  assert records.last_epoch_record(str(tmp_path)) == {
      "epoch": 1, "time/epoch_seconds": 2.0, "test/error": 0.25}
  assert records.last_epoch_record(str(tmp_path / "none")) == {}


def test_format_metrics():
  assert records.format_metrics({"a": 0.123456, "b": 5, "c": "x"}) == "a=0.1235, b=5, c=x"


# --- resuming -----------------------------------------------------------------------------


class _Checkpointer:
  def __init__(self, latest=None, saved=None):
    self._latest, self._saved = latest, saved

  def latest_step(self):
    return self._latest

  def steps(self):
    return [] if self._latest is None else [self._latest]

  def restore(self, abstract, step):
    del abstract
    return checkpoint.Restored(types.SimpleNamespace(step=step), self._saved, step)


def test_a_fresh_workdir_starts_at_step_zero_with_fresh_records(tmp_path, caplog):
  state = types.SimpleNamespace(step=0)
  got, host, step = checkpoint_policy.resume(_Checkpointer(), state, str(tmp_path))
  assert (got, host, step) == (state, records.initial(), 0)
  assert not caplog.records


def test_files_of_an_attempt_without_checkpoint_are_named_when_starting_over(tmp_path, caplog):
  (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
  with caplog.at_level("WARNING"):
    _, _, step = checkpoint_policy.resume(_Checkpointer(), None, str(tmp_path))
  assert step == 0
  assert "metrics.jsonl with 2 points" in caplog.text


def test_resuming_fills_bookkeeping_a_later_version_added():
  saved = {**records.epoch_sums(), "epoch_steps": 17}
  del saved["compile_seconds"]  # A checkpoint from before it was recorded.
  state, host, step = checkpoint_policy.resume(_Checkpointer(latest=17, saved=saved), None,
                                               "unused")
  assert step == 17 and state.step == 17
  assert host["epoch_steps"] == 17
  assert host["compile_seconds"] == 0.0 and host["train_seconds"] == 0.0


def _checkpoints(workdir, steps):
  checkpointer = checkpoint.Checkpointer(str(workdir))
  for step in steps:
    checkpointer.save(step, {"w": jnp.full((2,), float(step))}, {"epoch_steps": step})
  checkpointer.wait()
  return checkpointer


def _whole(*steps):
  return "".join(f'{{"step": {s}}}\n' for s in steps)


@pytest.mark.parametrize("text, line, start, deleted", [
    # A point of step 30 is cut: resume before it, and delete the checkpoint at 40,
    # whose resumption would never log step 30 again.
    (_whole(10, 20) + '{"step": 30, "train/lo', 3, 20, [40]),
    # The record the checkpoint at 40 was saved after (a finished run's last one).
    (_whole(10, 20, 30) + '{"step": 40, "train/lo', 4, 20, [40]),
    # Cut after the last checkpoint (a kill mid-write): the usual resumption.
    (_whole(10, 20, 30, 40) + '{"step": 50, "train/lo', 5, 40, []),
    # Its step cut too: it follows step 40, so the run resumes strictly before 40.
    (_whole(10, 20, 30, 40) + '{"ste', 5, 20, [40]),
    # No checkpoint precedes it: the run starts over.
    (_whole(10) + '{"step": 15, "train/lo', 2, 0, [20, 40]),
], ids=["between checkpoints", "at a checkpoint", "after the last", "step unknown",
        "before the first"])
def test_a_cut_line_is_logged_again_from_the_checkpoint_before_it(tmp_path, caplog, text,
                                                                   line, start, deleted):
  (tmp_path / "metrics.jsonl").write_text(text)
  checkpointer = _checkpoints(tmp_path, (20, 40))
  try:
    with caplog.at_level("WARNING"):
      state, host, step = checkpoint_policy.resume(checkpointer, {"w": jnp.zeros((2,))},
                                                   str(tmp_path))
    assert checkpointer.steps() == [s for s in (20, 40) if s not in deleted]
  finally:
    checkpointer.close()
  assert step == start and host["epoch_steps"] == start
  if start:
    assert jax.device_get(state["w"]).tolist() == [float(start)] * 2
  (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
  assert warning.startswith(f"Line {line} of {tmp_path / 'metrics.jsonl'} (")
  resumes = (f"the checkpoint at step {start}" if start else
             "the start, as no checkpoint precedes that step")
  assert f"was cut short, by a kill or a full disk while it was written: the run resumes " \
         f"from {resumes} and logs the steps after it again" in warning
  if len(deleted) == 1:
    assert warning.endswith(f"; the checkpoint at step {deleted[0]}, after it, is deleted "
                            "(the run saves it again).")
  elif deleted:
    assert warning.endswith("; the checkpoints at steps 20, 40, after it, are deleted (the "
                            "run saves them again).")
  else:
    assert warning.endswith("logs the steps after it again.")


# --- evaluating splits --------------------------------------------------------------------


def test_split_evaluator_prefixes_metrics_and_skips_missing_splits():
  def eval_step(state, batch):
    del state
    return {"x": jnp.sum(batch["x"] * batch["mask"])}, jnp.sum(batch["mask"])

  # 7 examples in batches of 3: a last batch of one, padded.
  dataset = Dataset("d", "synthetic", "here", {
      "test": {"x": np.arange(7, dtype=np.float32)},
      "validation": {"x": np.full(4, 2.0, np.float32)}})
  evaluate = steps.SplitEvaluator(jax.jit(eval_step), dataset, 3, parallel.make_mesh())
  assert evaluate(None, ("test", "train", "validation")) == {
      "test/x": pytest.approx(3.0), "validation/x": pytest.approx(2.0)}


def test_the_epoch_label_counts_a_partial_last_epoch():
  assembled = assembly.AssembledRun(*[None] * 7, steps_per_epoch=31, total_steps=60)
  run = loop.Run(assembled, workdir=None, data_record=None, schedule=None)
  assert run.num_epochs == 2
  assert [run.epoch_label(s) for s in (0, 30, 31, 59, 60)] == [
      "epoch 1/2", "epoch 1/2", "epoch 2/2", "epoch 2/2", "epoch 2/2"]
