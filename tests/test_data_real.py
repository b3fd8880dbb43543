"""The real datasets in $LNORM_DATA_DIR (CI: ../shared/data); skipped when absent.

Decoded CIFAR-10 and tokenized IMDB go to the default cache (~/.cache/lnorm unless
the data directory is writable), so only the first run pays for decoding (~15 s
each on an idle 2-core machine).
"""

import os

import numpy as np
import pytest

from lnorm import data
from lnorm.data import idx

DATA_DIR = data.data_dir()
MNIST_TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]


def needs(*relpath):
  path = os.path.join(DATA_DIR, *relpath) if DATA_DIR else None
  return pytest.mark.skipif(not path or not os.path.exists(path),
                            reason=f"set {data.DATA_DIR_ENV} to a folder with {'/'.join(relpath)}")


def files_only(**kw):
  # tfds_data_dir points nowhere, so a TFDS copy on this machine cannot take over.
  return dict(source="files", tfds_data_dir="/nonexistent", **kw)


@needs("mnist", "train-images-idx3-ubyte.gz")
def test_mnist():
  ds = data.load("mnist", files_only())
  assert ds.describe()["num_examples"] == {"train": 55000, "validation": 5000, "test": 10000}
  labels = np.concatenate([ds.splits["train"]["label"], ds.splits["validation"]["label"]])
  np.testing.assert_array_equal(np.bincount(labels), MNIST_TRAIN_COUNTS)
  official = idx.read(os.path.join(DATA_DIR, "mnist", "train-images-idx3-ubyte.gz"))
  np.testing.assert_array_equal(ds.splits["validation"]["image"], official[-5000:])
  assert np.bincount(ds.splits["test"]["label"]).sum() == 10000
  assert 33 < ds.splits["train"]["image"].mean() < 34  # MNIST's mean pixel is 33.3.


@needs("mnist", "train-images-idx3-ubyte.gz")
def test_mnist_auto_picks_files():
  ds = data.load("mnist", {"tfds_data_dir": "/nonexistent"})
  assert ds.source == "files" and ds.resolution[-1] == "files: used"


@needs("mnist", "train-images-idx3-ubyte.gz")
def test_binarized_mnist_derived():
  ds = data.load("binarized_mnist", {"source": "derived", "mnist_source": "files"})
  assert ds.describe()["num_examples"] == {"train": 50000, "validation": 10000, "test": 10000}
  assert "seeded Bernoulli" in ds.notes
  mean = ds.splits["test"]["image"].mean()
  assert 0.12 < mean < 0.14  # MNIST's mean intensity 0.13, preserved in expectation.


@needs("imdb", "aclImdb_v1_labeled.tar.gz")
def test_imdb():
  ds = data.load("imdb", files_only())
  assert ds.describe()["num_examples"] == {"train": 20000, "validation": 5000, "test": 25000}
  labels = np.concatenate([ds.splits["train"]["label"], ds.splits["validation"]["label"]])
  np.testing.assert_array_equal(np.bincount(labels), [12500, 12500])
  np.testing.assert_array_equal(np.bincount(ds.splits["test"]["label"]), [12500, 12500])
  assert ds.info["vocab_size"] == 20002 and ds.info["vocabulary"][2] == "the"
  test = ds.splits["test"]
  real = np.arange(80) < test["length"][:, None]
  assert (test["tokens"][~real] == 0).all() and (test["tokens"][real] > 0).all()
  assert 0.01 < (test["tokens"][real] == 1).mean() < 0.05  # OOV rate of a 20k vocabulary.
  assert (test["length"] == 80).mean() > 0.8  # Most reviews are longer than 80 tokens.


@needs("cifar10", "cifar10_jpeg.zip")
def test_cifar10_jpeg_zip():
  ds = data.load("cifar10", files_only())
  assert ds.describe()["num_examples"] == {"train": 45000, "validation": 5000, "test": 10000}
  assert "JPEG re-encoding" in ds.describe()["notes"]
  labels = np.concatenate([ds.splits["train"]["label"], ds.splits["validation"]["label"]])
  np.testing.assert_array_equal(np.bincount(labels), [5000] * 10)
  np.testing.assert_array_equal(np.bincount(ds.splits["test"]["label"]), [1000] * 10)
  images = np.concatenate([ds.splits["train"]["image"], ds.splits["validation"]["image"]])
  means = images.reshape(-1, 3).mean(axis=0) / 255
  # The original's per-channel means; the re-encoding matches them to 1e-4 (README).
  np.testing.assert_allclose(means, [0.4914, 0.4822, 0.4465], atol=1e-3)
