"""Checks of the reference loops themselves (tests/references.py: ``lstm``, ``gru``,
``ln``, ``flip``), which the cell and sequence tests compare lnorm with."""

from __future__ import annotations

import numpy as np

from tests.references import flip, ln


def test_reference_ln_standardizes():
  a = np.random.default_rng(0).standard_normal((3, 8)) * 5 + 2
  y = ln(np, a, {"scale": np.ones(8)})
  np.testing.assert_allclose(y.mean(-1), 0, atol=1e-12)
  np.testing.assert_allclose(y.var(-1), 1, rtol=1e-5)


def test_reference_flip_keeps_padding_at_the_end():
  x = np.array([[1, 2, 3, 0], [4, 5, 0, 0]])
  np.testing.assert_array_equal(flip(x, [3, 2]), [[3, 2, 1, 0], [5, 4, 0, 0]])
