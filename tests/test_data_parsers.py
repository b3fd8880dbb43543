"""The file-format readers of lnorm.data on small files written by the tests."""

import gzip
import io
import os
import pickle
import tarfile
import zipfile

import numpy as np
import pytest
from PIL import Image

from lnorm.data import acl_imdb
from lnorm.data import amat
from lnorm.data import cifar_pickle
from lnorm.data import idx
from lnorm.data import image_folder
from lnorm.data.core import MalformedDataError


def idx_bytes(arr: np.ndarray, code: int = 0x08) -> bytes:
  header = bytes([0, 0, code, arr.ndim]) + np.array(arr.shape, ">u4").tobytes()
  return header + arr.tobytes()


# ---- IDX -----------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [True, False])
def test_idx_reads_images_gzipped_or_plain(tmp_path, gz):
  images = np.random.default_rng(0).integers(0, 256, (5, 28, 28), dtype=np.uint8)
  path = tmp_path / ("x.gz" if gz else "x")
  data = idx_bytes(images)
  path.write_bytes(gzip.compress(data) if gz else data)
  out = idx.read(str(path))
  assert out.dtype == np.uint8 and out.shape == (5, 28, 28)
  np.testing.assert_array_equal(out, images)


def test_idx_big_endian_int32(tmp_path):
  values = np.array([[1, -2, 70000]], ">i4")
  path = tmp_path / "ints"
  path.write_bytes(idx_bytes(values, code=0x0C))
  np.testing.assert_array_equal(idx.read(str(path)), [[1, -2, 70000]])


def test_idx_bad_magic_names_file(tmp_path):
  path = tmp_path / "train-images-idx3-ubyte"
  path.write_bytes(b"\x12\x34\x08\x03" + bytes(100))
  with pytest.raises(MalformedDataError, match=r"train-images-idx3-ubyte.*bad magic"):
    idx.read(str(path))


def test_idx_truncated_says_what_header_promised(tmp_path):
  images = np.zeros((60, 28, 28), np.uint8)
  path = tmp_path / "train-images-idx3-ubyte.gz"
  path.write_bytes(gzip.compress(idx_bytes(images)[:16 + 1234]))
  with pytest.raises(MalformedDataError) as e:
    idx.read(str(path))
  msg = str(e.value)
  assert str(path) in msg
  assert "truncated: header says 60x28x28" in msg and "holds 1234 bytes of data" in msg


def test_idx_trailing_bytes_and_unknown_type(tmp_path):
  path = tmp_path / "labels"
  path.write_bytes(idx_bytes(np.zeros(3, np.uint8)) + b"xx")
  with pytest.raises(MalformedDataError, match="2 unexpected bytes"):
    idx.read(str(path))
  path.write_bytes(bytes([0, 0, 0x07, 1]) + np.array([3], ">u4").tobytes() + bytes(3))
  with pytest.raises(MalformedDataError, match="unknown IDX type code 0x07"):
    idx.read(str(path))


def test_idx_corrupt_gzip(tmp_path):
  path = tmp_path / "x.gz"
  path.write_bytes(gzip.compress(idx_bytes(np.zeros((10, 28, 28), np.uint8)))[:-30])
  with pytest.raises(MalformedDataError, match="gzip"):
    idx.read(str(path))


# ---- .amat -----------------------------------------------------------------------------


def test_amat_parses_lines(tmp_path):
  rows = np.random.default_rng(1).integers(0, 2, (3, 784), dtype=np.uint8)
  lines = [" ".join(map(str, r)) for r in rows]
  lines[1] = "  " + lines[1].replace(" ", "  ") + " \r"  # Irregular spacing, CRLF.
  path = tmp_path / "binarized_mnist_test.amat"
  path.write_text("\n".join(lines) + "\n\n")
  out = amat.read(str(path))
  assert out.dtype == np.uint8
  np.testing.assert_array_equal(out, rows)


def test_amat_wrong_count_names_line(tmp_path):
  good = " ".join(["0"] * 784)
  path = tmp_path / "binarized_mnist_valid.amat"
  path.write_text(good + "\n" + " ".join(["1"] * 783) + "\n")
  with pytest.raises(MalformedDataError,
                     match=r"binarized_mnist_valid.amat: line 2 has 783 values, expected 784"):
    amat.read(str(path))


def test_amat_non_binary_value(tmp_path):
  values = ["0"] * 784
  values[9] = "0.5"
  path = tmp_path / "b.amat"
  path.write_text(" ".join(values) + "\n")
  with pytest.raises(MalformedDataError, match=r"line 1, value 10 is '0.5', expected 0 or 1"):
    amat.read(str(path))


# ---- CIFAR-10 pickles ----------------------------------------------------------------


def cifar_batch(n: int, seed: int, protocol: int = 2) -> tuple[bytes, np.ndarray, np.ndarray]:
  """A pickled batch in the official layout, and the HWC images it must decode to."""
  rng = np.random.default_rng(seed)
  hwc = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
  labels = rng.integers(0, 10, n)
  chw_rows = hwc.transpose(0, 3, 1, 2).reshape(n, 3072)  # R plane, G plane, B plane.
  batch = {b"batch_label": b"x", b"labels": labels.tolist(), b"data": chw_rows,
           b"filenames": [b"f%d.png" % i for i in range(n)]}
  return pickle.dumps(batch, protocol=protocol), hwc, labels


def write_cifar_pickles(folder, n=4):
  """Writes cifar-10-batches-py into ``folder``; returns the expected arrays."""
  d = folder / cifar_pickle.FOLDER
  d.mkdir(parents=True)
  expected = {"train": ([], []), "test": ([], [])}
  for seed, name in enumerate([f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]):
    # Protocols 2 (as the official files) and 5 (as a Python 3 re-pickling).
    data, hwc, labels = cifar_batch(n, seed, protocol=2 if seed % 2 else 5)
    (d / name).write_bytes(data)
    split = "test" if name == "test_batch" else "train"
    expected[split][0].append(hwc)
    expected[split][1].append(labels)
  return {s: (np.concatenate(i), np.concatenate(l)) for s, (i, l) in expected.items()}


def test_cifar_pickle_chw_to_hwc_from_dir_and_tar(tmp_path):
  expected = write_cifar_pickles(tmp_path)
  from_dir = cifar_pickle.read_dir(str(tmp_path / cifar_pickle.FOLDER))
  tar_path = tmp_path / cifar_pickle.ARCHIVE
  with tarfile.open(tar_path, "w:gz") as tf:
    tf.add(tmp_path / cifar_pickle.FOLDER, arcname=cifar_pickle.FOLDER)
  from_tar = cifar_pickle.read_tar(str(tar_path))
  for got in (from_dir, from_tar):
    for split, (images, labels) in expected.items():
      assert got[split]["image"].shape == (len(labels), 32, 32, 3)
      np.testing.assert_array_equal(got[split]["image"], images)
      np.testing.assert_array_equal(got[split]["label"], labels)
      assert got[split]["label"].dtype == np.int32
  # Channel order: the first 1024 values of a row are the red plane.
  data, hwc, _ = cifar_batch(1, 0)
  assert pickle.loads(data)[b"data"][0, 0] == hwc[0, 0, 0, 0]
  assert pickle.loads(data)[b"data"][0, 1024] == hwc[0, 0, 0, 1]


def test_cifar_pickle_rejects_code_and_bad_shapes(tmp_path):
  # Unpickling may call any global it names; only NumPy's array constructors pass.
  with pytest.raises(MalformedDataError, match=r"evil: not a CIFAR-10 python pickle.*getcwd"):
    cifar_pickle.parse_batch(pickle.dumps({b"data": os.getcwd}), "evil")
  bad = pickle.dumps({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]})
  with pytest.raises(MalformedDataError, match=r"b'data' is uint8 \(2, 100\)"):
    cifar_pickle.parse_batch(bad, "bad_batch")


def test_cifar_tar_missing_batch(tmp_path):
  write_cifar_pickles(tmp_path)
  os.remove(tmp_path / cifar_pickle.FOLDER / "data_batch_3")
  tar_path = tmp_path / "c.tar.gz"
  with tarfile.open(tar_path, "w:gz") as tf:
    tf.add(tmp_path / cifar_pickle.FOLDER, arcname=cifar_pickle.FOLDER)
  with pytest.raises(MalformedDataError, match="data_batch_3"):
    cifar_pickle.read_tar(str(tar_path))


# ---- Image folders -------------------------------------------------------------------

CLASSES = ("airplane", "automobile", "bird")


def png(arr: np.ndarray) -> bytes:
  buf = io.BytesIO()
  Image.fromarray(arr).save(buf, format="PNG")
  return buf.getvalue()


def write_image_zip(path, per_class=2, classes=CLASSES, prefix="cifar10/", seed=0):
  """A zip of PNGs; returns split -> (images, labels) in the reader's order."""
  rng = np.random.default_rng(seed)
  expected = {}
  with zipfile.ZipFile(path, "w") as zf:
    for split in ("train", "test"):
      images = []
      # Class folders are written in reverse, so the test sees labels assigned from
      # the class list, not from the archive's order.
      for label in reversed(range(len(classes))):
        for i in range(per_class):
          arr = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
          zf.writestr(f"{prefix}{split}/{classes[label]}/{i:04d}.png", png(arr))
          images.append((label, i, arr))
      images.sort(key=lambda t: (t[0], t[1]))
      expected[split] = (np.stack([a for _, _, a in images]),
                         np.array([l for l, _, _ in images]))
  return expected


def test_image_folder_zip_pixel_exact(tmp_path):
  path = tmp_path / "cifar10_png.zip"
  expected = write_image_zip(path)
  data, lossy = image_folder.read_zip(str(path), ("train", "test"), CLASSES, (32, 32, 3))
  assert not lossy
  for split, (images, labels) in expected.items():
    np.testing.assert_array_equal(data[split]["image"], images)
    np.testing.assert_array_equal(data[split]["label"], labels)


def test_image_folder_dir_and_jpeg_is_lossy(tmp_path):
  root = tmp_path / "cifar10"
  for split in ("train", "test"):
    (root / split / "bird").mkdir(parents=True)
    Image.fromarray(np.full((32, 32, 3), 200, np.uint8)).save(root / split / "bird" / "0.jpg")
  assert image_folder.has_layout(str(root), ("train", "test"), CLASSES)
  data, lossy = image_folder.read_dir(str(root), ("train", "test"), CLASSES, (32, 32, 3))
  assert lossy
  assert data["train"]["label"].tolist() == [2]
  assert abs(int(data["test"]["image"].mean()) - 200) <= 2  # JPEG: close, not exact.


def test_image_folder_unknown_class_and_wrong_size(tmp_path):
  path = tmp_path / "a.zip"
  with zipfile.ZipFile(path, "w") as zf:
    zf.writestr("train/zebra/0.png", png(np.zeros((32, 32, 3), np.uint8)))
  with pytest.raises(MalformedDataError, match="unknown class folder 'zebra'"):
    image_folder.read_zip(str(path), ("train", "test"), CLASSES, (32, 32, 3))
  with zipfile.ZipFile(path, "w") as zf:
    for split in ("train", "test"):
      zf.writestr(f"{split}/bird/0.png", png(np.zeros((30, 32, 3), np.uint8)))
  with pytest.raises(MalformedDataError, match=r"shape \(30, 32, 3\), expected \(32, 32, 3\)"):
    image_folder.read_zip(str(path), ("train", "test"), CLASSES, (32, 32, 3))


# ---- aclImdb ---------------------------------------------------------------------------

REVIEWS = {
    "train/pos/1_9.txt": "Great film!<br /><br />Loved it.",
    "train/pos/0_10.txt": "Wonderful, wonderful.",
    "train/neg/3_1.txt": "Awful... just awful",
    "test/neg/0_2.txt": "Bad movie",
    "test/pos/5_8.txt": "Good (really) movie",
}


def write_acl_imdb(root, reviews=REVIEWS):
  for rel, text in reviews.items():
    path = root / "aclImdb" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
  (root / "aclImdb" / "imdb.vocab").write_text("the\nfilm\n")
  for split in ("train", "test"):
    for pol in ("pos", "neg"):
      (root / "aclImdb" / split / pol).mkdir(parents=True, exist_ok=True)


def test_acl_imdb_dir_and_tar_agree_sorted_by_path(tmp_path):
  write_acl_imdb(tmp_path)
  (tmp_path / "aclImdb" / "train" / "unsup").mkdir()
  (tmp_path / "aclImdb" / "train" / "unsup" / "0_0.txt").write_text("ignored")
  from_dir = acl_imdb.read_dir(str(tmp_path))
  tar_path = tmp_path / "aclImdb_v1.tar.gz"
  with tarfile.open(tar_path, "w:gz") as tf:
    tf.add(tmp_path / "aclImdb", arcname="aclImdb")
  from_tar = acl_imdb.read_tar(str(tar_path))
  assert from_dir == from_tar
  texts, labels = from_dir["train"]
  # Sorted by path: neg/3_1, pos/0_10, pos/1_9.
  assert texts == ["Awful... just awful", "Wonderful, wonderful.",
                   "Great film!<br /><br />Loved it."]
  assert labels == [0, 1, 1]
  assert from_dir["test"] == (["Bad movie", "Good (really) movie"], [0, 1])


def test_acl_imdb_bad_file_name(tmp_path):
  write_acl_imdb(tmp_path, dict(REVIEWS, **{"test/pos/notes.txt": "x"}))
  with pytest.raises(MalformedDataError, match="notes.txt"):
    acl_imdb.read_dir(str(tmp_path))
