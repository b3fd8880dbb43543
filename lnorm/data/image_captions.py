"""Images with several captions each, for image-caption retrieval (order-embeddings,
LN paper sec. 6.1, docs/experiments.md, sec. 7).

Splits 'train', 'validation', 'test'; one row per image:
  'image'           float32 [N, D]  image features (D from the data: 4096 for VGG)
  'captions'        int32 [N, K, T] word ids (``lnorm.data.text``: 0 pad, 1 OOV),
                    then EOS (id 2) if ``append_eos``, then padding
  'caption_length'  int32 [N, K]    real tokens per caption (words, and EOS if
                    ``append_eos``)
``info``: vocab_size (the embedding table's size), feature_size, captions_per_image,
max_length, vocabulary.

Sources ('auto' tries 'files' only):
  files      the layout of Vendrov et al.'s release: ``<data_dir>/<collection>/``
             (``collection`` 'coco', 'f30k', ...) holding ``{train,dev,test}_caps.txt``,
             one tokenised caption per line, K (5) consecutive lines per image, and
             ``{train,dev,test}_ims.npy``, float32 [N, D], one row per image in the same
             order. 'dev' becomes 'validation'; ``test_prefix`` names the test files
             (e.g. 'testall' where the release keeps the 5k test images apart).
  synthetic  SYNTHETIC, for smoke and CPU runs: real MNIST digits as the "images"
             (features: a fixed random projection of the pixels, then a ReLU) with five
             captions each, from general to specific, generated from the digit's class
             and from attributes measured on its pixels ("an even digit", "a seven",
             "a thick seven", "a seven leaning left", "a wide thick seven leaning
             left"). The partial order an order-embedding learns is in the captions,
             and the attributes make retrieval possible well above chance.
There is no TFDS source: TFDS's coco_captions builder holds the JPEG images, not the
10-crop VGG features the paper used, and computing those needs a VGG network this
project does not have.

Captions are lower-cased and split by ``lnorm.data.text.tokenize`` (the release is
already tokenised, so this mostly lower-cases). The vocabulary is built from the
training captions only (every word by default). Vendrov et al.'s dictionary took
every word of the training and dev captions, so a word seen only in validation had an
embedding of its own (never trained); here it is out of vocabulary.

``append_eos`` (default False when the option is absent, for data loaded by runs from
before it existed; the order-embeddings config sets True) ends every caption with
:data:`lnorm.data.text.EOS`, as Vendrov et al.'s ``datasource.py`` did (their id 0,
here :data:`EOS_ID` = 2, the first id after pad and OOV, as in ``lnorm.data.books``):
the caption's embedding is then the GRU's state after reading EOS. A caption cut by
``max_length`` keeps its EOS.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from lnorm.data import core
from lnorm.data import locate
from lnorm.data import text
from lnorm.errors import ConfigError

NAME = "image_captions"
DEFAULT_COLLECTION = "coco"
CAPTIONS_PER_IMAGE = 5
#: The end-of-caption token's id with ``append_eos``: the first special after pad and OOV.
EOS_ID = len(text.RESERVED)
#: Our split -> the file prefix of the release.
FILE_PREFIXES = {"train": "train", "validation": "dev", "test": "test"}


# --- the files source --------------------------------------------------------------------


def _file_names(prefixes: dict[str, str]) -> dict[str, tuple[str, str]]:
  return {split: (f"{p}_caps.txt", f"{p}_ims.npy") for split, p in prefixes.items()}


def _prefixes(config: Any) -> dict[str, str]:
  return {**FILE_PREFIXES, "test": core.option(config, "test_prefix", "test")}


def find_files(data_dir: str | None, collection: str, prefixes: dict[str, str]):
  """``({split: (captions path, features path)}, looked)`` from the first folder that
  holds all six files; ``looked`` says what each folder lacked."""
  looked = []
  names = _file_names(prefixes)
  for d in locate.search_dirs(data_dir, collection):
    missing = [n for pair in names.values() for n in pair
               if not os.path.isfile(os.path.join(d, n))]
    if not missing:
      return {s: tuple(os.path.join(d, n) for n in pair) for s, pair in names.items()}, looked
    looked.append(f"{d}: missing {', '.join(missing)}")
  return None, looked


def read_captions(path: str) -> list[str]:
  """One caption per line (trailing whitespace and a final newline ignored)."""
  with open(path, encoding="utf-8") as f:
    lines = f.read().splitlines()
  for i, line in enumerate(lines):
    if not line.strip():
      raise core.MalformedDataError(path, f"line {i + 1} is empty",
                                    "Every line must hold one caption.")
  return lines


def read_features(path: str) -> np.ndarray:
  try:
    features = np.load(path, allow_pickle=False)
  except (OSError, ValueError) as e:
    raise core.MalformedDataError(path, f"not a readable .npy array ({e})") from e
  if features.ndim != 2 or not np.issubdtype(features.dtype, np.number):
    raise core.MalformedDataError(
        path, f"expected a numeric [images, features] array, found {features.dtype} "
        f"of shape {features.shape}")
  return features.astype(np.float32, copy=False)


def check_pairing(captions: list[str], features: np.ndarray, per_image: int,
                  captions_path: str, features_path: str) -> None:
  if len(captions) != per_image * len(features):
    raise core.MalformedDataError(
        captions_path, f"holds {len(captions)} captions but {os.path.basename(features_path)} "
        f"holds {len(features)} images, and {per_image} x {len(features)} = "
        f"{per_image * len(features)} captions were expected",
        f"The release lists {per_image} consecutive captions per image, in the order of "
        "the feature rows; set data.captions_per_image if yours has another count.")


def load_files(config: Any, auto: bool) -> core.Dataset:
  del auto
  collection = core.option(config, "collection", DEFAULT_COLLECTION)
  prefixes = _prefixes(config)
  files_help = ", ".join(n for pair in _file_names(prefixes).values() for n in pair)
  found, _ = locate.find_or_raise(
      config, lambda d: find_files(d, collection, prefixes), collection, files_help)
  per_image = core.option(config, "captions_per_image", CAPTIONS_PER_IMAGE)
  raw = {}
  for split, (captions_path, features_path) in found.items():
    captions = read_captions(captions_path)
    features = read_features(features_path)
    check_pairing(captions, features, per_image, captions_path, features_path)
    raw[split] = (captions, features)
  dims = {s: f.shape[1] for s, (_, f) in raw.items()}
  if len(set(dims.values())) > 1:
    raise core.MalformedDataError(
        os.path.dirname(found["train"][1]), f"the feature files differ in width: {dims}")
  location = os.path.dirname(found["train"][0])
  notes = f"collection {collection}; test split from {prefixes['test']}_*"
  return encode(raw, config, NAME, "files", location, notes)


# --- shared encoding ---------------------------------------------------------------------


def encode(raw: dict[str, tuple[list[str], np.ndarray]], config: Any, name: str,
           source: str, location: str, notes: str) -> core.Dataset:
  """Caption texts and feature rows per split -> a Dataset (see the module docstring)."""
  per_image = core.option(config, "captions_per_image", CAPTIONS_PER_IMAGE)
  tokens = {s: [text.tokenize(c) for c in captions] for s, (captions, _) in raw.items()}
  counts = text.count_words(tokens["train"])
  specials = (text.EOS,) if core.option(config, "append_eos", False) else ()
  vocab = text.Vocabulary.from_counts(
      counts, core.option(config, "vocab_size", 0) or len(counts) + len(specials), specials)
  end = [EOS_ID] if specials else []
  # 0: the longest caption of any split (and its EOS), so that no caption is cut.
  max_length = core.option(config, "max_length", 0) or len(end) + max(
      max((len(t) for t in split_tokens), default=1) for split_tokens in tokens.values())
  if max_length <= len(end):
    raise ConfigError(f"data.max_length={max_length} leaves no room for a word before the "
                      "EOS of data.append_eos: set it to 0 (the longest caption) or more.")
  data = {}
  for split, (_, features) in raw.items():
    ids, lengths = text.pad_and_truncate(
        [vocab.encode(t)[:max_length - len(end)] + end for t in tokens[split]],
        max_length, padding="post", truncating="post")
    n = len(features)
    data[split] = {"image": features,
                   "captions": ids.reshape(n, per_image, max_length),
                   "caption_length": lengths.reshape(n, per_image)}
  info = {"vocab_size": len(vocab), "feature_size": int(raw["train"][1].shape[1]),
          "captions_per_image": per_image, "max_length": max_length,
          "vocabulary": tuple(vocab.words)}
  return core.Dataset(name, source, location, data, notes, info)


# --- the synthetic source ----------------------------------------------------------------

_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_THICKNESS = ("thin", "medium", "thick")
_SLANT = ("leaning left", "standing upright", "leaning right")
_WIDTH = ("narrow", "average", "wide")
#: How many images each synthetic split takes from MNIST's train/validation/test.
DEFAULT_SYNTHETIC_SIZES = {"train": 10000, "validation": 1000, "test": 5000}
_PROJECTION_SEED = 1234  # Fixed: the features are part of the dataset, not of a run.


def _article(word: str) -> str:
  return "an" if word[0] in "aeiou" else "a"


def digit_attributes(images: np.ndarray) -> dict[str, np.ndarray]:
  """Per image: 'ink' (mean intensity), 'slant' (how far the stroke's column moves per
  row, ink-weighted: the sign tells the lean) and 'width' (ink-weighted spread of the
  columns)."""
  x = images.astype(np.float64) / 255.0
  mass = x.sum(axis=(1, 2)) + 1e-9
  rows = np.arange(x.shape[1])[None, :, None]
  cols = np.arange(x.shape[2])[None, None, :]
  mean_r = (x * rows).sum(axis=(1, 2)) / mass
  mean_c = (x * cols).sum(axis=(1, 2)) / mass
  dr = rows - mean_r[:, None, None]
  dc = cols - mean_c[:, None, None]
  var_r = (x * dr**2).sum(axis=(1, 2)) / mass
  cov = (x * dr * dc).sum(axis=(1, 2)) / mass
  var_c = (x * dc**2).sum(axis=(1, 2)) / mass
  return {"ink": x.mean(axis=(1, 2)), "slant": cov / np.maximum(var_r, 1e-9),
          "width": np.sqrt(var_c)}


def tertile_thresholds(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
  """[10, 2] per-class 1/3 and 2/3 quantiles, so that every attribute word is about
  equally common within each digit class."""
  return np.stack([np.quantile(values[labels == c], [1 / 3, 2 / 3]) if np.any(labels == c)
                   else np.zeros(2) for c in range(10)])


def synthetic_captions(label: int, levels: dict[str, int]) -> list[str]:
  """Five captions from general to specific for a digit of class ``label`` whose
  attributes fall in tertiles ``levels`` ('ink', 'slant', 'width' -> 0, 1, 2)."""
  name = _DIGITS[label]
  parity = "even" if label % 2 == 0 else "odd"
  thick, slant, width = (_THICKNESS[levels["ink"]], _SLANT[levels["slant"]],
                         _WIDTH[levels["width"]])
  return [f"{_article(parity)} {parity} digit",
          f"{_article(name)} {name}",
          f"{_article(thick)} {thick} {name}",
          f"{_article(name)} {name} {slant}",
          f"{_article(width)} {width} {thick} {name} {slant}"]


def load_synthetic(config: Any, auto: bool) -> core.Dataset:
  del auto
  from lnorm.data import load  # pylint: disable=g-import-not-at-top  (avoids a cycle)
  mnist = load("mnist", {"source": core.option(config, "mnist_source", "auto"),
                         "data_dir": core.option(config, "data_dir"),
                         "tfds_data_dir": core.option(config, "tfds_data_dir")})
  sizes = {s: int(core.option(config, f"synthetic_{s}_images", n))
           for s, n in DEFAULT_SYNTHETIC_SIZES.items()}
  feature_size = core.option(config, "feature_size", 4096)
  projection = np.random.default_rng(_PROJECTION_SEED).normal(
      0.0, 1.0 / np.sqrt(28 * 28), size=(28 * 28, feature_size)).astype(np.float32)
  chosen, attributes = {}, {}
  for split, size in sizes.items():
    arrays = mnist.splits[split]
    size = min(size, len(arrays["label"]))
    chosen[split] = {"image": arrays["image"][:size], "label": arrays["label"][:size]}
    attributes[split] = digit_attributes(chosen[split]["image"])
  thresholds = {k: tertile_thresholds(v, chosen["train"]["label"])
                for k, v in attributes["train"].items()}
  raw = {}
  for split, arrays in chosen.items():
    labels = arrays["label"]
    levels = {k: np.sum(v[:, None] > thresholds[k][labels], axis=1)
              for k, v in attributes[split].items()}
    captions = [c for i, label in enumerate(labels)
                for c in synthetic_captions(int(label), {k: int(v[i]) for k, v in levels.items()})]
    pixels = arrays["image"].reshape(len(labels), -1).astype(np.float32) / 255.0
    raw[split] = (captions, np.maximum(pixels @ projection, 0.0))
  notes = (f"SYNTHETIC captions of real MNIST digits ({mnist.source} source): features "
           f"are a fixed random projection to {feature_size} dims, not VGG features; for "
           "smoke and CPU runs only")
  return encode(raw, {**_as_dict(config), "captions_per_image": CAPTIONS_PER_IMAGE},
                NAME, "synthetic", f"lnorm.data.image_captions.load_synthetic (MNIST at "
                f"{mnist.location})", notes)


def _as_dict(config: Any) -> dict[str, Any]:
  if config is None:
    return {}
  return config.to_dict() if hasattr(config, "to_dict") else dict(config)


SOURCES = {"files": load_files, "synthetic": load_synthetic}
AUTO = ("files",)
