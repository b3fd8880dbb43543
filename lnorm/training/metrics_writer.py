"""Writes every logged point to ``workdir/metrics.jsonl`` and to a wandb run.

``metrics.jsonl`` is the source of truth that plots, reports and tests read; wandb
gets the same scalars. The wandb run id is stored in the workdir, so a resumed run
continues the same wandb run.

A resumed run keeps the points up to the step it resumes from and logs the rest
again, so that every point is in the file once (the readers would keep both of a
point logged twice). A line a kill cut short is found by :func:`find_cut_line`, and
the run resumes before its step (``checkpoint_policy.resume``), so that its point is
logged again too.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import logging
import math
import os
import re
import uuid
from typing import Any, Iterator, Mapping

import jax
import numpy as np

from lnorm.config import did_you_mean
from lnorm.errors import ConfigError, UserError
from lnorm.training.run_files import METRICS_FILE, read_jsonl


def read_metrics(workdir: str) -> list[dict[str, Any]]:
  """The run's records. A line a kill cut short is skipped, so that the run resumes."""
  return read_jsonl(os.path.join(workdir, METRICS_FILE))


#: How every line begins (``MetricWriter.write`` puts the step first): the step of a
#: line cut short after it can still be read; one cut inside it (``{"step": 3`` of
#: 30) cannot.
_STEP_PREFIX = re.compile(r'\{"step": (\d+)[,}]')


@dataclasses.dataclass(frozen=True)
class CutLine:
  """The first line of a ``metrics.jsonl`` that is not a whole record.

  ``step``: the run must resume before it to log that line's point again: the step
  the line begins with, or when even that was cut, the step of the line before it
  (the points are in the order of their steps).
  """
  path: str
  number: int
  step: int
  step_known: bool

  def __str__(self) -> str:
    which = (f"a point of step {self.step}" if self.step_known
             else f"the point after one of step {self.step}")
    return f"Line {self.number} of {self.path} ({which})"


def _lines(path: str) -> Iterator[tuple[int, str, dict[str, Any] | None]]:
  """``(number, line, record)`` of each line that is not blank; ``record`` is None
  for one that is not a whole JSON object."""
  with open(path, encoding="utf-8", errors="replace") as f:
    for number, line in enumerate(f, 1):
      if not line.strip():
        continue
      try:
        record = json.loads(line)
      except json.JSONDecodeError:
        record = None
      yield number, line, record if isinstance(record, dict) else None


def find_cut_line(workdir: str) -> CutLine | None:
  """The first line of ``workdir``'s metrics that is not a whole record, or None."""
  path = os.path.join(workdir, METRICS_FILE)
  if not os.path.exists(path):
    return None
  last_step = 0
  for number, line, record in _lines(path):
    if record is None:
      match = _STEP_PREFIX.match(line)
      return CutLine(path, number, int(match.group(1)) if match else last_step,
                     step_known=bool(match))
    last_step = record.get("step", last_step)
  return None


def _plain(value: Any) -> Any:
  if isinstance(value, (np.generic, np.ndarray, jax.Array)):
    value = np.asarray(value).item()
  if isinstance(value, float) and not math.isfinite(value):
    return str(value)  # JSON has no NaN; keep it visible rather than invalid.
  return value


def wandb_installed() -> bool:
  """Whether the wandb package can be imported (it is optional: lnorm runs without it)."""
  try:
    return importlib.util.find_spec("wandb") is not None
  except (ImportError, ValueError):  # ValueError: a module entry without a spec.
    return False


#: What ``$WANDB_MODE`` may say: wandb's own modes ('dryrun' and 'run' are its old names
#: for offline and online). Empty counts as unset.
ENVIRONMENT_MODES = ("online", "offline", "disabled", "shared", "dryrun", "run")

#: How long ``wandb.init`` may try to reach the server before the run logs offline
#: instead: wandb's own default waits 90 s, then raises. ``$WANDB_INIT_TIMEOUT`` wins.
INIT_TIMEOUT_SECONDS = 30.0


def _environment_mode() -> str:
  """``$WANDB_MODE``, '' when unset or blank; a one-line error for a value wandb would
  refuse with a traceback."""
  env = os.environ.get("WANDB_MODE", "").strip()
  if env and env not in ENVIRONMENT_MODES:
    raise ConfigError(
        f"WANDB_MODE={env!r} in the environment is not a wandb mode"
        f"{did_you_mean(env, ENVIRONMENT_MODES)}: wandb reads it whatever the config says. "
        "Set it to online, offline or disabled, or unset it.")
  return env


def wandb_mode(configured: str) -> tuple[str, str]:
  """The wandb mode to run in, and why (for the log).

  An explicit ``wandb.mode`` wins over ``$WANDB_MODE``: a config override is the more
  deliberate, more local choice, and wandb itself ranks ``wandb.init``'s arguments above
  its environment. 'auto' defers to ``$WANDB_MODE`` (unless empty), else is disabled
  when wandb is not installed, online with credentials and offline without. A
  ``$WANDB_MODE`` that wandb would refuse is an error wherever wandb runs, since wandb
  reads it even when given a mode.
  """
  if configured == "disabled":
    env = os.environ.get("WANDB_MODE", "").strip()  # Not checked: wandb never reads it.
  else:
    env = _environment_mode()
  if configured != "auto":
    why = f"wandb.mode={configured} in the config"
    if env and env != configured:
      why += f"; WANDB_MODE={env} in the environment is ignored"
    return configured, why
  if env:
    return env, f"WANDB_MODE={env} in the environment, as wandb.mode is auto"
  if not wandb_installed():
    return "disabled", ("wandb.mode is auto and wandb is not installed (`pip install "
                        "wandb` to log there)")
  has_key = bool(os.environ.get("WANDB_API_KEY"))
  netrc = os.path.expanduser("~/.netrc")
  if not has_key and os.path.exists(netrc):
    with open(netrc) as f:
      has_key = "api.wandb.ai" in f.read()
  if has_key:
    return "online", "wandb.mode is auto and an API key was found"
  return "offline", "wandb.mode is auto and no API key was found; upload with `wandb sync`"


def import_wandb(mode: str, why: str):
  """The wandb module, for logging in ``mode`` (asked for as ``why`` says); a one-line
  error naming the fix when it is not installed."""
  if "WANDB_MODE" in os.environ and not os.environ["WANDB_MODE"].strip():
    # `WANDB_MODE= lnorm train`: unset for lnorm, a validation traceback for wandb.
    del os.environ["WANDB_MODE"]
  try:
    # Imported only when used: slow to import, and optional.
    return importlib.import_module("wandb")
  except ImportError as e:
    raise ConfigError(
        f"wandb logging in mode {mode} is asked for ({why}), but wandb is not installed "
        f"({e}): `pip install wandb`, or turn it off with --config.wandb.mode=disabled "
        "(or WANDB_MODE=disabled).") from e


def start_wandb(workdir: str, config: Mapping[str, Any], wandb_config: Any,
                several: bool = False):
  """The run's wandb run, or None when wandb is disabled; ``several``: one of several
  runs this process logs at once (seeds trained together), each a wandb run of its
  own.

  Online, a server that cannot be reached within INIT_TIMEOUT_SECONDS (no network, a
  firewall) is not a reason to lose the run: it logs offline instead, with one warning
  that says how to upload it later. A login wandb refuses is an error, since only the
  user can fix it."""
  mode, why = wandb_mode(wandb_config.mode)
  logging.info("wandb: %s (%s).", mode, why)
  if mode == "disabled":
    return None
  wandb = import_wandb(mode, why)
  arguments = dict(
      project=wandb_config.project, entity=wandb_config.get("entity") or None,
      group=wandb_config.get("group") or None, name=wandb_config.get("name") or None,
      tags=list(wandb_config.get("tags", ()) or ()), config=dict(config),
      dir=workdir, id=stable_run_id(workdir), resume="allow",
      **({"reinit": "create_new"} if several else {}))
  # $WANDB_INIT_TIMEOUT, when set, is wandb's; passed settings would override it.
  settings = (None if os.environ.get("WANDB_INIT_TIMEOUT")
              else wandb.Settings(init_timeout=INIT_TIMEOUT_SECONDS))
  try:
    run = wandb.init(mode=mode, settings=settings, **arguments)
  except (wandb.errors.UsageError, wandb.errors.AuthenticationError) as e:
    # Online without a login (or with a rejected key): one line, not a traceback.
    raise UserError(
        f"wandb could not start in {mode} mode ({why}): {str(e).rstrip('.')}. To "
        "log in: `wandb login`, or set WANDB_API_KEY; or run without an account: "
        "--config.wandb.mode=offline (upload later with `wandb sync`) or "
        "--config.wandb.mode=disabled.") from None
  except wandb.errors.CommError as e:
    wandb.teardown()  # The failed run holds its id in wandb's service until then.
    run = wandb.init(mode="offline", **arguments)
    logging.warning(
        "wandb could not reach its server in %s mode (%s), so this run logs offline: "
        "upload it later with `wandb sync %s`.", mode, str(e).splitlines()[0].rstrip("."),
        run.settings.sync_dir)
    mode = "offline"
  logging.info("wandb run %s (%s mode).", run.id, mode)
  return run


def stable_run_id(workdir: str) -> str:
  """The workdir's wandb id, created once and kept in ``workdir/wandb_id``."""
  path = os.path.join(workdir, "wandb_id")
  if os.path.exists(path):
    with open(path) as f:
      return f.read().strip()
  run_id = uuid.uuid4().hex[:12]
  with open(path, "w") as f:
    f.write(run_id)
  return run_id


class MetricWriter:
  """Appends metric points; only process 0 writes."""

  def __init__(self, workdir: str, config: Mapping[str, Any], wandb_config: Any,
               resume_step: int = 0, several: bool = False):
    self.workdir = workdir
    self.active = jax.process_index() == 0
    self._run = None
    if not self.active:
      return
    self._truncate_after(resume_step)
    self._run = start_wandb(workdir, config, wandb_config, several)

  def _truncate_after(self, step: int) -> None:
    """Drops the points logged after the checkpoint we resume from, and lines cut
    short: the run makes them again (see the module)."""
    path = os.path.join(self.workdir, METRICS_FILE)
    kept = [r for _, _, r in (_lines(path) if step and os.path.exists(path) else ())
            if r is not None and r.get("step", 0) <= step]
    with open(path, "w") as f:
      for r in kept:
        f.write(json.dumps(r) + "\n")

  def write(self, step: int, metrics: Mapping[str, Any]) -> None:
    if not self.active:
      return
    record = {"step": int(step), **{k: _plain(v) for k, v in metrics.items()}}
    with open(os.path.join(self.workdir, METRICS_FILE), "a") as f:
      f.write(json.dumps(record) + "\n")
    if self._run is not None:
      self._run.log({k: v for k, v in record.items() if k != "step"}, step=int(step))

  def write_images(self, step: int, images: Mapping[str, str]) -> None:
    """Logs PNG files already written to the workdir (``name -> path``) to wandb."""
    if self._run is not None:
      wandb = importlib.import_module("wandb")  # Imported when the run started.
      self._run.log({k: wandb.Image(p) for k, p in images.items()}, step=int(step))

  def summary(self, values: Mapping[str, Any]) -> None:
    if self._run is not None:
      self._run.summary.update({k: _plain(v) for k, v in values.items()})

  def close(self) -> None:
    if self._run is not None:
      self._run.finish()
      self._run = None
