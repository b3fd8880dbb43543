"""A workdir holds one run: the data check against every kind of source resolution,
and what an earlier attempt without a checkpoint left behind."""

from __future__ import annotations

import json
import logging
import os
import shutil

import ml_collections
import numpy as np
import pytest
import tensorflow_datasets as tfds

from lnorm import data
from lnorm.data.core import Dataset
from lnorm.errors import DataConflictError
from lnorm.training import workdir as workdir_lib
from tests.test_data_load import write_mnist

NO_TFDS = "/nonexistent/lnorm-tests-tfds"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
  monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)
  monkeypatch.setenv("LNORM_CACHE_DIR", str(tmp_path / "cache"))


def mnist(source="auto", data_dir=None, **kw):
  return data.load("mnist", dict(source=source, tfds_data_dir=NO_TFDS, validation_size=5,
                                 data_dir=str(data_dir) if data_dir else None, **kw))


def trained_on(workdir, dataset):
  """A workdir whose config.json says the run trained on ``dataset``."""
  os.makedirs(workdir, exist_ok=True)
  workdir_lib.write_run_record(str(workdir), ml_collections.ConfigDict({"seed": 0}),
                               workdir_lib.data_record(dataset), {})
  with open(os.path.join(workdir, "config.json")) as f:
    return f.read()


def refused(workdir, dataset) -> str:
  with pytest.raises(DataConflictError) as e:
    workdir_lib.check_data(str(workdir), workdir_lib.data_record(dataset))
  return str(e.value)


def test_auto_embedded_then_auto_files_is_refused_and_says_how_to_pin(tmp_path, monkeypatch):
  # The case: first no data directory (the embedded digits), then one.
  run = tmp_path / "run"
  trained_on(run, mnist())
  write_mnist(tmp_path / "data", n_train=30, n_test=10)
  monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path / "data"))
  files = mnist()
  assert files.source == "files"
  message = refused(run, files)
  assert "source: 'embedded' in the workdir, 'files' now" in message
  assert "'train': 4000" in message and "'train': 25" in message  # The split sizes.
  assert "use a new --workdir" in message
  assert "--config.data.source=embedded" in message
  # Pinned, the same command finds the data the run started with.
  workdir_lib.check_data(str(run), workdir_lib.data_record(mnist(source="embedded")))


def test_auto_files_then_auto_embedded_is_refused(tmp_path, monkeypatch):
  write_mnist(tmp_path / "data")
  monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path / "data"))
  run = tmp_path / "run"
  trained_on(run, mnist())
  monkeypatch.delenv(data.DATA_DIR_ENV)
  message = refused(run, mnist())
  assert "source: 'files' in the workdir, 'embedded' now" in message
  assert f"--config.data.source=files --config.data.data_dir={tmp_path / 'data'}" in message


def test_explicit_files_other_content_is_refused_moved_content_resumes(tmp_path, caplog):
  write_mnist(tmp_path / "a", seed=0)
  run = tmp_path / "run"
  trained_on(run, mnist("files", tmp_path / "a"))
  # Other digits, same sizes, same place: only the content tells.
  write_mnist(tmp_path / "b", seed=1)
  message = refused(run, mnist("files", tmp_path / "b"))
  assert "content: fingerprint" in message and "location:" in message
  # The same files copied elsewhere: the same data, so the run resumes, and says so.
  shutil.copytree(tmp_path / "a", tmp_path / "moved")
  with caplog.at_level(logging.INFO):
    workdir_lib.check_data(str(run), workdir_lib.data_record(
        mnist("files", tmp_path / "moved")))
  assert "read from elsewhere" in caplog.text and str(tmp_path / "moved") in caplog.text


def test_synthetic_fingerprint_is_stable_and_follows_the_data():
  small = data.load("cifar10", {"source": "synthetic", "synthetic_size": 8})
  assert small.source == "synthetic"
  again = data.load("cifar10", {"source": "synthetic", "synthetic_size": 8})
  bigger = data.load("cifar10", {"source": "synthetic", "synthetic_size": 12})
  record = workdir_lib.data_record(small)
  assert record["fingerprint"] == workdir_lib.data_record(again)["fingerprint"]
  assert record["fingerprint"] != workdir_lib.data_record(bigger)["fingerprint"]


def test_synthetic_workdir_refuses_real_data(tmp_path):
  run = tmp_path / "run"
  trained_on(run, data.load("cifar10", {"source": "synthetic", "synthetic_size": 8}))
  workdir_lib.check_data(str(run), workdir_lib.data_record(
      data.load("cifar10", {"source": "synthetic", "synthetic_size": 8})))
  message = refused(run, data.load("cifar10", {"source": "synthetic", "synthetic_size": 12}))
  assert "'train': 8" in message and "'train': 12" in message
  assert "--config.data.source=synthetic" in message


def test_tfds_then_embedded_is_refused(tmp_path):
  run = tmp_path / "run"
  with tfds.testing.mock_data(num_examples=12, policy=tfds.testing.MockPolicy.USE_CODE):
    from_tfds = mnist("tfds")
    again = mnist("tfds")
  assert from_tfds.source == "tfds"
  trained_on(run, from_tfds)
  workdir_lib.check_data(str(run), workdir_lib.data_record(again))  # The same mock data.
  message = refused(run, mnist())
  assert "source: 'tfds' in the workdir, 'embedded' now" in message
  assert "--config.data.source=tfds" in message


def test_a_refused_run_leaves_config_json_as_it_was(tmp_path, monkeypatch):
  run = tmp_path / "run"
  before = trained_on(run, mnist())
  write_mnist(tmp_path / "data")
  monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path / "data"))
  refused(run, mnist())
  with open(run / "config.json") as f:
    assert f.read() == before


def test_a_record_without_fingerprint_is_compared_by_its_description(tmp_path):
  write_mnist(tmp_path / "a")
  run = tmp_path / "run"
  trained_on(run, mnist("files", tmp_path / "a"))
  with open(run / "config.json") as f:
    record = json.load(f)
  del record["data"]["fingerprint"]  # Written before fingerprints existed.
  with open(run / "config.json", "w") as f:
    json.dump(record, f)
  workdir_lib.check_data(str(run), workdir_lib.data_record(mnist("files", tmp_path / "a")))
  shutil.copytree(tmp_path / "a", tmp_path / "moved")
  message = refused(run, mnist("files", tmp_path / "moved"))
  assert "location:" in message and "content" not in message


def test_no_record_no_check(tmp_path):
  workdir_lib.check_data(str(tmp_path), workdir_lib.data_record(mnist()))


def test_fingerprint_sees_one_changed_value_and_object_arrays():
  def dataset(texts, labels):
    return Dataset("d", "files", "/x", {"train": {
        "text": np.array(texts, dtype=object), "label": np.array(labels, np.int32)}})

  base = workdir_lib.data_fingerprint(dataset(["a b", "c"], [0, 1]))
  assert base == workdir_lib.data_fingerprint(dataset(["a b", "c"], [0, 1]))
  assert base != workdir_lib.data_fingerprint(dataset(["a b", "d"], [0, 1]))
  assert base != workdir_lib.data_fingerprint(dataset(["a b", "c"], [0, 2]))
  # The same bytes in another dtype or shape are other data.
  ints = Dataset("d", "files", "/x", {"train": {"x": np.zeros((2, 2), np.int32)}})
  flat = Dataset("d", "files", "/x", {"train": {"x": np.zeros((4,), np.int32)}})
  floats = Dataset("d", "files", "/x", {"train": {"x": np.zeros((2, 2), np.float32)}})
  prints = {workdir_lib.data_fingerprint(d) for d in (ints, flat, floats)}
  assert len(prints) == 3


def test_earlier_attempt_names_what_it_left(tmp_path):
  assert workdir_lib.earlier_attempt(str(tmp_path)) is None
  (tmp_path / "config.json").write_text("{}")
  assert workdir_lib.earlier_attempt(str(tmp_path)) == "config.json"
  (tmp_path / "metrics.jsonl").write_text('{"step": 50}\n{"step": 100}\n')
  assert workdir_lib.earlier_attempt(str(tmp_path)) == (
      "config.json and metrics.jsonl with 2 points")
