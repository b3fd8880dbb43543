"""NumPy references for every layer, loss and metric, written from the papers' equations.

Nothing here imports lnorm. Each function is the equation in float64 NumPy (the
recurrent loops also run under jax.numpy, ``xp``, for gradients); layers read their
parameters from the subtree of the flax variable dict that the module owns, so a test
never copies parameters by hand.

How a model's forward test is composed (tests/test_forward_models.py follows it; so
must the forward test of every new experiment):

1. Build the model the way its experiment does (``Task(config).build_model(...)``,
   then ``.clone(...)`` to tiny sizes), init it, and give every parameter random
   values with :func:`random_params`, so that an ignored gain, bias or layer shows.
2. Run ``model.apply`` in float32 under the ``precise_jax`` fixture (tests/conftest.py),
   in training mode when the norms use batch statistics.
3. Write the forward again in the test, in the order the paper gives (dense -> norm
   -> activation, ...), from the references below and the same parameter subtrees.
4. Compare with ``assert_allclose``; and call :func:`assert_differs` on the reference
   with the norm skipped, moved, or reduced over other axes, to show that the
   comparison is sharp enough to catch those bugs.

Equations: LN paper eq. 3-4 and appendix (docs/experiments.md sec. 4), BN, WN
(Salimans & Kingma), BLN paper eq. 10-25, recurrent BN after Cooijmans et al. 2016,
RMSNorm and pRMSNorm (Zhang & Sennrich 2019, eq. 4 and sec. 4), DRAW paper sec. 3.2
(eq. 19-22).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

EPS = 1e-5

# --- utilities ------------------------------------------------------------------------


def f64(tree: Any) -> Any:
  """A (nested dict of) array(s) as float64 NumPy."""
  if isinstance(tree, dict) or hasattr(tree, "items"):
    return {k: f64(v) for k, v in tree.items()}
  return np.asarray(tree, np.float64)


def random_params(shapes: Any, seed: int = 0) -> dict:
  """Random float32 values for a tree of parameter shapes (``jax.eval_shape`` of a
  model's init): gains ('scale') 1 + N(0, 0.3^2) and everything else N(0, 0.5^2),
  kernels scaled by 1/sqrt(fan-in). Gains away from 1 and biases away from 0 make a
  reference that ignores one disagree with the model."""
  rng = np.random.default_rng(seed)

  def fill(tree, name=""):
    if isinstance(tree, dict) or hasattr(tree, "items"):
      return {k: fill(v, k) for k, v in tree.items()}
    shape = tuple(tree.shape)
    if name == "scale":
      return (1.0 + rng.normal(scale=0.3, size=shape)).astype(np.float32)
    fan_in = math.prod(shape[:-1]) if name == "kernel" and len(shape) > 1 else 1
    return (rng.normal(scale=0.5, size=shape) / math.sqrt(fan_in)).astype(np.float32)

  return fill(shapes)


def assert_differs(actual, wrong, *, atol: float, what: str) -> None:
  """The model's output is farther than ``atol`` from a deliberately wrong reference:
  the test's tolerance can tell the right computation from ``what``."""
  gap = float(np.max(np.abs(np.asarray(actual, np.float64) - wrong)))
  assert gap > 10 * atol, f"{what} is within {gap:.2g} of the model: the test is blunt"


def _axes(axes: int | Sequence[int], ndim: int) -> tuple[int, ...]:
  axes = (axes,) if isinstance(axes, int) else axes
  return tuple(sorted(a % ndim for a in axes))


def _mask(x: np.ndarray, mask) -> np.ndarray:
  return np.ones_like(x) if mask is None else np.broadcast_to(mask, x.shape).astype(np.float64)


# --- activations, linear maps ---------------------------------------------------------


def sigmoid(xp, a):
  # = 1 / (1 + exp(-a)), in a form whose gradient does not overflow to inf/inf for
  # the large pre-activations of padded rows (masked afterwards, but NaN * 0 = NaN).
  return 0.5 * (xp.tanh(0.5 * a) + 1.0)


def relu(x):
  return np.maximum(x, 0.0)


def kernel(xp, p):
  """W of a Dense ({'kernel'}) or a weight-normalized Dense ({'kernel', 'scale'}):
  w = g v / ||v|| per output unit."""
  v = p["kernel"]
  if "scale" not in p:
    return v
  return p["scale"][None] * v / xp.sqrt(xp.sum(v ** 2, axis=0, keepdims=True))


def dense(x, p):
  """x W (+ b when the layer has a bias)."""
  y = x @ kernel(np, p)
  return y + p["bias"] if "bias" in p else y


def conv2d(x, p, padding: str):
  """Cross-correlation of NHWC ``x`` with an HWIO kernel, stride 1, plus the bias.
  'SAME' pads (k-1)//2 before and the rest after, as XLA does."""
  k = p["kernel"]
  kh, kw = k.shape[:2]
  if padding == "SAME":
    x = np.pad(x, ((0, 0), ((kh - 1) // 2, kh // 2), ((kw - 1) // 2, kw // 2), (0, 0)))
  windows = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(1, 2))
  return np.einsum("bhwcij,ijcf->bhwf", windows, k) + p["bias"]


def avg_pool2(x):
  """2x2 average pooling, stride 2, over NHWC (a trailing odd row/column is dropped)."""
  b, h, w, c = x.shape
  x = x[:, :h // 2 * 2, :w // 2 * 2]
  return x.reshape(b, h // 2, 2, w // 2, 2, c).mean(axis=(2, 4))


# --- normalizers (float64) ------------------------------------------------------------


def ln_ref(x, g=1.0, b=0.0, eps=1e-5, mask=None, axes=-1):
  """LN paper eq. 3-4: per example, mean and biased variance over ``axes`` (the H
  summed inputs of a layer; all of (H, W, C) for a conv map)."""
  x = np.asarray(x, np.float64)
  axes = _axes(axes, x.ndim)
  m = _mask(x, mask)
  h = np.maximum(m.sum(axes, keepdims=True), 1.0)  # An all-padding row: 0, not 0/0.
  mu = np.where(m > 0, x, 0.0).sum(axes, keepdims=True) / h
  var = np.where(m > 0, (x - mu) ** 2, 0.0).sum(axes, keepdims=True) / h
  return g * (x - mu) / np.sqrt(var + eps) + b


def rms_ref(x, g=1.0, b=0.0, eps=1e-5, mask=None, axes=-1, p=1.0):
  """RMSNorm paper eq. 4: ``g * x / sqrt(mean(x^2) + eps) + b`` per example over
  ``axes``. pRMSNorm (``p < 1``): the mean square of the first ``max(1, int(d p))``
  of the d entries of ``axes`` (row-major), written as a loop over examples so that
  it shares no indexing with the model's. Masked entries are left out, also from
  the partial head."""
  x = np.asarray(x, np.float64)
  axes = _axes(axes, x.ndim)
  m = _mask(x, mask)
  other = tuple(i for i in range(x.ndim) if i not in axes)
  # Examples first, then the normalized entries flattened in row-major order.
  xs = np.transpose(x, other + axes).reshape(-1, math.prod(x.shape[a] for a in axes))
  ms = np.transpose(m, other + axes).reshape(xs.shape)
  d = xs.shape[1]
  k = d if p == 1.0 else max(1, int(d * p))
  rms = np.empty(len(xs))
  for n, (row, real) in enumerate(zip(xs, ms)):
    head = [row[j] for j in range(k) if real[j] > 0]
    mean_square = sum(v * v for v in head) / max(len(head), 1)
    rms[n] = math.sqrt(mean_square + eps)
  rms = rms.reshape([x.shape[i] for i in other] + [1] * len(axes))
  rms = np.transpose(rms, np.argsort(other + axes))
  return g * x / rms + b


def scalenorm_ref(x, g, eps=1e-5, mask=None, axes=-1):
  """ScaleNorm (Nguyen & Salazar 2019): ``g * x / ||x||`` per example, the L2 norm over
  ``axes`` of the real entries, with lnorm's eps inside the root: ``sqrt(sum x^2 +
  eps)``. A loop over examples, as rms_ref."""
  x = np.asarray(x, np.float64)
  axes = _axes(axes, x.ndim)
  m = _mask(x, mask)
  other = tuple(i for i in range(x.ndim) if i not in axes)
  xs = np.transpose(x, other + axes).reshape(-1, math.prod(x.shape[a] for a in axes))
  ms = np.transpose(m, other + axes).reshape(xs.shape)
  norms = np.array([math.sqrt(sum(v * v for v, r in zip(row, real) if r > 0) + eps)
                    for row, real in zip(xs, ms)])
  norms = norms.reshape([x.shape[i] for i in other] + [1] * len(axes))
  return g * x / np.transpose(norms, np.argsort(other + axes))


def dyt_ref(x, alpha, gamma=1.0, beta=0.0):
  """DyT (Zhu et al. 2025): ``gamma * tanh(alpha * x) + beta``, entry by entry."""
  return gamma * np.tanh(alpha * np.asarray(x, np.float64)) + beta


def bn_stats_ref(x, mask=None, ddof=0, axes=0):
  """BN's batch mean and variance over ``axes`` (kept), padded entries left out."""
  x = np.asarray(x, np.float64)
  axes = _axes(axes, x.ndim)
  m = _mask(x, mask)
  n = m.sum(axes, keepdims=True)
  mu = np.where(m > 0, x, 0.0).sum(axes, keepdims=True) / n
  var = np.where(m > 0, (x - mu) ** 2, 0.0).sum(axes, keepdims=True) / (n - ddof)
  return mu, var


def bn_ref(x, g=1.0, b=0.0, eps=1e-5, mask=None, axes=None):
  """BN in training: batch statistics over ``axes`` (default: all but the last)."""
  x = np.asarray(x, np.float64)
  mu, var = bn_stats_ref(x, mask, axes=tuple(range(x.ndim - 1)) if axes is None else axes)
  return g * (x - mu) / np.sqrt(var + eps) + b


def bln_ref(x, gamma, beta, *, bm, bv, fm, fv, m, d=None, eps=1e-4, mix_eps=1e-4):
  """BLN eq. 14-17 given the four statistics; eps inside both variances; d is the
  size of the feature axes (the last axis unless given)."""
  d = x.shape[-1] if d is None else d
  xb = (x - bm) / np.sqrt(bv + eps)
  xf = (x - fm) / np.sqrt(fv + eps)
  y = ((1 - (1 / m + mix_eps)) * xb + (1 / m - mix_eps) * xf) / np.sqrt(d)
  return gamma * y + beta


def bln_train_ref(x, gamma, beta, mask=None, batch_axes=0, feature_axes=-1):
  """BLN eq. 10-17: batch statistics over ``batch_axes`` (per position), feature
  statistics over ``feature_axes``; padded entries are left out of the batch
  statistics, and m is the number of real entries each batch statistic averages."""
  x = np.asarray(x, np.float64)
  batch_axes, feature_axes = _axes(batch_axes, x.ndim), _axes(feature_axes, x.ndim)
  mb = _mask(x, mask)
  m = mb.sum(batch_axes, keepdims=True)
  bm = np.where(mb > 0, x, 0.0).sum(batch_axes, keepdims=True) / m
  bv = np.where(mb > 0, (x - bm) ** 2, 0.0).sum(batch_axes, keepdims=True) / m
  fm = x.mean(feature_axes, keepdims=True)
  fv = ((x - fm) ** 2).mean(feature_axes, keepdims=True)
  d = math.prod(x.shape[a] for a in feature_axes)
  return bln_ref(x, gamma, beta, bm=bm, bv=bv, fm=fm, fv=fv, m=m, d=d)


def bln_population_ref(batches):
  """Eq. 18-21 as the project implements them: last-epoch averages, m/(m-1) on the
  batch variance and d/(d-1) on the feature variance (none when a count is 1), feature
  statistics averaged over examples: one value per position."""
  acc = {"bm": [], "bv": [], "fm": [], "fv": []}
  for x in batches:
    x = np.asarray(x, np.float64)
    m, d = x.shape[0], x.shape[-1]
    bm = x.mean(0, keepdims=True)
    bv = ((x - bm) ** 2).mean(0, keepdims=True)
    fm = x.mean(-1, keepdims=True)
    fv = ((x - fm) ** 2).mean(-1, keepdims=True)
    acc["bm"].append(bm)
    acc["bv"].append(bv * (m / (m - 1) if m > 1 else 1.0))
    acc["fm"].append(fm.mean(0, keepdims=True))
    acc["fv"].append(fv.mean(0, keepdims=True) * (d / (d - 1) if d > 1 else 1.0))
  return {k: np.mean(v, axis=0) for k, v in acc.items()}


def bln_inference_ref(x, gamma, beta, pop, config, m_train):
  """Eq. 18-25: each statistic from the population ('p') or the mini-batch ('b'); a
  mini-batch variance is taken around the mean in use (eq. 19 and 21)."""
  x = np.asarray(x, np.float64)
  p = [c == "p" for c in config]
  bm = pop["bm"] if p[0] else x.mean(0, keepdims=True)
  bv = pop["bv"] if p[1] else ((x - bm) ** 2).mean(0, keepdims=True)
  fm = pop["fm"] if p[2] else x.mean(-1, keepdims=True)
  fv = pop["fv"] if p[3] else ((x - fm) ** 2).mean(-1, keepdims=True)
  return bln_ref(x, gamma, beta, bm=bm, bv=bv, fm=fm, fv=fv, m=m_train)


def norm_train_ref(name: str, x, p, *, mask=None, **axes):
  """The training-mode output of the activation normalizer ``name`` ('none', 'wn',
  'ln', 'bn', 'bln') with gain and bias from ``p``; ``axes``: ``axes=`` for LN
  (normalized) and BN (reduced), ``batch_axes=``/``feature_axes=`` for BLN."""
  if name in ("none", "wn"):
    return x
  g, b = p.get("scale", 1.0), p.get("bias", 0.0)
  if name == "ln":
    return ln_ref(x, g, b, mask=mask, axes=axes.get("axes", -1))
  if name in ("rms", "prms"):
    return rms_ref(x, g, b, mask=mask, axes=axes.get("axes", -1),
                   p=0.0625 if name == "prms" else 1.0)
  if name == "ln_simple":
    return ln_ref(x, mask=mask, axes=axes.get("axes", -1))
  if name == "scalenorm":
    return scalenorm_ref(x, p["scale"], mask=mask, axes=axes.get("axes", -1))
  if name == "dyt":
    return dyt_ref(x, p["alpha"], g, b)
  if name == "bn":
    return bn_ref(x, g, b, mask=mask, axes=axes.get("axes"))
  if name == "bln":
    return bln_train_ref(x, g, b, mask=mask, batch_axes=axes.get("batch_axes", 0),
                         feature_axes=axes.get("feature_axes", -1))
  raise ValueError(f"no reference for norm {name!r}")


# --- recurrent cells ------------------------------------------------------------------


def ln(xp, a, p):
  """LN over the last axis with gain p['scale'] and (optional) bias p['bias']."""
  mu = xp.mean(a, axis=-1, keepdims=True)
  var = xp.mean((a - mu) ** 2, axis=-1, keepdims=True)
  y = (a - mu) / xp.sqrt(var + EPS) * p["scale"][None]
  return y + p["bias"][None] if "bias" in p else y


def rms(xp, a, p, partial=1.0):
  """RMSNorm over the last axis with gain p['scale'] (and p['bias'] if present);
  ``partial < 1``: pRMSNorm, the mean square of the first max(1, int(d p)) entries."""
  d = a.shape[-1]
  k = d if partial == 1.0 else max(1, int(d * partial))
  y = a / xp.sqrt(xp.mean(a[:, :k] ** 2, axis=-1, keepdims=True) + EPS) * p["scale"][None]
  return y + p["bias"][None] if "bias" in p else y


def ln_simple(xp, a, p):
  """LayerNorm-simple (Xu et al. 2019): LN over the last axis, no gain, no bias."""
  del p
  mu = xp.mean(a, axis=-1, keepdims=True)
  return (a - mu) / xp.sqrt(xp.mean((a - mu) ** 2, axis=-1, keepdims=True) + EPS)


def scalenorm(xp, a, p):
  """ScaleNorm over the last axis: scalar gain p['scale'] times a / sqrt(sum a^2 + eps)."""
  return p["scale"] * a / xp.sqrt(xp.sum(a ** 2, axis=-1, keepdims=True) + EPS)


def dyt(xp, a, p):
  """DyT: p['scale'] * tanh(p['alpha'] * a) + p['bias']."""
  return xp.tanh(p["alpha"] * a) * p["scale"][None] + p["bias"][None]


#: The per-example normalizers of the recurrent variants (each also as <name>_cell).
CELL_NORMS = ("ln", "rms", "prms", "dyt", "scalenorm", "ln_simple")


def cell_norm_ref(variant: str, place: str, prms_p: float = 0.0625):
  """A recurrent variant's normalizer at one place (``input_norm``, ``hidden_norm``,
  ``cell_norm``; any other name for the GRU's four) as ``norm(xp, a, p)``; None where
  the variant does not normalize. ``prms_p``: pRMSNorm's fraction."""
  if variant in CELL_NORMS:
    kind = variant
  elif variant.endswith("_cell") and place == "cell_norm":
    kind = variant[:-len("_cell")]
  else:
    return None
  if kind in ("rms", "prms"):
    return lambda xp, a, p: rms(xp, a, p, partial=prms_p if kind == "prms" else 1.0)
  return {"ln": ln, "dyt": dyt, "scalenorm": scalenorm, "ln_simple": ln_simple}[kind]


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


def lstm(xp, p, x, lengths, variant, *, train=True, stats=None, init=None, prms_p=0.0625,
         gates=None):
  """LSTM of docs/experiments.md sec. 4 over x [B, T, I]; returns outputs, (c, h), bn
  stats.

  Gate order (f, i, o, g). Padded steps keep the state and output zero. ``gates``, a
  list, receives each step's pre-activations ``(f, i, o, g)`` and ``tanh(N_c(c))``.
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
    normalize = cell_norm_ref(variant, name, prms_p)
    # A normalizer without parameters (LayerNorm-simple) has no entry in p.
    return a if normalize is None else normalize(xp, a, p.get(name, {}))

  for t in range(T):
    m = (t < np.asarray(lengths))[:, None].astype(np.float64)
    a_x = norm("input_norm", x[:, t] @ wx, t, m)
    a_h = norm("hidden_norm", h @ wh, t, m)
    pre = a_h + a_x + p["bias"][None]
    f, i, o, g = (pre[:, k * H:(k + 1) * H] for k in range(4))
    c_new = sigmoid(xp, f) * c + sigmoid(xp, i) * xp.tanh(g)
    cell_out = xp.tanh(norm("cell_norm", c_new, t, m))
    if gates is not None:
      gates.append((f, i, o, g, cell_out))
    h_new = sigmoid(xp, o) * cell_out
    c = m * c_new + (1 - m) * c
    h = m * h_new + (1 - m) * h
    outs.append(m * h_new)
  return xp.stack(outs, axis=1), (c, h), batch_stats


def gru(xp, p, x, lengths, variant, *, init=None, prms_p=0.0625):
  """GRU of docs/experiments.md sec. 4 (LN paper eq. 26-28) over x [B, T, I]."""
  B, T, _ = x.shape
  H = p["hidden_proj"]["kernel"].shape[0]
  h = init if init is not None else xp.zeros((B, H))
  wx, wh = kernel(xp, p["input_proj"]), kernel(xp, p["hidden_proj"])
  normalize = cell_norm_ref(variant, "all", prms_p)
  norm = ((lambda name, a: a) if normalize is None
          else (lambda name, a: normalize(xp, a, p.get(name, {}))))
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


# --- DRAW attention (DRAW paper sec. 3.2) ---------------------------------------------


def draw_attention(p5, n, height, width):
  """The five linear outputs -> (g_x, g_y, delta, sigma^2, gamma), 1-based pixels."""
  gx_, gy_, log_var, log_delta, log_gamma = (p5[:, i] for i in range(5))
  return {"gx": (width + 1) / 2 * (gx_ + 1), "gy": (height + 1) / 2 * (gy_ + 1),
          "delta": (max(height, width) - 1) / max(n - 1, 1) * np.exp(log_delta),
          "var": np.exp(log_var), "gamma": np.exp(log_gamma)}


def draw_filterbank(g, delta, var, n, size, eps=1e-8):
  """Eq. 19-22 with explicit loops (1-based i and a): [B] -> [B, n, size]."""
  out = np.zeros((len(g), n, size))
  for b in range(len(g)):
    for i in range(1, n + 1):
      mu = g[b] + (i - n / 2 - 0.5) * delta[b]
      for a in range(1, size + 1):
        out[b, i - 1, a - 1] = np.exp(-(a - mu) ** 2 / (2 * var[b]))
    out[b] /= out[b].sum(axis=-1, keepdims=True) + eps
  return out


# --- Transformer (Vaswani et al. 2017; pre-LN: Xiong et al. 2020) --------------------


def gelu_tanh(x):
  """GELU in its tanh form (Hendrycks & Gimpel 2016)."""
  return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def causal_attention_ref(x, p, num_heads, causal=True, scaled=True):
  """Multi-head self-attention of ``x [B, T, d]`` with ``p`` = {qkv, out}: per head h,
  ``softmax(q_h k_h^T / sqrt(d_h) + M) v_h`` with ``M[i, j] = -inf`` for j > i, the
  heads concatenated, then the output map. ``qkv``'s 3d outputs are q, k, v in that
  order, each split into heads of d / num_heads consecutive units. A loop over
  examples, heads and query positions. ``causal``/``scaled`` False: the wrong variants
  that tests show the comparison can tell apart."""
  x = np.asarray(x, np.float64)
  batch, length, width = x.shape
  head = width // num_heads
  qkv = dense(x, p["qkv"])
  q, k, v = qkv[..., :width], qkv[..., width:2 * width], qkv[..., 2 * width:]
  out = np.zeros_like(x)
  for b in range(batch):
    for h in range(num_heads):
      cols = slice(h * head, (h + 1) * head)
      for i in range(length):
        keys = i + 1 if causal else length
        logits = k[b, :keys, cols] @ q[b, i, cols] / (math.sqrt(head) if scaled else 1.0)
        w = np.exp(logits - logits.max())
        out[b, i, cols] = (w / w.sum()) @ v[b, :keys, cols]
  return dense(out, p["out"])


def mlp_block_ref(x, p):
  """``W_2 gelu(W_1 x + b_1) + b_2`` with ``p`` = {hidden, output}."""
  return dense(gelu_tanh(dense(x, p["hidden"])), p["output"])


def transformer_block_ref(x, p, num_heads, placement, norm):
  """One layer: post ``N(x + f(x))``, pre ``x + f(N(x))``, none ``x + f(x)``, for f the
  attention then the MLP; ``norm`` names the normalizer (norm_train_ref)."""
  sublayers = ((lambda y: causal_attention_ref(y, p["attention"], num_heads),
                p.get("attention_norm", {})),
               (lambda y: mlp_block_ref(y, p["mlp"]), p.get("mlp_norm", {})))
  for f, norm_p in sublayers:
    if placement == "post":
      x = norm_train_ref(norm, x + f(x), norm_p)
    elif placement == "pre":
      x = x + f(norm_train_ref(norm, x, norm_p))
    else:
      x = x + f(x)
  return x


def transformer_lm_ref(tokens, p, *, num_layers, num_heads, placement, norm,
                       positions=None, tied=True):
  """Logits ``[B, T, V]``: ``E[tokens] sqrt(d) + P[:T]``, the layers, for pre-LN a final
  N, then ``x E^T`` (tied) or the output layer. ``positions``: a fixed ``[T, d]``
  table (sinusoidal); None: the learned ``p['positions']``."""
  embedding = np.asarray(p["embed"]["embedding"], np.float64)
  width = embedding.shape[1]
  table = p["positions"] if positions is None else positions
  x = embedding[tokens] * math.sqrt(width) + np.asarray(table, np.float64)[:tokens.shape[1]]
  for i in range(num_layers):
    x = transformer_block_ref(x, p[f"block_{i}"], num_heads, placement, norm)
  if placement == "pre":
    x = norm_train_ref(norm, x, p.get("final_norm", {}))
  return x @ embedding.T if tied else dense(x, p["output"])


def sinusoidal_ref(length, width):
  """``PE[t, 2i] = sin(t / 10000^(2i / d))``, ``PE[t, 2i + 1] = cos(t / 10000^(2i / d))``,
  entry by entry."""
  pe = np.zeros((length, width))
  for t in range(length):
    for j in range(width):
      angle = t / 10000 ** ((j - j % 2) / width)
      pe[t, j] = math.sin(angle) if j % 2 == 0 else math.cos(angle)
  return pe


# --- losses ---------------------------------------------------------------------------


def log_softmax(logits):
  z = np.asarray(logits, np.float64)
  z = z - z.max(-1, keepdims=True)
  return z - np.log(np.exp(z).sum(-1, keepdims=True))


def bernoulli_nll(logits, x):
  """-[x log sigmoid(l) + (1 - x) log(1 - sigmoid(l))], elementwise, in a form that
  stays finite for large |l|: log sigmoid(l) = -log1p(exp(-l))."""
  l = np.asarray(logits, np.float64)
  x = np.asarray(x, np.float64)
  log_p = -np.logaddexp(0.0, -l)
  log_not_p = -np.logaddexp(0.0, l)
  return -(x * log_p + (1 - x) * log_not_p)


def gaussian_kl(mu, log_sigma):
  """KL(N(mu, sigma^2) || N(0, 1)) summed over the last axis."""
  return 0.5 * np.sum(mu ** 2 + np.exp(2 * log_sigma) - 2 * log_sigma - 1, axis=-1)
