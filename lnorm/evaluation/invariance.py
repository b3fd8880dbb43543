"""LN paper Table 1, measured: which transformations leave a normalized layer's output
unchanged under BN, WN and LN, and under RMSNorm and pRMSNorm (the rows the RMSNorm
paper, Zhang & Sennrich 2019, adds to the same table). LN's later successors, DyT,
ScaleNorm and LayerNorm-simple, get their rows measured too; no paper publishes
them, so they are reported as measured, never checked against an expectation.

Following sec. 5.1, a layer computes summed inputs ``a = W x`` (W is H x D, row i is
unit i's incoming weights w_i) and ``h = f(g / sigma * (a - mu) + b)``, with mu and
sigma from the batch (BN, training mode), from the layer (LN), mu = 0 and sigma the
layer's root mean square (RMSNorm; pRMSNorm's from the first 6.25% of the units, at
least one; ScaleNorm's ||a|| with one scalar gain; LayerNorm-simple's as LN's with
g = 1, b = 0), or mu = 0 and sigma = ||w_i|| (WN, whose weights are ``v`` in
``w = g v / ||v||``, with g held fixed). DyT has no mu or sigma: ``h = f(g *
tanh(alpha a) + b)``, alpha at its initial 0.5. f is the identity here: a function applied after the normalization cannot
restore an invariance the normalized inputs lack, nor break one they have. The
transformations, on a batch X of N examples:

- weight matrix re-scaling:   W -> delta W
- weight matrix re-centering: W -> delta W + 1 gamma^T (every row shifted by gamma)
- weight vector re-scaling:   w_i -> delta w_i for one unit i
- dataset re-scaling:         x_n -> delta x_n for every example
- dataset re-centering:       x_n -> x_n + c for every example
- single case re-scaling:     x_0 -> delta x_0 for one example only

For each, the largest absolute change of any output over the whole batch, relative
to the largest output before the transformation, is recorded: below
``INVARIANT_TOL`` counts as invariant, above ``CHANGED_TOL`` as not, in between as
undecided (which never matches the paper).

The papers' invariances hold up to eps. pRMSNorm shows what that means: its
statistic reads few units (6.25% of a layer's), and for an example whose few summed
inputs are all near 0 the estimated mean square is not large against eps, so
re-scaling changes the output noticeably. With 12 units (one read) that happened
in 6 of 10 random layers; the layer here has 64 units (four read), where it does not.

Any other normalizer, your own included (``module:attribute``, docs/extending.md),
gets its row measured the same way with ``lnorm invariance --norms my_norms:my_norm``.

    lnorm invariance [--seed 0] [--norms NAME,...]
"""

from __future__ import annotations

from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from lnorm.normalization import BatchNorm, WeightNormDense, make_norm

NORMS = ("bn", "wn", "ln", "rms", "prms")
#: Normalizers measured without a published row to compare with (unlike
#: lnorm.analysis.specs.SUCCESSORS, pRMSNorm is not here: its row is the RMSNorm paper's).
UNPUBLISHED = ("dyt", "scalenorm", "ln_simple")
TRANSFORMATIONS = (
    "weight matrix re-scaling",
    "weight matrix re-centering",
    "weight vector re-scaling",
    "dataset re-scaling",
    "dataset re-centering",
    "single case re-scaling",
)

#: LN paper Table 1, and the RMSNorm paper's Table 1 for rms and prms: True = invariant.
PAPER_TABLE: dict[str, dict[str, bool]] = {
    "bn": dict(zip(TRANSFORMATIONS, (True, False, True, True, True, False))),
    "wn": dict(zip(TRANSFORMATIONS, (True, False, True, False, False, False))),
    "ln": dict(zip(TRANSFORMATIONS, (True, True, False, True, False, True))),
    "rms": dict(zip(TRANSFORMATIONS, (True, False, False, True, False, True))),
    "prms": dict(zip(TRANSFORMATIONS, (True, False, False, True, False, True))),
}

#: Changes relative to the largest output: float32 rounding and eps (1e-5 against
#: variances of order 1) move outputs by ~1e-5 of their scale, a broken invariance by
#: a large share of it.
INVARIANT_TOL = 1e-3
CHANGED_TOL = 1e-2

# A (N, D) batch through an (H, D) weight matrix; H = 64 so that pRMSNorm reads 4 units.
_N, _D, _H = 16, 24, 64
_DELTA = 3.0


def _layer(norm: str, gain: np.ndarray, bias: np.ndarray) -> Callable:
  """(W of shape (H, D), X of shape (N, D)) -> normalized summed inputs (N, H)."""
  g = jnp.asarray(gain, jnp.float32)
  b = jnp.asarray(bias, jnp.float32)
  if norm == "wn":
    module = WeightNormDense(_H)

    def apply(w, x):
      # The kernel is v^T; g is fixed, so only the direction of each v_i matters.
      return module.apply({"params": {"kernel": w.T, "scale": g, "bias": b}}, x)
  else:
    # BN with its default options; the others as the registry builds them, their
    # per-unit gain and bias (where they have them) set to the layer's g and b, any
    # other parameter (DyT's alpha, ScaleNorm's scalar gain) at its initial value.
    module = BatchNorm() if norm == "bn" else make_norm(norm).layer()
    initial = module.init(jax.random.key(0), jnp.zeros((_N, _H)), train=True)
    params = {name: {"scale": g, "bias": b}.get(name, value) if jnp.shape(value) == (_H,)
              else value for name, value in initial.get("params", {}).items()}

    def apply(w, x):
      # BN in training mode: the statistics of the batch at hand, as in Table 1.
      y = module.apply({"params": params,
                        "batch_stats": {"mean": jnp.zeros(_H), "var": jnp.ones(_H)}},
                       x @ w.T, train=True, mutable=["batch_stats"])[0]
      return y
  return jax.jit(apply)


def _transformations(rng: np.random.Generator) -> dict[str, Callable]:
  """name -> (W, X) -> (W', X')."""
  gamma = rng.normal(size=(1, _D)).astype(np.float32)
  c = rng.normal(size=(1, _D)).astype(np.float32) * 2.0
  ones_h = np.ones((_H, 1), np.float32)
  unit = np.ones((_H, 1), np.float32)
  unit[0] = _DELTA
  case = np.ones((_N, 1), np.float32)
  case[0] = _DELTA
  return {
      "weight matrix re-scaling": lambda w, x: (_DELTA * w, x),
      "weight matrix re-centering": lambda w, x: (_DELTA * w + ones_h @ gamma, x),
      "weight vector re-scaling": lambda w, x: (unit * w, x),
      "dataset re-scaling": lambda w, x: (w, _DELTA * x),
      "dataset re-centering": lambda w, x: (w, x + c),
      "single case re-scaling": lambda w, x: (w, case * x),
  }


def measure_invariance_table(seed: int = 0,
                             more: Sequence[str] = ()) -> dict[str, dict[str, float]]:
  """norm -> transformation -> largest absolute change of the layer's output,
  relative to the largest absolute output before the transformation; ``more``
  normalizers (registered names or import paths) are measured after the others."""
  rng = np.random.default_rng(seed)
  w = rng.normal(size=(_H, _D)).astype(np.float32) / np.sqrt(_D)
  x = (rng.normal(size=(_N, _D)) + 0.5).astype(np.float32)
  gain = (1.0 + 0.2 * rng.normal(size=(_H,))).astype(np.float32)
  bias = (0.2 * rng.normal(size=(_H,))).astype(np.float32)
  transforms = _transformations(rng)
  table = {}
  for norm in dict.fromkeys(NORMS + UNPUBLISHED + tuple(more)):
    layer = _layer(norm, gain, bias)
    before = np.asarray(layer(jnp.asarray(w), jnp.asarray(x)))
    scale = float(np.max(np.abs(before)))
    table[norm] = {}
    for name, transform in transforms.items():
      w2, x2 = transform(w, x)
      after = np.asarray(layer(jnp.asarray(w2), jnp.asarray(x2)))
      table[norm][name] = float(np.max(np.abs(after - before))) / scale
  return table


def classify(change: float) -> bool | None:
  """True = invariant, False = not, None = between the two tolerances."""
  if change < INVARIANT_TOL:
    return True
  if change > CHANGED_TOL:
    return False
  return None


def mismatches(table: dict[str, dict[str, float]]) -> list[tuple[str, str]]:
  """(norm, transformation) pairs where the measurement disagrees with the paper."""
  return [(norm, name) for norm in PAPER_TABLE for name in TRANSFORMATIONS
          if classify(table[norm][name]) is not PAPER_TABLE[norm][name]]


def format_table(table: dict[str, dict[str, float]]) -> str:
  """One line per transformation: each norm's largest output change, its verdict, and
  whether it matches the paper's Table 1."""
  word = {True: "invariant", False: "changes", None: "undecided"}
  lines = [f"{'transformation':28s}" + "".join(f"{n.upper():>26s}" for n in NORMS)]
  for name in TRANSFORMATIONS:
    cells = []
    for norm in NORMS:
      verdict = classify(table[norm][name])
      ok = "ok" if verdict is PAPER_TABLE[norm][name] else "MISMATCH"
      cells.append(f"{table[norm][name]:9.1e} {word[verdict]:>9s} {ok:>4s}")
    lines.append(f"{name:28s}" + "".join(f"{c:>26s}" for c in cells))
  bad = mismatches(table)
  lines.append(f"max |output change| / max |output| per cell; invariant < {INVARIANT_TOL:g}, "
               f"changes > {CHANGED_TOL:g}. "
               + ("Matches LN paper Table 1 and the RMSNorm paper's rows." if not bad else
                  f"{len(bad)} cell(s) differ from the papers' Table 1: {bad}"))
  for title, norms in (
      ("LN's successors, measured (no published row to compare with):",
       [n for n in UNPUBLISHED if n in table]),
      ("Asked for with --norms, measured (no published row to compare with):",
       [n for n in table if n not in NORMS + UNPUBLISHED])):
    if norms:
      lines += ["", title, _measured_rows(table, norms, word)]
  return "\n".join(lines)


def _measured_rows(table, norms: Sequence[str], word) -> str:
  """Rows of changes and verdicts for ``norms``, with no paper to compare with; a
  name wider than its column (an import path) gets a wider column."""
  width = max(21, *(len(n) + 2 for n in norms))
  lines = [f"{'transformation':28s}" + "".join(
      f"{(n.upper() if n in UNPUBLISHED else n):>{width}s}" for n in norms)]
  for name in TRANSFORMATIONS:
    lines.append(f"{name:28s}" + "".join(
        f"{table[n][name]:{width - 10}.1e} {word[classify(table[n][name])]:>9s}"
        for n in norms))
  return "\n".join(lines)
