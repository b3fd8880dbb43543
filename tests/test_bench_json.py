"""The benchmark scripts' ``--json`` records: the machine they ran on, and the same rows
and ratios as the printed table, so that a record can stand in for the text."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import platform
import re
import sys

import flax
import jax
import numpy as np

SCRIPTS = pathlib.Path(__file__).resolve().parent.parent / "scripts"


def _script(name: str):
  """scripts/<name>.py imported as a module (scripts/ is not a package)."""
  spec = importlib.util.spec_from_file_location(f"_{name}_under_test", SCRIPTS / f"{name}.py")
  module = importlib.util.module_from_spec(spec)
  # Flax modules are dataclasses, which look their defining module up in sys.modules.
  sys.modules[spec.name] = module
  spec.loader.exec_module(module)
  return module


def _check_machine(machine: dict) -> None:
  assert machine["cpu_count"] == os.cpu_count()
  assert machine["cpu_affinity_count"] == len(os.sched_getaffinity(0))
  assert machine["platform"] == platform.platform()
  assert machine["jax_backend"] == jax.default_backend()
  assert machine["jax_devices"] == [str(d) for d in jax.devices()]
  versions = machine["versions"]
  assert versions["python"] == platform.python_version()
  assert (versions["jax"], versions["flax"], versions["numpy"]) == (
      jax.__version__, flax.__version__, np.__version__)
  assert versions["jaxlib"]
  # None exactly when torch cannot be imported.
  assert (versions["torch"] is None) == (importlib.util.find_spec("torch") is None)


def _check_ratios(record: dict, printed: list[tuple[str, str, str]]) -> None:
  """Each ratio is the quotient of its two rows' medians and is printed as such."""
  median = {row["name"]: row["median_ms"] for row in record["rows"]}
  assert [(*r["name"].split(" / "), f"{r['value']:.2f}") for r in record["ratios"]] == printed
  for r in record["ratios"]:
    assert r["value"] == median[r["numerator"]] / median[r["denominator"]]
    # A PyTorch row is named with its thread count, the printed ratio without it.
    assert r["name"] == f"{r['numerator'].split('@')[0]} / {r['denominator'].split('@')[0]}"


def test_bench_norms_json_holds_the_printed_rows_and_ratios(tmp_path, capsys):
  path = tmp_path / "perf" / "norms.json"  # A directory that does not exist yet.
  assert _script("bench_norms").main(
      ["--shape", "64", "128", "--repeats", "2", "--json", str(path)]) == 0
  text = capsys.readouterr().out
  record = json.loads(path.read_text())

  _check_machine(record["machine"])
  assert record["args"] == {"shape": [64, 128], "repeats": 2, "seed": 0, "json": str(path)}
  printed_rows = re.findall(r"^\s*(\w+):\s+([\d.]+) ms$", text, re.MULTILINE)
  assert [(row["name"], f"{row['median_ms']:.2f}") for row in record["rows"]] == printed_rows
  assert [row["name"] for row in record["rows"]] == [
      "elementwise_floor", "flax_layernorm", "ln", "bn", "bln", "rms", "prms"]
  assert all(row["median_ms"] > 0 for row in record["rows"])
  printed_ratios = re.findall(r"^\s*(\w+) / (\w+): ([\d.]+)x$", text, re.MULTILINE)
  assert len(printed_ratios) == 8
  _check_ratios(record, printed_ratios)


def test_bench_rnn_json_holds_the_printed_rows_and_ratios(tmp_path, capsys):
  path = tmp_path / "rnn.json"
  # --no-naive and --rows: each jitted row costs seconds of compilation on a loaded core.
  rows = ["lstm", "ln_lstm", "lstm_scan", "ln_lstm_scan", "flax_optimized_lstm", "gru",
          "gru_scan", "torch_lstm", "torch_eager_ln_lstm", "torch_gru"]
  _script("bench_rnn").main(
      ["--batch", "2", "--steps", "3", "--hidden", "8", "--input", "5", "--repeats", "2",
       "--torch-threads", "1", "--no-naive", "--rows", *rows, "--json", str(path)])
  text = capsys.readouterr().out
  record = json.loads(path.read_text())

  _check_machine(record["machine"])
  assert record["args"] == {
      "batch": 2, "steps": 3, "input": 5, "hidden": 8, "repeats": 2, "torch_threads": [1],
      "unroll": 1, "no_naive": True, "rows": rows, "json": str(path)}
  printed_rows = re.findall(
      r"^(\S+)\s+([\d.]+) ms\s+([\d.]+) ms(?:   \(compile ([\d.]+) s\))?$", text, re.MULTILINE)
  assert [(row["name"], f"{row['median_ms']:.2f}", f"{row['min_ms']:.2f}",
           "" if row["compile_s"] is None else f"{row['compile_s']:.2f}")
          for row in record["rows"]] == printed_rows
  names = [row["name"] for row in record["rows"]]
  assert names[:5] == ["lstm", "ln_lstm", "lstm_scan", "ln_lstm_scan", "flax_optimized_lstm"]
  assert "naive_flax_ln_lstm" not in names
  for row in record["rows"]:
    assert 0 < row["min_ms"] <= row["median_ms"]
    # The jitted rows report their compile time, the eager PyTorch rows none.
    assert (row["compile_s"] is None) == row["name"].startswith("torch")
  printed_ratios = re.findall(r"^(\S+) / (\S+): ([\d.]+)x$", text, re.MULTILINE)
  assert names[5:7] == ["gru", "gru_scan"]
  # The rows chosen give 9 ratios, 4 of them with PyTorch.
  assert len(printed_ratios) == (9 if "torch_lstm@1" in names else 5)
  _check_ratios(record, printed_ratios)


def test_bench_seeds_json_holds_the_printed_rows_and_ratios(tmp_path, capsys, monkeypatch):
  monkeypatch.chdir(SCRIPTS.parent)  # The configs' paths are the checkout's.
  path = tmp_path / "perf" / "seeds.json"
  # Updates that do not fill a member's 31, with 3 seeds: every row's own count.
  assert _script("bench_seeds").main(
      ["--smoke", "--experiments", "perm_mnist", "--k", "3", "--updates", "perm_mnist=5",
       "--json", str(path)]) == 0
  text = capsys.readouterr().out
  record = json.loads(path.read_text())
  _check_machine(record["machine"])
  alone, together = record["rows"]
  assert (alone["seeds"], together["seeds"]) == (1, 3)
  assert alone["train_seconds"] == sum(alone["train_seconds_before_and_after"]) / 2
  for row in (alone, together):
    assert row["updates"] == 5 and row["member_updates"] == 31
    assert row["members_per_hour"] == 3600 / (
        row["train_seconds"] / (row["seeds"] * 5) * 31)
    assert f"{row['members_per_hour']:8.2f} members/h" in text
  (ratio,) = record["ratios"]
  assert ratio["value"] == together["members_per_hour"] / alone["members_per_hour"]
  assert f"{ratio['name']}: {ratio['value']:.2f}x" in text
