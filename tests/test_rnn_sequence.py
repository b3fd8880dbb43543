"""RecurrentLayer: padding, direction, stacking, learned initial state, dropout, masks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lnorm.rnn import (RecurrentLayer, flip_sequences, make_gru_cell, make_lstm_cell,
                       masked_mean, sequence_mask)
from tests import references as ref
from tests.test_rnn_cells import B, H, I, LENGTHS, T, build, f64, inputs


# Full-precision matmuls and no silent rank promotion (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("precise_jax")

TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind,variant", [("lstm", "ln"), ("lstm", "bn"), ("gru", "ln")])
def test_padding_invariance(kind, variant):
  """The same sequences padded to T and to 2T (garbage in the padding) give the same
  outputs, zero padded outputs and the same final state."""
  layer, variables = build(kind, variant)
  x = inputs(10)
  long = np.concatenate([x, 100 * inputs(11)], axis=1)
  for i, n in enumerate(LENGTHS):
    x[i, n:] = 7.0
  run = lambda x: layer.apply(variables, jnp.asarray(x), LENGTHS, train=True,
                              mutable=["batch_stats"])[0]
  short_out, long_out = run(x), run(long)
  np.testing.assert_allclose(short_out.outputs, long_out.outputs[:, :T], **TOL)
  np.testing.assert_array_equal(long_out.outputs[:, T:], 0.0)
  np.testing.assert_array_equal(short_out.outputs * ~short_out.mask[..., None], 0.0)
  np.testing.assert_allclose(short_out.final_hidden, long_out.final_hidden, **TOL)
  for a, b in zip(jax.tree.leaves(short_out.final_carries),
                  jax.tree.leaves(long_out.final_carries)):
    np.testing.assert_allclose(a, b, **TOL)


def test_reverse_and_bidirectional_match_reference_on_flipped_sequences():
  x = inputs(12)
  x64 = x.astype(np.float64)
  bi = RecurrentLayer(make_lstm_cell("ln"), H, bidirectional=True)
  variables = bi.init(jax.random.key(0), jnp.asarray(x), LENGTHS)
  params = f64(variables["params"])
  out = bi.apply(variables, jnp.asarray(x), LENGTHS)
  fwd, (_, h_fwd), _ = ref.lstm(np, params["layer_0"], x64, LENGTHS, "ln")
  bwd, (_, h_bwd), _ = ref.lstm(np, params["layer_0_bwd"], ref.flip(x64, LENGTHS),
                                LENGTHS, "ln")
  bwd = ref.flip(bwd, LENGTHS)
  np.testing.assert_allclose(out.outputs, np.concatenate([fwd, bwd], -1), **TOL)
  np.testing.assert_allclose(out.final_hidden, np.concatenate([h_fwd, h_bwd], -1), **TOL)
  # A reverse-only layer with the backward cell's parameters is the backward half.
  rev = RecurrentLayer(make_lstm_cell("ln"), H, reverse=True)
  rev_out = rev.apply({"params": {"layer_0_bwd": variables["params"]["layer_0_bwd"]}},
                      jnp.asarray(x), LENGTHS)
  np.testing.assert_allclose(rev_out.outputs, bwd, **TOL)


def test_stacked_layers_with_learned_initial_state():
  x = inputs(13)
  layer = RecurrentLayer(make_gru_cell("ln"), H, num_layers=2, learned_init=True)
  variables = layer.init(jax.random.key(0), jnp.asarray(x), LENGTHS)
  params = variables["params"]
  # Learned initial states start at 0; move them so that the test can see them.
  params = {**params, "layer_0_init_0": jnp.full((H,), 0.5),
            "layer_1_init_0": jnp.full((H,), -0.25)}
  out = layer.apply({"params": params}, jnp.asarray(x), LENGTHS)
  p = f64(params)
  h0 = lambda v: np.broadcast_to(p[v], (B, H))
  y0, _ = ref.gru(np, p["layer_0"], x.astype(np.float64), LENGTHS, "ln",
                  init=h0("layer_0_init_0"))
  y1, h1 = ref.gru(np, p["layer_1"], y0, LENGTHS, "ln", init=h0("layer_1_init_0"))
  np.testing.assert_allclose(out.outputs, y1, **TOL)
  np.testing.assert_allclose(out.final_hidden, h1, **TOL)
  assert len(out.final_carries) == 2


def test_dropout_between_layers_only_in_training():
  x = jnp.asarray(inputs(14))
  make = lambda rate: RecurrentLayer(make_lstm_cell("none"), H, num_layers=2,
                                     dropout=rate)
  variables = make(0.5).init(jax.random.key(0), x, LENGTHS)
  plain = make(0.0).apply(variables, x, LENGTHS).outputs
  evaluated = make(0.5).apply(variables, x, LENGTHS, train=False).outputs
  trained = make(0.5).apply(variables, x, LENGTHS, train=True,
                            rngs={"dropout": jax.random.key(1)}).outputs
  np.testing.assert_array_equal(evaluated, plain)
  assert np.max(np.abs(trained - plain)) > 1e-3


def test_sequence_mask_and_masked_mean():
  mask = sequence_mask(jnp.array([3, 0, 1]), 4)
  np.testing.assert_array_equal(mask, [[1, 1, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]])
  x = jnp.arange(24, dtype=jnp.float32).reshape(3, 4, 2)
  np.testing.assert_allclose(masked_mean(x, mask), [[2, 3], [0, 0], [16, 17]])
  x_tm = jnp.arange(12).reshape(4, 3)
  lengths = jnp.array([4, 2, 1])
  np.testing.assert_array_equal(flip_sequences(x_tm, lengths).T,
                                ref.flip(np.asarray(x_tm).T, lengths))


def test_bad_shapes_name_the_problem():
  layer = RecurrentLayer(make_lstm_cell("ln"), H)
  with pytest.raises(ValueError, match=r"\[batch, time, features\]"):
    layer.init(jax.random.key(0), jnp.zeros((T, I)))
  with pytest.raises(ValueError, match=r"lengths must have shape \[batch\]"):
    layer.init(jax.random.key(0), jnp.zeros((B, T, I)), jnp.array([[1, 2, 3]]))
  with pytest.raises(ValueError, match="sequence_mask|lengths"):
    sequence_mask(jnp.zeros((2, 2), jnp.int32), 3)
