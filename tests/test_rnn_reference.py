"""Reference loops for the recurrent cells, written from the equations.

Nothing here calls lnorm: each function reads the parameter tree of a
``RecurrentLayer`` and runs a plain Python loop over time, with ``xp`` either NumPy
(float64, for values) or jax.numpy (for gradients through the same equations).
Equations: REFERENCE.md sec. 4; recurrent BN after Cooijmans et al. 2016.
"""

from __future__ import annotations

import numpy as np

EPS = 1e-5


def sigmoid(xp, a):
  # = 1 / (1 + exp(-a)), in a form whose gradient does not overflow to inf/inf for
  # the large pre-activations of padded rows (masked afterwards, but NaN * 0 = NaN).
  return 0.5 * (xp.tanh(0.5 * a) + 1.0)


def ln(xp, a, p):
  """LN over the last axis with gain p['scale'] and (optional) bias p['bias']."""
  mu = xp.mean(a, axis=-1, keepdims=True)
  var = xp.mean((a - mu) ** 2, axis=-1, keepdims=True)
  y = (a - mu) / xp.sqrt(var + EPS) * p["scale"][None]
  return y + p["bias"][None] if "bias" in p else y


def bn_train(xp, a, p, m):
  """BN with the batch statistics of the real rows (m: [B, 1] 0/1); biased var."""
  n = xp.maximum(xp.sum(m), 1.0)
  mu = xp.sum(a * m, axis=0, keepdims=True) / n
  var = xp.sum((a - mu) ** 2 * m, axis=0, keepdims=True) / n
  y = (a - mu) / xp.sqrt(var + EPS) * p["scale"][None]
  return (y + p["bias"][None] if "bias" in p else y), mu[0], var[0]


def bn_eval(xp, a, p, stats, t):
  last = int(stats["trained_steps"]) - 1
  row = min(t, last)
  y = ((a - stats["mean"][row][None]) / xp.sqrt(stats["var"][row][None] + EPS)
       * p["scale"][None])
  return y + p["bias"][None] if "bias" in p else y


def kernel(xp, p):
  """W of a Dense ({'kernel'}) or a weight-normalized Dense ({'kernel', 'scale'})."""
  v = p["kernel"]
  if "scale" not in p:
    return v
  return p["scale"][None] * v / xp.sqrt(xp.sum(v ** 2, axis=0, keepdims=True))


def lstm(xp, p, x, lengths, variant, *, train=True, stats=None, init=None):
  """LSTM of REFERENCE.md sec. 4 over x [B, T, I]; returns outputs, (c, h), bn stats.

  Gate order (f, i, o, g). Padded steps keep the state and output zero.
  """
  B, T, _ = x.shape
  H = p["hidden_proj"]["kernel"].shape[0]
  c, h = init if init is not None else (xp.zeros((B, H)), xp.zeros((B, H)))
  wx, wh = kernel(xp, p["input_proj"]), kernel(xp, p["hidden_proj"])
  outs, batch_stats = [], {"input_norm": [], "hidden_norm": [], "cell_norm": []}

  def norm(name, a, t, m):
    if variant == "bn":
      if train:
        y, mu, var = bn_train(xp, a, p[name], m)
        batch_stats[name].append((mu, var))
        return y
      return bn_eval(xp, a, p[name], stats[name], t)
    if variant == "ln" or (variant == "ln_cell" and name == "cell_norm"):
      return ln(xp, a, p[name])
    return a

  for t in range(T):
    m = (t < np.asarray(lengths))[:, None].astype(np.float64)
    a_x = norm("input_norm", x[:, t] @ wx, t, m)
    a_h = norm("hidden_norm", h @ wh, t, m)
    gates = a_h + a_x + p["bias"][None]
    f, i, o, g = (gates[:, k * H:(k + 1) * H] for k in range(4))
    c_new = sigmoid(xp, f) * c + sigmoid(xp, i) * xp.tanh(g)
    h_new = sigmoid(xp, o) * xp.tanh(norm("cell_norm", c_new, t, m))
    c = m * c_new + (1 - m) * c
    h = m * h_new + (1 - m) * h
    outs.append(m * h_new)
  return xp.stack(outs, axis=1), (c, h), batch_stats


def gru(xp, p, x, lengths, variant, *, init=None):
  """GRU of REFERENCE.md sec. 4 (LN paper eq. 26-28) over x [B, T, I]."""
  B, T, _ = x.shape
  H = p["hidden_proj"]["kernel"].shape[0]
  h = init if init is not None else xp.zeros((B, H))
  wx, wh = kernel(xp, p["input_proj"]), kernel(xp, p["hidden_proj"])
  norm = (lambda name, a: ln(xp, a, p[name])) if variant == "ln" else (lambda name, a: a)
  outs = []
  for t in range(T):
    m = (t < np.asarray(lengths))[:, None].astype(np.float64)
    ax = x[:, t] @ wx
    if "bias" in p["input_proj"]:
      ax = ax + p["input_proj"]["bias"][None]
    ah = h @ wh
    gates = norm("hidden_gate_norm", ah[:, :2 * H]) + norm("input_gate_norm", ax[:, :2 * H])
    z, r = sigmoid(xp, gates[:, :H]), sigmoid(xp, gates[:, H:])
    cand = xp.tanh(norm("input_candidate_norm", ax[:, 2 * H:])
                   + r * norm("hidden_candidate_norm", ah[:, 2 * H:]))
    h_new = (1 - z) * h + z * cand
    h = m * h_new + (1 - m) * h
    outs.append(m * h_new)
  return xp.stack(outs, axis=1), h


def flip(x, lengths):
  """Reverses each sequence of x [B, T, ...] within its length (NumPy)."""
  out = np.array(x)
  for b, n in enumerate(np.asarray(lengths)):
    out[b, :n] = np.asarray(x)[b, :n][::-1]
  return out


def test_reference_ln_standardizes():
  a = np.random.default_rng(0).standard_normal((3, 8)) * 5 + 2
  y = ln(np, a, {"scale": np.ones(8)})
  np.testing.assert_allclose(y.mean(-1), 0, atol=1e-12)
  np.testing.assert_allclose(y.var(-1), 1, rtol=1e-5)


def test_reference_flip_keeps_padding_at_the_end():
  x = np.array([[1, 2, 3, 0], [4, 5, 0, 0]])
  np.testing.assert_array_equal(flip(x, [3, 2]), [[3, 2, 1, 0], [5, 4, 0, 0]])
