"""One run assembled: ``assemble(config)`` builds everything a run of a config needs.

After one check of the config (``check``: the shared fields' bounds, then the
experiment's own, in its ``Task``), it loads the data, builds the model and the mesh,
and fixes the schedule (steps per epoch, total steps, length buckets). The initial
state and a trained state restored from a workdir both come from the run's
``TrainStateInitializer`` (``lnorm.training.train_state``), so that training and
``lnorm bln-search`` agree on the structure a checkpoint restores into.

Also here: ``load_run_config``, the config a workdir's ``config.json`` records.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Callable, Mapping

import flax.linen as nn
import ml_collections
import numpy as np

from lnorm import config as config_lib
from lnorm import data
from lnorm.data import batching
from lnorm.data.core import Dataset
from lnorm.errors import UserError
from lnorm.training import defaults
from lnorm.training import metrics_writer
from lnorm.training import parallel
from lnorm.training import run_files
from lnorm.training import task as task_lib
from lnorm.training.steps import length_buckets
from lnorm.training.train_state import (TrainState, TrainStateInitializer,
                                        first_training_batch)


def check(config: ml_collections.ConfigDict) -> task_lib.Task:
  """The one check of a config before its data loads; returns its task. Besides the
  config's values (``task.check_config``), what the run would otherwise find wrong
  only after its data has loaded: a data source the dataset lacks, a ``$WANDB_MODE``
  wandb would refuse."""
  task = task_lib.check_config(config)
  data.check_source(config.data.name, config.data.source)
  metrics_writer.wandb_mode(config.wandb.mode)
  return task


@dataclasses.dataclass(frozen=True)
class AssembledRun:
  """What a run of ``config`` trains, on what, and for how long."""
  config: ml_collections.ConfigDict
  task: task_lib.Task
  dataset: Dataset
  train_arrays: Mapping[str, np.ndarray]
  mesh: Any
  model: nn.Module
  buckets: batching.LengthBuckets | None
  steps_per_epoch: int
  total_steps: int
  #: What a task's hooks compile once per run (a sampler, an embedder), by key: the
  #: run owns them, so that they go with it and another run compiles its own.
  _compiled: dict[Any, Any] = dataclasses.field(default_factory=dict, init=False,
                                                repr=False, compare=False)

  def compiled(self, key: Any, build: Callable[[], Any]) -> Any:
    """``build()``'s result, built at the first call with ``key`` in this run."""
    if key not in self._compiled:
      self._compiled[key] = build()
    return self._compiled[key]

  def for_seed(self, config: ml_collections.ConfigDict) -> "AssembledRun":
    """This run with ``config``, the same but for its seed (``train_seeds``): that
    config and its task, this run's data, model, mesh and schedule, and what its hooks
    compiled, which take the seed's state and keys as arguments."""
    other = dataclasses.replace(self, config=config, task=task_lib.load_task(config))
    object.__setattr__(other, "_compiled", self._compiled)
    return other

  @property
  def num_epochs(self) -> int:
    return -(-self.total_steps // self.steps_per_epoch)

  def epoch_label(self, step: int) -> str:
    return f"epoch {min(step // self.steps_per_epoch + 1, self.num_epochs)}/{self.num_epochs}"

  def ends_epoch(self, step: int) -> bool:
    """Whether the update that brings the run to ``step`` ends an epoch."""
    return step % self.steps_per_epoch == 0

  def is_last(self, step: int) -> bool:
    return step == self.total_steps

  @property
  def initializer(self) -> TrainStateInitializer:
    return TrainStateInitializer(self.config, self.task, self.model, self.mesh)

  def initial_state(self) -> TrainState:
    """The initial, replicated train state training starts from: initialised on the
    first training batch."""
    return self.initializer.from_scratch(first_training_batch(self.config,
                                                              self.train_arrays))

  def restore(self, workdir: str) -> tuple[TrainState, int]:
    """``(state, step)``: the latest checkpoint of ``workdir``, a run of this config."""
    return self.initializer.from_checkpoint(
        workdir, first_training_batch(self.config, self.train_arrays))


def assemble_model(config: ml_collections.ConfigDict, *,
                   task: task_lib.Task | None = None, dataset: Dataset | None = None,
                   ) -> tuple[task_lib.Task, Dataset, nn.Module]:
  """``(task, dataset, model)``: the first half of :func:`assemble`, without the mesh
  and the schedule. ``config`` is checked unless ``task`` (``check``'s result) is
  given, and its data loaded unless ``dataset`` is. Alone, it serves what traces or
  times a step without training (``lnorm check``, the GPU check), on small synthetic
  data that may not fill an epoch at the configured batch size."""
  task = task or check(config)
  if dataset is None:
    dataset = task.load_data()
  return task, dataset, task.build_model(dataset)


def assemble(config: ml_collections.ConfigDict, *, task: task_lib.Task | None = None,
             mesh: Any = None) -> AssembledRun:
  """Checks ``config`` (unless ``task``, the result of ``check``, is given), loads its
  data and builds its model on ``mesh`` (default: every device)."""
  task = task or check(config)
  if mesh is None:
    mesh = parallel.make_mesh()
    parallel.check_batch_size(config.batch_size, mesh)
  task, dataset, model = assemble_model(config, task=task)
  train_arrays = dataset.splits[task.train_split()]
  num_train = dataset.num_examples(task.train_split())
  steps_per_epoch = batching.steps_per_epoch(num_train, config.batch_size)
  if steps_per_epoch == 0:
    raise UserError(f"The training split has {num_train} examples, fewer than one batch "
                    f"of {config.batch_size}: lower --config.batch_size.")
  total_steps = defaults.total_steps(config, steps_per_epoch)
  buckets = length_buckets(config, task, train_arrays)
  return AssembledRun(config, task, dataset, train_arrays, mesh, model, buckets,
                      steps_per_epoch, total_steps)


# --- a trained run's config -----------------------------------------------------------


def config_from_flat(flat: dict[str, Any]) -> ml_collections.ConfigDict:
  """The nested config of a run from the flat dotted dict in its config.json.

  JSON turned tuples into lists; they become tuples again (configs hold tuples).
  """
  nested: dict[str, Any] = {}
  for dotted, value in flat.items():
    *parents, leaf = dotted.split(".")
    node = nested
    for p in parents:
      node = node.setdefault(p, {})
    node[leaf] = tuple(value) if isinstance(value, list) else value
  return ml_collections.ConfigDict(nested)


def load_run_config(workdir: str, overrides: dict[str, str] | None = None):
  """The config the run in ``workdir`` was trained with, ``overrides`` applied."""
  path = os.path.join(workdir, run_files.CONFIG_FILE)
  if not os.path.exists(path):
    raise UserError(f"{path} does not exist: --workdir must be a directory that "
                    "`lnorm train` wrote (it holds config.json and checkpoints/).")
  with open(path) as f:
    config = config_from_flat(json.load(f)["config"])
  config_lib.apply_overrides(config, overrides or {})
  return config
