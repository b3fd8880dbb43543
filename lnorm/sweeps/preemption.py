"""SIGTERM to a command that runs members (``lnorm sweep``, ``lnorm benchmark``): a
cluster's preemption, or ``timeout``.

Such a command must stop within seconds, with what it has saved, and say so with a
non-zero exit; the same command then resumes. Inside :func:`forwarding` a SIGTERM
marks the command as stopping and is passed on to every member now running (each
saves a checkpoint and exits, or ends normally if the signal found it in its last
epoch); a member started after the signal (the signal landed between two members)
gets it at once. The command checks :func:`stopping` before it starts a member and
after the members it waited for, and raises :class:`Interrupted`.

Signals reach the main thread only, so the handler is installed there; nested uses
(a benchmark's sweeps) share the outermost one.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from typing import Iterator

from lnorm import errors

#: Members' processes now running, to pass a SIGTERM on to.
_running: set[subprocess.Popen] = set()
#: The name of the signal that asked the command to stop, if one did.
_received: str | None = None
_depth = 0
_previous = None


class Interrupted(errors.Interrupted):
  """A command that runs members stopped on a signal; the CLI exits with 130."""


def _handle(signum, frame) -> None:
  del frame
  global _received
  _received = signal.Signals(signum).name
  for proc in list(_running):
    _send(proc, signum)


def _send(proc: subprocess.Popen, signum: int) -> None:
  try:
    proc.send_signal(signum)
  except ProcessLookupError:  # It has just exited.
    pass


@contextlib.contextmanager
def forwarding() -> Iterator[None]:
  """While inside, SIGTERM stops the command and reaches its members (see module)."""
  global _depth, _previous, _received
  if threading.current_thread() is not threading.main_thread():
    yield  # Signals go to the main thread, whose own use of this handles them.
    return
  if _depth == 0:
    _received = None
    _previous = signal.signal(signal.SIGTERM, _handle)
  _depth += 1
  try:
    yield
  finally:
    _depth -= 1
    if _depth == 0:
      signal.signal(signal.SIGTERM, _previous)


def stopping() -> str | None:
  """The signal that asked the command to stop ('SIGTERM'), or None."""
  return _received


def check(what: str) -> None:
  """Raises Interrupted when a signal asked the command to stop; ``what`` says what
  stopped and what the rerun does."""
  if _received:
    raise Interrupted(f"Stopped by {_received}: {what}")


def start(argv, **popen_kwargs) -> subprocess.Popen:
  """Starts a member's process, which a later SIGTERM reaches."""
  proc = subprocess.Popen(argv, **popen_kwargs)
  _running.add(proc)
  if _received:  # The signal came after the caller's check, before the process.
    _send(proc, signal.SIGTERM)
  return proc


def wait(proc: subprocess.Popen) -> int:
  """The member's exit code, once it has exited."""
  try:
    return proc.wait()
  finally:
    _running.discard(proc)
