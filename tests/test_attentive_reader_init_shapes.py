"""The attentive reader's initialisers called directly at odd and square sizes, where
the rules differ: square matrices 0.05 x orthogonal only where the authors' code says
so, W_q Glorot even when square, w uniform within 1/sqrt(A) of its fan-in."""

from __future__ import annotations

import jax
import numpy as np

from experiments.attentive_reader import initialisation

KEY = jax.random.key(3)


def singular_values(w):
  return np.linalg.svd(np.asarray(w), compute_uv=False)


def is_glorot(w, fan_in, fan_out) -> bool:
  bound = np.sqrt(6.0 / (fan_in + fan_out))
  return bound / 2 < np.abs(w).max() <= bound


def test_square_rules_at_an_odd_size():
  init = initialisation.authors()
  for name in ("att_passage", "att_bilinear"):
    np.testing.assert_allclose(singular_values(getattr(init, name)(KEY, (7, 7))), 0.05,
                               rtol=1e-5)
    assert is_glorot(getattr(init, name)(KEY, (7, 5)), 7, 5)
  # W_q is built with ortho=False in the authors' code: Glorot even when square.
  assert is_glorot(init.att_question(KEY, (7, 7)), 7, 7)
  assert is_glorot(init.readout(KEY, (7, 7)), 7, 7)


def test_lstm_blocks_per_gate_at_an_odd_width():
  init = initialisation.authors()
  w_h = np.asarray(init.lstm_recurrent(KEY, (5, 20)))
  for block in np.split(w_h, 4, axis=1):
    np.testing.assert_allclose(singular_values(block), 0.05, rtol=1e-5)
  w_x = np.asarray(init.lstm_input(KEY, (3, 20)))  # E != H: Glorot per [3, 5] block.
  assert all(is_glorot(b, 3, 5) for b in np.split(w_x, 4, axis=1))


def test_attention_vector_is_uniform_within_one_over_sqrt_of_its_fan_in():
  w = np.asarray(initialisation.authors().att_score(KEY, (49, 1)))
  assert 1 / 14 < np.abs(w).max() <= 1 / 7


def test_identical_blocks_ignore_the_key():
  init = initialisation.authors(identical=True)
  np.testing.assert_array_equal(init.att_question(KEY, (4, 6)),
                                init.att_question(jax.random.key(9), (4, 6)))
  assert not np.array_equal(initialisation.authors().att_question(KEY, (4, 6)),
                            initialisation.authors().att_question(jax.random.key(9), (4, 6)))
