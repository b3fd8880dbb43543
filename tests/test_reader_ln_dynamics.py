"""The measurements of lnorm/training/dynamics.py (scripts/reader_ln_dynamics.py) on
constructed cases whose answers are known: a linear recurrence with a known growth
per step, Adam's moments after known gradients, a second moment left to decay, the
clip rules on either side of their thresholds, an LSTM's gates against the reference
loop; and the replay of a run against the golden first updates of `lnorm train`."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from experiments.attentive_reader import clip as reader_clip
from experiments.attentive_reader.model import passage_lstm_reads
from lnorm import config as config_lib
from lnorm.data import core as data_core
from lnorm.errors import ConfigError, UserError
from lnorm.rnn import make_lstm_cell
from lnorm.training import assembly
from lnorm.training import dynamics
from lnorm.training import optim
from tests import references as ref
from tests.test_golden_losses import OVERRIDES, REPO, golden_path, tolerance
from tests.test_rnn_cells import B, H, LENGTHS, T, build, f64, inputs

# --- the growth of a perturbation --------------------------------------------------------

#: A linear recurrence h_t = a_b Q h_{t-1}, one rate a_b per example (Q orthogonal):
#: the state at step t is (a_b Q)^(t+1) h_0, so a unit readout's gradient with respect
#: to h_0 has norm a_b^(t+1) exactly, and the growth per step is log a_b.
RATES = np.array([1.1, 0.8, 1.3])
SIZE, STEPS = 5, 13


def linear_states(carry):
  c0, h0 = carry  # c0 is read by nothing: its gradient is 0.
  q, _ = jnp.linalg.qr(jax.random.normal(jax.random.key(3), (SIZE, SIZE)))
  def step(h, _):
    h = jnp.asarray(RATES, jnp.float32)[:, None] * (h @ q.T)
    return h, h
  return jnp.swapaxes(jax.lax.scan(step, h0 + 0.0 * c0, None, length=STEPS)[1], 0, 1)


def linear_carry():
  rng = np.random.default_rng(0)
  return tuple(jnp.asarray(rng.standard_normal((len(RATES), SIZE)), jnp.float32)
               for _ in range(2))


def test_growth_of_a_linear_recurrence_is_its_rate_per_step():
  lengths = np.array([7, STEPS, 10])  # Uneven: the later steps average fewer examples.
  mask = jnp.arange(STEPS)[None, :] < jnp.asarray(lengths)[:, None]
  steps = list(range(0, STEPS, 3))  # 0, 3, 6, 9, 12
  growth = jax.jit(lambda carry: dynamics.perturbation_growth(
      linear_states, carry, mask, jax.random.key(1), steps))  # As trace runs it.
  log_growth, examples = growth(linear_carry())
  for k, t in enumerate(steps):
    real = lengths > t
    assert examples[k] == real.sum()
    np.testing.assert_allclose(log_growth[k], np.mean((t + 1) * np.log(RATES[real])),
                               rtol=1e-5, atol=1e-5)
  # Fitted over the steps every example reaches (0, 3, 6): the mean rate.
  assert dynamics.lyapunov_exponent(steps, log_growth, examples) == pytest.approx(
      np.mean(np.log(RATES)), rel=1e-4)


def test_growth_refuses_fewer_than_two_steps_every_example_reaches():
  with pytest.raises(UserError, match="at least 2 probed steps"):
    dynamics.lyapunov_exponent([0, 5, 10], [0.1, 0.2, 0.3], [3, 2, 2])


def test_growth_per_step_leaves_out_a_gradient_below_float32s_range():
  steps, examples = [0, 10, 20, 30], [4, 4, 4, 4]
  assert dynamics.lyapunov_exponent(steps, [-1.0, -8.0, -15.0, -np.inf], examples) == (
      pytest.approx(-0.7))
  assert dynamics.lyapunov_exponent(steps, [-1.0, -np.inf, -np.inf, -np.inf],
                                    examples) == -np.inf


# --- Adam's moments -----------------------------------------------------------------------


def adam_after(gradients, params):
  tx = optax.adam(1e-3)
  state = tx.init(params)
  for g in gradients:
    _, state = tx.update(g, state, params)
  return state


def test_adam_statistics_against_numpy():
  params = {"a": jnp.zeros(4), "b": jnp.zeros((2, 3))}
  # Coordinate a[3] never has a gradient: the medians leave it out.
  gradients = [{"a": jnp.asarray([1.0, -2.0, 300.0, 0.0]), "b": jnp.full((2, 3), 0.5)},
               {"a": jnp.asarray([1.0, 2.0, 0.1, 0.0]), "b": jnp.full((2, 3), -0.5)}]
  state = adam_after(gradients, params)
  groups = dynamics.parameter_groups(params, {"a": ["a"], "both": ["a", "b"]})
  stats = jax.jit(lambda s: dynamics.adam_statistics(s, groups, b1=0.9, b2=0.999,
                                                      eps=1e-8))(state)
  g = np.asarray([[1.0, -2.0, 300.0], [1.0, 2.0, 0.1]])
  m = (0.9 * 0.1 * g[0] + 0.1 * g[1]) / (1 - 0.9**2)
  v = (0.999 * 0.001 * g[0] ** 2 + 0.001 * g[1] ** 2) / (1 - 0.999**2)
  assert stats["a/sqrt_v_median"] == pytest.approx(np.median(np.sqrt(v)), rel=1e-5)
  assert stats["a/sqrt_v_max"] == pytest.approx(np.sqrt(v).max(), rel=1e-5)
  assert stats["a/step_median"] == pytest.approx(np.median(np.abs(m) / np.sqrt(v)), rel=1e-4)
  # Group "both": b's six coordinates (step (0.09 * 0.5 - 0.1 * 0.5) / 0.19 / 0.5) join.
  step_b = abs(0.9 * 0.1 * 0.5 - 0.1 * 0.5) / 0.19 / 0.5
  assert stats["both/step_median"] == pytest.approx(
      np.median(np.concatenate([np.abs(m) / np.sqrt(v), np.full(6, step_b)])), rel=1e-4)


def test_adam_statistics_refuse_an_optimizer_without_adam():
  params = {"a": jnp.zeros(3)}
  state = optax.sgd(0.1).init(params)
  with pytest.raises(UserError, match="holds 0 sets of Adam moments.*optimizer.name=adam"):
    dynamics.adam_statistics(state, {"a": [0]})


def test_parameter_groups_by_glob_and_their_refusals():
  params = {"passage_lstm": {"layer_0": {"hidden_proj": {"kernel": jnp.zeros(2)},
                                         "bias": jnp.zeros(2)}},
            "embed": {"embedding": jnp.zeros(2)}}
  # Leaves in path order: embed/embedding, passage_lstm/layer_0/bias, .../kernel.
  assert dynamics.parameter_groups(params, {"k": ["*/hidden_proj/kernel"],
                                            "two": ["embed/*", "*/bias"]}) == {
                                                "k": [2], "two": [0, 1]}
  with pytest.raises(ConfigError, match="'gain' \\(\\*/scale\\) matches no parameter"):
    dynamics.parameter_groups(params, {"gain": ["*/scale"]})
  assert dynamics.parameter_groups(params, {"gain": ["*/scale"]}, missing_ok=True) == {}
  with pytest.raises(ConfigError, match="must be a list of globs"):
    dynamics.parameter_groups(params, {"k": "*/kernel"})


def simulated_steps(count: int, extra: int, b1=0.9, b2=0.999):
  """Adam's normalised step of one coordinate after a spike of 1e3 at update 1 and
  1e-3 at every later update, at each update up to count + extra."""
  m = v = 0.0
  steps = []
  for t in range(1, count + extra + 1):
    g = 1e3 if t == 1 else 1e-3
    m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
    steps.append(m / (1 - b1**t) / math.sqrt(v / (1 - b2**t)))
  return steps


def test_updates_to_recover_matches_adam_left_to_decay():
  count, target_factor = 300, 3.0
  steps = simulated_steps(count, 3000)
  at_count = steps[count - 1]
  predicted = dynamics.updates_to_recover(at_count, target_factor * at_count, count)
  reached = next(t for t, s in enumerate(steps[count - 1:]) if s >= target_factor * at_count)
  # Without the bias correction's growth the answer would be 2 ln 3 / 0.001 = 2197.
  assert predicted == pytest.approx(reached, abs=2)
  assert 1000 < predicted < 1500


def test_updates_to_recover_at_its_edges():
  assert dynamics.updates_to_recover(0.3, 0.3, 100) == 0.0
  assert dynamics.updates_to_recover(0.0, 0.3, 100) == math.inf
  assert dynamics.updates_to_recover(0.1, 0.3, 100, b2=1.0) == math.inf


# --- the clip, as Adam sees it ----------------------------------------------------------------


@pytest.mark.parametrize("rule,norm,handed", [
    ("attentive_reader_code", 100.0, 100.0),  # The threshold: both branches give 100.
    ("attentive_reader_code", 400.0, 200.0),  # 10 sqrt(400).
    ("attentive_reader_code", 37.5, 37.5),
    ("standard", 400.0, 10.0),
    ("standard", 7.5, 7.5),
])
def test_the_norm_the_clip_hands_to_adam(rule, norm, handed):
  stages = optim.clip_stages({"clip_global_norm": 10.0, "clip_global_norm_rule": rule},
                             reader_clip.CLIP_RULES)
  assert float(dynamics.clip_output_norm(jnp.float32(norm), stages)) == pytest.approx(
      handed, rel=1e-6)


def test_the_norm_handed_to_adam_refuses_a_per_tensor_clip():
  stages = optim.clip_stages({"clip_tensor_norm": 2.0})
  with pytest.raises(ConfigError, match="global-norm clips; .* also applies tensor"):
    dynamics.clip_output_norm(jnp.float32(3.0), stages)


# --- an LSTM's saturation -----------------------------------------------------------------


@pytest.mark.parametrize("variant,scale", [("none", 4.0), ("ln", 1.0)])
def test_lstm_saturation_against_the_reference_gates(variant, scale):
  _, variables = build("lstm", variant)
  params = variables["params"]
  x = inputs(2) * scale  # Large inputs saturate the plain LSTM's gates.
  rng = np.random.default_rng(5)
  # A large c0 saturates the cell's tanh from the first step.
  carry = tuple((rng.standard_normal((B, H)) * size).astype(np.float32) for size in (4, 1))
  got = dynamics.lstm_saturation(make_lstm_cell(variant), H, params, jnp.asarray(x),
                                 jnp.asarray(LENGTHS), tuple(map(jnp.asarray, carry)))
  gates = []
  out, _, _ = ref.lstm(np, f64(params["layer_0"]), x.astype(np.float64), LENGTHS, variant,
                       init=f64(carry), gates=gates)
  real = (np.arange(T)[None, :] < LENGTHS[:, None])[..., None]  # [B, T, 1]
  stacked = [np.stack(parts, axis=1) for parts in zip(*gates)]  # each [B, T, H]
  share = lambda saturated: np.sum(saturated * real) / (real.sum() * H)
  f, i, o, g, cell_out = stacked
  want = {"forget_saturated": share(np.abs(f) > dynamics.SIGMOID_SATURATION),
          "input_saturated": share(np.abs(i) > dynamics.SIGMOID_SATURATION),
          "output_saturated": share(np.abs(o) > dynamics.SIGMOID_SATURATION),
          "candidate_saturated": share(np.abs(g) > dynamics.TANH_SATURATION),
          "cell_tanh_saturated": share(np.abs(cell_out) > 0.99),
          "h_rms": np.sqrt(np.sum(out**2) / (real.sum() * H))}
  for name, value in want.items():
    assert float(got[name]) == pytest.approx(value, abs=1e-6), name
  if variant == "none":  # The case must test the thresholds, not only zeros.
    assert 0 < want["forget_saturated"] < 1 and 0 < want["cell_tanh_saturated"] < 1


# --- the reader, replayed -----------------------------------------------------------------


@pytest.fixture(name="smoke_run")
def fixture_smoke_run(monkeypatch):
  monkeypatch.delenv(data_core.DATA_DIR_ENV, raising=False)  # Synthetic data only.
  config = config_lib.load_config(f"{REPO}/configs/attentive_reader.py:norm=ln,smoke=true")
  config_lib.apply_overrides(config, {k: v for k, v in OVERRIDES.items() if k in config})
  return assembly.assemble(config)


def test_trace_of_the_smoke_reader_replays_lnorm_train(smoke_run):
  state = smoke_run.initial_state()
  batch = {k: v[:5] for k, v in smoke_run.train_arrays.items()}  # 5: not the batch size.
  recurrence = dynamics.Recurrence(
      smoke_run.model.cell, smoke_run.model.hidden_size,
      lambda p: passage_lstm_reads(smoke_run.model, p, batch["passage"],
                                   batch["passage_length"]))
  # The probe reads the model's own passage LSTM.
  own = smoke_run.model.apply(
      {"params": state.params}, batch["passage"], batch["passage_length"],
      method=lambda m, p, n: m.passage_rnn(m.embed_tokens(p, train=False), n,
                                           initial_carry=m.initial_carry("passage", len(p))))
  np.testing.assert_allclose(recurrence.states(state.params)[0], own.outputs, atol=1e-6)
  record = dynamics.trace(smoke_run, 3, recurrence, {"lstm": ["*_lstm*"]},
                          {"gain": ["passage_lstm/layer_0/hidden_norm/scale"],
                           "absent": ["no/such/*"]}, probe_every=2,
                          key=jax.random.key(0), curve_stride=4)
  columns = record["per_update"]
  assert columns["step"] == [1.0, 2.0, 3.0]
  # The updates are lnorm train's: its golden first two (tests/golden/).
  with open(golden_path("attentive_reader")) as f:
    golden = json.load(f)["cases"]["ln"]
  rtol = tolerance("attentive_reader")  # Written on another processor, maybe.
  np.testing.assert_allclose(columns["loss"][:2], golden["train/loss"], rtol=rtol)
  np.testing.assert_allclose(columns["grad_norm"][:2], golden["train/grad_norm"], rtol=rtol)
  assert all(len(v) == 3 for v in columns.values())
  assert "gain/mean" in columns and not any(k.startswith("absent") for k in columns)
  assert columns["clipped"] == [0.0, 0.0, 0.0]  # Smoke gradients are far under 100.
  assert columns["adam_input_norm"] == columns["grad_norm"]
  assert [p["step"] for p in record["perturbation"]] == [0, 2, 3]
  assert record["perturbation_steps"] == list(range(0, int(batch["passage_length"].max()), 4))
  summary = dynamics.summarise(record, steps_per_epoch=2, last=2)
  assert summary["first_epoch"]["grad_norm_mean"] == pytest.approx(
      np.mean(columns["grad_norm"][:2]))
  assert summary["last_2_updates"]["loss_mean"] == pytest.approx(np.mean(columns["loss"][1:]))
  assert set(summary["step_median_at_end"]) == {"lstm"}
