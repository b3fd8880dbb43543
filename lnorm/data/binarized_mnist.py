"""Binarized MNIST: 'train' 50k, 'validation' 10k, 'test' 10k; 'image' uint8 {0,1}
[N, 28, 28], no labels (the DRAW experiment, docs/experiments.md, sec. 2).

Sources: 'tfds' and 'files' give the fixed binarization of Larochelle & Murray
(2011) that the paper used; 'derived' samples a fixed, seeded Bernoulli
binarization of MNIST, a stand-in when that set is not at hand. Its likelihoods are
close to, not identical with, those on the fixed set.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from lnorm.data import amat
from lnorm.data import core
from lnorm.data import locate
from lnorm.data import mnist
from lnorm.data import resolution
from lnorm.data import splits
from lnorm.data import tfds_source

NAME = "binarized_mnist"
TFDS_NAME = "binarized_mnist"
IMAGE_SHAPE = (28, 28)
SPLITS = ("train", "validation", "test")
# The files' names use 'valid'.
FILES = {"train": "binarized_mnist_train.amat", "validation": "binarized_mnist_valid.amat",
         "test": "binarized_mnist_test.amat"}
FILES_HELP = ", ".join(FILES.values())
# The published split sizes; 'derived' reproduces them from MNIST's 60k/10k.
DERIVED_VALIDATION_SIZE = 10000


def load_tfds(config: Any, auto: bool) -> core.Dataset:
  tfds_dir = core.option(config, "tfds_data_dir")
  download = not auto and core.option(config, "tfds_download", True)
  data = tfds_source.read_splits(TFDS_NAME, SPLITS, tfds_dir, download, _from_tfds, NAME)
  return _finish(data, config, "tfds", tfds_source.where(TFDS_NAME, tfds_dir),
                 "fixed binarization of Larochelle & Murray (2011)")


def _from_tfds(examples: list[dict]) -> dict[str, np.ndarray]:
  image = tfds_source.stack(examples, "image", np.uint8).reshape((-1,) + IMAGE_SHAPE)
  if image.size and image.max() > 1:
    raise core.MalformedDataError(f"TFDS {TFDS_NAME}", f"pixel values up to {image.max()}, "
                                  "expected 0 or 1")
  return {"image": image}


def load_files(config: Any, auto: bool) -> core.Dataset:
  del auto
  data_dir = core.data_dir(core.option(config, "data_dir"))
  looked = []
  for d in locate.search_dirs(data_dir, NAME):
    paths = {s: _find(d, f) for s, f in FILES.items()}
    missing = [FILES[s] for s, p in paths.items() if p is None]
    if not missing:
      data = {s: {"image": amat.read(p).reshape((-1,) + IMAGE_SHAPE)} for s, p in paths.items()}
      return _finish(data, config, "files", d,
                     "fixed binarization of Larochelle & Murray (2011)")
    looked.append(d if len(missing) == len(FILES) else f"{d}: missing {', '.join(missing)}")
  raise locate.not_found(NAME, looked, FILES_HELP, TFDS_NAME, data_dir)


def _find(directory: str, name: str) -> str | None:
  for suffix in ("", ".gz"):
    path = os.path.join(directory, name + suffix)
    if os.path.isfile(path):
      return path
  return None


def load_derived(config: Any, auto: bool) -> core.Dataset:
  """A seeded Bernoulli binarization of MNIST (data_config.mnist_source, 'auto').

  MNIST's 60k training images give train (first 50k) and validation (last 10k), its
  test images the test split. Pixel p in 0..255 becomes 1 with probability p/255,
  drawn once from data_config.binarize_seed (0), so every run sees the same images.
  """
  mnist_config = {k: core.option(config, k) for k in ("data_dir", "tfds_data_dir", "tfds_download")}
  mnist_config.update(validation_size=DERIVED_VALIDATION_SIZE, subset_fraction=1.0,
                      permute_pixels=False)
  mnist_source = core.option(config, "mnist_source", "auto")
  if auto and mnist_source == "tfds":
    mnist_config["tfds_download"] = False
  base = resolution.resolve(mnist.NAME, mnist_source, mnist.SOURCES, mnist.AUTO, mnist_config)
  seed = core.option(config, "binarize_seed", 0)
  rng = np.random.default_rng(seed)
  data = {}
  for split in SPLITS:  # One stream in a fixed split order: the result is fixed.
    image = base.splits[split]["image"]
    # U uniform on 0..254 gives P(U < p) = p/255 exactly, in uint8 (not 8x the memory).
    u = rng.integers(0, 255, size=image.shape, dtype=np.uint8)
    data[split] = {"image": (u < image).astype(np.uint8)}
  notes = (f"seeded Bernoulli binarization (binarize_seed {seed}) of MNIST, close to but "
           "not identical with the fixed binarization of Larochelle & Murray")
  if base.notes:
    notes += f"; MNIST: {base.notes}"
  location = f"MNIST from {base.source} at {base.location}"
  return _finish(data, config, "derived", location, notes)


def _finish(data: dict[str, dict[str, np.ndarray]], config: Any, source: str,
            location: str, notes: str) -> core.Dataset:
  """The published splits as they are (validation_size does not apply); subset."""
  data = dict(data)
  data["train"] = splits.subset(data["train"], core.option(config, "subset_fraction", 1.0),
                                core.option(config, "seed", 0), NAME)
  info = {"image_shape": IMAGE_SHAPE}
  return core.Dataset(NAME, source, location, data, notes, info)


SOURCES = {"tfds": load_tfds, "files": load_files, "derived": load_derived}
AUTO = ("tfds", "files", "derived")
