"""lnorm.progress: a bar on a terminal, plain lines every few seconds elsewhere, with a
rate that leaves out the first (compiling) update."""

from __future__ import annotations

import io
import logging
import sys
import time

import pytest

from lnorm.progress import Progress, format_seconds, stage


class FakeClock:
  def __init__(self):
    self.now = 100.0

  def __call__(self):
    return self.now


class Terminal(io.StringIO):
  def isatty(self):
    return True


def lines_progress(total=1200, initial=0, every_secs=30.0):
  clock, lines, stream = FakeClock(), [], io.StringIO()
  progress = Progress("epoch 1/3", total=total, initial=initial, every_secs=every_secs,
                      stream=stream, log=lines.append, clock=clock)
  return progress, clock, lines, stream


def test_format_seconds():
  assert [format_seconds(s) for s in (0, 42.4, 723, 11109)] == [
      "0:00", "0:42", "12:03", "3:05:09"]


def test_plain_lines_come_every_so_many_seconds_with_rate_and_time_left():
  progress, clock, lines, stream = lines_progress()
  clock.now += 10.0  # The first call compiles: 20 steps in 10 s.
  progress.update(20, loss="0.5000")
  assert lines == []  # Not 30 s yet.
  for _ in range(10):  # Then 20 steps a second.
    clock.now += 1.0
    progress.update(20)
  assert lines == []
  clock.now += 19.0
  progress.update(380)
  # 600 steps done, 580 of them in the 29 s since the first update: 20 steps/s (the
  # first update's 20 steps in 10 s left out), so the 600 to go take 30 s.
  assert lines == ["epoch 1/3: 600/1200 steps (50%), 20 steps/s, 0:30 left, "
                   "0:39 so far, loss=0.5000"]
  assert stream.getvalue() == ""  # Nothing drawn, no carriage return anywhere.
  clock.now += 29.0
  progress.update(20)
  assert len(lines) == 1
  clock.now += 1.0
  progress.update(20)
  assert len(lines) == 2 and lines[1].startswith("epoch 1/3: 640/1200 steps (53%)")


def test_last_count_is_written_when_the_stage_ends():
  progress, clock, lines, _ = lines_progress(every_secs=5.0)
  clock.now += 6.0
  progress.update(100)
  progress.set_description("epoch 2/3")
  clock.now += 1.0
  progress.update(100)
  progress.close()
  assert [l.split(",")[0] for l in lines] == ["epoch 1/3: 100/1200 steps (8%)",
                                              "epoch 2/3: 200/1200 steps (17%)"]
  progress.close()  # Twice is harmless.
  assert len(lines) == 2


def test_a_short_stage_writes_nothing():
  progress, clock, lines, _ = lines_progress()
  clock.now += 3.0
  progress.update(1200)
  progress.close()
  assert lines == []


def test_resumed_count_starts_at_initial():
  progress, clock, lines, _ = lines_progress(total=1200, initial=900, every_secs=0.0)
  clock.now += 1.0
  progress.update(20)
  assert lines[0].startswith("epoch 1/3: 920/1200 steps (77%)")


def test_disabled_shows_nothing():
  lines, stream = [], Terminal()
  progress = Progress("x", total=10, enabled=False, stream=stream, log=lines.append,
                      every_secs=0.0)
  progress.update(5)
  progress.close()
  assert lines == [] and stream.getvalue() == ""


def test_a_terminal_gets_a_bar_towards_the_total():
  lines, stream = [], Terminal()
  progress = Progress("epoch 2/3", total=1200, initial=500, stream=stream,
                      log=lines.append, every_secs=0.0)
  progress.update(40, loss="0.1")
  bar = progress._bar  # pylint: disable=protected-access
  assert (bar.n, bar.total) == (540, 1200)
  progress.close()
  assert lines == []
  drawn = stream.getvalue()
  assert "\r" in drawn and "epoch 2/3" in drawn and "500/1200" in drawn


def test_log_records_go_above_the_bar_on_lines_of_their_own(monkeypatch):
  terminal = Terminal()
  monkeypatch.setattr(sys, "stderr", terminal)
  console = logging.StreamHandler(sys.stderr)  # The console handler `lnorm` sets up.
  console.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="12:34:56"))
  root = logging.getLogger()
  monkeypatch.setattr(root, "handlers", [console])
  monkeypatch.setattr(root, "level", logging.INFO)
  progress = Progress("epoch 1/2", total=10, every_secs=0.0)
  progress.update(3, loss="0.5")
  progress._bar.refresh()  # pylint: disable=protected-access
  logging.getLogger("lnorm.test").info("evaluated at step 3")
  progress.update(2)
  progress._bar.refresh()  # pylint: disable=protected-access
  progress.close()
  # Each screen line is what follows its last carriage return: the record has a line
  # of its own, whole, and the bar's line never holds a part of it.
  screen = [line.split("\r")[-1] for line in terminal.getvalue().split("\n")]
  assert "12:34:56 evaluated at step 3" in screen
  # The bar was wiped (blanks) before the record was written.
  raw = next(line for line in terminal.getvalue().split("\n") if "evaluated" in line)
  assert raw.split("\r")[-2].strip() == ""
  # Afterwards the console handler is the one `lnorm` set up again.
  assert root.handlers == [console]


def test_stage_is_silent_when_short_and_reports_when_long():
  lines = []
  with stage("quick", quiet_secs=5.0, log=lines.append):
    pass
  assert lines == []
  with stage("slow", quiet_secs=0.05, every_secs=10.0, log=lines.append):
    time.sleep(0.3)
  assert len(lines) == 2
  assert lines[0].startswith("slow: running, 0:00 so far")
  assert lines[1] == "slow: done in 0:00."
  lines.clear()
  with pytest.raises(RuntimeError):
    with stage("broken", quiet_secs=0.05, log=lines.append):
      time.sleep(0.3)
      raise RuntimeError("boom")
  assert lines[-1] == "broken: failed in 0:00."
