"""Timing device work: warm-up excluded, a device synchronisation closing each timed
region, the median of many repeats.

Device work is asynchronous: a call returns when the work is queued, so a host clock
read then measures the queueing. Each repeat here therefore waits for the device
(``jax.block_until_ready`` on the call's outputs, ``torch.cuda.synchronize`` for
PyTorch) before reading the clock, and the device is idle when the region starts (the
previous repeat waited for it). Compilation and first-call costs stay in the warm-up.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any, Callable

import jax


@dataclasses.dataclass(frozen=True)
class Timing:
  """Seconds per repeat: the median, the fastest and the slowest, over ``repeats``."""

  median_s: float
  min_s: float
  max_s: float
  repeats: int

  def record(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


def jax_sync(outputs: Any) -> None:
  jax.block_until_ready(outputs)


def time_repeats(run: Callable[[], Any], *, repeats: int, warmup: int,
                 sync: Callable[[Any], None] = jax_sync) -> Timing:
  """Times ``run()`` ``repeats`` times after ``warmup`` untimed calls; ``sync(outputs)``
  waits for the device to finish the call's work, inside the timed region."""
  if repeats < 1:
    raise ValueError(f"repeats={repeats}: time at least one call.")
  for _ in range(warmup):
    sync(run())
  seconds = []
  for _ in range(repeats):
    start = time.perf_counter()
    sync(run())
    seconds.append(time.perf_counter() - start)
  return Timing(statistics.median(seconds), min(seconds), max(seconds), repeats)
