"""Ctrl-C and SIGTERM during `lnorm train` (issue 56, item 5): a flag, never a
KeyboardInterrupt raised where Python would drop it; at once where nothing is lost."""

from __future__ import annotations

import gc
import signal
import subprocess
import sys
import time
import weakref

import pytest

from lnorm.errors import Interrupted
from lnorm.training.stop_signals import StopSignals

from tests.helpers import REPO


@pytest.mark.parametrize("first, second", [(signal.SIGINT, signal.SIGTERM),
                                           (signal.SIGTERM, signal.SIGINT)])
def test_a_signal_only_sets_the_flag_and_the_first_one_is_named(first, second):
  with StopSignals() as signals:
    signal.raise_signal(first)  # Its handler runs before this returns.
    signal.raise_signal(second)
    assert signals.received == first.name
    with pytest.raises(Interrupted) as e:
      signals.check("at step 3. Rerun the same command to resume.")
  assert str(e.value) == f"Stopped by {first.name} at step 3. Rerun the same command to resume."


def test_no_signal_no_stop():
  with StopSignals() as signals:
    signals.check("never said")
    with signals.interruptible("never said"):
      pass


def test_the_previous_handlers_come_back():
  before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
  with StopSignals():
    assert signal.getsignal(signal.SIGINT) is not before[signal.SIGINT]
  assert {s: signal.getsignal(s) for s in before} == before


def test_an_interruptible_region_stops_at_once():
  reached = []
  with StopSignals() as signals:
    with pytest.raises(Interrupted, match="^Stopped by SIGTERM while the data loaded.$"):
      with signals.interruptible("while the data loaded."):
        signal.raise_signal(signal.SIGTERM)
        reached.append("after the signal")
  assert not reached


def _stop_in_a_region(reached):
  with StopSignals() as signals:
    with pytest.raises(Interrupted, match="^Stopped by SIGTERM while the data loaded.$"):
      with signals.interruptible("while the data loaded."):
        signal.raise_signal(signal.SIGTERM)
        reached.append("after the signal")


def test_a_region_entered_below_code_run_from_a_string_still_stops_at_once():
  """What called the region does not count: pytest-xdist runs every test below code
  exec'd from a string, and the region stopped only by the retry's timer there."""
  reached = []
  exec(compile("_stop_in_a_region(reached)", "<string>", "exec"),  # pylint: disable=exec-used
       {"_stop_in_a_region": _stop_in_a_region, "reached": reached})
  assert not reached


def test_a_signal_before_the_region_stops_it_before_it_begins():
  with StopSignals() as signals:
    signal.raise_signal(signal.SIGINT)
    with pytest.raises(Interrupted):
      with signals.interruptible("while the data loaded."):
        pytest.fail("the region began")


def _stops_inside(signals, trigger) -> tuple[bool, bool]:
  """Runs ``trigger`` in an interruptible region, then code that would run for
  seconds: whether the interrupt stopped that code, and whether Python dropped it
  where it was raised (it reaches ``sys.unraisablehook``)."""
  dropped, seen = [], []
  previous_hook = sys.unraisablehook
  sys.unraisablehook = lambda unraisable: (
      dropped.append(unraisable) if unraisable.exc_type is KeyboardInterrupt
      else previous_hook(unraisable))
  try:
    with pytest.raises(Interrupted):
      with signals.interruptible("in the test."):
        trigger()
        try:
          for _ in range(5000):  # Seconds, unless the interrupt comes.
            time.sleep(0.001)
        except KeyboardInterrupt:
          seen.append(True)
          raise
  finally:
    sys.unraisablehook = previous_hook
  return bool(seen), bool(dropped)


def test_a_signal_inside_a_garbage_collection_callback_is_raised_after_it():
  # JAX's gc callback is where one early Ctrl-C in seven was lost.
  def callback(phase, info):
    del info
    if phase == "start" and not fired:
      fired.append(True)
      signal.raise_signal(signal.SIGINT)

  fired = []
  gc.callbacks.append(callback)
  try:
    with StopSignals() as signals:
      seen, dropped = _stops_inside(signals, gc.collect)
  finally:
    gc.callbacks.remove(callback)
  assert fired and seen and not dropped


def test_a_signal_inside_a_finalizer_is_raised_after_it():
  class Resource:
    def __del__(self):
      signal.raise_signal(signal.SIGINT)

  with StopSignals() as signals:
    seen, dropped = _stops_inside(signals, lambda: Resource())  # Dropped at once.
  assert seen and not dropped


def test_a_signal_inside_code_exec_runs_from_a_string_is_raised_after_it():
  # dataclasses and namedtuple make their methods so; a KeyboardInterrupt that leaves
  # such code makes Python end the process by SIGINT, whatever its exit code.
  namespace = {}
  with StopSignals() as signals:
    seen, _ = _stops_inside(signals, lambda: exec(
        "import signal\nsignal.raise_signal(signal.SIGINT)\nfinished = True", namespace))
  assert namespace.get("finished") and seen


def test_a_signal_inside_an_import_is_raised_after_it(tmp_path, monkeypatch):
  # JAX's import, cut short, crashed the process as it exited.
  (tmp_path / "half_made.py").write_text(
      "import signal\nsignal.raise_signal(signal.SIGINT)\nfinished = True\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  with StopSignals() as signals:
    seen, _ = _stops_inside(signals, lambda: __import__("half_made"))
  assert sys.modules.pop("half_made").finished and seen


def test_a_second_ctrl_c_ends_the_process_at_once():
  script = ("import signal\n"
            "from lnorm.training.stop_signals import StopSignals\n"
            "with StopSignals():\n"
            "  signal.raise_signal(signal.SIGTERM)\n"  # Whatever came first.
            "  signal.raise_signal(signal.SIGINT)\n"
            "  print('after the first')\n"
            "  signal.raise_signal(signal.SIGINT)\n"
            "  print('after the second')\n")
  done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                        text=True, timeout=60, check=False)
  assert done.returncode == 130
  assert done.stdout == "after the first\n"
  assert done.stderr == ("lnorm: a second Ctrl-C: stopped at once, without saving. Rerun "
                         "the same command: it resumes from the latest complete "
                         "checkpoint.\n")


def test_a_second_sigterm_is_not_a_hard_stop():
  with StopSignals() as signals:
    signal.raise_signal(signal.SIGTERM)
    signal.raise_signal(signal.SIGTERM)  # A scheduler's repeat: the save goes on.
    signal.raise_signal(signal.SIGINT)  # After SIGTERMs: still the first Ctrl-C.
  assert signals.received == "SIGTERM"


def test_a_signal_that_python_drops_anyway_is_raised_again():
  # A weakref callback, run by the garbage collector: no frame says where it runs.
  class Thing:
    pass

  def callback(ref):
    del ref
    signal.raise_signal(signal.SIGINT)

  thing = Thing()
  ref = weakref.ref(thing, callback)

  def drop():
    nonlocal thing
    thing = None  # The callback runs here, and Python drops what it raises.

  with StopSignals() as signals:
    seen, dropped = _stops_inside(signals, drop)
  assert ref() is None and seen and not dropped
