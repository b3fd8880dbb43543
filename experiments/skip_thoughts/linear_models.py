"""Many L2-regularised logistic regressions at once, in JAX: every fold and every value
of C of a cross-validated search in one batched solve, on the CPU or an accelerator.

Fit (g, c) -- training rows weighted by ``weights[:, g]``, strength ``C[c]`` -- solves

  minimise over W, b:  sum_i weights[i, g] * loss(targets[i], x_i W + b) + ||W||^2 / (2 C[c])

which is scikit-learn's ``LogisticRegression`` objective (``C * loss + ||W||^2 / 2``,
the same minimiser). ``loss``:

* ``binary``: one sigmoid per target column, targets the probability of class 1. One
  column is scikit-learn's binary logistic regression; K columns of one-hot targets
  are its one-vs-rest (liblinear) classifier.
* ``multinomial``: a softmax over the K columns, targets any distribution over them
  (one-hot for classification, soft for Tai et al.'s relatedness encoding); scikit-
  learn's multinomial ``lbfgs`` fit, sample weights included.

Also here, trained by Adam in rounds of epochs for the caller to stop early, the two
published relatedness regressions: Kiros et al.'s softmax by cross-entropy
(:func:`adam_softmax_rounds`) and SentEval's softmax by squared error
(:func:`softmax_mse_rounds`).

The intercept is unpenalised (scikit-learn's ``lbfgs``) or, with
``penalize_intercept``, the weight of a constant feature 1 penalised like the others
(liblinear, ``intercept_scaling=1``, the solver of the scikit-learn of 2015).

Why this is fast and still the same model: the features are centred (the unpenalised
intercept absorbs any shift) and rotated into the eigenbasis of their Gram matrix
(the penalty ||W||^2 is rotation-invariant), and the outputs into the eigenbasis of
the loss's curvature across them (W -> W Q leaves the penalty alone too). None of
this changes the minimiser, only the coordinates it is found in; there the Hessian
is close to diagonal, so L-BFGS with that diagonal as its initial inverse Hessian
converges in 5 to 30 iterations on the binary tasks' sentence vectors (scikit-learn's
lbfgs on the raw vectors takes 500 to 2,000) and in at most a few hundred on softmax
fits with weak regularisation. The logits move linearly along a search direction,
so each iteration costs two matrix products of the features with all fits' weights
(the direction's logits and the new gradient); the line search (safeguarded Newton
steps on the step length) works on those logits alone. Everything runs in float32
on the default device, to a relative gradient tolerance rather than an iteration cap.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax

LOSSES = ("binary", "multinomial")
#: Relative gradient tolerance: a fit stops when max |gradient| falls below TOLERANCE
#: times the largest value a gradient component can take (sum over the rows of the
#: largest |feature|: residuals are at most 1), or earlier when float32 allows no
#: further progress (no new smallest gradient for STALLED_ITERATIONS iterations); it
#: counts as converged below ACCEPTABLE. scikit-learn's default (tol=1e-4 on the
#: gradient of the mean loss) is about 1e-4 on this scale.
TOLERANCE = 1e-6
ACCEPTABLE = 1e-5
STALLED_ITERATIONS = 50
MAX_ITERATIONS = 2000
HISTORY = 10  # L-BFGS pairs kept.
LINE_SEARCH_STEPS = 2  # Newton steps on the step length per iteration.
_HIGHEST = jax.lax.Precision.HIGHEST  # No TF32 or bfloat16 passes on accelerators.


@dataclasses.dataclass(frozen=True)
class Design:
  """Features in the solver's coordinates: centred (or with a constant column) and
  rotated."""
  x: jax.Array  # [n, p] float32, p = d (+ 1 with a penalised intercept)
  rotation: jax.Array  # [p, p]
  eigenvalues: jax.Array  # [p] of the Gram matrix of x, ascending
  shift: np.ndarray  # [d] subtracted before rotating (zeros with a penalised intercept)
  penalize_intercept: bool

  @property
  def num_features(self) -> int:
    return self.rotation.shape[0] - int(self.penalize_intercept)


def design(features, *, penalize_intercept: bool = False) -> Design:
  """Centres (unpenalised intercept) or extends with a column of ones (penalised) the
  [n, d] ``features``, then rotates them into their Gram matrix's eigenbasis."""
  x = np.asarray(features, np.float64)
  if x.ndim != 2 or not len(x):
    raise ValueError(f"features must be a non-empty [n, d] array, got shape {x.shape}")
  if penalize_intercept:
    shift = np.zeros(x.shape[1])
    x = np.concatenate([x, np.ones((len(x), 1))], axis=1)
  else:
    shift = x.mean(axis=0)
    x = x - shift
  rotated, rotation, eigenvalues = _rotate(jnp.asarray(x, jnp.float32))
  return Design(rotated, rotation, eigenvalues, shift, penalize_intercept)


@jax.jit
def _rotate(x):
  eigenvalues, rotation = jnp.linalg.eigh(jnp.matmul(x.T, x, precision=_HIGHEST))
  return jnp.matmul(x, rotation, precision=_HIGHEST), rotation, jnp.maximum(eigenvalues, 0.0)


@dataclasses.dataclass(frozen=True)
class Solution:
  logits: np.ndarray  # [n, G, C, K] of every row of the design, training or not
  coef: np.ndarray  # [G, C, d, K] on the raw features
  intercept: np.ndarray  # [G, C, K]; -inf for a softmax class absent from a fit's rows
  iterations: int
  relative_gradient: np.ndarray  # [G, C]: max |gradient| over its largest possible value

  @property
  def converged(self) -> np.ndarray:
    """[G, C] bool: the relative gradient is at most ACCEPTABLE."""
    return self.relative_gradient <= ACCEPTABLE


def fit(design_: Design, targets, weights, inverse_c, *, loss: str,
        tolerance: float = TOLERANCE, max_iterations: int = MAX_ITERATIONS) -> Solution:
  """All G x C fits at once: ``targets`` [n, K], ``weights`` [n, G] (zero: not a
  training row of that fit), ``inverse_c`` [C] = 1 / C."""
  if loss not in LOSSES:
    raise ValueError(f"Unknown loss {loss!r}; valid: {', '.join(LOSSES)}")
  targets = jnp.asarray(targets, jnp.float32)
  weights = jnp.asarray(weights, jnp.float32)
  inverse_c = jnp.asarray(inverse_c, jnp.float32)
  x = design_.x
  if targets.ndim != 2 or weights.ndim != 2 or len(targets) != len(x) or len(weights) != len(x):
    raise ValueError(f"targets [n, K] and weights [n, G] must have the design's "
                     f"{len(x)} rows: {targets.shape}, {weights.shape}")
  rotation, curvature = _class_curvature(loss, np.asarray(targets), np.asarray(weights))
  # A softmax class with no mass among a fit's rows is left out of that fit (as
  # scikit-learn, which never sees it): its logit is -inf. Otherwise its unpenalised
  # intercept would head for -inf and the fit would never converge.
  absent = np.zeros((weights.shape[1], targets.shape[1]), np.float32)
  if loss == "multinomial":
    absent = (np.asarray(weights).T @ np.asarray(targets) <= 0).astype(np.float32)
  shape = (x.shape[1], weights.shape[1], len(inverse_c), targets.shape[1])
  # The start W = 0, b = 0 goes in as an argument: as constants, XLA would spend
  # seconds folding the first gradient at compile time.
  state = _solve(x, targets, weights, inverse_c, design_.eigenvalues,
                 jnp.asarray(rotation, jnp.float32), jnp.asarray(curvature, jnp.float32),
                 jnp.asarray(absent), jnp.zeros(shape), jnp.zeros(shape[1:]), loss=loss,
                 fit_bias=not design_.penalize_intercept, tolerance=tolerance,
                 max_iterations=max_iterations)
  w, b = np.asarray(state["w"], np.float64), np.asarray(state["b"], np.float64)
  coef = np.einsum("pq,qgck->gcpk", np.asarray(design_.rotation, np.float64), w)
  d = design_.num_features
  if design_.penalize_intercept:
    intercept = coef[:, :, d]
  else:
    intercept = b - np.einsum("d,gcdk->gck", design_.shift, coef)
  intercept = np.where(absent[:, None, :] > 0, -np.inf, intercept)
  logits = np.where(absent[None, :, None, :] > 0, -np.inf, _logits(x, state["w"], state["b"]))
  return Solution(logits, coef[:, :, :d], intercept,
                  int(state["iteration"]), np.asarray(state["relative_gradient"]))


# --- the solver -------------------------------------------------------------------------


def _class_curvature(loss: str, targets: np.ndarray, weights: np.ndarray):
  """(Q [K, K], a [K]): the loss's curvature across the K outputs at the optimum's
  mean prediction (the mean target, which an unpenalised intercept matches), as
  Q diag(a) Q^T. Binary: independent sigmoids, p(1 - p) each; multinomial: the
  softmax's diag(p) - p p^T. The penalty ||W||^2 is invariant under W -> W Q, so
  the preconditioner is diagonal in the features' and the outputs' eigenbases."""
  rows = weights.sum(axis=1)
  mean = (rows @ targets) / max(rows.sum(), 1e-12)
  if loss == "binary":  # Floored: a class absent from the rows still gets steps.
    return np.eye(len(mean)), np.maximum(mean * (1 - mean), 0.01)
  curvature, rotation = np.linalg.eigh(np.diag(mean) - np.outer(mean, mean))
  return rotation, np.maximum(curvature, 0.0)


def _logits(x, w, b):
  return jnp.einsum("np,pgck->ngck", x, w, precision=_HIGHEST) + b


def _dot(a, b):
  """Per-fit inner product of two (w [p, G, C, K], b [G, C, K]) pairs: [G, C]."""
  return jnp.sum(a[0] * b[0], axis=(0, 3)) + jnp.sum(a[1] * b[1], axis=-1)


def _line(loss: str, z, u, targets, weights):
  """Slope and curvature in t of the data term along z + t u: each [G, C]."""
  y = targets[:, None, None, :]
  if loss == "binary":
    p = jax.nn.sigmoid(z)
    slope = jnp.sum((p - y) * u, axis=-1)
    curve = jnp.sum(p * (1 - p) * u * u, axis=-1)
  else:
    p = jax.nn.softmax(z, axis=-1)
    slope = jnp.sum((p - y) * u, axis=-1)
    pu = jnp.sum(p * u, axis=-1)
    curve = jnp.sum(p * u * u, axis=-1) - pu * pu
  # Sums over the rows as products with the weights: XLA's CPU backend reduces a
  # leading axis several times slower than it multiplies.
  return tuple(jnp.einsum("ng,ngc->gc", weights, q, precision=_HIGHEST) for q in (slope, curve))


def _gradient(loss, x, z, w, targets, weights, inverse_c, fit_bias):
  y = targets[:, None, None, :]
  p = jax.nn.sigmoid(z) if loss == "binary" else jax.nn.softmax(z, axis=-1)
  residual = weights[:, :, None, None] * (p - y)
  gw = jnp.einsum("np,ngck->pgck", x, residual, precision=_HIGHEST)
  gw = gw + inverse_c[None, None, :, None] * w
  gb = (jnp.einsum("ng,ngck->gck", weights, p - y, precision=_HIGHEST) if fit_bias
        else jnp.zeros(w.shape[1:]))
  return gw, gb


def _line_search(loss, z, u, targets, weights, reg, slope0, done):
  """Step length along u minimising the objective, by safeguarded Newton steps from
  t = 1 inside a bracket [lo, hi] of the minimiser (the objective is strictly convex
  in t). ``reg(t)`` gives the penalty's (slope, curve) at t, ``slope0`` the
  objective's slope at t = 0. Returns the evaluated step with the smallest |slope|,
  or 0 if u is not a descent direction (possible only at float32's precision)."""
  best_t, best_slope = jnp.ones(done.shape), jnp.full(done.shape, jnp.inf)
  lo, hi = jnp.zeros(done.shape), jnp.full(done.shape, jnp.inf)
  t = jnp.ones(done.shape)
  for _ in range(LINE_SEARCH_STEPS):
    slope, curve = _line(loss, z + t[None, :, :, None] * u, u, targets, weights)
    reg_slope, reg_curve = reg(t)
    slope, curve = slope + reg_slope, curve + reg_curve
    better = jnp.abs(slope) < best_slope
    best_t, best_slope = jnp.where(better, t, best_t), jnp.where(better, jnp.abs(slope), best_slope)
    lo, hi = jnp.where(slope < 0, t, lo), jnp.where(slope < 0, hi, t)
    newton = t - slope / jnp.where(curve > 0, curve, 1.0)
    inside = (newton > lo) & (newton < hi) & (curve > 0)
    fallback = jnp.where(jnp.isinf(hi), 2.0 * jnp.maximum(t, lo), 0.5 * (lo + hi))
    t = jnp.where(inside, newton, fallback)
  return jnp.where(done | (slope0 >= 0), 0.0, best_t)


@functools.partial(jax.jit, static_argnames=("loss", "fit_bias", "tolerance", "max_iterations"))
def _solve(x, targets, weights, inverse_c, eigenvalues, class_rotation, class_curvature, absent,
           w, b, *, loss, fit_bias, tolerance, max_iterations):
  n = x.shape[0]
  num_fits, num_c, _ = w.shape[1:]
  # The initial inverse Hessian: diagonal in the features' eigenbasis (x is rotated
  # into it) times the outputs' (class_rotation), where the Hessian at the mean
  # prediction is curvature x eigenvalue x the fit's share of the rows + 1 / C.
  share = jnp.sum(weights, axis=0) / n  # [G]
  h_w = 1.0 / (eigenvalues[:, None, None, None] * share[None, :, None, None]
               * class_curvature + inverse_c[None, None, :, None])  # [p, G, C, K]
  bias_curvature = class_curvature * (share * n)[:, None, None]  # [G, 1, K]
  # The softmax's flat direction (all intercepts up by one) has no curvature: no step.
  h_b = jnp.where(bias_curvature > 1e-6 * jnp.max(bias_curvature),
                  1.0 / jnp.maximum(bias_curvature, 1e-30), 0.0) * jnp.ones((1, num_c, 1))
  if not fit_bias:
    h_b = jnp.zeros_like(h_b)

  def precondition(vw, vb):
    to_eigen = lambda v: jnp.matmul(v, class_rotation, precision=_HIGHEST)
    from_eigen = lambda v: jnp.matmul(v, class_rotation.T, precision=_HIGHEST)
    return from_eigen(h_w * to_eigen(vw)), from_eigen(h_b * to_eigen(vb))

  # Absent classes: a logit so low that their probability is 0 (finite: no inf - inf).
  z = _logits(x, w, b) - 1e9 * absent[None, :, None, :]
  gw, gb = _gradient(loss, x, z, w, targets, weights, inverse_c, fit_bias)
  gmax = lambda gw, gb: jnp.maximum(jnp.max(jnp.abs(gw), axis=(0, 3)),
                                    jnp.max(jnp.abs(gb), axis=-1))
  # The scale of the tolerance: the largest a gradient component can be (every
  # residual 1 in magnitude, every sign aligned). Relative to the gradient at the
  # start instead, features that barely separate the classes (a small start)
  # would ask for more than float32's sums can deliver.
  scale = jnp.maximum(jnp.max(jnp.einsum("ng,np->gp", weights, jnp.abs(x), precision=_HIGHEST),
                           axis=1), jnp.sum(weights, axis=0))[:, None] * jnp.ones((1, num_c))
  history = jnp.zeros((HISTORY,) + w.shape), jnp.zeros((HISTORY,) + b.shape)
  state = {"w": w, "b": b, "z": z, "gw": gw, "gb": gb, "s": history, "y": history,
           "rho": jnp.zeros((HISTORY, num_fits, num_c)), "gamma": jnp.ones((num_fits, num_c)),
           "count": jnp.int32(0), "iteration": jnp.int32(0), "scale": scale,
           "best": gmax(gw, gb), "since_best": jnp.zeros(scale.shape, jnp.int32),
           "done": gmax(gw, gb) <= tolerance * scale}

  def direction(st):
    """L-BFGS two-loop recursion, per fit, with the diagonal initial inverse Hessian."""
    kept = jnp.minimum(st["count"], HISTORY)
    fits = lambda a, i: (a[0][i], a[1][i])
    scale_w = lambda c, v: c[None, :, :, None] * v
    scale_b = lambda c, v: c[:, :, None] * v

    def first(j, carry):
      qw, qb, alphas = carry
      i = (st["count"] - 1 - j) % HISTORY
      s, y = fits(st["s"], i), fits(st["y"], i)
      alpha = jnp.where(j < kept, st["rho"][i] * _dot(s, (qw, qb)), 0.0)
      return qw - scale_w(alpha, y[0]), qb - scale_b(alpha, y[1]), alphas.at[i].set(alpha)

    qw, qb, alphas = jax.lax.fori_loop(
        0, HISTORY, first, (st["gw"], st["gb"], jnp.zeros((HISTORY, num_fits, num_c))))
    rw, rb = precondition(qw, qb)
    rw, rb = scale_w(st["gamma"], rw), scale_b(st["gamma"], rb)

    def second(j, carry):
      rw, rb = carry
      i = (st["count"] - kept + j) % HISTORY
      s, y = fits(st["s"], i), fits(st["y"], i)
      beta = st["rho"][i] * _dot(y, (rw, rb))
      coef = jnp.where(j < kept, alphas[i] - beta, 0.0)
      return rw + scale_w(coef, s[0]), rb + scale_b(coef, s[1])

    rw, rb = jax.lax.fori_loop(0, HISTORY, second, (rw, rb))
    live = ~st["done"]
    return -scale_w(live, rw), -scale_b(live, rb)

  def step(st):
    dw, db = direction(st)
    u = _logits(x, dw, db)
    wd, dd = _dot((st["w"], 0 * db), (dw, db)), _dot((dw, 0 * db), (dw, db))
    reg = lambda t: (inverse_c * (wd + t * dd), inverse_c * dd)
    slope0 = _dot((st["gw"], st["gb"]), (dw, db))
    t = _line_search(loss, st["z"], u, targets, weights, reg, slope0, st["done"])
    sw, sb = t[None, :, :, None] * dw, t[:, :, None] * db
    w, b, z = st["w"] + sw, st["b"] + sb, st["z"] + t[None, :, :, None] * u
    gw, gb = _gradient(loss, x, z, w, targets, weights, inverse_c, fit_bias)
    yw, yb = gw - st["gw"], gb - st["gb"]
    sy = _dot((sw, sb), (yw, yb))
    usable = sy > 1e-12 * jnp.sqrt(_dot((sw, sb), (sw, sb)) * _dot((yw, yb), (yw, yb)))
    i = st["count"] % HISTORY
    yhy = _dot((yw, yb), precondition(yw, yb))
    new = dict(st, w=w, b=b, z=z, gw=gw, gb=gb,
               s=(st["s"][0].at[i].set(sw), st["s"][1].at[i].set(sb)),
               y=(st["y"][0].at[i].set(yw), st["y"][1].at[i].set(yb)),
               rho=st["rho"].at[i].set(jnp.where(usable, 1.0 / jnp.where(usable, sy, 1.0), 0.0)),
               gamma=jnp.where(usable & (yhy > 0), sy / jnp.where(yhy > 0, yhy, 1.0), st["gamma"]),
               count=st["count"] + 1, iteration=st["iteration"] + 1)
    # At float32's precision the gradient stops shrinking: then no more iterations.
    g = gmax(gw, gb)
    new["best"] = jnp.minimum(g, st["best"])
    new["since_best"] = jnp.where(g < st["best"], 0, st["since_best"] + 1)
    new["done"] = (st["done"] | (g <= tolerance * st["scale"])
                   | (new["since_best"] >= STALLED_ITERATIONS))
    return new

  def going(st):
    return (st["iteration"] < max_iterations) & ~jnp.all(st["done"])

  state = jax.lax.while_loop(going, step, state)
  relative = gmax(state["gw"], state["gb"]) / jnp.where(state["scale"] > 0, state["scale"], 1.0)
  return {"w": state["w"], "b": state["b"], "iteration": state["iteration"],
          "relative_gradient": relative}


# --- softmax regression trained by Adam, as Kiros et al.'s eval_sick.py -------------------


def softmax_logits(params, x) -> np.ndarray:
  w, b = params
  return np.asarray(x, np.float64) @ w + b


def adam_softmax_rounds(x, targets, *, seed: int, learning_rate: float, batch_size: int,
                        epochs_per_round: int):
  """Yields the (w [d, K], b [K]) of a softmax regression on (soft) ``targets``
  after every ``epochs_per_round`` epochs of Adam, for ever: Keras's ``Dense`` +
  softmax of 2015 (Glorot-uniform w, zero b; the batch-mean cross-entropy; minibatches
  in the rows' order, the last one short; Adam with bias correction and Keras's
  epsilon placement). The caller decides when to stop."""
  x = np.asarray(x, np.float32)
  targets = np.asarray(targets, np.float32)
  n, d = x.shape
  k = targets.shape[1]
  batches = -(-n // batch_size)
  pad = batches * batch_size - n
  shape = lambda a: np.pad(a, [(0, pad)] + [(0, 0)] * (a.ndim - 1)).reshape(
      (batches, batch_size) + a.shape[1:])
  data = (jnp.asarray(shape(x)), jnp.asarray(shape(targets)),
          jnp.asarray(shape(np.ones(n, np.float32))))
  limit = np.sqrt(6.0 / (d + k))
  w = jax.random.uniform(jax.random.key(seed), (d, k), jnp.float32, -limit, limit)
  params = (w, jnp.zeros(k))
  zeros = jax.tree.map(jnp.zeros_like, params)
  state = (params, zeros, zeros, jnp.int32(0))
  while True:
    state = _adam_epochs(state, data, learning_rate=learning_rate, epochs=epochs_per_round)
    yield tuple(np.asarray(p, np.float64) for p in state[0])


@functools.partial(jax.jit, static_argnames=("learning_rate", "epochs"))
def _adam_epochs(state, data, *, learning_rate, epochs):
  beta1, beta2, eps = 0.9, 0.999, 1e-8

  def loss(params, x, y, mask):
    logp = jax.nn.log_softmax(jnp.dot(x, params[0], precision=_HIGHEST) + params[1])
    return jnp.sum(mask * -jnp.sum(y * logp, axis=-1)) / jnp.sum(mask)

  def update(state, batch):
    params, m, v, t = state
    grads = jax.grad(loss)(params, *batch)
    t = t + 1
    m = jax.tree.map(lambda m, g: beta1 * m + (1 - beta1) * g, m, grads)
    v = jax.tree.map(lambda v, g: beta2 * v + (1 - beta2) * g * g, v, grads)
    rate = learning_rate * jnp.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
    params = jax.tree.map(lambda p, m, v: p - rate * m / (jnp.sqrt(v) + eps), params, m, v)
    return (params, m, v, t), None

  epoch = lambda _, state: jax.lax.scan(update, state, data)[0]
  return jax.lax.fori_loop(0, epochs, epoch, state)


# --- SentEval's relatedness model: a linear softmax fit by the squared error ----------------


def softmax_probabilities(params, x) -> np.ndarray:
  logits = softmax_logits(params, x)
  p = np.exp(logits - logits.max(-1, keepdims=True))
  return p / p.sum(-1, keepdims=True)


def softmax_mse_rounds(x, targets, *, seed: int, learning_rate: float, batch_size: int,
                       epochs_per_round: int):
  """Yields the (w [d, K], b [K]) of SentEval's RelatednessPytorch after every
  ``epochs_per_round`` epochs, for ever: ``softmax(x w + b)`` fit to the target
  distributions by the squared error summed over the batch and the classes, Adam
  (PyTorch's defaults: beta 0.9, 0.999, eps 1e-8; no weight decay), minibatches of
  ``batch_size`` in a new order every epoch, NumPy's ``permutation`` of the rows
  from ``RandomState(seed)`` (SentEval seeds NumPy's global generator with its seed
  and draws nothing else from it), the last batch short. w and b start from
  PyTorch's ``nn.Linear`` distribution, U(+-1/sqrt(d)), drawn by JAX (PyTorch's own
  generator is not reproduced). The caller decides when to stop."""
  x = jnp.asarray(x, jnp.float32)
  targets = jnp.asarray(targets, jnp.float32)
  n, d = x.shape
  k = targets.shape[1]
  batches = -(-n // batch_size)
  order = np.random.RandomState(seed)
  bound = 1.0 / np.sqrt(d)
  w_key, b_key = jax.random.split(jax.random.key(seed))
  params = (jax.random.uniform(w_key, (d, k), jnp.float32, -bound, bound),
            jax.random.uniform(b_key, (k,), jnp.float32, -bound, bound))
  state = (params, _pytorch_adam(learning_rate).init(params))
  padding = batches * batch_size - n
  while True:
    # Padded rows point at row 0 with weight 0: every batch has one shape.
    rows = np.stack([np.pad(order.permutation(n), (0, padding))
                     for _ in range(epochs_per_round)]).reshape(-1, batches, batch_size)
    weight = np.broadcast_to(np.pad(np.ones(n, np.float32), (0, padding)),
                             (epochs_per_round, batches * batch_size))
    state = _mse_epochs(state, x, targets, jnp.asarray(rows),
                        jnp.asarray(weight.reshape(rows.shape)), learning_rate=learning_rate)
    yield tuple(np.asarray(p, np.float64) for p in state[0])


def _pytorch_adam(learning_rate: float) -> optax.GradientTransformation:
  return optax.adam(learning_rate, b1=0.9, b2=0.999, eps=1e-8)


@functools.partial(jax.jit, static_argnames=("learning_rate",))
def _mse_epochs(state, x, targets, rows, weight, *, learning_rate):
  optimizer = _pytorch_adam(learning_rate)

  def loss(params, rows, weight):
    p = jax.nn.softmax(jnp.dot(x[rows], params[0], precision=_HIGHEST) + params[1])
    return jnp.sum(weight[:, None] * (p - targets[rows]) ** 2)

  def update(state, batch):
    params, opt_state = state
    grads = jax.grad(loss)(params, *batch)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), None

  epoch = lambda state, batches: (jax.lax.scan(update, state, batches)[0], None)
  return jax.lax.scan(epoch, state, (rows, weight))[0]
