r"""wandb sweeps: the search of ``lnorm sweep`` handed to ``wandb agent``.

  lnorm sweep --config configs/perm_mnist.py:norm=ln,batch_size=4 --workdir runs/lr \
      --grid optimizer.learning_rate=3e-4,1e-3,3e-3 --grid seed=0,1 \
      --select validation/error --wandb-sweep sweep.yaml
  wandb sweep sweep.yaml          # registers the sweep, prints its agent command
  wandb agent ENTITY/PROJECT/ID   # on any number of machines

The file is a wandb sweep configuration (wandb's "Sweep configuration options"):
``method`` grid (``--grid``, a named sweep) or random (``--random``); one
``parameters`` entry per swept config field, named as the field
(``optimizer.learning_rate``) so that wandb's sweep parameters and the flat config
that ``lnorm train`` logs share their keys: ``values`` for a grid or a choice,
``distribution`` ``uniform``, ``log_uniform_values`` or ``int_uniform`` with
``min``/``max`` for the ranges, ``value`` for the sweep command's own
``--config.x=y``; ``metric`` with its ``goal`` from ``--select``; and ``program``
and ``command`` in wandb's macros. For each run the agent executes

  /usr/bin/env python -m lnorm.sweeps.wandb_sweep --config SPEC --workdir ROOT \
      --name-keys KEY,... --optimizer.learning_rate=0.001 --seed=0 ...

(``${env} ${interpreter} -m ${program} ... ${args}``), so ``python`` must be the one
lnorm is installed in. :func:`main` turns the parameters into ``--config.*``
overrides and runs ``lnorm train`` into ``ROOT/<KEY=value,...>``, named as ``lnorm sweep`` names its
members (with the values as wandb passes them: ``0.0003`` for ``3e-4``), so that
``lnorm report ROOT --select`` reads the runs afterwards. The wandb run that ``lnorm train`` opens is the agent's: the
agent sets ``WANDB_RUN_ID`` (and the sweep's id) in the environment, which wandb
follows inside a sweep; it is also written to ``<workdir>/wandb_id``, where lnorm
keeps a workdir's wandb id, so that a resumed run (``wandb agent`` resuming it, or
``lnorm train`` by hand) continues the same wandb run. A second wandb run with the
same parameters gets its own directory, ``<KEY=value,...>_<run id>``.

Differences from ``lnorm sweep``, all wandb's: a random sweep samples the grid's
values instead of crossing them with the draws (``run_cap`` keeps the number of runs
the same), and wandb draws its own values (not the seeded draws of ``lnorm sweep``);
a named sweep becomes one categorical parameter, ``sweep_member``, whose values are
its members' names.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Mapping, Sequence

from lnorm import config as config_lib
from lnorm.analysis import runs as runs_lib
from lnorm.sweeps import runner as sweep_lib
from lnorm.sweeps import space as sweep_space
from lnorm.errors import UserError
from lnorm.sweeps.space import SweepSpace

#: ``program``: the module the agent runs with ``python -m``.
PROGRAM = "lnorm.sweeps.wandb_sweep"
#: The parameter that picks a member of a named sweep (``--sweep NAME``).
MEMBER_PARAM = "sweep_member"
#: Set by ``wandb agent`` in each run's environment.
RUN_ID_ENV = "WANDB_RUN_ID"
#: Where lnorm keeps a workdir's wandb run id (lnorm.training.metrics_writer).
WANDB_ID_FILE = "wandb_id"

_DISTRIBUTIONS = {"uniform": "uniform", "loguniform": "log_uniform_values",
                  "int": "int_uniform"}


# --- writing the sweep configuration ------------------------------------------------------------


def _yaml_value(base, key: str, value: str) -> Any:
  """A number, bool or string as the field holds it; anything else (a tuple) as the
  text lnorm parses, since wandb passes a parameter back as ``str(value)``."""
  typed = sweep_space.typed_value(base, key, value)
  return typed if isinstance(typed, (bool, int, float, str)) else value


def sweep_config(config_spec: str, space: SweepSpace, workdir: str, metric: str,
                 extra: Mapping[str, str] | None = None, sweep_name: str | None = None,
                 name: str | None = None) -> dict[str, Any]:
  """The wandb sweep configuration (a dict for YAML) of the same search.

  ``sweep_name`` is the named sweep (``--sweep``), whose members ``space.named``
  holds; ``name`` the wandb sweep's name (default: the workdir's).
  """
  extra = dict(extra or {})
  sweep_space.check_against_config(config_spec, space, extra)
  base = config_lib.load_config(config_spec)
  config_lib.apply_overrides(base, extra)
  parameters: dict[str, Any] = {}
  name_keys: list[str] = []
  if space.named:
    members = sweep_lib.make_members(space.named, workdir)
    parameters[MEMBER_PARAM] = {"values": [m.name for m in members]}
    name_keys.append(MEMBER_PARAM)
  for key, values in space.grid:
    parameters[key] = {"values": [_yaml_value(base, key, v) for v in values]}
  for d in space.distributions:
    if d.kind == "choice":
      parameters[d.key] = {"values": [_yaml_value(base, d.key, v) for v in d.values]}
    else:
      number = int if d.kind == "int" else float
      parameters[d.key] = {"distribution": _DISTRIBUTIONS[d.kind], "min": number(d.low),
                           "max": number(d.high)}
  name_keys += space.keys
  for key, value in extra.items():
    parameters[key] = {"value": _yaml_value(base, key, value)}
  if not name_keys:
    raise UserError("--wandb-sweep needs something to sweep: --sweep NAME, --grid or "
                    "--random.")

  command = ["${env}", "${interpreter}", "-m", "${program}", "--config", config_spec,
             "--workdir", workdir, "--name-keys", ",".join(name_keys)]
  if sweep_name:
    command += ["--sweep", sweep_name]
  out: dict[str, Any] = {
      "name": name or sweep_lib.sweep_label(workdir, sweep_name),
      "project": base.wandb.project,
      "method": "random" if space.random else "grid",
      "metric": {"name": metric,
                 "goal": "minimize" if runs_lib.lower_is_better(metric) else "maximize"},
      "parameters": parameters,
      "program": PROGRAM,
      "command": command + ["${args}"],
  }
  if base.wandb.get("entity"):
    out["entity"] = base.wandb.entity
  if space.random:
    grid_size = len(space.members()) // space.random
    out["run_cap"] = space.random * grid_size
  return out


HEADER = """\
# A wandb sweep written by `lnorm sweep --wandb-sweep` (see lnorm/sweeps/wandb_sweep.py).
#   wandb sweep {path}    then    wandb agent ENTITY/PROJECT/SWEEP_ID
# Run `wandb agent` where `python` has lnorm installed, from the directory the
# --config and --workdir paths below are relative to. Each run trains into
# {workdir}/<parameters>; `lnorm report {workdir} --select {metric}`
# selects on their logs afterwards. wandb ranks runs by the run summary's {metric},
# which is its last logged value, not its best.
"""


def write(path: str, config: Mapping[str, Any]) -> None:
  """Writes ``config`` as YAML, with a header that says how to use it."""
  import yaml  # pylint: disable=g-import-not-at-top  (installed with wandb)
  workdir = config["command"][config["command"].index("--workdir") + 1]
  with open(path, "w") as f:
    f.write(HEADER.format(path=path, workdir=workdir, metric=config["metric"]["name"]))
    yaml.safe_dump(dict(config), f, sort_keys=False, default_flow_style=False)


# --- one run, as the agent starts it ------------------------------------------------------------


def parse_parameters(args: Sequence[str]) -> dict[str, str]:
  """``--key=value`` arguments (wandb's ``${args}``) as a dict, in their order."""
  out = {}
  for arg in args:
    key, eq, value = arg[2:].partition("=") if arg.startswith("--") else ("", "", "")
    if not key or not eq:
      raise UserError(f"Unexpected argument {arg!r}: a wandb sweep passes its parameters "
                      "as --KEY=VALUE.")
    out[key] = value
  return out


def run_workdir(root: str, parameters: Mapping[str, str], name_keys: Sequence[str],
                run_id: str | None) -> str:
  """``root/<KEY=value,...>``; a second wandb run with the same parameters gets
  ``..._<run id>`` rather than continuing another run's workdir."""
  keys = [k for k in name_keys if k in parameters] or list(parameters)
  name = sweep_lib.safe_dirname(",".join(
      parameters[k] if k == MEMBER_PARAM else runs_lib.setting_name(parameters, [k])
      for k in keys))
  workdir = os.path.join(root, name)
  if run_id:
    existing = _read_wandb_id(workdir)
    if existing not in (None, run_id):
      workdir = os.path.join(root, f"{name}_{run_id}")
  return workdir


def _read_wandb_id(workdir: str) -> str | None:
  path = os.path.join(workdir, WANDB_ID_FILE)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return f.read().strip() or None


def train_command(args: argparse.Namespace, parameters: Mapping[str, str],
                  run_id: str | None) -> tuple[list[str], str]:
  """The ``lnorm train`` arguments of one run of the sweep, and its workdir."""
  overrides = dict(parameters)
  if MEMBER_PARAM in overrides:
    if not args.sweep:
      raise UserError(f"--{MEMBER_PARAM} needs --sweep NAME, the named sweep it picks from.")
    grid = sweep_lib.load_sweep(args.config, args.sweep)
    members = {m.name: m for m in sweep_lib.make_members(grid, args.workdir)}
    chosen = overrides.pop(MEMBER_PARAM)
    if chosen not in members:
      raise UserError(f"Sweep {args.sweep} has no member {chosen!r}. Members: "
                      f"{', '.join(members)}.")
    overrides = {**members[chosen].overrides, **overrides}
  name_keys = [k for k in args.name_keys.split(",") if k]
  workdir = run_workdir(args.workdir, parameters, name_keys, run_id)
  argv = ["train", "--config", args.config, "--workdir", workdir,
          f"--config.wandb.name={os.path.basename(workdir)}"]
  return argv + [f"--config.{k}={v}" for k, v in overrides.items()], workdir


def main(argv: Sequence[str] | None = None) -> int:
  """Trains the run a wandb sweep agent asked for (see the module's docstring)."""
  from lnorm import cli  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser(
      prog=f"python -m {PROGRAM}",
      description="One run of a wandb sweep written by `lnorm sweep --wandb-sweep`: "
      "`lnorm train` with the sweep's parameters as --config.* overrides.")
  parser.add_argument("--config", required=True)
  parser.add_argument("--workdir", required=True, help="The sweep's directory.")
  parser.add_argument("--name-keys", default="",
                      help="The parameters that name a run's directory, comma-separated.")
  parser.add_argument("--sweep", default=None, help="The named sweep of sweep_member.")
  args, rest = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
  try:
    parameters = parse_parameters(rest)
    run_id = os.environ.get(RUN_ID_ENV) or None
    train_argv, workdir = train_command(args, parameters, run_id)
  except UserError as e:
    print(f"lnorm: error: {e}", file=sys.stderr)
    return 2
  if run_id:  # The agent's run is this workdir's wandb run.
    os.makedirs(workdir, exist_ok=True)
    if _read_wandb_id(workdir) is None:
      with open(os.path.join(workdir, WANDB_ID_FILE), "w") as f:
        f.write(run_id)
  print(f"[wandb sweep] lnorm {' '.join(train_argv)}", flush=True)
  return cli.main(train_argv)


if __name__ == "__main__":
  sys.exit(main())
