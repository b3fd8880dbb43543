"""One process per workdir, and paths that can hold a run or an output file.

A job resubmitted while the first still runs would otherwise take the fresh workdir
for a crashed attempt, replace its records and interleave two runs' steps in
``metrics.jsonl``. ``hold`` takes an flock on a file in the workdir: the kernel
releases it when its process ends, however it ends (kill -9 too), so a lock file left
behind never blocks a rerun. The PID written into the file only names the holder.

Light on purpose (no JAX): ``lnorm sweep`` holds its folder with it too.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import sys
import time
from typing import Any, Iterator

from lnorm.errors import UserError, WorkdirInUseError

LOCK_FILE = ".lnorm.lock"


def make_workdir(workdir: str, flag: str = "--workdir") -> str:
  """Creates ``workdir`` (and its parents) and returns its absolute path; a path that
  cannot be a writable folder is a UserError naming the reason and the fix."""
  workdir = os.path.abspath(workdir)
  blocking = next((p for p in _self_and_parents(workdir)
                   if os.path.exists(p) and not os.path.isdir(p)), None)
  if blocking == workdir:
    raise UserError(f"{flag} {workdir} is a file, not a folder: choose another {flag}.")
  if blocking:
    raise UserError(f"{flag} {workdir} cannot be made: {blocking} is a file, not a "
                    f"folder. Choose another {flag}.")
  too_long = next((n for n in workdir.split(os.sep) if len(os.fsencode(n)) > NAME_MAX), None)
  if too_long:
    raise UserError(f"{flag} {_shorten(workdir)} cannot be made: a folder name may have "
                    f"at most {NAME_MAX} bytes, and {_shorten(too_long)} has "
                    f"{len(os.fsencode(too_long))}. Choose a shorter {flag}.")
  try:
    os.makedirs(workdir, exist_ok=True)
  except PermissionError:
    raise UserError(f"{flag} {workdir} cannot be made: permission denied. Choose a "
                    f"{flag} in a folder you can write to.") from None
  except OSError as e:
    raise UserError(f"{flag} {workdir} cannot be made: {_why_not_writable(e)}. Choose "
                    f"a {flag} on a disk you can write to.") from None
  if _read_only(workdir):
    raise UserError(f"{flag} {workdir} is on a read-only file system: choose a {flag} on "
                    "a disk you can write to.")
  if not os.access(workdir, os.W_OK | os.X_OK):
    raise UserError(f"{flag} {workdir} is not writable by you: choose another {flag}, "
                    "or make it writable (chmod u+w).")
  return workdir


#: The longest name of one file or folder on Linux and macOS file systems.
NAME_MAX = 255


def _shorten(text: str, keep: int = 40) -> str:
  """A long name as its start and end, so that a message stays one readable line."""
  return text if len(text) <= 2 * keep else f"{text[:keep]}...{text[-keep:]}"


def _why_not_writable(e: OSError) -> str:
  if e.errno == errno.EROFS:
    return "it is on a read-only file system"
  if e.errno in (errno.ENOSPC, errno.EDQUOT):
    return "the disk is full"
  return e.strerror or str(e)


def _read_only(path: str) -> bool:
  """True on a read-only mount, where even root cannot write (os.access says so too,
  but not why)."""
  try:
    return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
  except OSError:
    return False


def _self_and_parents(path: str) -> list[str]:
  """``path`` and its parents, the root first."""
  chain = [path]
  while os.path.dirname(chain[-1]) != chain[-1]:
    chain.append(os.path.dirname(chain[-1]))
  return chain[::-1]


@contextlib.contextmanager
def hold(workdir: str, command: str) -> Iterator[None]:
  """Holds the existing folder ``workdir`` for this process while the block runs, or
  raises WorkdirInUseError naming the process that holds it. ``command`` names this
  process's job in the message a second process gets ("lnorm train")."""
  path = os.path.join(workdir, LOCK_FILE)
  # Not truncated on open: a refused attempt must still read the holder's record.
  fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
  try:
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
        logging.warning("The file system of %s does not support locks: nothing keeps a "
                        "second process out of this workdir; start one at a time.", workdir)
        yield
        return
      if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
        raise
      raise WorkdirInUseError(in_use_message(workdir, _read_holder(fd))) from None
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "command": command,
              "started": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": sys.argv}
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(holder).encode() + b"\n", 0)
    yield
  finally:
    os.close(fd)  # Releases the lock. The file stays: harmless, and reused.


def _read_holder(fd: int) -> dict[str, Any]:
  try:
    return json.loads(os.pread(fd, 1 << 16, 0) or b"{}")
  except ValueError:  # The holder is writing it at this moment.
    return {}


def in_use_message(workdir: str, holder: dict[str, Any]) -> str:
  pid = holder.get("pid")
  if pid:
    who = f"process {pid}" + (f" on {holder['host']}" if holder.get("host") else "")
    if holder.get("command"):
      who += f" ({holder['command']}, started {holder.get('started', '?')})"
    stop = f"stop it with `kill -TERM {pid}`, which saves a checkpoint"
  else:
    who, stop = "another process", "stop it with SIGTERM, which saves a checkpoint"
  return (f"The workdir {workdir} is in use by {who}. Two processes in one workdir "
          "would overwrite each other's checkpoints and records. Wait for it to finish, "
          f"or {stop}, then rerun this command to resume; or give this run another "
          "--workdir.")


def make_output_file(path: str, flag: str = "--out") -> str:
  """Makes the folder of the output file ``path`` (``report --out runs/new/REPORT.md``)
  and returns the absolute path; a path that cannot be written is a UserError."""
  path = os.path.abspath(path)
  if os.path.isdir(path):
    raise UserError(f"{flag} {path} is a folder: give a file name in it, e.g. "
                    f"{os.path.join(path, 'REPORT.md')}.")
  make_workdir(os.path.dirname(path), flag=f"{flag}'s folder")
  return path
