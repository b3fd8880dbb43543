"""Ctrl-C (SIGINT) and SIGTERM (a cluster's preemption, ``timeout``) as a flag that a
command checks at safe points, so that it saves and stops instead of dying wherever
the signal lands: the one signal mechanism of ``lnorm train`` and of the commands that
run members (``lnorm sweep``, ``lnorm benchmark``).

Python's own SIGINT handler raises ``KeyboardInterrupt`` in whatever code runs when
the signal arrives; when that is a garbage-collection callback (JAX registers one) or
a ``__del__``, Python prints "Exception ignored" and drops the exception, and the run
trains on to its end (about one early Ctrl-C in seven did). :class:`StopSignals` only
records the signal; ``lnorm train`` installs it before it imports JAX, and the loop
checks :attr:`StopSignals.received` between phases and after every train call.

Two exceptions to "only a flag":

- :meth:`StopSignals.interruptible` marks code that holds none of the run's state
  (loading and decoding the data, up to 30 s the first time; the imports before it),
  where a signal stops at once, as a ``KeyboardInterrupt``, raised only where that
  is safe (``_safe_to_raise``: not inside an import, for one), else tried again
  10 ms later (a SIGALRM) until it is; one that Python dropped all the same (a
  weakref callback's) is tried again too.
- A second Ctrl-C ends the process at once, without saving (a save that hangs, an
  impatient user): a checkpoint is written to a temporary folder and renamed when
  complete, so the rerun resumes from the last complete one.

A command that runs members (each a ``lnorm train`` process) starts them through
:meth:`StopSignals.start`: a signal is passed on to every member running, each of
which saves a checkpoint and exits (or ends normally if it was in its last epoch), and
a member started after the signal gets it at once. Such a command catches SIGTERM
only (``StopSignals(signal.SIGTERM)``): a Ctrl-C at the terminal reaches its members
directly. It checks :attr:`StopSignals.received` before it starts a member.

Signals reach the main thread only: entered in another thread, it installs nothing.
Entered again while entered (a benchmark's sweeps), it stays as it is.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import signal
import subprocess
import sys
from typing import Iterator

from lnorm.errors import Interrupted

#: How soon an interrupt that was not safe to raise is tried again.
_RETRY_SECS = 0.01


def _safe_to_raise(frame, region=None) -> bool:
  """Whether a ``KeyboardInterrupt`` raised in ``frame`` stops the code cleanly. Not
  inside a garbage-collection callback (JAX's runs at every collection) or a
  finalizer, where Python prints it as "Exception ignored" and goes on; not inside
  an import (JAX's, cut short, crashed the process as it exited: SIGSEGV); not inside
  code that ``exec`` runs from a string (``dataclasses`` makes its methods so):
  Python remembers a KeyboardInterrupt that left such code, caught or not, and ends
  the process by SIGINT instead of with its exit code. Only the frames from ``frame``
  up to ``region``'s (the frame that entered the interruptible region) count: what
  called the region is outside it (a test runner may itself run from a string)."""
  callbacks = {getattr(c, "__code__", None) for c in gc.callbacks}
  while frame is not None:
    code = frame.f_code
    if (code in callbacks or code.co_name == "__del__" or code.co_filename == "<string>"
        or code.co_filename.startswith("<frozen importlib")):
      return False
    if frame is region:
      break
    frame = frame.f_back
  return True


class StopSignals:
  """While entered, the signals caught (by default SIGINT and SIGTERM) set
  :attr:`received` (the first one's name) and reach the members it started."""

  def __init__(self, *caught: signal.Signals):
    self._caught = caught or (signal.SIGINT, signal.SIGTERM)
    self.received: str | None = None
    self._ctrl_c = 0
    self._previous = {}
    self._depth = 0
    self._interruptible = False
    self._region = None  # The frame that entered the interruptible region.
    self._members: set[subprocess.Popen] = set()

  def __enter__(self) -> "StopSignals":
    self._depth += 1
    if self._depth > 1:
      return self
    # SIGINT is Ctrl-C; SIGTERM a scheduler's or ``timeout``'s; SIGALRM the retry.
    handlers = [(sig, self._handle) for sig in self._caught] + [(signal.SIGALRM,
                                                                 self._retry)]
    for sig, handler in handlers:
      try:
        self._previous[sig] = signal.signal(sig, handler)
      except ValueError:  # Not the main thread: leave signals alone.
        pass
    return self

  def __exit__(self, *exc) -> bool:
    self._depth -= 1
    if self._depth:
      return False
    if self._previous:
      signal.setitimer(signal.ITIMER_REAL, 0)  # A retry due must not find SIGALRM's default.
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)
    self._previous.clear()
    return False

  def _handle(self, signum, frame) -> None:
    for member in list(self._members):
      _send(member, signum)
    if signum == signal.SIGINT:
      self._ctrl_c += 1
      if self._ctrl_c > 1:
        sys.stderr.write("lnorm: a second Ctrl-C: stopped at once, without saving. "
                         "Rerun the same command: it resumes from the latest complete "
                         "checkpoint.\n")
        sys.stderr.flush()
        os._exit(128 + signal.SIGINT)  # The shell's code for a process ended by SIGINT.
    self.received = self.received or signal.Signals(signum).name
    self._retry(signum, frame)

  def _retry(self, signum, frame) -> None:
    """Inside an interruptible region, stops it: now, or where that is not safe, a
    moment later (SIGALRM calls this again)."""
    del signum
    if not (self._interruptible and self.received):
      return
    if not _safe_to_raise(frame, self._region):
      signal.setitimer(signal.ITIMER_REAL, _RETRY_SECS)
      return
    raise KeyboardInterrupt

  def start(self, argv, **popen_kwargs) -> subprocess.Popen:
    """Starts a member's process, which a signal caught from now on reaches."""
    member = subprocess.Popen(argv, **popen_kwargs)
    self._members.add(member)
    if self.received:  # The signal came after the caller's check, before the process.
      _send(member, signal.Signals[self.received])
    return member

  def wait(self, member: subprocess.Popen) -> int:
    """The member's exit code, once it has exited."""
    try:
      return member.wait()
    finally:
      self._members.discard(member)

  def check(self, what: str) -> None:
    """Raises :class:`Interrupted` when a signal asked to stop; ``what`` follows
    "Stopped by SIGINT": where the run stopped and what the rerun does."""
    if self.received:
      raise Interrupted(f"Stopped by {self.received} {what}")

  @contextlib.contextmanager
  def interruptible(self, what: str) -> Iterator[None]:
    """A signal stops the code inside at once (see the module); ``what`` as for
    :meth:`check`, said whether it stopped inside or was asked before."""
    self.check(what)
    # This generator's caller is contextlib's __enter__, whose caller holds the region.
    self._region = sys._getframe(0).f_back.f_back  # pylint: disable=protected-access
    previous_hook = sys.unraisablehook
    sys.unraisablehook = functools.partial(self._dropped, previous_hook)
    self._interruptible = True
    try:
      yield
    except KeyboardInterrupt:
      if not self.received:  # Not ours: leave it to the caller.
        raise
    finally:
      self._interruptible, self._region = False, None
      sys.unraisablehook = previous_hook
    self.check(what)

  def _dropped(self, previous_hook, unraisable) -> None:
    """Python could not raise an exception and dropped it (in a weakref callback, or
    any other place ``_safe_to_raise`` does not know): when it was the interrupt, it
    is tried again in a moment, unprinted."""
    if unraisable.exc_type is KeyboardInterrupt and self._interruptible and self.received:
      signal.setitimer(signal.ITIMER_REAL, _RETRY_SECS)
    else:
      previous_hook(unraisable)


def _send(member: subprocess.Popen, signum: int) -> None:
  try:
    member.send_signal(signum)
  except ProcessLookupError:  # It has just exited.
    pass
