"""Optimizers by name, with the gradient clipping the reference codes used."""

from __future__ import annotations

import fnmatch
import functools
import types
from typing import Any, Callable, Mapping, NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import optax

from lnorm.errors import ConfigError


def scale_by_adam_theano(b1: float = 0.9, b2: float = 0.999,
                         eps: float = 1e-8) -> optax.GradientTransformation:
  """The Adam of the skip-thoughts and order-embeddings authors' Theano code
  (``optim.py`` of ryankiros/skip-thoughts and of ivendrov/order-embedding), whose
  bias correction has, in effect, no effect.

  With the moments of a standard Adam, ``m_t = b1 m + (1 - b1) g`` and ``v_t = b2 v +
  (1 - b2) g^2``, its step at update t (from 1) is

    ``step_t = sqrt(1 - (1 - b2)^t) / (1 - (1 - b1)^t) * m_t / (sqrt(v_t) + eps)``

  (times the learning rate): their code names the complements ``1 - b1 = 0.1`` and
  ``1 - b2 = 0.001`` b1 and b2 and raises those to the power t, where Adam raises 0.9
  and 0.999. The factor is 1.11 at t = 1, 1.01 at t = 2 and 1 to float precision from
  t = 4 on: ``m_t`` and ``v_t``, biased towards zero, go uncorrected. For any gradient
  sequence the step is therefore a standard Adam's (with ``eps / sqrt(1 - b2^t)``)
  times ``(1 - b1^t) / sqrt(1 - b2^t)`` times that factor. At b1 = 0.9, b2 = 0.999:
  3.5x at t = 1, 5.8x at t = 5, 6.6x at its peak near t = 12, 4.5x at t = 50, 3.2x at
  t = 100, 2.0x at t = 300, 1.26x at t = 1,000, 1.03x at t = 3,000, within 0.3% of a
  standard Adam from t = 5,000 on.
  """

  def init_fn(params):
    zeros = lambda p: jnp.zeros_like(p, dtype=jnp.float32)
    return optax.ScaleByAdamState(count=jnp.zeros([], jnp.int32),
                                  mu=jax.tree.map(zeros, params),
                                  nu=jax.tree.map(zeros, params))

  def update_fn(updates, state, params=None):
    del params
    mu = jax.tree.map(lambda m, g: b1 * m + (1.0 - b1) * g.astype(jnp.float32),
                      state.mu, updates)
    nu = jax.tree.map(lambda v, g: b2 * v + (1.0 - b2) * jnp.square(g.astype(jnp.float32)),
                      state.nu, updates)
    count = optax.safe_increment(state.count)
    t = count.astype(jnp.float32)
    factor = jnp.sqrt(1.0 - (1.0 - b2) ** t) / (1.0 - (1.0 - b1) ** t)
    steps = jax.tree.map(lambda m, v, g: (factor * m / (jnp.sqrt(v) + eps)).astype(g.dtype),
                         mu, nu, updates)
    return steps, optax.ScaleByAdamState(count=count, mu=mu, nu=nu)

  return optax.GradientTransformation(init_fn, update_fn)


def adam_theano(learning_rate: float, b1: float = 0.9, b2: float = 0.999,
                eps: float = 1e-8) -> optax.GradientTransformation:
  """:func:`scale_by_adam_theano`, then the learning rate (descending)."""
  return optax.chain(scale_by_adam_theano(b1, b2, eps),
                     optax.scale_by_learning_rate(learning_rate))


OPTIMIZERS = {
    "adam": lambda c: optax.adam(c.learning_rate, b1=c.get("b1", 0.9), b2=c.get("b2", 0.999),
                                 eps=c.get("eps", 1e-8)),
    "adamw": lambda c: optax.adamw(c.learning_rate, weight_decay=c.get("weight_decay", 1e-4)),
    "sgd": lambda c: optax.sgd(c.learning_rate),
    "momentum": lambda c: optax.sgd(c.learning_rate, momentum=c.get("momentum", 0.9),
                                    nesterov=c.get("nesterov", False)),
    "rmsprop": lambda c: optax.rmsprop(c.learning_rate),
    "adam_theano": lambda c: adam_theano(c.learning_rate, b1=c.get("b1", 0.9),
                                         b2=c.get("b2", 0.999), eps=c.get("eps", 1e-8)),
}


class ClipStage(NamedTuple):
  """One gradient clip of an optimizer config, as a pure function of the gradients, so
  that the optimizer applies it and the training loop can count when it acted."""

  #: The training metric ``train/<metric>``: the fraction of steps the clip acted on.
  metric: str
  #: ``grads -> (clipped grads, whether the clip changed them)``.
  apply: Callable[[Any], tuple[Any, jax.Array]]


#: The power of two the branch-free overflow-safe norm scales every leaf by (exactly:
#: a power of two): the square of any finite float32 times it is finite, and so is the
#: sum of squares of every tree whose norm float32 holds (up to about 3.4e38).
_OVERFLOW_SCALE = 2.0 ** -64


def global_norm(tree) -> jax.Array:
  """The L2 norm of all of ``tree``'s leaves together, in float32, as optax's
  ``tree.norm`` computes it (the sum of the squares, then its root) whenever that sum
  is finite, so every ordinary value is optax's to the bit.

  The sum of squares overflows float32 once the norm passes about 1.8e19, long
  before the norm itself could not be held (3.4e38): the LN-LSTM reader's first
  gradient at gain 1.0 has a norm of about 1e31 (docs/results.md), and the naive
  value, inf, made every clip scale the gradient by 0 and the run stop as divergent.
  The overflow is handled in one of two ways, by the platform the step compiles for
  (``lax.platform_dependent`` picks one when the step is lowered; neither is a branch
  in the other's program):

  - on a CPU, ``_rescaled_on_overflow``: a ``lax.cond`` computes the norm again only
    when the sum overflowed. The predicate is on the host already, so the branch costs
    nothing, and the second pass is never paid for in an ordinary step;
  - on an accelerator, ``_branch_free``: a ``lax.cond`` there copies its predicate to
    the host and waits for it, at every update (issue 59), so both sums are computed,
    in one read of each leaf, and one is selected.

  A leaf holding an inf or a nan still gives inf or nan."""
  leaves = [x.astype(jnp.float32) for x in jax.tree.leaves(tree)]
  if not leaves:
    return optax.tree.norm(leaves)
  return jax.lax.platform_dependent(leaves, cpu=_rescaled_on_overflow,
                                    default=_branch_free)


def _rescaled_on_overflow(leaves) -> jax.Array:
  """``global_norm`` with a branch: on overflow, the norm of the leaves divided by
  their largest absolute value, whose squares cannot overflow."""
  naive = optax.tree.norm(leaves)

  def rescaled(leaves):
    peak = functools.reduce(jnp.maximum, [jnp.max(jnp.abs(x)) for x in leaves])
    # An inf or nan leaf: the naive value (inf or nan) is the answer.
    divisor = jnp.where(jnp.isfinite(peak) & (peak > 0), peak, 1.0)
    squares = sum(jnp.sum(jnp.square(x / divisor)) for x in leaves)
    return jnp.where(jnp.isfinite(peak), divisor * jnp.sqrt(squares), naive)

  # Only an overflowing step pays for the second pass.
  return jax.lax.cond(jnp.isfinite(naive), lambda leaves: naive, rescaled, leaves)


def _branch_free(leaves) -> jax.Array:
  """``global_norm`` without a branch: the naive norm where its sum is finite, else the
  norm of the leaves scaled by 2^-64. The scaled squares of entries below about 2 flush
  to zero, which moves a norm over 1.8e19 by nothing float32 holds; both sums read the
  same leaves, which XLA fuses into one pass on a GPU."""
  naive = optax.tree.norm(leaves)
  scaled = sum(jnp.sum(jnp.square(x * _OVERFLOW_SCALE)) for x in leaves)
  return jnp.where(jnp.isfinite(naive), naive, jnp.sqrt(scaled) / _OVERFLOW_SCALE)


def _tensor_norm(g) -> jax.Array:
  return jnp.sqrt(jnp.sum(jnp.square(g.astype(jnp.float32))))


def clip_by_tensor_norm(max_norm: float):
  """Rescales each gradient tensor on its own to norm at most ``max_norm`` (the
  order-embeddings code clipped per tensor, not globally)."""

  def apply(grads):
    norms = jax.tree.map(_tensor_norm, grads)
    clipped = jax.tree.map(
        lambda g, n: g * jnp.minimum(1.0, max_norm / jnp.maximum(n, 1e-12)).astype(g.dtype),
        grads, norms)
    return clipped, jnp.any(jnp.stack(jax.tree.leaves(norms)) > max_norm)

  return apply


def clip_by_global_norm(max_norm: float):
  """optax's ``clip_by_global_norm``: rescales the gradient to norm ``max_norm`` when
  its norm reaches it."""

  def apply(grads):
    norm = global_norm(grads)
    acted = norm >= max_norm
    scale = jnp.where(acted, max_norm / jnp.maximum(norm, 1e-12), 1.0)
    return jax.tree.map(lambda g: g * scale.astype(g.dtype), grads), acted

  return apply


#: A clip rule: ``max_norm -> (grads -> (clipped grads, whether the clip acted))``.
ClipRule = Callable[[float], Callable[[Any], tuple[Any, jax.Array]]]
#: ``optimizer.clip_global_norm_rule``: how ``clip_global_norm`` is applied. An
#: experiment may add its own (``Task.clip_rules``: the attentive reader's code's).
GLOBAL_CLIP_RULES: Mapping[str, ClipRule] = types.MappingProxyType(
    {"standard": clip_by_global_norm})


def parameter_path(path) -> str:
  """A pytree path as ``"layer_0/lstm/bias"``."""
  return "/".join(str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k))))
                  for k in path)


def pattern_matches(pattern: str, path: str) -> bool:
  """Whether the glob ``pattern`` (``"mixture"``, ``"layer_*"``, ``"layer_0/lstm"``)
  matches the leading components of ``path``: as many as the pattern has."""
  depth = pattern.count("/") + 1
  return fnmatch.fnmatchcase("/".join(path.split("/")[:depth]), pattern)


def elementwise_bounds(bounds: Mapping[str, float], params) -> dict[str, float]:
  """``{parameter path: bound}`` for the parameters some active pattern (bound > 0) of
  ``bounds`` matches; one matched by several takes the smallest bound. A pattern that
  matches no parameter is a ConfigError (a typo would otherwise clip nothing)."""
  active = {p: float(b) for p, b in bounds.items() if b and float(b) > 0}
  paths = [parameter_path(path) for path, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
  chosen: dict[str, float] = {}
  for pattern, bound in active.items():
    matched = [p for p in paths if pattern_matches(pattern, p)]
    if not matched:
      tops = sorted({p.split("/")[0] for p in paths})
      raise ConfigError(
          f"optimizer.clip_elementwise pattern {pattern!r} matches no parameter. Patterns "
          f"are globs over the leading parts of paths such as {paths[0]!r}; the top-level "
          f"names here are {', '.join(tops)}.")
    for p in matched:
      chosen[p] = min(bound, chosen.get(p, bound))
  return chosen


def clip_elementwise(bounds: Mapping[str, float]):
  """Clips every gradient coordinate of a parameter to ``[-bound, bound]``, with the
  bound of its group: ``bounds`` maps parameter-path patterns to bounds (see
  :func:`elementwise_bounds`); parameters no pattern matches are not clipped.

  This is the form of Graves (2013, sec. 4-5), who trained the handwriting network
  with derivatives clipped element-wise, ±100 at the output layer and ±10 in the
  LSTMs, but it is not his clipping: he clipped the derivatives of the loss with
  respect to the network's *activations* (the mixture outputs, the LSTM pre-activations)
  during back-propagation, so every gradient upstream of a clipped derivative, and
  through time, was computed from the clipped value. Here the backward pass is exact
  and only the parameter gradients it produces are clipped, one coordinate at a time.
  """

  def apply(grads):
    chosen = elementwise_bounds(bounds, grads)
    acted = []

    def clip(path, g):
      bound = chosen.get(parameter_path(path))
      if bound is None:
        return g
      acted.append(jnp.any(jnp.abs(g) > bound))
      return jnp.clip(g, -bound, bound)

    clipped = jax.tree_util.tree_map_with_path(clip, grads)
    return clipped, jnp.any(jnp.stack(acted)) if acted else jnp.asarray(False)

  return apply


def clip_stages(config: Mapping[str, Any],
                rules: Mapping[str, ClipRule] | None = None) -> list[ClipStage]:
  """The clips an ``optimizer`` config turns on, in the order they apply:
  ``clip_elementwise`` (a mapping of parameter-path patterns to bounds; absent or
  empty: off), ``clip_tensor_norm`` and ``clip_global_norm`` (0 disables a clip; the
  latter by ``clip_global_norm_rule``, one of GLOBAL_CLIP_RULES or of the experiment's
  own ``rules``)."""
  rules = {**GLOBAL_CLIP_RULES, **(rules or {})}
  stages = []
  elementwise = _as_mapping(config.get("clip_elementwise"))
  if any(float(b or 0) > 0 for b in elementwise.values()):
    stages.append(ClipStage("elementwise_clipped_fraction", clip_elementwise(elementwise)))
  if config.get("clip_tensor_norm", 0.0):
    stages.append(ClipStage("tensor_clipped_fraction",
                            clip_by_tensor_norm(float(config["clip_tensor_norm"]))))
  if config.get("clip_global_norm", 0.0):
    rule = config.get("clip_global_norm_rule", None) or "standard"
    if rule not in rules:
      raise ConfigError(f"Unknown optimizer.clip_global_norm_rule {rule!r}. Valid choices: "
                        f"{', '.join(rules)}.")
    stages.append(ClipStage("clipped_fraction",
                            rules[rule](float(config["clip_global_norm"]))))
  return stages


def _as_transformation(stage: ClipStage, init_check=None) -> optax.GradientTransformation:
  def init_fn(params):
    if init_check is not None:
      init_check(params)
    return optax.EmptyState()

  def update_fn(updates, state, params=None):
    del params
    return stage.apply(updates)[0], state

  return optax.GradientTransformation(init_fn, update_fn)


def linear_warmup(warmup_steps: int) -> optax.GradientTransformation:
  """Scales the update of step t (from 0) by ``min(1, (t + 1) / warmup_steps)``: the
  learning rate rises linearly from ``lr / warmup_steps`` at the first update to
  ``lr`` at update ``warmup_steps``, and stays there. Scaling the optimizer's final
  update is scaling its learning rate, for every optimizer here (each applies the rate
  last)."""
  return optax.scale_by_schedule(
      lambda count: jnp.minimum(1.0, (count + 1) / warmup_steps))


def make_optimizer(config: ml_collections.ConfigDict,
                   clip_rules: Mapping[str, ClipRule] | None = None,
                   ) -> optax.GradientTransformation:
  """``config`` is the ``optimizer`` block: name, learning_rate, the clips of
  :func:`clip_stages` (``clip_rules``: the experiment's own global clip rules),
  applied in that order before the optimizer, and ``warmup_steps``
  (:func:`linear_warmup`; absent or 0: none) after it."""
  if config.name not in OPTIMIZERS:
    raise ConfigError(f"Unknown optimizer {config.name!r}. Valid choices: "
                      f"{', '.join(OPTIMIZERS)}.")
  elementwise = _as_mapping(config.get("clip_elementwise"))
  # A pattern that matches no parameter fails at init, before training starts.
  check = lambda params: elementwise_bounds(elementwise, params)
  chain = [_as_transformation(s, check if s.metric == "elementwise_clipped_fraction"
                              else None) for s in clip_stages(config, clip_rules)]
  chain.append(OPTIMIZERS[config.name](config))
  warmup_steps = int(config.get("warmup_steps", 0) or 0)
  if warmup_steps < 0:
    raise ConfigError(f"optimizer.warmup_steps={warmup_steps}: it must be >= 0 (0: none).")
  if warmup_steps:
    chain.append(linear_warmup(warmup_steps))
  return optax.chain(*chain)


def _as_mapping(value: Any) -> dict[str, float]:
  if value is None:
    return {}
  if isinstance(value, ml_collections.ConfigDict):
    return dict(value.items())
  if isinstance(value, Mapping):
    return dict(value)
  raise ConfigError(f"optimizer.clip_elementwise must map parameter-path patterns to "
                    f"bounds, e.g. {{'mixture': 100.0, 'layer_*': 10.0}}; got {value!r}.")
