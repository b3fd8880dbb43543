"""The data cache's folder and files at their edges: which setting wins when several
are set (one change at a time), paths made absolute, empty variables, unreadable and
shared cache files."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from lnorm.data import cache


@pytest.fixture
def home(tmp_path, monkeypatch):
  monkeypatch.setenv("HOME", str(tmp_path / "home"))
  monkeypatch.delenv(cache.CACHE_DIR_ENV, raising=False)
  monkeypatch.delenv(cache.XDG_CACHE_ENV, raising=False)
  return tmp_path


def test_the_config_wins_over_lnorm_cache_dir(home, monkeypatch):
  monkeypatch.setenv(cache.CACHE_DIR_ENV, str(home / "env"))
  assert cache.cache_dir({"cache_dir": str(home / "configured")}) == str(home / "configured")


def test_lnorm_cache_dir_wins_over_xdg(home, monkeypatch):
  monkeypatch.setenv(cache.XDG_CACHE_ENV, str(home / "xdg"))
  monkeypatch.setenv(cache.CACHE_DIR_ENV, str(home / "env"))
  assert cache.cache_dir({}) == str(home / "env")


def test_an_empty_lnorm_cache_dir_is_unset(home, monkeypatch):
  monkeypatch.setenv(cache.CACHE_DIR_ENV, "")
  monkeypatch.setenv(cache.XDG_CACHE_ENV, str(home / "xdg"))
  assert cache.cache_dir({}) == str(home / "xdg" / "lnorm")


def test_a_relative_xdg_cache_home_is_ignored(home, monkeypatch):
  monkeypatch.setenv(cache.XDG_CACHE_ENV, "xdg")
  assert cache.cache_dir({}) == str(home / "home" / ".cache" / "lnorm")


def test_paths_are_made_absolute_and_home_expanded(home, monkeypatch):
  monkeypatch.chdir(home)
  assert cache.cache_dir({"cache_dir": "rel"}) == str(home / "rel")
  monkeypatch.setenv(cache.CACHE_DIR_ENV, "~/c")
  assert cache.cache_dir({}) == str(home / "home" / "c")


def test_the_data_directory_is_never_the_cache(home):
  assert cache.cache_dir({}, data_dir=str(home / "data")) == str(
      home / "home" / ".cache" / "lnorm")


def test_use_cache_false_turns_it_off():
  assert cache.enabled({}) and cache.enabled({"use_cache": True})
  assert not cache.enabled({"use_cache": False})


def test_a_saved_entry_is_readable_by_others_and_leaves_no_temporary(tmp_path):
  path = str(tmp_path / "c" / "x-1.npz")
  cache.save(path, {"a": np.arange(3, dtype=np.int16)})
  assert os.listdir(tmp_path / "c") == ["x-1.npz"]
  assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
  loaded = cache.load(path)
  assert loaded["a"].dtype == np.int16 and loaded["a"].tolist() == [0, 1, 2]


def test_an_unreadable_entry_is_ignored(tmp_path):
  path = tmp_path / "x-1.npz"
  path.write_bytes(b"not an npz")
  assert cache.load(str(path)) is None
  assert cache.load(str(tmp_path / "absent.npz")) is None
