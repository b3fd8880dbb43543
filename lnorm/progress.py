"""Progress of long stages: a live bar on a terminal, a plain line now and then elsewhere.

A bar redraws itself with carriage returns: right on a terminal, but in a log file (a
sweep member's ``train.log``, a cluster job's output) every redraw stays, and 450
updates fill tens of kilobytes of one unreadable line. So a :class:`Progress` shows a
tqdm bar only when its stream is a terminal, and otherwise logs one plain line every
``every_secs`` seconds, with the same count, rate and time left. While a bar is drawn,
log records sent to the console are written above it (tqdm's logging redirect).

The rate leaves out the first update, which in a jitted loop includes compilation;
the time left is then (total - done) / rate.

  with Progress("epoch 1/3", total=1200, unit="step") as progress:
    for ...:
      progress.update(20, loss="0.1234")

``stage`` reports a long stage without a count of its own: that it is running, and
how long it took.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from typing import Any, Callable, Iterator, TextIO

#: Seconds between two plain progress lines when the output is not a terminal.
DEFAULT_EVERY_SECS = 30.0

_log = logging.getLogger(__name__)


def is_terminal(stream: TextIO) -> bool:
  try:
    return bool(stream.isatty())
  except (AttributeError, ValueError):  # No isatty, or a closed stream.
    return False


def format_seconds(seconds: float) -> str:
  """'0:42', '12:03' or '3:05:09'."""
  seconds = max(int(round(seconds)), 0)
  hours, rest = divmod(seconds, 3600)
  minutes, secs = divmod(rest, 60)
  return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
  """Counts the units of one stage towards ``total`` (None: unknown).

  Args:
    desc: what is counted, e.g. 'epoch 2/3' or 'evaluate test'; change it with
      :meth:`set_description`.
    total: the count at which the stage ends; None if not known.
    initial: the count already done (a resumed run).
    unit: the singular name of what is counted.
    every_secs: when the stream is not a terminal, a line at most this often (0: at
      every update).
    enabled: False shows nothing at all.
    stream: where a bar is drawn (default stderr); lines go to ``log``.
    delay_secs: a bar appears only once the stage lasted this long, so that short
      stages do not flicker.
    log: how a plain line is written (default: this module's logger, at INFO).
    clock: seconds, for tests.
  """

  def __init__(self, desc: str, total: int | None = None, initial: int = 0,
               unit: str = "step", every_secs: float = DEFAULT_EVERY_SECS,
               enabled: bool = True, stream: TextIO | None = None, delay_secs: float = 0.0,
               log: Callable[[str], Any] | None = None,
               clock: Callable[[], float] = time.monotonic):
    self.desc = desc
    self.total = total
    self.n = initial
    self.unit = unit
    self._units = unit + ("es" if unit.endswith(("s", "sh", "ch", "x")) else "s")
    self.every_secs = every_secs
    self._log = log or _log.info
    self._clock = clock
    self._start = clock()
    self._last_line = self._start
    self._lines_written = 0
    self._n_at_last_line = initial
    self._first_update: tuple[float, int] | None = None
    self._postfix: dict[str, Any] = {}
    self._bar = None
    self._closed = False
    stream = sys.stderr if stream is None else stream
    self._lines = enabled and not is_terminal(stream)
    self._redirect = None
    if enabled and not self._lines:
      from tqdm import tqdm  # pylint: disable=g-import-not-at-top
      from tqdm.contrib import logging as tqdm_logging  # pylint: disable=g-import-not-at-top
      self._bar = tqdm(total=total, initial=initial, desc=desc, unit=unit, file=stream,
                       leave=False, mininterval=1.0, delay=delay_secs, dynamic_ncols=True)
      # Log records written to the console while the bar is drawn go above it, on lines
      # of their own, instead of onto the bar's line.
      self._redirect = tqdm_logging.logging_redirect_tqdm()
      self._redirect.__enter__()

  def __enter__(self) -> "Progress":
    return self

  def __exit__(self, *exc) -> bool:
    self.close()
    return False

  def set_description(self, desc: str) -> None:
    self.desc = desc
    if self._bar is not None:
      self._bar.set_description(desc, refresh=False)

  def update(self, n: int = 1, **postfix: Any) -> None:
    """Adds ``n`` done units; ``postfix`` (name=value) is shown after the count."""
    self.n += n
    now = self._clock()
    if self._first_update is None:
      self._first_update = (now, self.n)
    self._postfix.update(postfix)
    if self._bar is not None:
      if postfix:
        self._bar.set_postfix(self._postfix, refresh=False)
      self._bar.update(n)
    elif self._lines and now - self._last_line >= self.every_secs:
      self._write_line(now)

  def rate(self, now: float | None = None) -> float | None:
    """Units per second since the first update, which is left out (it compiles)."""
    if self._first_update is None:
      return None
    now = self._clock() if now is None else now
    t0, n0 = self._first_update
    if self.n <= n0 or now <= t0:
      return None
    return (self.n - n0) / (now - t0)

  def line(self, now: float | None = None) -> str:
    """The plain progress line: count, share, rate, time left and the postfix."""
    now = self._clock() if now is None else now
    parts = [f"{self.n}/{self.total}" if self.total else f"{self.n}"]
    parts[0] += f" {self._units}"
    if self.total:
      parts[0] += f" ({100.0 * self.n / self.total:.0f}%)"
    rate = self.rate(now)
    if rate:
      parts.append(f"{rate:.3g} {self._units}/s")
      if self.total and self.n < self.total:
        parts.append(f"{format_seconds((self.total - self.n) / rate)} left")
    parts.append(f"{format_seconds(now - self._start)} so far")
    parts += [f"{k}={v}" for k, v in self._postfix.items()]
    return f"{self.desc}: " + ", ".join(parts)

  def _write_line(self, now: float) -> None:
    self._log(self.line(now))
    self._last_line = now
    self._n_at_last_line = self.n
    self._lines_written += 1

  def close(self) -> None:
    """Ends the stage. A stage that wrote progress lines also writes its last count."""
    if self._closed:
      return
    self._closed = True
    if self._bar is not None:
      self._bar.close()
      self._redirect.__exit__(None, None, None)
    elif self._lines and self._lines_written and self.n != self._n_at_last_line:
      self._write_line(self._clock())


@contextlib.contextmanager
def stage(name: str, quiet_secs: float = 5.0, every_secs: float = DEFAULT_EVERY_SECS,
          log: Callable[[str], Any] | None = None) -> Iterator[None]:
  """Reports a long stage that has no count of its own (a task's evaluation hook).

  A stage that ends within ``quiet_secs`` says nothing: hooks that run often and fast
  must not flood the log. A longer one says that it is running once it has run
  ``quiet_secs``, again every ``every_secs``, and how long it took when it ends.
  """
  log = log or _log.info
  start = time.monotonic()
  done = threading.Event()
  reported = threading.Event()

  def heartbeat():
    wait = quiet_secs
    while not done.wait(wait):
      log(f"{name}: running, {format_seconds(time.monotonic() - start)} so far.")
      reported.set()
      wait = max(every_secs, 1e-3)

  thread = threading.Thread(target=heartbeat, name=f"progress: {name}", daemon=True)
  thread.start()
  outcome = "failed"
  try:
    yield
    outcome = "done"
  finally:
    done.set()
    thread.join()
    if reported.is_set():
      log(f"{name}: {outcome} in {format_seconds(time.monotonic() - start)}.")
