"""lnorm.data.load on small fixture datasets: splits, sources, 'auto', errors."""

import gzip
import tarfile
import zipfile

import numpy as np
import pytest
from PIL import Image

from lnorm import data
from lnorm.data import cifar10
from lnorm.data import image_folder
from lnorm.data import mnist
from lnorm.data import tfds_source
from lnorm.errors import ConfigError

from tests.test_data_parsers import idx_bytes
from tests.test_data_parsers import png
from tests.test_data_parsers import write_acl_imdb
from tests.test_data_parsers import write_cifar_pickles


# TFDS reads $TFDS_DATA_DIR when imported, so the tests name an empty place instead.
NO_TFDS = "/nonexistent/lnorm-tests-tfds"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
  """No test may see the developer's data, TFDS datasets or caches."""
  monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)
  monkeypatch.setenv("LNORM_CACHE_DIR", str(tmp_path / "cache"))


def config(data_dir=None, **kw):
  return dict(data_dir=str(data_dir) if data_dir else None, tfds_data_dir=NO_TFDS, **kw)


def write_mnist(folder, n_train=30, n_test=10, gz=True, seed=0):
  """Writes the four IDX files; returns the official arrays."""
  rng = np.random.default_rng(seed)
  arrays = {}
  folder.mkdir(parents=True, exist_ok=True)
  for split, n in (("train", n_train), ("test", n_test)):
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    labels = (np.arange(n) % 10).astype(np.uint8)
    arrays[split] = (images, labels)
    for name, arr in zip(mnist.FILES[split], (images, labels)):
      raw = idx_bytes(arr)
      (folder / (name + (".gz" if gz else ""))).write_bytes(gzip.compress(raw) if gz else raw)
  return arrays


# ---- MNIST ---------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["subdir", "flat", "uncompressed"])
def test_mnist_files_validation_is_the_tail(tmp_path, layout):
  folder = tmp_path / "mnist" if layout == "subdir" else tmp_path
  official = write_mnist(folder, gz=layout != "uncompressed")
  ds = data.load("mnist", config(tmp_path, source="files", validation_size=5))
  assert ds.source == "files" and ds.location == str(folder)
  assert ds.describe()["num_examples"] == {"train": 25, "validation": 5, "test": 10}
  train_images, train_labels = official["train"]
  np.testing.assert_array_equal(ds.splits["validation"]["image"], train_images[25:])
  np.testing.assert_array_equal(ds.splits["train"]["label"], train_labels[:25])
  np.testing.assert_array_equal(ds.splits["test"]["image"], official["test"][0])
  for split in ds.splits.values():
    assert split["image"].dtype == np.uint8 and split["image"].shape[1:] == (28, 28)
    assert split["label"].dtype == np.int32
  assert ds.info["num_classes"] == 10


def test_mnist_label_count_mismatch(tmp_path):
  write_mnist(tmp_path)
  (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(
      gzip.compress(idx_bytes(np.zeros(9, np.uint8))))
  with pytest.raises(data.MalformedDataError, match="holds 9 labels but .* holds 10 images"):
    data.load("mnist", config(tmp_path, source="files", validation_size=5))


def test_mnist_permutation_is_shared_by_splits_and_seeded(tmp_path):
  write_mnist(tmp_path)
  plain = data.load("mnist", config(tmp_path, source="files", validation_size=5))
  perm = data.load("mnist", config(tmp_path, source="files", validation_size=5,
                                   permute_pixels=True, seed=3))
  p = mnist.pixel_permutation(3)
  assert not np.array_equal(p, np.arange(784))
  for split in ("train", "validation", "test"):
    expected = plain.splits[split]["image"].reshape(-1, 784)[:, p].reshape(-1, 28, 28)
    np.testing.assert_array_equal(perm.splits[split]["image"], expected)
    np.testing.assert_array_equal(perm.splits[split]["label"], plain.splits[split]["label"])
  assert "permuted" in perm.notes
  assert not np.array_equal(mnist.pixel_permutation(4), p)


def test_mnist_subset_fraction(tmp_path):
  write_mnist(tmp_path)
  ds = data.load("mnist", config(tmp_path, source="files", validation_size=10,
                                 subset_fraction=0.25))
  assert ds.num_examples("train") == 5 and ds.num_examples("validation") == 10


def test_mnist_embedded_5k_subset():
  ds = data.load("mnist", config(source="embedded"))
  assert ds.source == "embedded"
  assert ds.describe()["num_examples"] == {"train": 4000, "validation": 500, "test": 500}
  assert "5k subset" in ds.notes
  for split, per_class in mnist.EMBEDDED_PER_CLASS.items():
    arrays = ds.splits[split]
    assert arrays["image"].dtype == np.uint8 and arrays["image"].shape[1:] == (28, 28)
    np.testing.assert_array_equal(np.bincount(arrays["label"]), [per_class] * 10)
  # Splits are disjoint digits.
  flat = {s: {a.tobytes() for a in ds.splits[s]["image"]} for s in ds.splits}
  assert not flat["train"] & flat["test"] and not flat["validation"] & flat["test"]


# ---- 'auto' and errors ------------------------------------------------------------------


def test_auto_prefers_files_over_embedded_and_records_why(tmp_path, caplog):
  write_mnist(tmp_path / "mnist")
  with caplog.at_level("INFO", logger="lnorm.data"):
    ds = data.load("mnist", config(tmp_path, validation_size=5))
  assert ds.source == "files"
  record = ds.describe()
  assert record["source"] == "files"
  assert record["resolution"][0].startswith("tfds: not available")
  assert record["resolution"][-1] == "files: used"
  assert any("Loaded mnist from source files" in r.message and "train 25" in r.message
             for r in caplog.records)


def test_auto_falls_back_to_embedded_only_without_a_data_directory(monkeypatch):
  monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)
  ds = data.load("mnist", config())
  assert ds.source == "embedded"
  assert [r.split(":")[0] for r in ds.resolution] == ["tfds", "files", "embedded"]


@pytest.mark.parametrize("exists", [False, True], ids=["missing", "empty"])
def test_a_data_directory_set_without_the_dataset_is_an_error_not_the_embedded_copy(
    tmp_path, monkeypatch, exists):
  # The user set a data directory: the embedded digits are not the data they meant.
  directory = tmp_path / "data"
  if exists:
    (directory / "cifar10").mkdir(parents=True)  # Another dataset's folder only.
  monkeypatch.setenv(data.DATA_DIR_ENV, str(directory))
  with pytest.raises(data.DatasetNotFoundError) as e:
    data.load("mnist", config())
  state = "holds none of the mnist files" if exists else "does not exist"
  assert (f"the data directory {directory} (set by $LNORM_DATA_DIR) {state}, so lnorm "
          "does not fall back to the copy shipped with it") in str(e.value)
  assert str(directory / "mnist") in str(e.value)  # What was looked for, and where.
  assert ("or, for the embedded copy shipped with lnorm, unset LNORM_DATA_DIR or pass "
          "--config.data.source=embedded.") in str(e.value)


def test_a_data_directory_in_the_config_is_named_as_the_config_field(tmp_path, monkeypatch):
  monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)
  with pytest.raises(data.DatasetNotFoundError) as e:
    data.load("mnist", config(tmp_path / "nope"))
  assert f"(set by data_dir '{tmp_path / 'nope'}' in the config) does not exist" in str(e.value)
  assert "leave data_dir unset or pass --config.data.source=embedded" in str(e.value)


def test_derived_binarized_mnist_does_not_fall_back_under_a_data_directory(tmp_path,
                                                                           monkeypatch):
  # DRAW's 'derived' source reads MNIST through the same rule.
  monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path))
  with pytest.raises(data.DatasetNotFoundError, match="holds none of the mnist files"):
    data.load("binarized_mnist", config(source="derived"))


def test_auto_does_not_skip_a_malformed_file(tmp_path):
  write_mnist(tmp_path)
  path = tmp_path / "train-images-idx3-ubyte.gz"
  path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes())[:500]))
  with pytest.raises(data.MalformedDataError, match="truncated"):
    data.load("mnist", config(tmp_path, validation_size=5))


def test_auto_uses_tfds_only_when_prepared(tmp_path, monkeypatch):
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  write_mnist(tmp_path)
  downloads = []
  real = tfds.data_source

  def spy(*args, **kw):
    downloads.append(kw.get("download"))
    return real(*args, **kw)

  monkeypatch.setattr(tfds, "data_source", spy)
  monkeypatch.setattr(tfds_source, "is_prepared", lambda name, data_dir: True)
  with tfds.testing.mock_data(num_examples=12, policy=tfds.testing.MockPolicy.USE_CODE):
    ds = data.load("mnist", config(tmp_path, validation_size=2))
  assert ds.source == "tfds" and ds.resolution == ["tfds: used"]
  assert downloads == [False, False]  # 'auto' never downloads.


def test_missing_dataset_lists_places_and_fixes(tmp_path):
  with pytest.raises(data.DatasetNotFoundError) as e:
    data.load("cifar10", config(tmp_path))
  msg = str(e.value)
  assert str(tmp_path / "cifar10" / "cifar-10-batches-py") in msg
  assert "cifar*10*.zip" in msg and "not prepared" in msg
  assert "LNORM_DATA_DIR" in msg and "--config.data.data_dir" in msg
  assert "--config.data.source=tfds" in msg
  assert e.value.looked


def test_missing_data_dir_is_said():
  with pytest.raises(data.DatasetNotFoundError, match="no data directory"):
    data.load("imdb", config(source="files"))


def test_auto_says_why_it_passed_over_each_source_in_single_parentheses(monkeypatch):
  monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)
  ds = data.load("mnist", config())
  assert ds.source == "embedded"
  assert ds.resolution == [
      f"tfds: not available (TFDS 'mnist' in {NO_TFDS}: not prepared)",
      "files: not available (no data directory: neither data_config.data_dir nor "
      "$LNORM_DATA_DIR is set)",
      "embedded: used"]


def test_unknown_name_or_source():
  with pytest.raises(ConfigError, match="valid datasets: mnist, binarized_mnist, cifar10, imdb"):
    data.load("svhn", {})
  with pytest.raises(ConfigError, match=r"Unknown data source 'embedded' for the cifar10 "
                     r"dataset\. Its sources: auto, tfds, files, synthetic\. Set "):
    data.load("cifar10", {"source": "embedded"})
  assert data.sources("mnist") == ("auto", "tfds", "files", "embedded")


def test_synthetic_mnist_is_refused_with_its_sources_and_the_shipped_copy():
  # MNIST's data-free source is its shipped digits (embedded), not synthetic data: the
  # README's table gives synthetic only to the datasets without a shipped copy.
  with pytest.raises(ConfigError) as e:
    data.check_source("mnist", "synthetic")
  assert str(e.value) == (
      "Unknown data source 'synthetic' for the mnist dataset. Its sources: auto, tfds, "
      "files, embedded (embedded: the copy shipped with lnorm, no download, what smoke "
      "runs use). Set --config.data.source to one of them.")
  with pytest.raises(ConfigError, match=r"'file' for the mnist dataset \(did you mean 'files'\?\)"):
    data.check_source("mnist", "file")
  with pytest.raises(ConfigError, match=r"Unknown dataset 'mnsit' \(did you mean 'mnist'\?\)"):
    data.check_source("mnsit", "auto")
  for source in data.sources("mnist"):
    data.check_source("mnist", source)  # Every listed source passes.


@pytest.mark.parametrize("source", ["embedded", "files", "tfds"])
def test_a_data_directory_that_does_not_exist_is_refused_whatever_the_source(tmp_path,
                                                                             monkeypatch,
                                                                             source):
  # A smoke run's explicit source (embedded, synthetic) ignored a misspelt directory.
  monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path / "nope"))
  with pytest.raises(data.DatasetNotFoundError) as e:
    data.load("mnist", config(source=source))
  assert str(e.value) == (
      "Could not find the mnist dataset. lnorm looked in:\n"
      f"  - the data directory {tmp_path / 'nope'} (set by $LNORM_DATA_DIR) does not exist\n"
      "To fix this, point LNORM_DATA_DIR at the folder that holds the mnist data, or unset "
      "LNORM_DATA_DIR.")


def test_an_existing_data_directory_does_not_stop_a_source_that_reads_none(tmp_path,
                                                                          monkeypatch):
  monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path))  # Exists, holds no MNIST.
  assert data.load("mnist", config(source="embedded")).source == "embedded"


def test_data_dir_from_environment(tmp_path, monkeypatch):
  write_mnist(tmp_path)
  monkeypatch.setenv(data.DATA_DIR_ENV, str(tmp_path))
  assert data.load("mnist", {"source": "files", "validation_size": 5}).location == str(tmp_path)


# ---- Binarized MNIST -------------------------------------------------------------------


def test_binarized_files(tmp_path):
  rng = np.random.default_rng(0)
  folder = tmp_path / "binarized_mnist"
  folder.mkdir()
  expected = {}
  for split, fname, n in (("train", "train", 4), ("validation", "valid", 3), ("test", "test", 2)):
    rows = rng.integers(0, 2, (n, 784), dtype=np.uint8)
    expected[split] = rows.reshape(n, 28, 28)
    (folder / f"binarized_mnist_{fname}.amat").write_text(
        "\n".join(" ".join(map(str, r)) for r in rows) + "\n")
  ds = data.load("binarized_mnist", config(tmp_path))
  assert ds.source == "files" and "Larochelle" in ds.notes
  for split, images in expected.items():
    np.testing.assert_array_equal(ds.splits[split]["image"], images)
    assert list(ds.splits[split]) == ["image"]


def test_binarized_derived_is_seeded_bernoulli(tmp_path):
  rng = np.random.default_rng(0)
  n_train = 10_020
  images = np.zeros((n_train, 28, 28), np.uint8)
  images[:, :, :10] = 255  # Always on.
  images[:, :, 10:20] = 128  # On with probability 128/255.
  (tmp_path / "train-images-idx3-ubyte").write_bytes(idx_bytes(images))
  (tmp_path / "train-labels-idx1-ubyte").write_bytes(idx_bytes(np.zeros(n_train, np.uint8)))
  test = rng.integers(0, 256, (7, 28, 28), dtype=np.uint8)
  (tmp_path / "t10k-images-idx3-ubyte").write_bytes(idx_bytes(test))
  (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(idx_bytes(np.zeros(7, np.uint8)))
  cfg = config(tmp_path, source="derived", mnist_source="files", validation_size=5)
  ds = data.load("binarized_mnist", cfg)
  assert ds.source == "derived"
  assert ds.describe()["num_examples"] == {"train": 20, "validation": 10_000, "test": 7}
  assert "seeded Bernoulli binarization" in ds.notes and "not identical" in ds.notes
  train = ds.splits["train"]["image"]
  assert set(np.unique(train)) <= {0, 1} and train.dtype == np.uint8
  val = ds.splits["validation"]["image"]
  assert val[:, :, :10].all() and not val[:, :, 20:].any()
  assert abs(val[:, :, 10:20].mean() - 128 / 255) < 0.01
  again = data.load("binarized_mnist", cfg)
  np.testing.assert_array_equal(again.splits["test"]["image"], ds.splits["test"]["image"])
  other = data.load("binarized_mnist", dict(cfg, binarize_seed=1))
  assert not np.array_equal(other.splits["validation"]["image"], val)


# ---- CIFAR-10 --------------------------------------------------------------------------


def test_cifar_pickles_holdout_and_subset(tmp_path):
  write_cifar_pickles(tmp_path / "cifar10", n=4)  # 20 train, 4 test.
  ds = data.load("cifar10", config(tmp_path, validation_size=4, seed=1))
  assert ds.source == "files" and ds.location.endswith("cifar-10-batches-py")
  assert ds.describe()["num_examples"] == {"train": 16, "validation": 4, "test": 4}
  assert ds.info["class_names"][0] == "airplane" and ds.info["num_classes"] == 10
  seen = np.concatenate([ds.splits["train"]["image"], ds.splits["validation"]["image"]])
  assert len({a.tobytes() for a in seen}) == 20  # Disjoint, together the whole set.
  same = data.load("cifar10", config(tmp_path, validation_size=4, seed=1))
  np.testing.assert_array_equal(same.splits["validation"]["image"],
                                ds.splits["validation"]["image"])
  other = data.load("cifar10", config(tmp_path, validation_size=4, seed=2))
  assert not np.array_equal(other.splits["validation"]["image"], ds.splits["validation"]["image"])
  sub = data.load("cifar10", config(tmp_path, validation_size=4, seed=1, subset_fraction=0.25))
  assert sub.num_examples("train") == 4
  np.testing.assert_array_equal(sub.splits["validation"]["label"], ds.splits["validation"]["label"])
  train_rows = {a.tobytes() for a in ds.splits["train"]["image"]}
  assert {a.tobytes() for a in sub.splits["train"]["image"]} <= train_rows


def test_cifar_prefers_pickles_over_image_zip(tmp_path):
  write_cifar_pickles(tmp_path, n=2)
  with zipfile.ZipFile(tmp_path / "cifar10_png.zip", "w") as zf:
    zf.writestr("cifar10/train/cat/0.png", png(np.zeros((32, 32, 3), np.uint8)))
  assert data.load("cifar10", config(tmp_path, validation_size=2)).location.endswith(
      "cifar-10-batches-py")


def write_cifar_zip(path, ext="png"):
  rng = np.random.default_rng(0)
  images = {}
  with zipfile.ZipFile(path, "w") as zf:
    for split in ("train", "test"):
      for label, cls in enumerate(cifar10.CLASS_NAMES[:3]):
        arr = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
        if ext == "png":
          zf.writestr(f"cifar10/{split}/{cls}/0000.png", png(arr))
        else:
          with zf.open(f"cifar10/{split}/{cls}/0000.jpg", "w") as f:
            Image.fromarray(arr).save(f, format="JPEG", quality=75)
        images[(split, label)] = arr
  return images


def test_cifar_image_zip_is_cached(tmp_path, monkeypatch):
  images = write_cifar_zip(tmp_path / "cifar10_png.zip")
  cfg = config(tmp_path, validation_size=1, cache_dir=str(tmp_path / "c"))
  first = data.load("cifar10", cfg)
  assert "JPEG" not in first.notes
  test = first.splits["test"]
  for label in range(3):
    np.testing.assert_array_equal(test["image"][test["label"] == label][0], images[("test", label)])
  assert len(list((tmp_path / "c").glob("cifar10-*.npz"))) == 1

  def fail(*a, **kw):
    raise AssertionError("decoded again despite the cache")

  monkeypatch.setattr(image_folder, "read_zip", fail)
  second = data.load("cifar10", cfg)
  np.testing.assert_array_equal(second.splits["train"]["image"], first.splits["train"]["image"])
  with pytest.raises(AssertionError, match="decoded again"):
    data.load("cifar10", dict(cfg, use_cache=False))


def test_cifar_jpeg_zip_is_labelled(tmp_path):
  write_cifar_zip(tmp_path / "cifar10_jpeg.zip", ext="jpg")
  ds = data.load("cifar10", config(tmp_path, validation_size=1, use_cache=False))
  assert "JPEG re-encoding" in ds.notes and "JPEG re-encoding" in ds.describe()["notes"]


def test_cifar_synthetic_is_marked_and_never_auto(tmp_path):
  ds = data.load("cifar10", config(source="synthetic", synthetic_size=40))
  record = ds.describe()
  assert record["synthetic"] and "SYNTHETIC" in record["notes"]
  assert record["num_examples"] == {"train": 40, "validation": 10, "test": 10}
  assert ds.splits["train"]["image"].dtype == np.uint8
  assert ds.splits["train"]["image"].shape == (40, 32, 32, 3)
  assert ds.splits["train"]["label"].dtype == np.int32


# ---- IMDB ------------------------------------------------------------------------------

IMDB_REVIEWS = {
    "train/pos/0_9.txt": "good good good great fun<br />really good",
    "train/pos/1_8.txt": "great great fun",
    "train/neg/0_1.txt": "bad bad awful boring boring",
    "train/neg/1_2.txt": "bad awful plot",
    "test/pos/0_10.txt": "good and unseenword great",
    "test/neg/0_3.txt": "awful awful",
}


@pytest.mark.parametrize("archive", [False, True])
def test_imdb_files(tmp_path, archive):
  write_acl_imdb(tmp_path / "imdb", IMDB_REVIEWS)
  if archive:
    with tarfile.open(tmp_path / "aclImdb_v1.tar.gz", "w:gz") as tf:
      tf.add(tmp_path / "imdb" / "aclImdb", arcname="aclImdb")
    (tmp_path / "imdb").rename(tmp_path / "elsewhere")
  cfg = config(tmp_path, validation_size=1, vocab_size=5, max_length=4, seed=0)
  ds = data.load("imdb", cfg)
  assert ds.source == "files"
  assert ds.describe()["num_examples"] == {"train": 3, "validation": 1, "test": 2}
  vocab = ds.info["vocabulary"]
  assert vocab[:2] == ("<pad>", "<oov>") and ds.info["vocab_size"] == len(vocab) == 7
  assert "unseenword" not in vocab and "and" not in vocab  # Test-only words.
  test = ds.splits["test"]
  assert test["tokens"].dtype == np.int32 and test["tokens"].shape == (2, 4)
  assert test["length"].tolist() == [2, 4] and test["label"].tolist() == [0, 1]
  # Sorted by path: neg/0_3 'awful awful', then pos/0_10 'good and unseenword great'.
  ids = {w: i for i, w in enumerate(vocab)}
  assert test["tokens"][0].tolist() == [ids["awful"], ids["awful"], 0, 0]
  good_or_oov = ids.get("good", 1)
  assert test["tokens"][1].tolist() == [good_or_oov, 1, 1, ids.get("great", 1)]
  train = ds.splits["train"]
  assert (train["length"] <= 4).all() and train["label"].dtype == np.int32
  if archive:  # The second load reads the tokenized cache.
    assert list((tmp_path / "cache").glob("imdb-*.npz"))
    again = data.load("imdb", cfg)
    np.testing.assert_array_equal(again.splits["train"]["tokens"], train["tokens"])


def test_imdb_vocabulary_counts_training_split_only(tmp_path):
  write_acl_imdb(tmp_path, IMDB_REVIEWS)
  ds = data.load("imdb", config(tmp_path, validation_size=1, vocab_size=100, max_length=50))
  from lnorm.data import acl_imdb, splits, text  # pylint: disable=g-import-not-at-top
  texts, _ = acl_imdb.read_dir(str(tmp_path))["train"]
  kept, held = splits.holdout({"i": np.arange(4)}, 1, 0, "imdb")
  # Words of the held-out review and of the test set count only if also in 'train'.
  expected = text.Vocabulary.from_texts([text.tokenize(texts[i]) for i in kept["i"]], 100)
  assert list(ds.info["vocabulary"]) == expected.words
  held_words = set(text.tokenize(texts[held["i"][0]]))
  assert held_words - set(expected.words)  # The check above is not vacuous.


def test_imdb_long_review_keeps_its_end_and_pads_as_configured(tmp_path):
  reviews = dict(IMDB_REVIEWS)
  reviews["test/pos/0_10.txt"] = "one two three four five six"
  write_acl_imdb(tmp_path, reviews)
  for padding in ("post", "pre"):
    ds = data.load("imdb", config(tmp_path, validation_size=1, max_length=3, padding=padding))
    vocab = ds.info["vocabulary"]
    test = ds.splits["test"]
    assert test["length"].tolist() == [2, 3]
    assert test["tokens"][1].tolist() == [1, 1, 1]  # 'four five six': all OOV.
    assert ds.info["padding"] == padding
    short = [vocab[i] for i in test["tokens"][0]]
    assert short == (["awful", "awful", "<pad>"] if padding == "post"
                     else ["<pad>", "awful", "awful"])


def test_imdb_synthetic_structure():
  ds = data.load("imdb", config(source="synthetic", synthetic_size=32, max_length=20))
  assert ds.describe()["synthetic"]
  arrays = ds.splits["train"]
  assert arrays["tokens"].shape == (32, 20) and arrays["tokens"].dtype == np.int32
  assert (arrays["tokens"] < ds.info["vocab_size"]).all()
  mask = np.arange(20) < arrays["length"][:, None]
  assert (arrays["tokens"][mask] >= 2).all() and (arrays["tokens"][~mask] == 0).all()
