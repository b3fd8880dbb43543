"""The decoded-array cache key: it changes with the archive and with the decoder's
source code, so an edited decoder never reads arrays decoded by its old version."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from lnorm.data import cache, cifar10, image_folder, imdb

DECODER = '''
def decode(data):
  return helper(data)


def helper(data):
  return data{suffix}
'''


def _decoder_module(tmp_path, suffix, name="h4_cache_decoder"):
  """A module whose file holds DECODER with ``suffix``, imported afresh."""
  path = tmp_path / f"{name}.py"
  path.write_text(DECODER.format(suffix=suffix))
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module  # inspect finds a module's source through sys.modules.
  spec.loader.exec_module(module)
  return module


@pytest.fixture
def archive(tmp_path):
  path = tmp_path / "archive.zip"
  path.write_bytes(b"data")
  return str(path)


def test_key_changes_with_the_decoder_source(tmp_path, archive):
  key = lambda m: cache.key_path(str(tmp_path), "kind", archive, decoder=(m,))
  original = key(_decoder_module(tmp_path, ""))
  assert key(_decoder_module(tmp_path, "")) == original  # Same code, same entry.
  # An edit to a helper the decoder calls, not to the decoder function itself.
  assert key(_decoder_module(tmp_path, "[::-1]")) != original


def test_key_changes_with_the_archive_and_the_version(tmp_path, archive):
  key = lambda version="": cache.key_path(str(tmp_path), "kind", archive, version,
                                          decoder=(image_folder,))
  original = key()
  assert key() == original and os.path.dirname(original) == str(tmp_path)
  assert key("Pillow 0.0") != original
  os.utime(archive, ns=(0, 0))
  assert key() != original


def test_key_of_a_folder_follows_the_files_inside_it(tmp_path):
  """A folder's own size and time do not change when a file in a subfolder is edited
  or added; the key must."""
  folder = tmp_path / "questions"
  (folder / "training").mkdir(parents=True)
  question = folder / "training" / "a.question"
  question.write_text("one")
  key = lambda: cache.key_path(str(tmp_path / "cache"), "kind", str(folder),
                               decoder=(image_folder,))
  original = key()
  assert key() == original
  question.write_text("two")
  os.utime(question, ns=(1, 1))
  edited = key()
  assert edited != original
  (folder / "training" / "b.question").write_text("three")
  assert key() not in (original, edited)


def test_key_of_several_sources_follows_each(tmp_path, archive):
  second = tmp_path / "ascii.tar.gz"
  second.write_bytes(b"text")
  key = lambda: cache.key_path(str(tmp_path), "kind", (archive, str(second)),
                               decoder=(image_folder,))
  original = key()
  os.utime(second, ns=(0, 0))
  assert key() != original


def test_the_real_decoders_are_part_of_their_keys():
  # Each data module names the code that produces its cached arrays.
  cifar = cache.code_fingerprint((image_folder, cifar10))
  assert cifar != cache.code_fingerprint((cifar10,))
  tokenizer = cache.code_fingerprint((imdb,))
  assert tokenizer != cache.code_fingerprint((imdb, imdb.text))
  with pytest.raises(TypeError, match="modules"):
    cache.code_fingerprint((imdb.tokenize_corpus,))
