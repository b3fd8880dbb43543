"""A phase's JSON record, written as the phase goes.

Each phase writes one file, ``<out>/<phase>.json``: the machine it ran on, its
settings, its items (one per measurement, in the order they finished) and its status.
The file is rewritten after every item (through a temporary file and a rename), so a
phase stopped at its time limit, or failing half-way, leaves a valid record of what it
finished; its status then says ``running``, and ``run.sh`` marks it as stopped.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import tempfile
from typing import Any

from lnorm.analysis import gpu_report
from lnorm.analysis import specs
from lnorm.errors import UserError

#: The phases, in the order run.sh runs them; each writes ``<phase>.json``.
PHASES = gpu_report.PHASES

#: A phase's status: still going (or killed while it was), or how it ended.
STATUSES = ("running", "done", "failed", "stopped")


def now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def write_json(path: str, record: Any) -> None:
  """Writes ``record`` to ``path`` atomically: a reader never sees half a file."""
  folder = os.path.dirname(os.path.abspath(path))
  os.makedirs(folder, exist_ok=True)
  fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
  try:
    with os.fdopen(fd, "w") as f:
      json.dump(record, f, indent=1, default=str)
      f.write("\n")
    os.replace(tmp, path)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)


def read_json(path: str) -> Any:
  with open(path) as f:
    return json.load(f)


def log_tail(path: str, lines: int = 12) -> str:
  """The last ``lines`` lines of a log (for a record of what failed); '' when unreadable."""
  try:
    with open(path, errors="replace") as f:
      return "".join(f.readlines()[-lines:]).strip()
  except OSError:
    return ""


def phase_path(out: str, phase: str) -> str:
  return os.path.join(out, f"{phase}.json")


class PhaseRecord:
  """``<out>/<phase>.json``: ``{"phase", "toy", "settings", "machine", "started",
  "status", "items": [...], "notes": [...]}``, rewritten at every change."""

  def __init__(self, out: str, phase: str, *, toy: bool, settings: dict[str, Any],
               machine: dict[str, Any] | None = None):
    if phase not in PHASES:
      raise ValueError(f"Unknown phase {phase!r}; the phases: {', '.join(PHASES)}.")
    self.path = phase_path(out, phase)
    self.data: dict[str, Any] = {
        "phase": phase, "toy": toy, "settings": settings, "machine": machine or {},
        "started": now(), "status": "running", "items": [], "notes": []}
    self._write()

  def add(self, item: dict[str, Any]) -> None:
    self.data["items"].append(item)
    self._write()

  def note(self, text: str) -> None:
    self.data["notes"].append(text)
    self._write()

  def set(self, key: str, value: Any) -> None:
    self.data[key] = value
    self._write()

  def finish(self, status: str = "done") -> None:
    if status not in STATUSES:
      raise ValueError(f"Unknown status {status!r}; use one of {', '.join(STATUSES)}.")
    self.data.update(status=status, finished=now())
    self._write()

  def _write(self) -> None:
    write_json(self.path, self.data)


def mark_stopped(out: str, phase: str, why: str) -> bool:
  """Marks a phase record still ``running`` as ``stopped`` (its process was killed at
  its time limit, or died): returns whether there was such a record."""
  path = phase_path(out, phase)
  if not os.path.exists(path):
    return False
  data = read_json(path)
  if data.get("status") != "running":
    return False
  data.update(status="stopped", finished=now())
  data.setdefault("notes", []).append(why)
  write_json(path, data)
  return True


def collect(out: str, root: str | None = None) -> str:
  """Files the records run.sh wrote into ``out`` under ``root/<device>/`` (default
  the repository's results/gpu/), where docs/gpu.md's tables are generated from; the
  fig6 phase's members' files go to ``fig6/<experiment>/<member>/``, as the benchmark's
  records (``lnorm benchmark --report-only --records <that fig6 folder>``). Returns the
  device's folder."""
  device_path = phase_path(out, "device")
  if not os.path.exists(device_path):
    raise UserError(f"No device.json in {out}: the device phase did not run there, and "
                    "the records need it to name the device. Rerun run.sh's device phase.")
  device = read_json(device_path)
  if device.get("toy"):
    raise UserError(f"The records in {out} are a rehearsal's (toy sizes): only a device's "
                    "run at the papers' sizes goes under results/gpu/.")
  slug = (device.get("device") or {}).get("slug")
  if not slug:
    raise UserError(f"{device_path} names no device (its phase {device.get('status')}): "
                    "rerun run.sh's device phase.")
  dest = os.path.join(root or gpu_report.DEFAULT_ROOT, slug)
  os.makedirs(dest, exist_ok=True)
  for phase in PHASES:
    if os.path.exists(phase_path(out, phase)):
      record = read_json(phase_path(out, phase))
      if "out" in record.get("settings", {}):  # The device's folder: no reader's.
        record["settings"]["out"] = "$OUT"
      with open(phase_path(dest, phase), "w") as f:
        json.dump(record, f, indent=1)
  fig6 = read_json(phase_path(out, "fig6")) if os.path.exists(phase_path(out, "fig6")) else {}
  # A record from before the phase named its experiment is the one its spec declares.
  experiment = fig6.get("experiment") or specs.with_gpu_benchmark().name
  for member, files in fig6.get("members", {}).items():
    folder = os.path.join(dest, "fig6", experiment, member)
    os.makedirs(folder, exist_ok=True)
    for name, content in files.items():
      data = (base64.b64decode(content["base64"]) if isinstance(content, dict)
              else content.encode())
      with open(os.path.join(folder, name), "wb") as f:
        f.write(data)
  return dest
