"""pRMSNorm and the fused GRU at awkward sizes: odd widths, a partial statistic smaller
than one gate, a fraction whose product with the width is not an integer, and the
recurrent dropout mask, each against a plain JAX loop of the equations that JAX
differentiates itself."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lnorm.normalization import functional as F
from lnorm.rnn import fused
from lnorm.rnn import fused_gru

pytestmark = pytest.mark.usefixtures("precise_jax")


@pytest.mark.parametrize("d,p,size", [
    (24, 0.0625, 1),  # 1.5 entries: truncated, as the authors' int(d * p).
    (20, 0.0625, 1),  # 1.25
    (7, 0.5, 3),  # 3.5
    (9, 0.3, 2),  # 2.7: truncated, not rounded
    (100, 0.07, 7),  # 7.000000000000001 in floating point
    (100, 0.29, 29),  # 28.999999999999996 in floating point
    (5, 0.01, 1),  # Less than one entry: at least one.
    (13, 1.0, 13),
])
def test_partial_size_truncates_and_keeps_at_least_one_entry(d, p, size):
  assert F.partial_size(d, p) == size


@pytest.mark.parametrize("p", [0.0, -0.5, 1.5])
def test_partial_fraction_outside_zero_one_is_refused(p):
  with pytest.raises(ValueError, match="must be in \\(0, 1\\]"):
    F.partial_size(10, p)


@pytest.mark.parametrize("d,p", [(7, 0.5), (24, 0.0625), (9, 0.3)])
def test_prms_values_and_gradients_at_odd_widths_against_numpy(d, p):
  rng = np.random.default_rng(d)
  x = rng.normal(size=(3, d)) + 0.5
  scale, bias = rng.normal(size=d), rng.normal(size=d)
  dy = rng.normal(size=(3, d))
  k = F.partial_size(d, p)

  def numpy_prms(x):
    rms = np.sqrt(np.mean(x[:, :k] ** 2, axis=-1, keepdims=True) + 1e-5)
    return x / rms * scale + bias

  args = [jnp.asarray(a, jnp.float32) for a in (x, scale, bias)]
  fused_fn = jax.jit(lambda x, g, b: F.rms_norm(x, g, b, eps=1e-5, partial=p))  # Hand-written backward.
  np.testing.assert_allclose(fused_fn(*args), numpy_prms(x), rtol=1e-5, atol=1e-5)
  # The fused backward against JAX's differentiation of the general path.
  general = lambda x, g, b: F._rms_norm_autodiff(x, g, b, axes=(1,), eps=1e-5, mask=None,
                                                 size=k)
  vjp = jax.jit(lambda f, *a: jax.vjp(f, *a[:3])[1](a[3]), static_argnums=0)
  got = vjp(fused_fn, *args, jnp.asarray(dy, jnp.float32))
  want = vjp(general, *args, jnp.asarray(dy, jnp.float32))
  for a, b in zip(got, want):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
  # The tail of the row takes no part in the statistic: changing it leaves the head.
  x2 = x.copy()
  x2[:, k:] *= 3.0
  np.testing.assert_allclose(np.asarray(fused_fn(jnp.asarray(x2, jnp.float32), *args[1:]))[:, :k],
                             numpy_prms(x)[:, :k], rtol=1e-5, atol=1e-5)


# --- the fused GRU against a plain loop ---------------------------------------------------

B, T, H = 3, 4, 5  # Odd width: the gate norm sees 2H = 10 entries, the candidate's 5.


def _row_norm(kind: str, width: int, rng) -> fused.RowNorm | None:
  if kind == "none":
    return None
  scale = jnp.asarray(1.0 + 0.3 * rng.normal(size=width), jnp.float32)
  bias = jnp.asarray(0.2 * rng.normal(size=width), jnp.float32)
  if kind == "ln":
    return fused.RowNorm(scale, bias, 1e-5, F.LN_ROWS)
  # pRMSNorm reading 2 entries: fewer than one gate of 5.
  return fused.RowNorm(scale, bias, 1e-5, F.rms_rows(2))


def _apply_norm(x, norm):
  if norm is None:
    return x
  mean, rstd = F.row_statistics(x, norm.eps, norm.stats)
  return F.normalize_rows(x, mean, rstd) * norm.scale[None] + norm.bias[None]


def _gru_loop(params: fused_gru.GRURecurrenceParams, projected, h0, step_mask,
              recurrent_mask):
  """The GRU of docs/experiments.md, sec. 4, one step at a time, differentiated by JAX."""
  h, hs = h0, []
  for t in range(projected.shape[0]):
    h_in = h * recurrent_mask
    wh = h_in @ params.hidden_kernel
    gates = _apply_norm(wh[:, :2 * H], params.gate_norm)
    cand_h = _apply_norm(wh[:, 2 * H:], params.candidate_norm)
    z = jax.nn.sigmoid(gates[:, :H] + projected[t, :, :H])
    r = jax.nn.sigmoid(gates[:, H:] + projected[t, :, H:2 * H])
    candidate = jnp.tanh(projected[t, :, 2 * H:] + r * cand_h)
    new = (1.0 - z) * h + z * candidate  # The undropped h.
    h = jnp.where(step_mask[t][:, None], new, h)
    hs.append(h)
  return h, jnp.stack(hs)


@pytest.mark.parametrize("gate,candidate", [("prms", "prms"), ("ln", "none")])
def test_fused_gru_with_dropout_mask_and_padding_against_a_plain_loop(gate, candidate):
  rng = np.random.default_rng(11)
  params = fused_gru.GRURecurrenceParams(
      jnp.asarray(0.5 * rng.normal(size=(H, 3 * H)), jnp.float32),
      _row_norm(gate, 2 * H, rng), _row_norm(candidate, H, rng))
  projected = jnp.asarray(rng.normal(size=(T, B, 3 * H)), jnp.float32)
  h0 = jnp.asarray(rng.normal(size=(B, H)), jnp.float32)
  lengths = np.array([4, 2, 1])
  step_mask = jnp.asarray(np.arange(T)[:, None] < lengths[None])
  # An inverted-dropout mask: zeros and 1 / keep.
  recurrent_mask = jnp.asarray((rng.random((B, H)) < 0.6) / 0.6, jnp.float32)
  w = jnp.asarray(rng.normal(size=(T, B, H)), jnp.float32)

  def loss(run, params, projected, h0):
    final, hs = run(params, projected, h0)
    return jnp.sum(hs * w) + jnp.sum(jnp.sin(final))

  run_fused = lambda p, x, h: fused_gru.gru_recurrence(p, x, h, step_mask=step_mask,
                                                       recurrent_mask=recurrent_mask)
  run_loop = lambda p, x, h: _gru_loop(p, x, h, step_mask, recurrent_mask)
  np.testing.assert_allclose(jax.jit(run_fused)(params, projected, h0)[1],
                             jax.jit(run_loop)(params, projected, h0)[1], rtol=1e-5, atol=1e-6)
  grad = lambda run: jax.jit(jax.grad(lambda *a: loss(run, *a), argnums=(0, 1, 2)))
  got = grad(run_fused)(params, projected, h0)
  want = grad(run_loop)(params, projected, h0)
  assert jax.tree.structure(got) == jax.tree.structure(want)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
