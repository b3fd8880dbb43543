"""The one way a train state is built, modelled on t5x's ``TrainStateInitializer``.

A :class:`TrainStateInitializer` holds what fixes a state's structure (the config's
optimizer, the task and its model) and builds the state in each of the ways a run or
a command needs one:

* :meth:`~TrainStateInitializer.from_scratch`: initialised on a batch (data-dependent
  initialisations, WN's, need a real one), replicated over the mesh: what training
  starts from, and what a benchmark script times;
* :meth:`~TrainStateInitializer.abstract`: its shapes and dtypes only, without
  computing or allocating it (lowering for accelerators this machine lacks);
* :meth:`~TrainStateInitializer.from_checkpoint`: the latest checkpoint of a run,
  restored into that structure (``lnorm bln-search``, ``evaluate``, ``sample``);
  a run's own resumption restores through the same ``Checkpointer.restore`` into the
  state it starts from (``checkpoint_policy.resume``);
* :meth:`~TrainStateInitializer.from_kept`: a state whose variables are the ones a run
  kept beside its checkpoints (the best on validation so far, ``best_model``).

Several seeds of one config train together (``lnorm.training.loop.train_seeds``) as
one state whose arrays have a leading seed axis (the counters they share aside):
:func:`stack_seeds` makes it from the seeds' own states, :func:`seed_of` gives one
seed's state back (what its checkpoint holds, the same as a run of that seed alone),
:func:`keep_seeds` drops the seeds that stopped.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax.training import train_state

from lnorm.data import batching
from lnorm.training import optim
from lnorm.training import parallel
from lnorm.training.best_model import BestModel
from lnorm.training.checkpoint import abstract_like, restore_latest


class TrainState(train_state.TrainState):
  batch_stats: Any = None


def seed_keys(seed: int) -> tuple[jax.Array, jax.Array]:
  """``(init key, train key)`` of a run's seed: the initial parameters come from the
  first, every training step's rngs from the second (folded in with the step)."""
  init_rng, train_rng = jax.random.split(jax.random.key(seed))
  return init_rng, train_rng


#: How ``stack_seeds`` stacks a state's arrays: ``SEED_AXIS`` (0), a leading seed
#: axis; ``SHARED`` (None), one array for every seed.
SEED_AXIS, SHARED = 0, None


def stack_seeds(states: Sequence[Any]) -> tuple[Any, Any]:
  """``(stacked, axes)``: the seeds' states as one, and where its seed axis is.

  Every array is stacked on a new leading axis (the seeds in order) but the integer
  scalars every seed holds alike, the counters of a schedule the seeds share (the
  step, Adam's count), which stay one array: ``axes`` (the state's structure, each
  array's ``SEED_AXIS`` or ``SHARED``) says which, as ``jax.vmap``'s ``in_axes`` and
  ``out_axes`` take it. Shared, a counter is a scalar in the compiled step as in a run
  alone, which keeps XLA's rewrites, and each seed's numbers, the same: Adam's bias
  correction, divided by per seed, is turned into a multiplication by its reciprocal.
  The structure is the first state's: each state has an optimizer of its own
  (``TrainState.tx``, a static field that compares by identity), the same one."""
  structure = jax.tree.structure(states[0])
  leaves = list(zip(*(jax.tree.leaves(s) for s in states)))
  axes = [SHARED if _same_counter(x) else SEED_AXIS for x in leaves]
  stacked = [x[0] if axis is SHARED else jnp.stack(x) for x, axis in zip(leaves, axes)]
  return jax.tree.unflatten(structure, stacked), jax.tree.unflatten(structure, axes)


def _same_counter(arrays: Sequence[Any]) -> bool:
  first = np.asarray(arrays[0])
  return (first.ndim == 0 and np.issubdtype(first.dtype, np.integer)
          and all(np.asarray(a) == first for a in arrays[1:]))


def seed_of(stacked: Any, axes: Any, index: int) -> Any:
  """The state of the seed at ``index`` of a :func:`stack_seeds` state: its arrays
  copied out, so that the stacked state can be donated to the next train call."""
  return _over_seed_axes(lambda x: x[index], stacked, axes)


def keep_seeds(stacked: Any, axes: Any, indices: Sequence[int]) -> Any:
  """A :func:`stack_seeds` state of the seeds at ``indices`` only."""
  keep = np.asarray(indices)
  return _over_seed_axes(lambda x: x[keep], stacked, axes)


def as_stack(state: Any, axes: Any) -> Any:
  """One seed's state as a :func:`stack_seeds` state of it alone, with ``axes``."""
  return _over_seed_axes(lambda x: x[None], state, axes)


def _over_seed_axes(f, stacked: Any, axes: Any) -> Any:
  """``f`` of every stacked array of ``stacked``; shared ones as they are."""
  return jax.tree.map(lambda axis, x: x if axis is SHARED else f(x), axes, stacked,
                      is_leaf=lambda axis: axis is SHARED)


def first_training_batch(config: ml_collections.ConfigDict,
                         train_arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
  """The first batch training takes (epoch 0, the config's seed): what a run's state
  is initialised on."""
  chunk = batching.train_chunk(train_arrays, config.batch_size, config.seed, 0, 0, 1)
  return {k: v[0] for k, v in chunk.items()}


class TrainStateInitializer:
  """Builds the train states of ``model`` under ``config`` (its optimizer and seed)
  for ``task`` (its inputs, its random streams and its optimizer's clip rules), on
  ``mesh`` (default: every device)."""

  def __init__(self, config: ml_collections.ConfigDict, task: Any, model: nn.Module,
               mesh: Any = None):
    self.config, self.task, self.model = config, task, model
    self.mesh = parallel.make_mesh() if mesh is None else mesh

  def _rngs(self, rng: jax.Array) -> dict[str, jax.Array]:
    return {"params": rng, **{stream: rng for stream in self.task.rng_streams}}

  def _variables(self, rng: jax.Array, batch) -> Mapping[str, Any]:
    return self.model.init(self._rngs(rng), *self.task.model_inputs(batch), train=True)

  def _create(self, variables: Mapping[str, Any]) -> TrainState:
    return TrainState.create(apply_fn=self.model.apply, params=variables["params"],
                             tx=optim.make_optimizer(self.config.optimizer,
                                                     self.task.clip_rules),
                             batch_stats=variables.get("batch_stats", {}))

  def initial_rng(self) -> jax.Array:
    """The key the parameters are drawn with: the seed's init key (:func:`seed_keys`)."""
    return seed_keys(self.config.seed)[0]

  def from_scratch(self, batch: Mapping[str, Any], rng: jax.Array | None = None
                   ) -> TrainState:
    """The state initialised on ``batch`` (``config.batch_size`` examples) with ``rng``
    (default: :meth:`initial_rng`), replicated over the mesh."""
    rng = self.initial_rng() if rng is None else rng
    variables = jax.jit(functools.partial(self.model.init, train=True))(
        self._rngs(rng), *self.task.model_inputs(batch))
    return jax.device_put(self._create(variables), parallel.replicated(self.mesh))

  def abstract(self, batch: Mapping[str, Any]) -> TrainState:
    """The state's structure, shapes and dtypes from an abstract initialisation on
    ``batch`` (arrays or ``jax.ShapeDtypeStruct``s): nothing is computed or allocated."""
    return jax.eval_shape(lambda rng, batch: self._create(self._variables(rng, batch)),
                          jax.random.key(0), batch)

  def from_checkpoint(self, workdir: str, batch: Mapping[str, Any],
                      fix: str = "train it first with `lnorm train`",
                      ) -> tuple[TrainState, int]:
    """``(state, step)``: the latest checkpoint of ``workdir``, a run of this config,
    restored into the structure and shardings of a state initialised on ``batch`` (of
    the data's shapes: a command reads a trained run without loading its data). A run
    with no checkpoint is a ``UserError`` that says ``fix``; a damaged one names the
    rerun that repairs it."""
    return restore_latest(workdir, abstract_like(self.from_scratch(batch)), fix)

  @staticmethod
  def from_kept(state: TrainState, kept: BestModel,
                collections: tuple[str, ...] = ("params", "batch_stats")) -> TrainState:
    """``state`` with the variables ``kept`` holds (a run's best on validation so far:
    ``collections`` of them), restored into ``state``'s structure."""
    variables = {name: getattr(state, name) for name in collections}
    return state.replace(**kept.restore(variables))
