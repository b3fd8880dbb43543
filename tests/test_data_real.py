"""The real datasets in $LNORM_DATA_DIR (CI: .ci/run sets it).

A test whose files are missing is skipped, or fails when LNORM_REQUIRE_DATA=1 (CI
sets it; the ``real_data`` marker of tests/conftest.py). CIFAR-10 and IMDB are
decoded for real into a fresh cache directory, never read from an old cache entry,
so that a change to a decoder shows here; each is then read back from that cache
and must come back identical. Decoded values are checked against independent
readers (zipfile + PIL, tarfile + the tokenisation rule) for a few examples, and
against the datasets' published statistics for all of them.
"""

import io
import os
import re
import tarfile
import zipfile

import numpy as np
import pytest
from PIL import Image

from lnorm import data
from lnorm.data import idx

DATA_DIR = data.data_dir()
MNIST_TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
CIFAR_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                 "ship", "truck")

mnist_files = pytest.mark.real_data("mnist", "train-images-idx3-ubyte.gz")


@pytest.mark.parametrize("required,outcome", [("", {"skipped": 1}), ("1", {"errors": 1})])
def test_missing_data_skips_or_fails_as_required(pytester, monkeypatch, required, outcome):
  pytester.makeconftest("from tests.conftest import pytest_configure, pytest_runtest_setup")
  pytester.makepyfile("""
      import pytest

      @pytest.mark.real_data("absent", "file.bin")
      def test_reads_it():
        pass
  """)
  monkeypatch.setenv(data.DATA_DIR_ENV, str(pytester.path))
  monkeypatch.setenv("LNORM_REQUIRE_DATA", required)
  result = pytester.runpytest_inprocess("-ra", "-p", "no:xdist", "-p", "no:cacheprovider")
  result.assert_outcomes(**outcome)
  assert "absent/file.bin" in result.stdout.str()


def files_only(**kw):
  # tfds_data_dir points nowhere, so a TFDS copy on this machine cannot take over.
  return dict(source="files", tfds_data_dir="/nonexistent", **kw)


@pytest.fixture
def fresh_cache(tmp_path):
  return str(tmp_path / "decoded_cache")


def load_fresh_then_cached(name: str, cache_dir: str) -> data.Dataset:
  """Decodes ``name`` into an empty cache directory, then reads it back from there;
  the two must agree exactly."""
  assert not os.path.exists(cache_dir)
  decoded = data.load(name, files_only(cache_dir=cache_dir))
  (entry,) = os.listdir(cache_dir)
  assert entry.startswith(name) and entry.endswith(".npz")
  cached = data.load(name, files_only(cache_dir=cache_dir))
  for split, arrays in decoded.splits.items():
    for key, value in arrays.items():
      np.testing.assert_array_equal(cached.splits[split][key], value, err_msg=f"{split}/{key}")
  return decoded


@mnist_files
def test_mnist():
  ds = data.load("mnist", files_only())
  assert ds.describe()["num_examples"] == {"train": 55000, "validation": 5000, "test": 10000}
  labels = np.concatenate([ds.splits["train"]["label"], ds.splits["validation"]["label"]])
  np.testing.assert_array_equal(np.bincount(labels), MNIST_TRAIN_COUNTS)
  official = idx.read(os.path.join(DATA_DIR, "mnist", "train-images-idx3-ubyte.gz"))
  np.testing.assert_array_equal(ds.splits["validation"]["image"], official[-5000:])
  assert np.bincount(ds.splits["test"]["label"]).sum() == 10000
  assert 33 < ds.splits["train"]["image"].mean() < 34  # MNIST's mean pixel is 33.3.


@mnist_files
def test_mnist_auto_picks_files():
  ds = data.load("mnist", {"tfds_data_dir": "/nonexistent"})
  assert ds.source == "files" and ds.resolution[-1] == "files: used"


@mnist_files
def test_binarized_mnist_derived():
  ds = data.load("binarized_mnist", {"source": "derived", "mnist_source": "files"})
  assert ds.describe()["num_examples"] == {"train": 50000, "validation": 10000, "test": 10000}
  assert "seeded Bernoulli" in ds.notes
  mean = ds.splits["test"]["image"].mean()
  assert 0.12 < mean < 0.14  # MNIST's mean intensity 0.13, preserved in expectation.


# --- IMDB -----------------------------------------------------------------------------

IMDB_ARCHIVE = ("imdb", "aclImdb_v1_labeled.tar.gz")


def _first_reviews(path):
  """The raw text of the alphabetically first test review of each polarity."""
  first = {}
  with tarfile.open(path, "r:gz") as tf:
    for member in tf:
      m = re.fullmatch(r"aclImdb/test/(neg|pos)/\d+_\d+\.txt", member.name)
      if m and (m[1] not in first or member.name < first[m[1]][0]):
        first[m[1]] = (member.name, tf.extractfile(member).read().decode("utf-8"))
  return first


def _tokens(review: str) -> list[str]:
  """The documented rule: lower case, '<br />' is a space, words (inner apostrophes
  kept) and every other non-space character are tokens."""
  review = re.sub(r"<br\s*/?>", " ", review, flags=re.IGNORECASE).lower()
  return re.findall(r"\w+(?:'\w+)*|[^\w\s]", review)


@pytest.mark.real_data(*IMDB_ARCHIVE)
def test_imdb(fresh_cache):
  ds = load_fresh_then_cached("imdb", fresh_cache)
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

  # The test split is in file-name order: negative reviews first, 12,500 of each.
  word_id = {w: i for i, w in enumerate(ds.info["vocabulary"])}
  first = _first_reviews(os.path.join(DATA_DIR, *IMDB_ARCHIVE))
  for index, polarity in ((0, "neg"), (12500, "pos")):
    expected = [word_id.get(w, 1) for w in _tokens(first[polarity][1])][-80:]
    n = test["length"][index]
    assert test["label"][index] == (polarity == "pos")
    np.testing.assert_array_equal(test["tokens"][index, :n], expected, err_msg=polarity)


# --- CIFAR-10 -------------------------------------------------------------------------

CIFAR_ZIP = ("cifar10", "cifar10_jpeg.zip")


@pytest.mark.real_data(*CIFAR_ZIP)
def test_cifar10_jpeg_zip(fresh_cache):
  ds = load_fresh_then_cached("cifar10", fresh_cache)
  assert ds.describe()["num_examples"] == {"train": 45000, "validation": 5000, "test": 10000}
  assert "JPEG re-encoding" in ds.describe()["notes"]
  labels = np.concatenate([ds.splits["train"]["label"], ds.splits["validation"]["label"]])
  np.testing.assert_array_equal(np.bincount(labels), [5000] * 10)
  np.testing.assert_array_equal(np.bincount(ds.splits["test"]["label"]), [1000] * 10)
  # Per-channel sums of the 51 million pixels and of their squares, exact in integers:
  # a float64 copy of them (1.2 GB) and its mean and std took a third of the test.
  pixels = [ds.splits[s]["image"].reshape(-1, 3) for s in ("train", "validation")]
  n = sum(len(p) for p in pixels)
  sums = sum(p.sum(axis=0, dtype=np.int64) for p in pixels)
  squares = sum((p.astype(np.uint16) ** 2).sum(axis=0, dtype=np.int64) for p in pixels)
  mean = sums / n
  std = np.sqrt(squares / n - mean ** 2)
  # The original's per-channel means; the JPEG copy matches them to 1e-4. Its stds,
  # measured, are 0.001-0.002 below the original's (0.2470, 0.2435, 0.2616).
  np.testing.assert_allclose(mean / 255, [0.4914, 0.4822, 0.4465], atol=1e-3)
  np.testing.assert_allclose(std / 255, [0.2452, 0.2428, 0.2606], atol=3e-4)

  # The test split is in (label, file name) order; decode a few files independently.
  test = ds.splits["test"]
  with zipfile.ZipFile(os.path.join(DATA_DIR, *CIFAR_ZIP)) as zf:
    for label in (0, 3, 9):
      names = sorted(n for n in zf.namelist()
                     if n.startswith(f"cifar10/test/{CIFAR_CLASSES[label]}/"))
      for k in (0, 517, 999):
        with Image.open(io.BytesIO(zf.read(names[k]))) as im:
          expected = np.asarray(im.convert("RGB"))
        assert test["label"][1000 * label + k] == label
        np.testing.assert_array_equal(test["image"][1000 * label + k], expected,
                                      err_msg=names[k])


# --- IAM-OnDB -------------------------------------------------------------------------

IAMONDB_STROKES = ("iamondb", "lineStrokes-all.tar.gz")


@pytest.mark.real_data(*IAMONDB_STROKES)
def test_iamondb_names_the_lines_the_database_leaves_untranscribed(fresh_cache):
  """12,195 stroke files: 8 have no CSR line in their form's transcription (7 of them
  in form z01-000z), and every form has its transcription file; 31 lines with a
  glitch offset are dropped."""
  ds = load_fresh_then_cached("iamondb", fresh_cache)
  notes = ds.describe()["notes"]
  assert notes.startswith(
      "8 stroke files without a CSR transcription line skipped: their form's "
      "transcription has fewer CSR lines than the form has stroke files (the complete "
      "database has 8 such lines): a08-551z-09, z01-000z-02, z01-000z-03, z01-000z-04, "
      "z01-000z-05, z01-000z-06, z01-000z-07, z01-000z-08;")
  assert "transcription file" not in notes
  assert sum(ds.describe()["num_examples"].values()) == 12195 - 8 - 31
