"""What ``lnorm train`` (or each member of ``lnorm sweep``) would do, without training:
the resolved config, the data it would load (the source ``auto`` resolves to, the
split sizes) and the number of updates; and, for a workdir that holds a run, whether
the command would resume it or be refused.

The data is loaded (that is how ``auto`` resolves and how the sizes are known: from
the cache, after a first load, in seconds); no model is built or compiled.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import ml_collections

from lnorm import config as config_lib
from lnorm.data import batching
from lnorm.errors import UserError
from lnorm.training import defaults
from lnorm.training import eval_schedule
from lnorm.training import task as task_lib
from lnorm.training import workdir as workdir_lib


@dataclasses.dataclass
class Plan:
  config: dict[str, Any]  # Flat.
  data: dict[str, Any]  # ``Dataset.describe()``.
  train_split: str
  steps_per_epoch: int
  total_steps: int
  workdir: str
  workdir_state: str  # "new", "resumes from step N", "starts over: ...", or the refusal.

  @property
  def epochs(self) -> float:
    return self.total_steps / self.steps_per_epoch if self.steps_per_epoch else 0.0

  def summary_lines(self) -> list[str]:
    """Data, updates and workdir, without the config."""
    sizes = ", ".join(f"{n} {s}" for s, n in self.data.get("num_examples", {}).items())
    lines = [f"data: {self.data.get('name')} from {self.data.get('source')} "
             f"({self.data.get('location')}): {sizes}"]
    lines += [f"  {step}" for step in self.data.get("resolution", [])]
    epochs = f"{self.epochs:.4g}"
    lines.append(f"updates: {self.total_steps} ({epochs} epoch"
                 f"{'' if epochs == '1' else 's'} of {self.steps_per_epoch} updates at batch "
                 f"size {self.config.get('batch_size')}, {self.train_split} split)")
    note = eval_schedule.misalignment(
        self.config.get("eval_every_steps", 0), self.config.get("steps_per_call", 1),
        self.steps_per_epoch, self.total_steps)
    if note:
      lines.append(f"evaluations: {note}")
    lines.append(f"workdir: {self.workdir}: {self.workdir_state}")
    return lines

  def text(self) -> str:
    config = [f"  {k} = {v!r}" for k, v in sorted(self.config.items())]
    return "\n".join(["config:", *config, *self.summary_lines()]) + "\n"


def plan(config: ml_collections.ConfigDict, workdir: str,
         datasets: dict[str, Any] | None = None) -> Plan:
  """The plan of ``lnorm train`` with ``config`` into ``workdir``. Raises the errors
  the command would raise before training (a bad value, missing data). ``datasets``
  caches the data by its config, for the members of a sweep."""
  task = task_lib.check_config(config)
  key = repr(sorted(config_lib.to_flat_dict(config.data).items()))
  if datasets is not None and key in datasets:
    dataset = datasets[key]
  else:
    dataset = task.load_data()
    if datasets is not None:
      datasets[key] = dataset
  split = task.train_split()
  steps_per_epoch = batching.steps_per_epoch(dataset.num_examples(split), config.batch_size)
  if steps_per_epoch == 0:
    raise UserError(f"The training split has {dataset.num_examples(split)} examples, fewer "
                    f"than one batch of {config.batch_size}: lower --config.batch_size.")
  workdir = os.path.abspath(workdir)
  return Plan(config_lib.to_flat_dict(config), dataset.describe(), split, steps_per_epoch,
              defaults.total_steps(config, steps_per_epoch), workdir,
              _workdir_state(workdir, config, dataset))


def _workdir_state(workdir: str, config, dataset) -> str:
  if not os.path.exists(os.path.join(workdir, workdir_lib.CONFIG_FILE)):
    return "new" if not os.path.exists(workdir) else "holds no run yet"
  try:
    workdir_lib.check_workdir(workdir, config)
    workdir_lib.check_data(workdir, workdir_lib.data_record(dataset))
  except UserError as e:
    return f"REFUSED: {e}"
  checkpoints = os.path.join(workdir, "checkpoints")
  steps = [int(d) for d in os.listdir(checkpoints) if d.isdigit()] if os.path.isdir(
      checkpoints) else []
  if steps:
    return f"resumes from the checkpoint at step {max(steps)}"
  return "starts over (an earlier attempt left no checkpoint)"


def sweep_text(plans: dict[str, Plan]) -> str:
  """The members' plans: the config fields they share once, then each member's own
  fields, data, updates and workdir."""
  configs = [p.config for p in plans.values()]
  shared = {k: v for k, v in configs[0].items() if all(c.get(k) == v for c in configs)}
  lines = ["config (every member):", *[f"  {k} = {v!r}" for k, v in sorted(shared.items())]]
  for name, p in plans.items():
    own = {k: v for k, v in p.config.items() if k not in shared}
    lines += ["", f"member {name}: " + (", ".join(f"{k}={v!r}" for k, v in own.items())
                                         or "the shared config")]
    lines += [f"  {line}" for line in p.summary_lines()]
  total = sum(p.total_steps for p in plans.values())
  lines += ["", f"{len(plans)} members, {total} updates in all."]
  return "\n".join(lines) + "\n"
