"""Times LN, RMSNorm, BN and BLN forward+backward against flax's LayerNorm and a floor.

Every contender is jitted and differentiated with respect to its input and its
parameters (gain and bias) through the sum of its output weighted by a fixed random
cotangent, so the backward pass cannot be simplified away. Compilation and a warm-up
call are excluded; each figure is the median of ``--repeats`` timed calls, each ended
with ``block_until_ready``, the contenders interleaved round by round.

The floor is the fwd+bwd of ``x * w + b`` on the same array: it reads x and the
cotangent and writes dx, the least memory traffic any normalizer's fwd+bwd can have
(a normalizer also has to reduce over rows, which the floor does not).

    python scripts/bench_norms.py                # (4096, 4096) float32
    python scripts/bench_norms.py --shape 1024 1024 --repeats 20
    python scripts/bench_norms.py --json perf/norms.json   # also a machine-readable record

The machine may be shared with other processes: run it a few times and look at the
spread before reading much into a ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from lnorm.normalization import functional as F
from lnorm.normalization.modules import BLN_OPTIONS
from lnorm.training import process
from lnorm.training import throughput


def _contenders(d: int) -> dict[str, tuple[Callable, dict]]:
  """name -> (f(params, x) -> y, params)."""
  ones = jnp.ones((d,), jnp.float32)
  zeros = jnp.zeros((d,), jnp.float32)
  gain_bias = {"scale": ones, "bias": zeros}

  def elementwise(p, x):
    return x * p["scale"] + p["bias"]

  def ln(p, x):
    return F.layer_norm(x, p["scale"], p["bias"], axes=-1, eps=1e-5)

  # RMSNorm as the experiments' layers use it: a gain and the layer's bias after it.
  def rms(p, x):
    return F.rms_norm(x, p["scale"], p["bias"], axes=-1, eps=1e-5)

  def prms(p, x):
    return F.rms_norm(x, p["scale"], p["bias"], axes=-1, eps=1e-5, partial=0.0625)

  def bn(p, x):
    mean, var = F.batch_moments(x, 0)
    return F.batch_norm(x, p["scale"], p["bias"], mean=mean, var=var, eps=1e-5)

  def bln(p, x):
    stats = F.bln_statistics(x, batch_axes=(0,), feature_axes=(-1,))
    return F.batch_layer_norm(
        x, p["scale"], p["bias"], batch_mean=stats["batch_mean"],
        batch_var=stats["batch_var"], feature_mean=stats["feature_mean"],
        feature_var=stats["feature_var"], m=stats["m"], feature_size=d,
        eps=BLN_OPTIONS["eps"], mix_eps=BLN_OPTIONS["mix_eps"])

  flax_ln = nn.LayerNorm(epsilon=1e-5)
  flax_params = flax_ln.init(jax.random.key(0), jnp.zeros((1, d)))

  def flax_layernorm(p, x):
    return flax_ln.apply(p, x)

  return {
      "elementwise_floor": (elementwise, gain_bias),
      "flax_layernorm": (flax_layernorm, flax_params),
      "ln": (ln, gain_bias),
      "bn": (bn, gain_bias),
      "bln": (bln, gain_bias),
      "rms": (rms, gain_bias),
      "prms": (prms, gain_bias),
  }


def _fwd_bwd(f: Callable) -> Callable:
  """Jitted (params, x, cotangent) -> (y, d params, d x)."""

  def step(p, x, ct):
    y, vjp = jax.vjp(f, p, x)
    dp, dx = vjp(ct)
    return y, dp, dx

  return jax.jit(step)


def time_calls(calls: dict[str, tuple[Callable, tuple]], repeats: int) -> dict[str, float]:
  """Median wall time in ms of each ``fn(*args)``, compile and one warm-up excluded.

  The contenders are timed in interleaved rounds, so that load from other processes
  on a shared machine falls on all of them alike rather than on whichever ran then.
  """
  for fn, args in calls.values():
    jax.block_until_ready(fn(*args))
    jax.block_until_ready(fn(*args))
  times = {name: [] for name in calls}
  for _ in range(repeats):
    for name, (fn, args) in calls.items():
      start = time.perf_counter()
      jax.block_until_ready(fn(*args))
      times[name].append((time.perf_counter() - start) * 1e3)
  return {name: statistics.median(t) for name, t in times.items()}


def run(shape=(4096, 4096), repeats: int = 10, seed: int = 0) -> dict[str, float]:
  kx, kc = jax.random.split(jax.random.key(seed))
  x = jax.random.normal(kx, shape, jnp.float32) * 3.0 + 1.0
  ct = jax.random.normal(kc, shape, jnp.float32)
  calls = {name: (_fwd_bwd(f), (p, x, ct)) for name, (f, p) in _contenders(shape[-1]).items()}
  return time_calls(calls, repeats)


RATIOS = (("ln", "elementwise_floor"), ("bn", "elementwise_floor"),
          ("bln", "elementwise_floor"), ("flax_layernorm", "elementwise_floor"),
          ("ln", "flax_layernorm"), ("rms", "ln"), ("prms", "ln"),
          ("rms", "elementwise_floor"))


def ratios(ms: dict[str, float]) -> list[dict]:
  """The reported ratios of medians, as the ``--json`` record holds them."""
  return [{"name": f"{a} / {b}", "numerator": a, "denominator": b, "value": ms[a] / ms[b]}
          for a, b in RATIOS]


def report(ms: dict[str, float]) -> str:
  lines = [f"{name:>18s}: {t:8.2f} ms" for name, t in ms.items()]
  for r in ratios(ms):
    lines.append(f"{r['name']:>34s}: {r['value']:.2f}x")
  return "\n".join(lines)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--shape", type=int, nargs=2, default=(4096, 4096))
  parser.add_argument("--repeats", type=int, default=10)
  parser.add_argument("--seed", type=int, default=0)
  throughput.add_json_flag(parser)
  args = parser.parse_args(argv)
  process.set_up()  # As `lnorm train` runs: one XLA:CPU thread ($PJRT_NPROC), freed memory kept.
  print(f"backend={jax.default_backend()} devices={jax.devices()} shape={tuple(args.shape)}"
        f" float32, fwd+bwd (grads wrt input and params), median of {args.repeats}")
  ms = run(tuple(args.shape), args.repeats, args.seed)
  print(report(ms))
  if args.json:
    rows = [{"name": name, "median_ms": t} for name, t in ms.items()]
    throughput.write_json(args.json, throughput.bench_record(args, rows, ratios(ms)))
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
