"""The TFDS sources under tfds.testing.mock_data: structure and dtypes, no TensorFlow."""

import logging

import numpy as np
import pytest
import tensorflow_datasets as tfds

from lnorm import data
from lnorm.data import tfds_source

MOCK = dict(num_examples=12, policy=tfds.testing.MockPolicy.USE_CODE)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch):
  monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)


def check(ds, features):
  """features: name -> (dtype, per-example shape)."""
  assert ds.source == "tfds" and not ds.describe()["synthetic"]
  for split, arrays in ds.splits.items():
    assert set(arrays) == set(features), split
    for name, (dtype, shape) in features.items():
      assert arrays[name].dtype == dtype, (split, name)
      assert arrays[name].shape[1:] == shape, (split, name)


def test_mnist():
  with tfds.testing.mock_data(**MOCK):
    ds = data.load("mnist", {"source": "tfds", "validation_size": 2})
  assert ds.describe()["num_examples"] == {"train": 10, "validation": 2, "test": 12}
  check(ds, {"image": (np.uint8, (28, 28)), "label": (np.int32, ())})
  assert ds.splits["train"]["label"].max() < 10


def _binary_source(self, split, **kw):
  del self, kw
  rng = np.random.default_rng(len(split))
  return [{"image": rng.integers(0, 2, (28, 28, 1), dtype=np.uint8)} for _ in range(5)]


def test_binarized_mnist():
  # The default mock draws pixels from 0..255; the real builder holds 0/1.
  with tfds.testing.mock_data(as_data_source_fn=_binary_source, **MOCK):
    ds = data.load("binarized_mnist", {"source": "tfds"})
  assert ds.describe()["num_examples"] == {"train": 5, "validation": 5, "test": 5}
  check(ds, {"image": (np.uint8, (28, 28))})
  assert set(np.unique(ds.splits["test"]["image"])) <= {0, 1}


def test_binarized_mnist_rejects_grey_pixels():
  with tfds.testing.mock_data(**MOCK):
    with pytest.raises(data.MalformedDataError, match="expected 0 or 1"):
      data.load("binarized_mnist", {"source": "tfds"})


def test_cifar10():
  with tfds.testing.mock_data(**MOCK):
    ds = data.load("cifar10", {"source": "tfds", "validation_size": 3, "subset_fraction": 0.5})
  assert ds.describe()["num_examples"] == {"train": 4, "validation": 3, "test": 12}
  check(ds, {"image": (np.uint8, (32, 32, 3)), "label": (np.int32, ())})


def test_imdb_reviews():
  with tfds.testing.mock_data(**MOCK):
    ds = data.load("imdb", {"source": "tfds", "validation_size": 2, "max_length": 7})
  assert ds.describe()["num_examples"] == {"train": 10, "validation": 2, "test": 12}
  check(ds, {"tokens": (np.int32, (7,)), "length": (np.int32, ()), "label": (np.int32, ())})
  assert ds.info["vocab_size"] == len(ds.info["vocabulary"]) > 2
  assert set(np.unique(ds.splits["train"]["label"])) <= {0, 1}
  assert (ds.splits["train"]["length"] > 0).all()


def test_tfds_failure_says_how_to_fix(monkeypatch):
  def needs_tf(*args, **kw):
    raise ModuleNotFoundError("No module named 'tensorflow'")

  monkeypatch.setattr(tfds, "data_source", needs_tf)
  with pytest.raises(data.DataError, match=r"pip install tensorflow-cpu.*source=files"):
    data.load("mnist", {"source": "tfds"})


@pytest.mark.parametrize("name", ["mnist", "imdb_reviews/plain_text"])
def test_a_dataset_never_downloaded_is_passed_over_without_a_warning(tmp_path, caplog, name):
  """TFDS itself warns "Variant folder .../mnist/3.0.1 has no dataset_info.json" about a
  folder that does not exist; 'auto' asks only where a folder is, and says plainly why
  it passes TFDS over."""
  with caplog.at_level(logging.INFO):
    assert not tfds_source.is_prepared(name, str(tmp_path))
  assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
  folder = tmp_path / name.split("/")[0]
  assert f"TFDS '{name}' is not prepared: no {folder} folder" in caplog.text
  folder.mkdir()  # An incomplete copy: TFDS's warnings become one line of ours.
  caplog.clear()
  with caplog.at_level(logging.INFO):
    assert not tfds_source.is_prepared(name, str(tmp_path))
  assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
  assert f"{folder} holds no complete copy" in caplog.text
