"""The image-caption reader (lnorm.data.image_captions): the authors' release layout
on fixtures written here, the real COCO captions with stand-in features, bad input,
and the synthetic captioned digits."""

from __future__ import annotations

import os

import numpy as np
import pytest

from lnorm import data
from lnorm.data import image_captions
from lnorm.data import text

REAL_CAPTIONS = os.path.join(os.environ.get("LNORM_DATA_DIR", "/nonexistent"), "coco_captions")


def write_release(root, collection="coco", sizes=None, dim=7, per_image=5,
                  prefixes=("train", "dev", "test")):
  """Vendrov's layout: <root>/<collection>/<prefix>_caps.txt and <prefix>_ims.npy."""
  sizes = sizes or {"train": 3, "dev": 2, "test": 2}
  folder = root / collection
  folder.mkdir(parents=True, exist_ok=True)
  rng = np.random.default_rng(0)
  for prefix in prefixes:
    n = sizes.get(prefix, 2)
    lines = [f"A {prefix} photo number {i} , caption {k} ." for i in range(n)
             for k in range(per_image)]
    (folder / f"{prefix}_caps.txt").write_text("\n".join(lines) + "\n")
    np.save(folder / f"{prefix}_ims.npy", rng.normal(size=(n, dim)).astype(np.float32))
  return folder


def load_files(root, **options):
  return data.load("image_captions", {"source": "files", "data_dir": str(root), **options})


def test_release_layout(tmp_path):
  folder = write_release(tmp_path, dim=7)
  ds = load_files(tmp_path)
  assert ds.source == "files" and ds.location == str(folder)
  assert {s: ds.num_examples(s) for s in ds.splits} == {"train": 3, "validation": 2, "test": 2}
  train = ds.splits["train"]
  assert train["image"].dtype == np.float32 and train["image"].shape == (3, 7)
  np.testing.assert_array_equal(train["image"], np.load(folder / "train_ims.npy"))
  assert ds.info["feature_size"] == 7 and ds.info["captions_per_image"] == 5
  vocab = text.Vocabulary(ds.info["vocabulary"])
  assert ds.info["vocab_size"] == len(vocab)
  # Lines 5..9 are image 1's captions, in order; padding after the words.
  longest = ds.info["max_length"]
  assert train["captions"].shape == (3, 5, longest)
  assert vocab.decode(train["captions"][1, 2]) == "a train photo number 1 , caption 2 .".split()
  assert train["caption_length"][1, 2] == 9
  assert np.all(train["captions"][1, 2, 9:] == text.PAD_ID)
  # The vocabulary is the training captions': 'dev' and 'test' are out of vocabulary.
  assert "train" in vocab.words and "dev" not in vocab.words
  assert vocab.encode(["dev"]) == [text.OOV_ID]
  assert ds.splits["validation"]["captions"][0, 0, 1] == text.OOV_ID


def test_append_eos_ends_every_caption_with_eos(tmp_path):
  write_release(tmp_path, dim=7)
  plain, ended = load_files(tmp_path), load_files(tmp_path, append_eos=True)
  vocab = text.Vocabulary(ended.info["vocabulary"])
  # EOS takes id 2, right after pad and OOV; every word moves up by one.
  assert image_captions.EOS_ID == 2 and vocab.id(text.EOS) == 2
  assert ended.info["vocab_size"] == plain.info["vocab_size"] + 1
  assert ended.info["max_length"] == plain.info["max_length"] + 1
  for split in ("train", "validation"):
    caps, lengths = ended.splits[split]["captions"], ended.splits[split]["caption_length"]
    np.testing.assert_array_equal(lengths, plain.splits[split]["caption_length"] + 1)
    # Image 1's third caption: its nine words, then EOS, then padding.
    assert caps[1, 2, 9] == image_captions.EOS_ID and np.all(caps[1, 2, 10:] == text.PAD_ID)
  assert vocab.decode(ended.splits["train"]["captions"][1, 2]) == (
      "a train photo number 1 , caption 2 . <eos>".split())
  # A caption cut by max_length keeps its EOS.
  cut = load_files(tmp_path, append_eos=True, max_length=4)
  assert vocab.decode(cut.splits["train"]["captions"][1, 2]) == "a train photo <eos>".split()
  assert np.all(cut.splits["train"]["caption_length"] == 4)


def test_other_collection_and_test_prefix(tmp_path):
  write_release(tmp_path, collection="f30k", prefixes=("train", "dev", "testall"),
                sizes={"train": 2, "dev": 1, "testall": 4}, dim=3)
  ds = load_files(tmp_path, collection="f30k", test_prefix="testall")
  assert ds.num_examples("test") == 4 and ds.info["feature_size"] == 3


def test_caption_count_must_be_five_per_image(tmp_path):
  folder = write_release(tmp_path)
  lines = (folder / "dev_caps.txt").read_text().splitlines()
  (folder / "dev_caps.txt").write_text("\n".join(lines[:-1]) + "\n")
  with pytest.raises(data.MalformedDataError, match=r"holds 9 captions but dev_ims.npy "
                     r"holds 2 images.*5 x 2 = 10"):
    load_files(tmp_path)


def test_missing_file_is_named(tmp_path):
  folder = write_release(tmp_path)
  os.remove(folder / "test_ims.npy")
  with pytest.raises(data.DatasetNotFoundError, match="missing test_ims.npy"):
    load_files(tmp_path)


@pytest.mark.parametrize("problem, message", [
    ("empty_line", "line 3 is empty"),
    ("not_2d", "expected a numeric"),
])
def test_malformed_files(tmp_path, problem, message):
  folder = write_release(tmp_path)
  if problem == "empty_line":
    lines = (folder / "train_caps.txt").read_text().splitlines()
    lines[2] = "  "
    (folder / "train_caps.txt").write_text("\n".join(lines))
  else:
    np.save(folder / "train_ims.npy", np.zeros(3, np.float32))
  with pytest.raises(data.MalformedDataError, match=message):
    load_files(tmp_path)


@pytest.mark.skipif(not os.path.isdir(REAL_CAPTIONS), reason="no real COCO captions")
def test_real_coco_captions_with_stand_in_features(tmp_path):
  folder = tmp_path / "coco"
  folder.mkdir()
  # The real captions (dev as the training split too) beside stand-in features.
  for prefix, source, n in (("train", "dev", 1000), ("dev", "dev", 1000),
                            ("testall", "testall", 5000)):
    os.symlink(os.path.join(REAL_CAPTIONS, f"{source}_caps.txt"), folder / f"{prefix}_caps.txt")
    np.save(folder / f"{prefix}_ims.npy", np.zeros((n, 4), np.float32))
  ds = load_files(tmp_path, test_prefix="testall")
  assert {s: ds.num_examples(s) for s in ds.splits} == {
      "train": 1000, "validation": 1000, "test": 5000}
  with open(os.path.join(REAL_CAPTIONS, "dev_caps.txt")) as f:
    lines = f.read().splitlines()
  vocab = text.Vocabulary(ds.info["vocabulary"])
  for image, caption in ((0, 0), (1, 4), (999, 3)):
    got = vocab.decode(ds.splits["train"]["captions"][image, caption])
    assert got == text.tokenize(lines[5 * image + caption])
  assert ds.info["max_length"] >= 40  # COCO has captions of about 50 words: none is cut.
  assert ds.splits["test"]["caption_length"].min() >= 1
  # Test words unseen in training map to OOV; most test words are known.
  test_ids = ds.splits["test"]["captions"]
  oov = np.mean(test_ids[test_ids != text.PAD_ID] == text.OOV_ID)
  assert 0.0 < oov < 0.1


def test_synthetic_captions_from_general_to_specific():
  assert image_captions.synthetic_captions(7, {"ink": 2, "slant": 0, "width": 1}) == [
      "an odd digit", "a seven", "a thick seven", "a seven leaning left",
      "an average thick seven leaning left"]
  assert image_captions.synthetic_captions(8, {"ink": 0, "slant": 2, "width": 0})[1] == "an eight"


def test_digit_attributes_read_the_pixels():
  images = np.zeros((3, 28, 28), np.uint8)
  images[0, 4:24, 13:15] = 255  # An upright bar.
  for r in range(20):  # A bar whose column grows with the row: leaning one way.
    images[1, 4 + r, 4 + r] = 255
    images[2, 4 + r, 23 - r] = 255  # and the other.
  a = image_captions.digit_attributes(images)
  assert abs(a["slant"][0]) < 1e-6 and a["slant"][1] > 0.9 and a["slant"][2] < -0.9
  assert a["width"][0] < a["width"][1]
  assert a["ink"][0] == pytest.approx(40 / 784)


def test_synthetic_source_is_labelled_and_balanced():
  ds = data.load("image_captions", {
      "source": "synthetic", "feature_size": 16, "synthetic_train_images": 600,
      "synthetic_validation_images": 50, "synthetic_test_images": 100})
  assert ds.source == "synthetic" and ds.describe()["synthetic"]
  assert "SYNTHETIC" in ds.notes
  assert {s: ds.num_examples(s) for s in ds.splits} == {"train": 600, "validation": 50, "test": 100}
  train = ds.splits["train"]
  assert train["image"].shape == (600, 16) and train["image"].min() >= 0.0
  assert train["captions"].shape[:2] == (600, 5)
  vocab = text.Vocabulary(ds.info["vocabulary"])
  specific = [" ".join(vocab.decode(c)) for c in train["captions"][:, 4]]
  # Per class, each attribute word is used for about a third of the digits.
  for word in ("thin", "medium", "thick"):
    share = np.mean([f" {word} " in s for s in specific])
    assert 0.25 < share < 0.42, (word, share)
  assert not np.any(train["captions"] == text.OOV_ID)
