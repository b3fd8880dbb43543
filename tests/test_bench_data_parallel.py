"""scripts/bench_data_parallel.py's arithmetic: from the emulated devices' step times,
the share of a step every device pays in full and the speed-up N real devices could
give at best; and its table, where a batch that does not divide is a row saying so."""

from __future__ import annotations

import pytest

from tests.test_bench_json import _script

bench = _script("bench_data_parallel")


def _row(devices: int, step_s: float, experiment: str = "draw") -> dict:
  return {"experiment": experiment, "norm": "ln", "batch_size": 128, "devices": devices,
          "per_device_batch": 128 // devices, "step_s": step_s}


def test_the_share_duplicated_and_the_bound_on_n_real_devices():
  one, two, three, four = bench.with_ratios(
      [_row(1, 1.0), _row(2, 1.5), _row(3, 1.2), _row(4, 4.0)])
  assert "ratio" not in one  # The reference itself.
  # Half of each step is paid by both devices: at best 1 / (0.5 + 0.5 / 2).
  assert two["ratio"] == pytest.approx(1.5)
  assert two["duplicated"] == pytest.approx(0.5)
  assert two["bound"] == pytest.approx(4 / 3)
  # A device count that does not divide 128 evenly still has its own (n - 1).
  assert three["duplicated"] == pytest.approx(0.1)
  assert three["bound"] == pytest.approx(1 / (0.1 + 0.9 / 3))
  # Each of 4 devices does a whole step's work: no speed-up at all.
  assert four["duplicated"] == pytest.approx(1.0) and four["bound"] == pytest.approx(1.0)


def test_faster_on_more_emulated_devices_is_clamped_to_a_perfect_split():
  """Noise, or smaller batches fitting a cache: not more than a perfect split."""
  (_, two) = bench.with_ratios([_row(1, 1.0), _row(2, 0.8)])
  assert two["duplicated"] == 0.0 and two["bound"] == pytest.approx(2.0)


def test_rows_compare_with_their_own_experiments_one_device_row_only():
  rows = bench.with_ratios([_row(1, 2.0, "a"), _row(2, 3.0, "a"), _row(2, 1.0, "b"),
                            {"experiment": "c", "devices": 2, "error": "exit code 1: x"}])
  assert rows[1]["ratio"] == pytest.approx(1.5)
  assert "ratio" not in rows[2]  # b has no 1-device row: nothing to compare with.
  assert rows[3] == {"experiment": "c", "devices": 2, "error": "exit code 1: x"}


def test_the_table_prints_each_row_and_says_why_one_has_no_time():
  rows = bench.with_ratios([_row(1, 0.0125), _row(2, 0.025),
                            {"experiment": "bln_cifar", "norm": "ln", "batch_size": 25,
                             "devices": 2, "error": "batch 25 does not divide over 2 devices"}])
  lines = bench.table(rows).splitlines()
  assert len(lines) == 5
  assert lines[2] == "| draw | ln | 128 | 1 | 128 | 12.5 ms | 1.00 | — | — |"
  assert lines[3] == "| draw | ln | 128 | 2 | 64 | 25.0 ms | 2.00 | 1.00 | 1.00x |"
  assert "| bln_cifar | ln | 25 | 2 | — | batch 25 does not divide over 2 devices |" in lines[4]
