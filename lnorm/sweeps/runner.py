"""Sweeps: override dicts for a config, run member by member.

The members come from a named sweep beside the config, from the command line, or
both. A config file may define ``get_sweep(name=None)``: a list of override dicts for
``name`` (``{"norm": "ln", "batch_size": 4}``), or all sweeps by name when ``name``
is None. ``--grid`` and random search (``lnorm.sweeps.space``) cross it with a grid
product and with seeded random draws. Every member trains into its own sub-workdir,
named by the overrides that tell it apart from the other members
(``norm=ln,batch_size=4``), by a ``python -m lnorm train`` subprocess: a member that
crashes takes nothing else down, and its log stays in ``<member>/train.log``.

A sweep is resumable because ``lnorm train`` is: finished members (as many epochs,
or ``max_steps`` updates, in ``metrics.jsonl`` as their configs ask) are skipped,
interrupted ones resume from their checkpoint. The summary (final and best metrics
per member, and mean / spread over seeds) is printed and written as CSV, followed
with ``select`` by the best setting on a validation metric (``lnorm.analysis.selection``).
Only ``prepare``, which checks every member's config as ``lnorm train`` would before the
first one runs, imports JAX (through the experiment's task); summaries do not.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import csv
import dataclasses
import json
import logging
import math
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Mapping, Sequence

from lnorm import config as config_lib
from lnorm.analysis import selection as selection_lib
from lnorm.sweeps import space as sweep_space
from lnorm.errors import ConfigError, Interrupted, UserError
from lnorm.analysis.runs import (SWEEP_FILE, Run, distinguishing_keys, epoch_records, epochs_done,
                        is_seed, lower_is_better, read_run, read_sweep_file, setting_name,
                        summary_metrics)
from lnorm.sweeps.space import SweepSpace
from lnorm.training import run_files
from lnorm.training import workdir_lock
from lnorm.training.defaults import is_complete, seeds_together_problem
from lnorm.training.stop_signals import StopSignals

SUMMARY_FILE = "summary.csv"
GROUPED_SUMMARY_FILE = "summary_by_setting.csv"
SELECTION_FILE = "selection.json"
LOG_FILE = run_files.LOG_FILE


# --- members and their names -----------------------------------------------------------


#: The exit code of an ``lnorm train`` stopped by SIGTERM/SIGINT after saving.
INTERRUPTED_CODE = 130


def stop_signals() -> StopSignals:
  """What stops a command that runs members: SIGTERM (a cluster's preemption,
  ``timeout``), passed on to the members running; a Ctrl-C at the terminal reaches
  them itself."""
  return StopSignals(signal.SIGTERM)


@dataclasses.dataclass
class Member:
  """One run of a sweep: its readable name, its overrides and its workdir."""
  name: str
  overrides: dict[str, str]
  workdir: str


def load_sweep(config_path: str, name: str) -> list[dict[str, str]]:
  """The override dicts of sweep ``name`` in the config file ``config_path``."""
  path = config_path.partition(":")[0]
  module = config_lib.load_config_module(path)
  if not hasattr(module, "get_sweep"):
    raise ConfigError(f"{path} defines no get_sweep(name): it has no named sweeps.")
  available = module.get_sweep(None)
  available = sorted(available) if isinstance(available, Mapping) else []
  try:
    grid = module.get_sweep(name)
  except KeyError:
    raise ConfigError(f"{path} has no sweep {name!r}. Available sweeps: "
                      f"{', '.join(available) or '(none listed)'}.") from None
  if not grid:
    raise ConfigError(f"Sweep {name!r} in {path} has no members.")
  return [{str(k): _to_str(v) for k, v in member.items()} for member in grid]


def _to_str(value: Any) -> str:
  """An override value as it would be typed on the command line."""
  if isinstance(value, (tuple, list)):
    return "(" + ",".join(_to_str(v) for v in value) + ("," if len(value) == 1 else "") + ")"
  return str(value)


def safe_dirname(name: str) -> str:
  return re.sub(r"[^A-Za-z0-9=,._+-]", "_", name) or "run"


def make_members(grid: Sequence[Mapping[str, str]], workdir: str,
                 keys: Sequence[str] | None = None) -> list[Member]:
  """Members with readable, unique directory names under ``workdir``.

  ``keys`` name them, those of them that vary (random draws need every drawn key in
  the name, although the first alone tells the draws apart); by default the fewest
  keys that tell the members apart.
  """
  if keys is not None:
    keys = [k for k in keys if len({m.get(k) for m in grid}) > 1]
  keys = keys or distinguishing_keys(grid) or sorted({k for m in grid for k in m})
  names = [safe_dirname(setting_name(m, keys)) if keys else "default" for m in grid]
  seen: dict[str, int] = {}
  for i, n in enumerate(names):
    if names.count(n) > 1:
      seen[n] = seen.get(n, 0) + 1
      names[i] = f"{n}_{seen[n]}"
  return [Member(n, dict(m), os.path.join(workdir, n)) for n, m in zip(names, grid)]


def setting_keys(space: SweepSpace, grid: Sequence[Mapping[str, str]]) -> list[str]:
  """The keys the members ``grid`` of ``space`` are named by: the named sweep's
  distinguishing keys, then the grid's and the drawn keys (a random search's draws
  differ in each drawn key, although the first alone tells them apart); without a
  grid or random search the fewest keys that tell the members apart."""
  if not space.keys:
    return distinguishing_keys(grid)
  return (distinguishing_keys(space.named) if space.named else []) + space.keys


def space_members(space: SweepSpace, workdir: str) -> list[Member]:
  """The members of a named sweep crossed with a grid and random draws, named by
  their ``setting_keys``."""
  grid = space.members()
  return make_members(grid, workdir, keys=setting_keys(space, grid))


def prepare(config_spec: str, space: SweepSpace, workdir: str,
            extra: Mapping[str, str] | None = None):
  """The members and their configs, every value checked against the config first.

  Returns (members, {member name: config}); raises ConfigError before anything runs.
  """
  extra = dict(extra or {})
  sweep_space.check_against_config(config_spec, space, extra)
  members = space_members(space, workdir)
  configs = {m.name: member_config(config_spec, m, extra) for m in members}
  for m in members:  # A combination of values, or a named sweep's member.
    try:
      sweep_space.check_config(configs[m.name])
    except ConfigError as e:
      raise ConfigError(f"Sweep member {m.name}: {e}") from None
  return members, configs


# --- state of a member's workdir ----------------------------------------------------------


def is_finished(workdir: str, config: Mapping[str, Any]) -> bool:
  """True when the run trained as long as ``config`` asks (epochs or max_steps)."""
  return is_complete(config, epoch_records(workdir))


def member_config(config_spec: str, member: Member, extra: Mapping[str, str]):
  """The member's full config (loads the config file; no JAX)."""
  config = config_lib.load_config(config_spec)
  config_lib.apply_overrides(config, {**member.overrides, **extra})
  return config


# --- running ---------------------------------------------------------------------------


def train_argv(config_spec: str, member: Member, extra: Mapping[str, str],
               sweep_name: str) -> list[str]:
  """The ``lnorm train`` arguments of one member (after the program name)."""
  overrides = {
      "wandb.group": sweep_name,
      "wandb.name": f"{sweep_name}/{member.name}",
      **member.overrides,
      **extra,  # The sweep command's own --config.x=y win over the grid.
  }
  return (["train", "--config", config_spec, "--workdir", member.workdir]
          + [f"--config.{k}={v}" for k, v in overrides.items()])


#: The config field ``lnorm train --seeds`` trains several values of in one process.
SEED_KEY = "seed"


def group_argv(config_spec: str, group: Sequence[Member], extra: Mapping[str, str],
               sweep_name: str) -> list[str]:
  """The ``lnorm train`` arguments of a group of :func:`seed_groups` (after the
  program name): one member's own, or ``--seeds`` and the members' workdir pattern."""
  if len(group) == 1:
    return train_argv(config_spec, group[0], extra, sweep_name)
  first = group[0]
  pattern = _seed_pattern(first)
  argv = train_argv(config_spec, dataclasses.replace(
      first, name=os.path.basename(pattern),
      overrides={k: v for k, v in first.overrides.items() if k != SEED_KEY},
      workdir=pattern), extra, sweep_name)
  return argv + ["--seeds", ",".join(m.overrides[SEED_KEY] for m in group)]


def seed_groups(members: Sequence[Member], per_process: int,
                extra: Mapping[str, str] | None = None,
                configs: Mapping[str, Any] | None = None) -> list[list[Member]]:
  """``members`` in groups that one ``lnorm train`` process trains: up to
  ``per_process`` members that differ in their seed only (``lnorm train --seeds``), in
  the order of their first member; a member that cannot share a process (its seed
  not in its name, or fixed by the command's ``extra``, or its config's seeds cannot
  train together: ``configs`` by member name, ``seeds_together_problem``) is a group
  of its own."""
  if per_process <= 1 or SEED_KEY in (extra or {}):
    return [[m] for m in members]
  by_setting: dict[Any, list[list[Member]]] = {}
  groups: list[list[Member]] = []
  for m in members:
    pattern = _seed_pattern(m)
    if pattern is None or (configs and seeds_together_problem(configs[m.name])):
      groups.append([m])
      continue
    setting = (pattern, tuple(sorted((k, v) for k, v in m.overrides.items()
                                     if k != SEED_KEY)))
    chunks = by_setting.setdefault(setting, [])
    if not chunks or len(chunks[-1]) == per_process:
      chunks.append([])
      groups.append(chunks[-1])
    chunks[-1].append(m)
  return groups


def _seed_pattern(member: Member) -> str | None:
  """The member's workdir with its seed as ``run_files.SEED_FIELD``, which ``lnorm
  train --seeds`` fills in: where its name says ``seed=<s>`` once; else None."""
  seed = member.overrides.get(SEED_KEY)
  if seed is None or not seed.isdigit():
    return None
  parts = member.name.split(",")
  own = f"{SEED_KEY}={seed}"
  if parts.count(own) != 1:
    return None
  parts[parts.index(own)] = f"{SEED_KEY}={run_files.SEED_FIELD}"
  pattern = os.path.join(os.path.dirname(member.workdir), ",".join(parts))
  return pattern if run_files.with_seed(pattern, seed) == member.workdir else None


def print_commands(config_spec: str, members: Sequence[Member], extra: Mapping[str, str],
                   sweep_name: str, out=None, seeds_per_process: int = 1,
                   configs: Mapping[str, Any] | None = None) -> None:
  """One shell line per member, e.g. for a SLURM job array (line $SLURM_ARRAY_TASK_ID);
  with ``seeds_per_process``, one per group of :func:`seed_groups` (``configs`` as
  there)."""
  out = out or sys.stdout
  for group in seed_groups(members, seeds_per_process, extra, configs):
    print(shlex.join(["lnorm", *group_argv(config_spec, group, extra, sweep_name)]),
          file=out)


@dataclasses.dataclass
class Outcome:
  member: Member
  status: str  # 'finished', 'skipped' (already finished), 'interrupted', 'failed'
  seconds: float = 0.0
  returncode: int = 0


def _run_group(config_spec: str, group: Sequence[Member], configs: Mapping[str, Any],
               extra: Mapping[str, str], sweep_name: str, stream: bool,
               signals: StopSignals) -> list[Outcome]:
  """Trains a group of :func:`seed_groups` in one ``lnorm train`` process, its output
  in every member's ``train.log``; each member's outcome."""
  for m in group:
    os.makedirs(m.workdir, exist_ok=True)
  # The member's output is no terminal: it logs a plain progress line now and then.
  argv = [sys.executable, "-m", "lnorm", *group_argv(config_spec, group, extra, sweep_name)]
  start = time.time()
  with contextlib.ExitStack() as files:
    logs = [files.enter_context(open(os.path.join(m.workdir, LOG_FILE), "a"))
            for m in group]
    for log in logs:
      log.write(f"\n$ {shlex.join(argv)}\n")
      log.flush()
    # The whole output goes to the train.logs here: the process must not add its own.
    # One member's log takes it straight from the process when no one reads it.
    direct = not stream and len(logs) == 1
    proc = signals.start(argv, stdout=logs[0] if direct else subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True,
                         env={**os.environ, run_files.LOG_FILE_ENV: "0"})
    if not direct:  # Sequential: the user sees the member's log as it runs.
      try:
        for line in proc.stdout:
          for log in logs:
            log.write(line)
          if stream:
            sys.stdout.write(f"  {line}")
      except KeyboardInterrupt:
        # The member got the same Ctrl-C and is saving a checkpoint: keep reading its
        # output, or it would die of a broken pipe before it finished saving.
        for line in proc.stdout:
          for log in logs:
            log.write(line)
    code = signals.wait(proc)
  seconds = time.time() - start
  status = {0: "finished", INTERRUPTED_CODE: "interrupted"}.get(code, "failed")
  if code != 0 and signals.received:
    # The sweep's SIGTERM reached the member before it could save (during its start,
    # where SIGTERM ends it at once: it has trained nothing since its checkpoint).
    status = "interrupted"
  if len(group) == 1 or code == 0:
    return [Outcome(m, status, seconds, code) for m in group]
  # Seeds together: a seed that stopped (on a value that was not finite) failed alone,
  # and one that was done before the signal came is finished.
  return [Outcome(m, "finished" if is_finished(m.workdir, configs[m.name]) else status,
                  seconds, code) for m in group]


def _run_member(config_spec: str, member: Member, extra: Mapping[str, str], sweep_name: str,
                stream: bool, signals: StopSignals) -> Outcome:
  """Trains one member in an ``lnorm train`` process of its own; its outcome."""
  (outcome,) = _run_group(config_spec, [member], {}, extra, sweep_name, stream, signals)
  return outcome


def _group_name(group: Sequence[Member]) -> str:
  """A group of :func:`seed_groups` as the sweep's log names it."""
  if len(group) == 1:
    return group[0].name
  return (f"{os.path.basename(_seed_pattern(group[0]))} (seeds "
          f"{', '.join(m.overrides[SEED_KEY] for m in group)} together)")


def _members_text(names: Sequence[str]) -> str:
  return f"{len(names)} members" if len(names) > 4 else ", ".join(names) or "none"


def sweep_label(workdir: str, name: str | None = None) -> str:
  """A named sweep's name, else the workdir's: the wandb group and the log prefix."""
  return name or os.path.basename(os.path.abspath(workdir)) or "sweep"


def run_sweep(config_spec: str, space: SweepSpace, workdir: str,
              extra: Mapping[str, str] | None = None, parallel: int = 1,
              figures: bool = True, name: str | None = None,
              select: str | None = None,
              signals: StopSignals | None = None,
              seeds_per_process: int = 1) -> "Summary":
  """Runs (or resumes) every member of a sweep, then summarises it.

  ``name`` is the named sweep's (``--sweep``), if any; ``select`` a metric to choose
  the best setting on (``lnorm.analysis.selection``); ``signals`` the command's (a
  benchmark's, whose sweeps share them), else :func:`stop_signals`;
  ``seeds_per_process``: up to that many members that differ in their seed only train
  together, in one process (:func:`seed_groups`). Returns the summary; members that
  failed are listed there, their logs in ``<workdir>/<member>/train.log``.
  """
  extra = dict(extra or {})
  sweep_name = sweep_label(workdir, name)
  workdir = os.path.abspath(workdir)
  members, configs = prepare(config_spec, space, workdir, extra)  # Fails before running.
  workdir_lock.make_workdir(workdir)
  # One sweep per folder (each member's `lnorm train` holds the member's workdir too).
  with workdir_lock.hold(workdir, f"lnorm sweep {sweep_name}"):
    return _run_members(config_spec, space, workdir, members, configs, extra, parallel,
                        figures, name, select, sweep_name, signals or stop_signals(),
                        seeds_per_process)


def _run_members(config_spec, space, workdir, members, configs, extra, parallel, figures,
                 name, select, sweep_name, signals: StopSignals,
                 seeds_per_process: int = 1) -> "Summary":
  """``run_sweep`` once it holds the sweep's folder."""
  _write_sweep_file(workdir, config_spec, name, space, members, extra)

  todo, outcomes = [], {}
  for m in members:
    if is_finished(m.workdir, configs[m.name]):
      outcomes[m.name] = Outcome(m, "skipped")
      print(f"[sweep {sweep_name}] {m.name}: already finished, skipped.", flush=True)
    else:
      todo.append(m)
  groups = seed_groups(todo, seeds_per_process, extra, configs)
  start = time.time()
  lock = threading.Lock()

  def one(i_group):
    i, group = i_group
    if signals.received:  # Start no member once the sweep was asked to stop.
      return None
    resuming = any(os.path.exists(os.path.join(m.workdir, "checkpoints")) for m in group)
    where = group[0].workdir if len(group) == 1 else _seed_pattern(group[0])
    with lock:
      print(f"[sweep {sweep_name}] ({i + 1}/{len(groups)}) {_group_name(group)}: "
            f"{'resuming' if resuming else 'starting'} in {where}", flush=True)
    outs = ([_run_member(config_spec, group[0], extra, sweep_name, parallel <= 1, signals)]
            if len(group) == 1 else
            _run_group(config_spec, group, configs, extra, sweep_name, parallel <= 1,
                       signals))
    with lock:
      for o in outs:
        msg = {"finished": "done",
               "interrupted": "interrupted (a rerun resumes it from its last checkpoint)"
               }.get(o.status, f"FAILED with exit code {o.returncode}; see "
                     f"{os.path.join(o.member.workdir, LOG_FILE)}")
        print(f"[sweep {sweep_name}] {o.member.name}: {msg} ({o.seconds:.0f} s)",
              flush=True)
    return outs

  def record(outs) -> bool:
    """Keeps a group's outcomes; whether the sweep must stop (None: it was stopped)."""
    for o in outs or ():
      outcomes[o.member.name] = o
    return outs is None or any(o.status == "interrupted" for o in outs)

  stop = threading.Event()  # Set when a member was interrupted: start no others.
  try:
    with signals:
      if parallel <= 1:
        for i_group in enumerate(groups):
          if record(one(i_group)):
            stop.set()
            break
      else:
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=parallel)

        def guarded(i_group):
          return None if stop.is_set() else one(i_group)

        futures = [pool.submit(guarded, i_group) for i_group in enumerate(groups)]
        try:
          for future in concurrent.futures.as_completed(futures):
            if record(future.result()):
              stop.set()
        except KeyboardInterrupt:
          stop.set()  # The running members got the Ctrl-C too and are saving.
        pool.shutdown(wait=True, cancel_futures=True)
        for future in futures:
          if future.done() and not future.cancelled():
            record(future.result())
      stopped_by = signals.received
  finally:
    _append_timing(workdir, time.time() - start,
                   sum(o.status != "skipped" for o in outcomes.values()))
  if stop.is_set() or stopped_by:
    done = [n for n, o in outcomes.items() if o.status in ("finished", "skipped")]
    left = [m.name for m in members if m.name not in done]
    raise Interrupted(
        f"Sweep {sweep_name} was stopped{f' by {stopped_by}' if stopped_by else ''} "
        f"with {len(done)} of {len(members)} members finished; "
        f"{_members_text(left)} left (an interrupted member saved a checkpoint). Rerun "
        "the same command to resume.")

  summary = summarize(members, configs, {n: o.status for n, o in outcomes.items()})
  summary.write(workdir)
  if select:
    try:
      summary.selection = select_members(
          members, select, setting_keys(space, [m.overrides for m in members]))
    except UserError as e:  # E.g. no member logged the metric: keep the summary.
      summary.selection_problem = str(e)
    else:
      with open(os.path.join(workdir, SELECTION_FILE), "w") as f:
        json.dump(summary.selection.to_dict(), f, indent=2)
  if figures:
    summary.figures = _draw_figures(workdir, configs[members[0].name].get("experiment"))
  return summary


def _write_sweep_file(workdir, config_spec, sweep_name, space, members, extra) -> None:
  # The keys the members are named by, which report --select names settings by too.
  keys = setting_keys(space, [m.overrides for m in members])
  record = {"sweep": sweep_name, "config": config_spec, "extra_overrides": extra,
            "setting_keys": keys, **space.to_dict(),
            "members": [{"name": m.name, "overrides": m.overrides,
                         "workdir": os.path.relpath(m.workdir, workdir)} for m in members]}
  with open(os.path.join(workdir, SWEEP_FILE), "w") as f:
    json.dump(record, f, indent=2)


def _append_timing(workdir: str, seconds: float, ran: int) -> None:
  with open(os.path.join(workdir, "sweep_times.jsonl"), "a") as f:
    f.write(json.dumps({"finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
                        "wall_seconds": round(seconds, 1), "members_run": ran}) + "\n")


def _draw_figures(workdir: str, experiment: str | None) -> list[str]:
  """The sweep's figures; a plotting failure must not lose the summary."""
  try:
    from lnorm.analysis import plotting  # pylint: disable=g-import-not-at-top  (matplotlib is slow)
    return plotting.sweep_figures(workdir, experiment)
  except Exception as e:  # pylint: disable=broad-except
    logging.warning("Could not draw the sweep's figures: %s", e)
    return []


# --- summary ---------------------------------------------------------------------------

#: What the summary's columns mean, printed under its table. "Best" is one thing
#: everywhere (summary.csv, --select, lnorm report, lnorm compare): the best finite
#: value over every point that measured the metric, mid-epoch evaluations included; a
#: training metric counts at epoch ends only, where it is the epoch's mean.
BEST_MEANS = ("final: the value at the last epoch end; best: the best value over every "
              "evaluation (epoch ends and mid-epoch; training metrics at epoch ends), as "
              "--select and lnorm report take it.")


def display_metrics(metrics: Sequence[str], limit: int = 4) -> list[str]:
  """For a narrow table: one training loss, then test (else validation) metrics."""
  train = [m for m in ("train/nll", "train/loss") if m in metrics][:1]
  held_out = [m for m in metrics if m.startswith("test/")] or [
      m for m in metrics if m.startswith("validation/")]
  return (train + held_out)[:limit]


@dataclasses.dataclass
class Summary:
  rows: list[dict[str, Any]]
  metrics: list[str]
  grouped: list[dict[str, Any]] = dataclasses.field(default_factory=list)
  figures: list[str] = dataclasses.field(default_factory=list)
  selection: selection_lib.Selection | None = None
  selection_problem: str = ""  # Why there is no selection, when one was asked for.

  @property
  def failed(self) -> list[str]:
    return [r["member"] for r in self.rows if r["status"] == "failed"]

  def write(self, workdir: str) -> list[str]:
    paths = [os.path.join(workdir, SUMMARY_FILE)]
    _write_csv(paths[0], self.rows)
    if self.grouped:
      paths.append(os.path.join(workdir, GROUPED_SUMMARY_FILE))
      _write_csv(paths[1], self.grouped)
    return paths

  def table(self, max_metrics: int = 4) -> str:
    """A fixed-width text table of final/best values (mean ± std over seeds if any)."""
    metrics = display_metrics(self.metrics, max_metrics)
    if self.grouped:
      header = ["setting", "n"] + [f"{k} {m}" for m in metrics for k in ("final", "best")]
      body = [[g["setting"], str(g["n"])] + [
          _pm(g.get(f"{k} {m} mean"), g.get(f"{k} {m} std")) for m in metrics
          for k in ("final", "best")] for g in self.grouped]
    else:
      header = ["member", "status", "epochs"] + [f"{k} {m}" for m in metrics
                                                  for k in ("final", "best")]
      body = [[r["member"], r["status"], str(r["epochs"])] + [
          _fmt(r.get(f"{k} {m}")) for m in metrics for k in ("final", "best")]
              for r in self.rows]
    widths = [max(len(x) for x in col) for col in zip(header, *body)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(row, widths)) for row in [header] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines + ["", BEST_MEANS])


def _fmt(v: Any) -> str:
  if v is None:
    return "-"
  return f"{v:.4g}" if isinstance(v, float) else str(v)


def _pm(mean, std) -> str:
  if mean is None:
    return "-"
  return f"{mean:.4g} ± {std:.2g}" if std is not None else f"{mean:.4g}"


def _write_csv(path: str, rows: Sequence[Mapping[str, Any]]) -> None:
  columns: list[str] = []
  for r in rows:
    columns += [k for k in r if k not in columns]
  with open(path, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=columns)
    w.writeheader()
    for r in rows:
      w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in columns})


def summarize(members: Sequence[Member], configs: Mapping[str, Mapping[str, Any]] | None = None,
              statuses: Mapping[str, str] | None = None) -> Summary:
  """Final and best value of each metric per member (see BEST_MEANS); mean and spread
  over seeds.

  ``configs`` (member name -> config) tell a finished member from an incomplete one.
  """
  configs = configs or {}
  statuses = statuses or {}
  runs = {m.name: run for m, run in zip(members, member_runs(members))}
  metrics = summary_metrics([r for run in runs.values() for r in run.epochs])
  rows = []
  for m in members:
    records = runs[m.name].epochs
    epochs = epochs_done(records)
    complete = m.name in configs and is_complete(configs[m.name], records)
    status = statuses.get(m.name) or ("finished" if complete else "incomplete")
    if status == "finished" and m.name in configs and not complete:
      status = "incomplete"
    row = {"member": m.name, "status": status, "epochs": epochs, **m.overrides}
    for metric in metrics:
      values = [r[metric] for r in records if isinstance(r.get(metric), (int, float))]
      # BEST_MEANS: every evaluation, as --select, report and compare take it.
      finite = [float(r[metric]) for r in runs[m.name].records(metric)
                if math.isfinite(r[metric])]
      row[f"final {metric}"] = values[-1] if values else None
      row[f"best {metric}"] = ((min if lower_is_better(metric) else max)(finite)
                               if finite else None)
    rows.append(row)
  return Summary(rows, metrics, _group_over_seeds(members, rows, metrics))


def _group_over_seeds(members, rows, metrics) -> list[dict[str, Any]]:
  seed_keys = {k for m in members for k in m.overrides if is_seed(k)}
  if not seed_keys or len({tuple(sorted(m.overrides.items())) for m in members}) < 2:
    return []
  settings = [{k: v for k, v in m.overrides.items() if k not in seed_keys} for m in members]
  keys = distinguishing_keys(settings)
  groups: dict[str, list[dict[str, Any]]] = {}
  for s, row in zip(settings, rows):
    groups.setdefault(setting_name(s, keys) or "all", []).append(row)
  out = []
  for name, group in groups.items():
    g = {"setting": name, "n": len(group),
         "n_finished": sum(r["status"] in ("finished", "skipped") for r in group)}
    for metric in metrics:
      for kind in ("final", "best"):
        values = [r[f"{kind} {metric}"] for r in group
                  if isinstance(r.get(f"{kind} {metric}"), (int, float))
                  and math.isfinite(r[f"{kind} {metric}"])]
        if values:
          g[f"{kind} {metric} mean"] = statistics.fmean(values)
          g[f"{kind} {metric} std"] = statistics.stdev(values) if len(values) > 1 else 0.0
          g[f"{kind} {metric} min"] = min(values)
          g[f"{kind} {metric} max"] = max(values)
    out.append(g)
  return out


def load_members(sweep_dir: str) -> list[Member]:
  """The members recorded in ``sweep_dir/sweep.json``."""
  record = read_sweep_file(sweep_dir)
  if record is None:
    raise UserError(f"{sweep_dir} holds no {SWEEP_FILE}: it is not a sweep directory.")
  return [Member(m["name"], m["overrides"], os.path.join(sweep_dir, m["workdir"]))
          for m in record["members"]]


def member_runs(members: Sequence[Member]) -> list[Run]:
  """The members as runs (an unstarted member has no config and no points)."""
  return [read_run(m.workdir, m.name) for m in members]


def select_members(members: Sequence[Member], metric: str,
                   keys: Sequence[str] | None = None) -> selection_lib.Selection:
  """The best setting of the members on ``metric``: settings are the members'
  overrides but the seed, named by ``keys`` (the sweep's ``setting_keys``)."""
  return selection_lib.select(member_runs(members), metric,
                              settings={m.workdir: m.overrides for m in members}, keys=keys)
