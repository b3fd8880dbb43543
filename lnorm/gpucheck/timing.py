"""Timing device work: warm-up excluded, a device synchronisation closing each timed
region, the fastest, the median and the slowest of many repeats.

Device work is asynchronous: a call returns when the work is queued, so a host clock
read then measures the queueing. Each repeat here therefore waits for the device
(``jax.block_until_ready`` on the call's outputs, ``torch.cuda.synchronize`` for
PyTorch) before reading the clock, and the device is idle when the region starts (the
previous repeat waited for it). Compilation and first-call costs stay in the warm-up.

A timing whose slowest repeat exceeds ``UNEVEN`` times its fastest is flagged
(``uneven``): its calls did not all do the same thing, or something else ran (the
first GPU run's LN step split into calls of 0.76 and 2.7 ms while other workers
compiled).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any, Callable

import jax

from lnorm.analysis.gpu_report import UNEVEN

#: The fewest repeats a timing cut short by its time budget keeps.
MIN_REPEATS = 5


@dataclasses.dataclass(frozen=True)
class Timing:
  """Seconds per repeat: the median, the fastest and the slowest, over ``repeats``."""

  median_s: float
  min_s: float
  max_s: float
  repeats: int

  @property
  def spread(self) -> float:
    """The slowest repeat over the fastest."""
    return self.max_s / self.min_s if self.min_s > 0 else float("inf")

  @property
  def uneven(self) -> bool:
    return self.spread > UNEVEN

  def record(self) -> dict[str, Any]:
    return {**dataclasses.asdict(self), "spread": self.spread, "uneven": self.uneven}


def jax_sync(outputs: Any) -> None:
  jax.block_until_ready(outputs)


def time_repeats(run: Callable[[], Any], *, repeats: int, warmup: int,
                 sync: Callable[[Any], None] = jax_sync,
                 budget_s: float | None = None) -> Timing:
  """Times ``run()`` ``repeats`` times after ``warmup`` untimed calls; ``sync(outputs)``
  waits for the device to finish the call's work, inside the timed region. With
  ``budget_s``, stops once the timed calls took that long and ``MIN_REPEATS`` ran."""
  if repeats < 1:
    raise ValueError(f"repeats={repeats}: time at least one call.")
  for _ in range(warmup):
    sync(run())
  seconds = []
  for _ in range(repeats):
    start = time.perf_counter()
    sync(run())
    seconds.append(time.perf_counter() - start)
    if (budget_s is not None and len(seconds) >= MIN_REPEATS
        and sum(seconds) >= budget_s):
      break
  return Timing(statistics.median(seconds), min(seconds), max(seconds), len(seconds))
