"""Keras-style dropout in the recurrent cells (Gal & Ghahramani 2016): one mask for x
and one for h per sequence, reused at every step, only in training."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lnorm.rnn import RecurrentLayer, make_gru_cell, make_lstm_cell
from tests import references as ref
from tests.test_rnn_cells import B, CASES, H, I, LENGTHS, PRMS_P, T, build, f64, inputs

pytestmark = pytest.mark.usefixtures("precise_jax")

RATE, RECURRENT_RATE = 0.3, 0.5


def dropout_layer(kind, variant, rate=RATE, recurrent_rate=RECURRENT_RATE):
  make = make_lstm_cell if kind == "lstm" else make_gru_cell
  options = {"prms_p": PRMS_P} if variant.startswith("prms") else {}
  return RecurrentLayer(
      make(variant, dropout=rate, recurrent_dropout=recurrent_rate, **options), H)


def apply_capturing_masks(layer, variables, x, key, lengths=LENGTHS):
  """Training outputs and the masks the layer drew (``cell.dropout_masks``'s return)."""
  out, state = layer.apply(
      variables, jnp.asarray(x), lengths, train=True, rngs={"dropout": key},
      mutable=["batch_stats", "intermediates"],
      capture_intermediates=lambda _, method: method == "dropout_masks")
  (masks,) = state["intermediates"]["layer_0"]["dropout_masks"]
  return out, masks


# --- a NumPy reference of the cells' equations with the two masks ---------------------


def _sigmoid(a):
  return 1.0 / (1.0 + np.exp(-a))


def _kernel(p):
  if "scale" not in p:   # weight norm: w = g v / ||v|| per output unit
    return p["kernel"]
  return p["scale"] * p["kernel"] / np.sqrt(np.sum(p["kernel"] ** 2, axis=0))


def _normalize(variant, name, p, a, real):
  """LN or RMSNorm per row, or recurrent BN over the real rows (batch statistics), or
  nothing."""
  per_row = ref.cell_norm_ref(variant, name, PRMS_P)
  if per_row is not None:
    return per_row(np, a, p.get(name, {}))  # LayerNorm-simple has no parameters
  if variant == "bn":
    n = real.sum()
    mu = (a * real).sum(0) / n
    y = (a - mu) / np.sqrt(((a - mu) ** 2 * real).sum(0) / n + 1e-5)
  else:
    return a
  return y * p[name]["scale"] + p[name].get("bias", 0.0)


def reference(kind, variant, p, x, lengths, input_mask, state_mask):
  """x [B, T, I] -> outputs [B, T, H]: at every step x_t * input_mask enters W_x and
  h * state_mask enters W_h (docs/experiments.md sec. 4 otherwise); padded steps keep
  h, c."""
  norm = lambda name, a, real: _normalize(variant, name, p, a, real)
  wx, wh = _kernel(p["input_proj"]), _kernel(p["hidden_proj"])
  h = c = np.zeros((x.shape[0], H))
  outs = []
  for t in range(x.shape[1]):
    real = (t < lengths)[:, None].astype(np.float64)
    ax = (x[:, t] * input_mask) @ wx + p["input_proj"].get("bias", 0.0)
    ah = (h * state_mask) @ wh
    if kind == "lstm":
      gates = norm("input_norm", ax, real) + norm("hidden_norm", ah, real) + p["bias"]
      f, i, o, g = np.split(gates, 4, axis=-1)
      c_new = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
      h_new = _sigmoid(o) * np.tanh(norm("cell_norm", c_new, real))
      c = np.where(real > 0, c_new, c)
    else:
      gates = (norm("hidden_gate_norm", ah[:, :2 * H], real)
               + norm("input_gate_norm", ax[:, :2 * H], real))
      z, r = _sigmoid(gates[:, :H]), _sigmoid(gates[:, H:])
      candidate = np.tanh(norm("input_candidate_norm", ax[:, 2 * H:], real)
                          + r * norm("hidden_candidate_norm", ah[:, 2 * H:], real))
      h_new = (1 - z) * h + z * candidate   # the undropped h
    h = np.where(real > 0, h_new, h)
    outs.append(real * h_new)
  return np.stack(outs, axis=1), h


# --- tests ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind,variant", CASES)
def test_the_same_masks_serve_every_step(kind, variant):
  _, variables = build(kind, variant)
  x = inputs(11)
  out, masks = apply_capturing_masks(dropout_layer(kind, variant), variables, x,
                                     jax.random.key(3))
  p = f64(variables["params"]["layer_0"])
  m_x, m_h = np.asarray(masks.inputs, np.float64), np.asarray(masks.state, np.float64)
  assert m_x.shape == (B, I) and m_h.shape == (B, H)
  want, want_h = reference(kind, variant, p, x.astype(np.float64), LENGTHS, m_x, m_h)
  np.testing.assert_allclose(out.outputs, want, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(out.final_hidden, want_h, rtol=1e-5, atol=1e-5)
  # The comparison can tell a missing state mask from the right one.
  unmasked, _ = reference(kind, variant, p, x.astype(np.float64), LENGTHS, m_x,
                          np.ones_like(m_h))
  assert np.max(np.abs(np.asarray(out.outputs) - unmasked)) > 1e-3


def test_masks_are_inverted_dropout_per_sequence_and_per_rng():
  _, variables = build("lstm", "none")
  layer = dropout_layer("lstm", "none", 0.5, 0.5)
  x = inputs(12)
  key = jax.random.key(4)
  out, masks = apply_capturing_masks(layer, variables, x, key)
  for m in masks:
    m = np.asarray(m)
    assert set(np.unique(m)) == {0.0, 2.0}          # dropped, or kept and scaled 1/(1-p)
    assert len({row.tobytes() for row in m}) == B   # each sequence has its own mask
  assert not np.array_equal(np.asarray(masks.inputs), np.asarray(masks.state)[:, :I])
  # Deterministic given the key; another training step (fold_in) draws other masks.
  again, same = apply_capturing_masks(layer, variables, x, key)
  np.testing.assert_array_equal(again.outputs, out.outputs)
  for a, b in zip(masks, same):
    np.testing.assert_array_equal(a, b)
  _, other = apply_capturing_masks(layer, variables, x, jax.random.fold_in(key, 1))
  for a, b in zip(masks, other):
    assert not np.array_equal(a, b)


def test_mask_statistics():
  cell = make_lstm_cell("none", dropout=0.2, recurrent_dropout=0.4)(8)
  masks, _ = cell.init_with_output(
      {"params": jax.random.key(0), "dropout": jax.random.key(1)}, (5000, 10),
      train=True, method=cell.dropout_masks)
  for m, rate in zip(masks, (0.2, 0.4)):
    m = np.asarray(m)
    assert abs(np.mean(m == 0) - rate) < 0.01
    assert abs(np.mean(m) - 1.0) < 0.02   # the expectation of x is kept


def test_input_mask_is_constant_over_time_in_the_gradient():
  """d outputs / d x_t is exactly zero at the dropped inputs of each sequence, at every
  step t, and nowhere else: the input mask does not change from step to step."""
  _, variables = build("lstm", "ln")
  layer = dropout_layer("lstm", "ln")
  x = jnp.asarray(inputs(13))
  lengths = np.full(B, T)
  _, masks = apply_capturing_masks(layer, variables, x, jax.random.key(5), lengths)

  def total(x):
    out, _ = layer.apply(variables, x, lengths, train=True,
                         rngs={"dropout": jax.random.key(5)}, mutable=["batch_stats"])
    return jnp.sum(out.outputs)

  grad = np.asarray(jax.grad(total)(x))
  dropped = np.asarray(masks.inputs) == 0
  assert dropped.any() and not dropped.all()
  np.testing.assert_array_equal(grad == 0, np.broadcast_to(dropped[:, None], grad.shape))


@pytest.mark.parametrize("kind,variant", CASES)
def test_no_dropout_in_evaluation_and_at_rate_zero(kind, variant):
  layer, variables = build(kind, variant)
  x = jnp.asarray(inputs(14))
  # Evaluation with dropout rates set = evaluation without: bit for bit.
  plain = layer.apply(variables, x, LENGTHS, train=False)
  dropped = dropout_layer(kind, variant).apply(variables, x, LENGTHS, train=False)
  np.testing.assert_array_equal(dropped.outputs, plain.outputs)
  np.testing.assert_array_equal(dropped.final_hidden, plain.final_hidden)
  # Rate 0 in training: no random numbers are drawn (no 'dropout' rng is needed) and
  # the outputs equal the cell's without the fields, bit for bit.
  zero = dropout_layer(kind, variant, 0.0, 0.0)
  train = lambda l, v: l.apply(v, x, LENGTHS, train=True, mutable=["batch_stats"])[0]
  assert "random_bits" not in str(jax.make_jaxpr(lambda v: train(zero, v))(variables))
  np.testing.assert_array_equal(train(zero, variables).outputs,
                                train(layer, variables).outputs)


def test_every_layer_and_direction_draws_its_own_masks():
  layer = RecurrentLayer(make_lstm_cell("none", dropout=0.5, recurrent_dropout=0.5), H,
                         bidirectional=True, num_layers=2)
  x = jnp.asarray(inputs(15))
  rngs = {"params": jax.random.key(0), "dropout": jax.random.key(1)}
  _, state = layer.init_with_output(
      rngs, x, LENGTHS, train=True,
      capture_intermediates=lambda _, method: method == "dropout_masks")
  state_masks = [np.asarray(v["dropout_masks"][0].state)
                 for v in state["intermediates"].values()]
  assert len(state_masks) == 4
  assert len({m.tobytes() for m in state_masks}) == 4


def test_a_cell_stepped_by_hand_needs_its_masks():
  with pytest.raises(ValueError, match="dropout_masks"):
    # The cell's step alone, in training, without the sequence's state mask.
    cell = make_lstm_cell("none", recurrent_dropout=0.2)(H)
    carry = (jnp.zeros((B, H)), jnp.zeros((B, H)))
    cell.init({"params": jax.random.key(0)}, carry,
              (jnp.zeros((B, 4 * H)), 0, None), train=True)
  with pytest.raises(ValueError, match=r"dropout=1.0: a dropout rate must be in \[0, 1\)"):
    RecurrentLayer(make_lstm_cell("none", dropout=1.0), H).init(
        jax.random.key(0), jnp.asarray(inputs()))
