"""CIFAR-10 (Krizhevsky 2009) for the BLN experiments (docs/experiments.md, sec. 8).

Splits: 'train' = the 50k training images less a seeded random hold-out of
``validation_size`` (5,000), then optionally a seeded ``subset_fraction`` of the rest
(the BLN protocol's "20%"); 'validation' = the hold-out; 'test' = the 10k test set.
Features: 'image' uint8 [N, 32, 32, 3] (HWC, RGB), 'label' int32 [N].

Sources: 'tfds' (the 'cifar10' builder); 'files', the first found of the official
python pickles (directory, then tar.gz) and image folders
``cifar10/{train,test}/<class>/*`` (directory, then zip); 'synthetic' (random
images, for smoke runs only, never chosen by 'auto').
"""

from __future__ import annotations

import glob
import logging
import os
import sys
import time
from typing import Any

import numpy as np
import PIL

from lnorm.data import cache
from lnorm.data import cifar_pickle
from lnorm.data import core
from lnorm.data import image_folder
from lnorm.data import locate
from lnorm.data import splits
from lnorm.data import tfds_source

NAME = "cifar10"
TFDS_NAME = "cifar10"
CLASS_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
               "ship", "truck")
IMAGE_SHAPE = (32, 32, 3)
DEFAULT_VALIDATION_SIZE = 5000
DEFAULT_SYNTHETIC_SIZE = 256
FILES_HELP = (f"{cifar_pickle.FOLDER}/ or {cifar_pickle.ARCHIVE} (the official python "
              "version), or an image-folder copy cifar10/{train,test}/<class>/*.png|jpg "
              "(directory or .zip)")
_SPLITS = ("train", "test")

_log = logging.getLogger(__name__)


def load_tfds(config: Any, auto: bool) -> core.Dataset:
  tfds_dir = core.option(config, "tfds_data_dir")
  download = not auto and core.option(config, "tfds_download", True)
  official = tfds_source.read_splits(TFDS_NAME, _SPLITS, tfds_dir, download, _from_tfds, NAME)
  return _finish(official, config, "tfds", tfds_source.where(TFDS_NAME, tfds_dir), "")


def _from_tfds(examples: list[dict]) -> dict[str, np.ndarray]:
  return {"image": tfds_source.stack(examples, "image", np.uint8),
          "label": tfds_source.stack(examples, "label", np.int32)}


def find_files(data_dir: str | None) -> tuple[tuple[str, str] | None, list[str]]:
  """((kind, path), looked): the first copy found, lossless formats first."""
  looked = []
  dirs = locate.search_dirs(data_dir, NAME)
  for d in dirs:
    looked.append(os.path.join(d, cifar_pickle.FOLDER))
    if os.path.isdir(os.path.join(d, cifar_pickle.FOLDER)):
      return ("pickle_dir", os.path.join(d, cifar_pickle.FOLDER)), looked
  for d in dirs:
    looked.append(os.path.join(d, cifar_pickle.ARCHIVE))
    if os.path.isfile(os.path.join(d, cifar_pickle.ARCHIVE)):
      return ("pickle_tar", os.path.join(d, cifar_pickle.ARCHIVE)), looked
  for d in dirs:
    for root in (os.path.join(d, NAME), d):
      looked.append(os.path.join(root, "{train,test}/<class>/"))
      if image_folder.has_layout(root, _SPLITS, CLASS_NAMES):
        return ("folder_dir", root), looked
  for d in dirs:
    looked.append(os.path.join(d, "cifar*10*.zip"))
    zips = sorted(glob.glob(os.path.join(d, "cifar*10*.zip")))
    if zips:
      return ("folder_zip", zips[0]), looked
  return None, looked


def load_files(config: Any, auto: bool) -> core.Dataset:
  del auto
  (kind, path), _ = locate.find_or_raise(config, find_files, NAME, FILES_HELP, TFDS_NAME)
  notes = ""
  if kind == "pickle_dir":
    official = cifar_pickle.read_dir(path)
  elif kind == "pickle_tar":
    official = cifar_pickle.read_tar(path)
  else:
    official, lossy = _read_image_folder(kind, path, config)
    if lossy:
      notes = ("JPEG re-encoding of CIFAR-10 (lossy): accuracies are close to, not "
               "identical with, those on the original images")
  return _finish(official, config, "files", path, notes)


def _read_image_folder(kind: str, path: str, config: Any):
  """Decodes an image-folder copy; zips go through the decoded-array cache."""
  if kind == "folder_dir":
    return image_folder.read_dir(path, _SPLITS, CLASS_NAMES, IMAGE_SHAPE)
  entry = None
  if cache.enabled(config):
    # The JPEG decoder's version is part of the key: another libjpeg may round differently.
    entry = cache.key_path(cache.cache_dir(config), NAME, path,
                           f"Pillow {PIL.__version__}",
                           decoder=(image_folder, sys.modules[__name__]))
    arrays = cache.load(entry)
    if arrays is not None:
      _log.info("Read decoded %s from cache %s", path, entry)
      official = {s: {"image": arrays[f"{s}_image"], "label": arrays[f"{s}_label"]}
                  for s in _SPLITS}
      return official, bool(arrays["lossy"])
  start = time.perf_counter()
  official, lossy = image_folder.read_zip(path, _SPLITS, CLASS_NAMES, IMAGE_SHAPE)
  _log.info("Decoded %s in %.1f s", path, time.perf_counter() - start)
  if entry is not None:
    arrays = {f"{s}_{k}": v for s, a in official.items() for k, v in a.items()}
    cache.save(entry, dict(arrays, lossy=np.array(lossy)))
  return official, lossy


def load_synthetic(config: Any, auto: bool) -> core.Dataset:
  """Random images with the real structure: for smoke runs, never for results.

  Each class has its own mean colour, so a model can learn something and a smoke
  run can show the loss falling.
  """
  del auto
  n = core.option(config, "synthetic_size", DEFAULT_SYNTHETIC_SIZE)
  rng = np.random.default_rng([core.option(config, "seed", 0), 7])
  colours = rng.integers(40, 216, size=(len(CLASS_NAMES), 1, 1, 3))
  data = {}
  for split, size in (("train", n), ("validation", max(1, n // 4)), ("test", max(1, n // 4))):
    label = rng.integers(0, len(CLASS_NAMES), size=size).astype(np.int32)
    noise = rng.integers(-40, 40, size=(size,) + IMAGE_SHAPE)
    data[split] = {"image": np.clip(colours[label] + noise, 0, 255).astype(np.uint8),
                   "label": label}
  return core.Dataset(NAME, "synthetic", "lnorm.data.cifar10.load_synthetic", data,
                      "SYNTHETIC random images with CIFAR-10's structure, for smoke runs "
                      "only", _info())


def _finish(official: dict[str, dict[str, np.ndarray]], config: Any, source: str,
            location: str, notes: str) -> core.Dataset:
  size = core.option(config, "validation_size", DEFAULT_VALIDATION_SIZE)
  seed = core.option(config, "seed", 0)
  train, validation = splits.holdout(official["train"], size, seed, NAME)
  fraction = core.option(config, "subset_fraction", 1.0)
  train = splits.subset(train, fraction, seed, NAME)
  if fraction != 1.0:
    notes = "; ".join(filter(None, [notes, f"training subset: {fraction:g} of the "
                                    "training split (seeded)"]))
  data = {"train": train, "validation": validation, "test": official["test"]}
  return core.Dataset(NAME, source, location, data, notes, _info())


def _info() -> dict[str, Any]:
  return {"num_classes": len(CLASS_NAMES), "class_names": CLASS_NAMES,
          "image_shape": IMAGE_SHAPE}


SOURCES = {"tfds": load_tfds, "files": load_files, "synthetic": load_synthetic}
AUTO = ("tfds", "files")
