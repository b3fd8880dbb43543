"""What a run's first updates do, measured update by update.

``replay`` takes a run's first updates exactly as ``lnorm train`` does with one step
per call (the same batches in the same order, the same step rngs, the harness's own
jitted step), so a probe sees the run ``lnorm train`` makes, not a look-alike. The
measurements:

- ``adam_statistics``: Adam's moments per group of parameters (the median and the
  largest root second moment, and the median size of Adam's normalised step
  ``|m_hat| / (sqrt(v_hat) + eps)``: about 1 when every coordinate steps like a sign,
  far below 1 when an old, large gradient still dominates the second moment);
- ``updates_to_recover``: how many further updates Adam's second moment takes to decay
  until a stalled normalised step is back at a healthy size, if the gradients keep
  their present size;
- ``clip_output_norm``: the norm of the gradient the clips hand to the optimizer;
- ``lstm_saturation``: how saturated a one-layer LSTM's gates and its cell's tanh are
  along a batch of sequences, and the size of its state;
- ``perturbation_growth`` and ``lyapunov_exponent``: how strongly a recurrence's
  state at each step depends on its initial state (the norm of a gradient
  back-propagated from that step to the start, whose log grows at the rate a small
  perturbation of the initial state grows), and that growth per step, a finite-time
  Lyapunov estimate: positive when the recurrence is chaotic (nearby states separate
  exponentially, and gradients through it explode), negative when it forgets its
  start.

scripts/reader_ln_dynamics.py applies them to the attentive reader
(docs/reader_ln_gain.md).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import math
from typing import Any, Callable, Iterator, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax

from lnorm.data import batching
from lnorm.errors import ConfigError, UserError
from lnorm.normalization import finalize_epoch_statistics
from lnorm.rnn import RecurrentLayer
from lnorm.training import optim
from lnorm.training import parallel
from lnorm.training.assembly import AssembledRun
from lnorm.training.steps import make_train_chunk, make_train_step
from lnorm.training.train_state import TrainState, seed_keys

#: |x| beyond which sigmoid(x) is outside [0.01, 0.99].
SIGMOID_SATURATION = math.log(0.99 / 0.01)
#: |x| beyond which |tanh(x)| > 0.99.
TANH_SATURATION = math.atanh(0.99)


# --- the run's updates -----------------------------------------------------------------


def replay(run: AssembledRun, num_updates: int,
           state: TrainState | None = None) -> Iterator[tuple[int, TrainState, dict]]:
  """The run's first ``num_updates`` updates, one call of one step each, as the
  training loop takes them with ``steps_per_call=1``: yields ``(updates done, state
  after it, the step's outputs)`` (``loss``, ``grad_norm``, ``update_norm``, ``clips``,
  ``sums``: ``lnorm.training.steps.make_train_step``). ``state``: where to start
  (default: the run's initial state)."""
  config = run.config
  rep = parallel.replicated(run.mesh)
  call = jax.jit(make_train_chunk(make_train_step(run.task, run.model)),
                 donate_argnums=0, out_shardings=(rep, rep))
  # Population statistics at each epoch's end, as the loop keeps them (BN only).
  finish_epoch = jax.jit(
      lambda s: s.replace(batch_stats=finalize_epoch_statistics(s.batch_stats)),
      donate_argnums=0, out_shardings=rep)
  _, rng = seed_keys(config.seed)
  state = run.initial_state() if state is None else state
  order_of = (None, None)
  for step in range(num_updates):
    epoch, in_epoch = divmod(step, run.steps_per_epoch)
    if order_of[0] != epoch:
      order_of = (epoch, batching.training_order(run.train_arrays, config.batch_size,
                                                 config.seed, epoch, run.buckets))
    chunk = batching.train_chunk(run.train_arrays, config.batch_size, config.seed, epoch,
                                 in_epoch, 1, run.buckets, order_of[1])
    state, out = call(state, parallel.shard_batch(chunk, run.mesh, 1), rng)
    if run.ends_epoch(step + 1):
      state = finish_epoch(state)
    yield step + 1, state, jax.tree.map(lambda x: x[0], out)


def clip_output_norm(grad_norm: jax.Array, stages: Sequence[optim.ClipStage]) -> jax.Array:
  """The norm of the gradient the global-norm clips of ``stages``
  (``optim.clip_stages``) hand to the optimizer, from the gradient's norm before them:
  a global clip rescales the whole gradient, so its output norm depends on the input
  norm alone, and the rule is applied with the optimizer's own function."""
  tree = [jnp.reshape(grad_norm, (1,)).astype(jnp.float32)]
  for stage in stages:
    if stage.metric != "clipped_fraction":
      raise ConfigError(f"The norm handed to the optimizer is known from the gradient's "
                        f"norm only for global-norm clips; this optimizer also applies "
                        f"{stage.metric.replace('_fraction', '')} clipping.")
    tree, _ = stage.apply(tree)
  return optim.global_norm(tree)


# --- Adam's moments ----------------------------------------------------------------------


def adam_moments(opt_state) -> optax.ScaleByAdamState:
  """The one ``ScaleByAdamState`` in an optimizer's state (optax's Adam keeps one;
  so does lnorm's Adam-Theano, whose bias correction ``adam_statistics`` does not
  model)."""
  found = [s for s in jax.tree.leaves(
      opt_state, is_leaf=lambda x: isinstance(x, optax.ScaleByAdamState))
           if isinstance(s, optax.ScaleByAdamState)]
  if len(found) != 1:
    raise UserError(f"The optimizer's state holds {len(found)} sets of Adam moments; "
                    "the probe reads Adam's: use --config.optimizer.name=adam.")
  return found[0]


def parameter_groups(params, patterns: Mapping[str, Sequence[str]], *,
                     missing_ok: bool = False) -> dict[str, list[int]]:
  """``{group: indices of the leaves of params}``: a group is the parameters whose
  whole path (``passage_lstm/layer_0/hidden_proj/kernel``) some glob of its list
  matches. A group that matches nothing is an error, or, with ``missing_ok``, left
  out (an LN gain in a model without LN)."""
  paths = [optim.parameter_path(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
  groups = {}
  for name, globs in patterns.items():
    if isinstance(globs, str):
      raise ConfigError(f"The parameter group {name!r} must be a list of globs, got the "
                        f"string {globs!r}; write [{globs!r}].")
    chosen = [i for i, p in enumerate(paths) if any(fnmatch.fnmatchcase(p, g) for g in globs)]
    if chosen:
      groups[name] = chosen
    elif not missing_ok:
      raise ConfigError(f"The parameter group {name!r} ({', '.join(globs)}) matches no "
                        f"parameter; the paths look like {paths[0]!r}.")
  return groups


def _flat(leaves: Sequence[jax.Array], chosen: Sequence[int]) -> jax.Array:
  return jnp.concatenate([jnp.ravel(leaves[i]).astype(jnp.float32) for i in chosen])


def adam_statistics(opt_state, groups: Mapping[str, Sequence[int]], *, b1: float = 0.9,
                    b2: float = 0.999, eps: float = 1e-8) -> dict[str, jax.Array]:
  """Per group (``parameter_groups``), with Adam's bias corrections at its count t:

  - ``<group>/sqrt_v_median`` and ``<group>/sqrt_v_max``: of ``sqrt(v_hat)``;
  - ``<group>/step_median``: of ``|m_hat| / (sqrt(v_hat) + eps)``, the step Adam takes
    before its learning rate.

  Medians are over the coordinates that have had a gradient (``v > 0``): the rows of an
  embedding whose words no batch held yet are left out."""
  adam = adam_moments(opt_state)
  t = adam.count.astype(jnp.float32)
  mu, nu = jax.tree.leaves(adam.mu), jax.tree.leaves(adam.nu)
  out = {}
  for name, chosen in groups.items():
    m = _flat(mu, chosen) / (1.0 - b1**t)
    v = _flat(nu, chosen)
    root = jnp.sqrt(v / (1.0 - b2**t))
    seen = v > 0
    out[f"{name}/sqrt_v_median"] = jnp.nanmedian(jnp.where(seen, root, jnp.nan))
    out[f"{name}/sqrt_v_max"] = jnp.max(root)
    out[f"{name}/step_median"] = jnp.nanmedian(
        jnp.where(seen, jnp.abs(m) / (root + eps), jnp.nan))
  return out


def parameter_means(params, groups: Mapping[str, Sequence[int]]) -> dict[str, jax.Array]:
  """``<group>/mean``: the mean value of each group's parameters (an LN gain)."""
  leaves = jax.tree.leaves(params)
  return {f"{name}/mean": jnp.mean(_flat(leaves, chosen)) for name, chosen in groups.items()}


def updates_to_recover(step: float, target: float, count: int, b2: float = 0.999) -> float:
  """Updates until Adam's normalised step grows from ``step`` to ``target`` when the
  second moment only decays: the gradients keep their present size, far below the
  root of ``v``, so ``m`` stays and ``v`` shrinks by ``b2`` an update while the bias
  correction ``1 - b2^t`` grows. From update ``count``, k more updates scale the step by
  ``sqrt((1 - b2^(count + k)) / ((1 - b2^count) b2^k))``; solved for k. 0 when
  ``step >= target``; inf when the target cannot be reached (b2 at or above 1, or a
  step of 0)."""
  if step >= target:
    return 0.0
  if step <= 0 or b2 >= 1.0:
    return math.inf
  ratio = (target / step) ** 2
  decayed = b2**count
  return math.log(ratio * (1.0 - decayed) + decayed) / -math.log(b2)


# --- a recurrence's state ----------------------------------------------------------------


def lstm_states(cell, hidden_size: int, layer_params, inputs: jax.Array, lengths: jax.Array,
                carry) -> tuple[jax.Array, jax.Array]:
  """``(h [B, T, H], mask [B, T])`` of a one-layer, one-direction recurrence
  (``RecurrentLayer(cell, hidden_size)`` with ``layer_params``) over ``inputs [B, T, I]``
  from ``carry``; h is zero at padding."""
  out = RecurrentLayer(cell, hidden_size).apply({"params": layer_params}, inputs, lengths,
                                                initial_carry=carry)
  return out.outputs, out.mask


def lstm_saturation(cell, hidden_size: int, layer_params, inputs: jax.Array,
                    lengths: jax.Array, carry) -> dict[str, jax.Array]:
  """How saturated an LSTM is along ``inputs``, as fractions of its units over the
  real steps: ``forget_saturated``, ``input_saturated``, ``output_saturated`` (the gate
  outside [0.01, 0.99]), ``candidate_saturated`` and ``cell_tanh_saturated``
  (``|tanh(g)|``, ``|tanh(N_c(c))|`` over 0.99; the latter is ``h / sigmoid(o)``), and
  ``h_rms``, the root mean square of its state h. The gates are the cell's own
  ``gate_preactivations`` of the states each step read."""
  h, mask = lstm_states(cell, hidden_size, layer_params, inputs, lengths, carry)
  step_cell = cell(hidden_size)
  variables = {"params": layer_params["layer_0"]}
  inputs_tm, h_tm = jnp.swapaxes(inputs, 0, 1), jnp.swapaxes(h, 0, 1)
  gates_x = step_cell.apply(variables, inputs_tm, method="project")
  read = jnp.concatenate([carry[1][None].astype(h_tm.dtype), h_tm[:-1]], axis=0)
  f, i, o, g = step_cell.apply(variables, read, gates_x, step=jnp.arange(h_tm.shape[0]),
                               method="gate_preactivations")
  real = jnp.swapaxes(mask, 0, 1)[..., None].astype(jnp.float32)
  units = jnp.sum(real) * hidden_size
  share = lambda saturated: jnp.sum(saturated * real) / units
  return {
      "forget_saturated": share(jnp.abs(f) > SIGMOID_SATURATION),
      "input_saturated": share(jnp.abs(i) > SIGMOID_SATURATION),
      "output_saturated": share(jnp.abs(o) > SIGMOID_SATURATION),
      "candidate_saturated": share(jnp.abs(g) > TANH_SATURATION),
      "cell_tanh_saturated": share(jnp.abs(h_tm / jax.nn.sigmoid(o)) > 0.99),
      "h_rms": jnp.sqrt(jnp.sum(jnp.square(h_tm) * real) / units),
  }


def perturbation_growth(states: Callable[[Any], jax.Array], carry, mask: jax.Array,
                        key: jax.Array, steps: Sequence[int]) -> tuple[jax.Array, jax.Array]:
  """``(log growth [S], examples [S])`` at each of ``steps``: how strongly the state at
  step t depends on the initial ``carry``, where ``states(carry)`` gives ``[B, T, H]``.

  For each example, the norm of the gradient, with respect to the carry (all its
  leaves), of a random unit readout ``u_t . states_t``: the Jacobian J_t of the state
  at t with respect to the carry, transposed, applied to u_t. Its singular values are
  J_t's, so its log grows along the sequence at the rate a small perturbation of the
  initial state grows (the largest Lyapunov exponent), and its size is the size of a
  gradient back-propagated from step t to the start. Reverse mode, because lnorm's
  normalizers and fused recurrences define their own backward passes, which forward
  mode cannot push a perturbation through. At step t: the mean over the examples still
  inside their ``mask [B, T]`` of the log, and how many they are."""
  out, pullback = jax.vjp(states, carry)
  readout = jax.random.normal(key, out.shape, jnp.float32)
  readout = readout / jnp.linalg.norm(readout, axis=-1, keepdims=True)

  def log_gradient(t):
    cotangent = jnp.zeros_like(out).at[:, t].set(readout[:, t].astype(out.dtype))
    gradient = jax.tree.leaves(pullback(cotangent)[0])
    size = jnp.sqrt(sum(jnp.sum(jnp.square(g.astype(jnp.float32)),
                                axis=tuple(range(1, g.ndim))) for g in gradient))
    return jnp.log(size)

  steps = jnp.asarray(steps, jnp.int32)
  logs = jax.lax.map(log_gradient, steps)  # [S, B]
  real = jnp.swapaxes(mask, 0, 1)[steps]
  examples = jnp.sum(real, axis=1)
  total = jnp.sum(jnp.where(real, logs, 0.0), axis=1)
  return total / jnp.maximum(examples, 1), examples


def lyapunov_exponent(steps: Sequence[int], log_growth, examples) -> float:
  """The growth per step of ``perturbation_growth``: the least-squares slope of the
  log growth against the step over the ``steps`` every example reaches (a finite-time
  estimate of the largest Lyapunov exponent; e^slope is the factor per step).

  A strongly contracting recurrence (the plain LSTM under the attentive reader's
  initialisation halves a perturbation every step) drives the gradient below
  float32's range within a few dozen steps; its log is then -inf, and the fit keeps
  the steps before. -inf when fewer than 2 are left."""
  steps = np.asarray(steps, np.float64)
  log_growth, examples = np.asarray(log_growth, np.float64), np.asarray(examples)
  every = examples == examples.max()
  if np.count_nonzero(every) < 2:
    raise UserError("The growth per step needs at least 2 probed steps that every "
                    "example of the batch reaches; give longer sequences or probe more "
                    "often.")
  kept = every & np.isfinite(log_growth)
  if np.count_nonzero(kept) < 2:
    return -math.inf
  return float(np.polyfit(steps[kept], log_growth[kept], 1)[0])


# --- a run traced --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Recurrence:
  """A one-layer LSTM of a model, probed on one batch of sequences: ``read(params)``
  gives the layer's parameters, the inputs ``[B, T, I]`` it reads, their lengths
  ``[B]`` and its initial carry, from the model's parameters."""
  cell: Callable[..., Any]
  hidden_size: int
  read: Callable[[Any], tuple[Any, jax.Array, jax.Array, Any]]

  def states(self, params, carry=None) -> tuple[jax.Array, jax.Array]:
    """``(h [B, T, H], mask [B, T])`` from ``carry`` (default: the model's own)."""
    layer, inputs, lengths, own = self.read(params)
    return lstm_states(self.cell, self.hidden_size, layer, inputs, lengths,
                       own if carry is None else carry)

  def saturation(self, params) -> dict[str, jax.Array]:
    return lstm_saturation(self.cell, self.hidden_size, *self.read(params))

  def growth(self, params, key, steps: Sequence[int]) -> tuple[jax.Array, jax.Array]:
    """``perturbation_growth`` from the model's initial carry."""
    carry = self.read(params)[3]
    mask = self.states(params)[1]
    return perturbation_growth(lambda c: self.states(params, c)[0], carry, mask, key,
                               steps)


def trace(run: AssembledRun, num_updates: int, recurrence: Recurrence,
          groups: Mapping[str, Sequence[str]], tracked: Mapping[str, Sequence[str]],
          probe_every: int, key: jax.Array, curve_stride: int = 10,
          report: Callable[[int, dict], None] | None = None) -> dict[str, Any]:
  """``run``'s first ``num_updates`` updates (``replay``), measured after each:

  - ``per_update``: columns, one value an update: ``step``, ``loss``, ``error`` (the
    batch's training error), ``grad_norm`` (before the clips), ``adam_input_norm``
    (``clip_output_norm``), ``clipped`` (1 where the global clip acted),
    ``update_norm`` (Adam's update, after the learning rate), ``adam_statistics`` of
    each of ``groups``, ``parameter_means`` of each of ``tracked`` the model has, and
    ``recurrence``'s ``lstm_saturation``;
  - ``perturbation``: at update 0 (initialisation), every ``probe_every`` updates and
    at the last, ``recurrence``'s ``lyapunov_exponent`` and its log growth at
    ``perturbation_steps``, every ``curve_stride`` steps of the sequence (the same
    readouts, ``key``, each time).

  ``report(step, row)`` is called after each update (progress)."""
  state = run.initial_state()
  optimizer = run.config.optimizer
  adam = {"b1": optimizer.get("b1", 0.9), "b2": optimizer.get("b2", 0.999),
          "eps": optimizer.get("eps", 1e-8)}
  group_leaves = parameter_groups(state.params, groups)
  tracked_leaves = parameter_groups(state.params, tracked, missing_ok=True)
  stages = optim.clip_stages(optimizer, run.task.clip_rules)

  @jax.jit
  def measure(state, grad_norm):
    return {"adam_input_norm": clip_output_norm(grad_norm, stages),
            **adam_statistics(state.opt_state, group_leaves, **adam),
            **parameter_means(state.params, tracked_leaves),
            **recurrence.saturation(state.params)}

  # Every curve_stride-th step that some sequence of the probe batch reaches.
  longest = int(np.max(np.sum(recurrence.states(state.params)[1], axis=1)))
  probed = list(range(0, longest, curve_stride))
  growth = jax.jit(functools.partial(recurrence.growth, steps=probed))

  def probe(step: int, params) -> dict[str, Any]:
    log_growth, examples = jax.device_get(growth(params, key))
    return {"step": step, "lyapunov": lyapunov_exponent(probed, log_growth, examples),
            "log_growth": [float(x) for x in log_growth]}

  columns: dict[str, list[float]] = {}
  probes = [probe(0, state.params)]
  for step, state, out in replay(run, num_updates, state):
    row = {"step": step, "loss": out["loss"],
           "error": out["sums"]["error"] / run.config.batch_size,
           "grad_norm": out["grad_norm"], "clipped": out["clips"]["clipped_fraction"],
           "update_norm": out["update_norm"], **measure(state, out["grad_norm"])}
    row = {k: float(v) for k, v in jax.device_get(row).items()}
    for name, value in row.items():
      columns.setdefault(name, []).append(value)
    if step % probe_every == 0 or step == num_updates:
      probes.append(probe(step, state.params))
    if report is not None:
      report(step, row)
  return {"per_update": columns, "perturbation": probes, "perturbation_steps": probed}


def summarise(record: Mapping[str, Any], steps_per_epoch: int,
              last: int = 50) -> dict[str, Any]:
  """A traced run (``trace``) in a few numbers: its first epoch's gradient (the mean
  and largest norm before the clip, the largest handed to Adam, the share clipped:
  what an epoch record of ``lnorm train`` holds), the mean loss and training error
  of its ``last`` updates, the growth per step at initialisation and at the end, and
  at the end each group's median normalised Adam step."""
  cols = {k: np.asarray(v, np.float64) for k, v in record["per_update"].items()}
  epoch = slice(0, min(steps_per_epoch, len(cols["step"])))
  tail = slice(-last, None)
  probes = record["perturbation"]
  return {
      "first_epoch": {"grad_norm_mean": float(np.mean(cols["grad_norm"][epoch])),
                      "grad_norm_max": float(np.max(cols["grad_norm"][epoch])),
                      "adam_input_norm_max": float(np.max(cols["adam_input_norm"][epoch])),
                      "clipped_fraction": float(np.mean(cols["clipped"][epoch]))},
      f"last_{last}_updates": {"loss_mean": float(np.mean(cols["loss"][tail])),
                               "error_mean": float(np.mean(cols["error"][tail]))},
      "lyapunov_per_step": {"initial": probes[0]["lyapunov"], "final": probes[-1]["lyapunov"]},
      "step_median_at_end": {k[:-len("/step_median")]: float(v[-1])
                             for k, v in cols.items() if k.endswith("/step_median")},
  }
