"""The decoded-array cache: its key changes with the archive's content and with the
decoder's source code, so an edited decoder never reads arrays decoded by its old
version; it lives in the user's cache folder and never writes into the data directory."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from lnorm import cli
from lnorm import data
from lnorm.data import cache, cifar10, image_folder, imdb
from tests.test_data_iamondb import forms_fixture, write_tree

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
  with open(archive, "wb") as f:
    f.write(b"DATA")
  assert key() != original


def test_key_follows_the_bytes_not_the_size_and_time(tmp_path, archive):
  """An edit that keeps the size and the modification time (a copy with `cp -p` or
  `rsync -t` of a changed file) changes the key; touching the file, or moving it, does
  not."""
  key = lambda path: cache.key_path(str(tmp_path), "kind", path, decoder=(image_folder,))
  original = key(archive)
  stat = os.stat(archive)
  with open(archive, "wb") as f:
    f.write(b"date")  # Same size...
  os.utime(archive, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # ... and time.
  edited = key(archive)
  assert edited != original
  os.utime(archive, ns=(0, 0))
  moved = str(tmp_path / "elsewhere.zip")
  os.rename(archive, moved)
  assert key(moved) == edited


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
  second.write_bytes(b"TEXT")
  assert key() != original


def test_the_real_decoders_are_part_of_their_keys():
  # Each data module names the code that produces its cached arrays.
  cifar = cache.code_fingerprint((image_folder, cifar10))
  assert cifar != cache.code_fingerprint((cifar10,))
  tokenizer = cache.code_fingerprint((imdb,))
  assert tokenizer != cache.code_fingerprint((imdb, imdb.text))
  with pytest.raises(TypeError, match="modules"):
    cache.code_fingerprint((imdb.tokenize_corpus,))


def test_cache_dir_honours_the_config_then_the_environment_in_order(tmp_path, monkeypatch):
  monkeypatch.setenv("HOME", str(tmp_path / "home"))
  monkeypatch.delenv("LNORM_CACHE_DIR", raising=False)
  monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
  data_dir = str(tmp_path / "data")
  assert cache.cache_dir({}, data_dir) == str(tmp_path / "home" / ".cache" / "lnorm")
  monkeypatch.setenv("XDG_CACHE_HOME", "relative/xdg")  # Invalid by the spec: ignored.
  assert cache.cache_dir() == str(tmp_path / "home" / ".cache" / "lnorm")
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
  assert cache.cache_dir({}, data_dir) == str(tmp_path / "xdg" / "lnorm")
  monkeypatch.setenv("LNORM_CACHE_DIR", str(tmp_path / "lnorm_cache"))
  assert cache.cache_dir({}, data_dir) == str(tmp_path / "lnorm_cache")
  assert cache.cache_dir({"cache_dir": str(tmp_path / "configured")}, data_dir) == str(
      tmp_path / "configured")


def _snapshot(root):
  """Every path below ``root`` with its modification time (files and folders)."""
  out = {}
  for folder, dirs, files in os.walk(root):
    for name in dirs + files:
      path = os.path.join(folder, name)
      out[os.path.relpath(path, root)] = os.stat(path).st_mtime_ns
  return out


@pytest.mark.parametrize("read_only", [False, True])
def test_the_data_directory_stays_untouched(tmp_path, monkeypatch, read_only):
  """Parsing IAM-OnDB caches it in $XDG_CACHE_HOME/lnorm, not beside the data, whether
  or not the data directory could be written; a read-only one works."""
  data_dir = tmp_path / "data"
  write_tree(data_dir / "iamondb", forms_fixture(4))
  monkeypatch.delenv("LNORM_CACHE_DIR", raising=False)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
  monkeypatch.setenv("HOME", str(tmp_path / "home"))
  if read_only:
    for folder, dirs, files in os.walk(data_dir):
      for name in files:
        os.chmod(os.path.join(folder, name), 0o444)
      os.chmod(folder, 0o555)
  before = _snapshot(data_dir)
  config = {"data_dir": str(data_dir), "source": "files", "validation_fraction": 0.25,
            "test_fraction": 0.25}
  try:
    decoded = data.load("iamondb", config)
    (entry,) = os.listdir(tmp_path / "xdg" / "lnorm")
    assert entry.startswith("iamondb-") and entry.endswith(".npz")
    cached = data.load("iamondb", config)
  finally:
    for folder, _, _ in os.walk(data_dir):
      os.chmod(folder, 0o755)
  assert _snapshot(data_dir) == before
  assert not os.path.exists(tmp_path / "home")
  assert decoded.num_examples("train") == cached.num_examples("train") > 0


def test_train_help_says_where_the_cache_lives_and_how_to_clear_it(capsys):
  with pytest.raises(SystemExit) as exit_:
    cli.main(["train", "--help"])
  assert exit_.value.code == 0
  text = " ".join(capsys.readouterr().out.split())
  assert ("in $LNORM_CACHE_DIR if set, else $XDG_CACHE_HOME/lnorm, else ~/.cache/lnorm; "
          "never in the data directory") in text
  assert "--config.data.cache_dir" not in text  # Not a config field.
  assert "To clear it, delete the folder" in text
