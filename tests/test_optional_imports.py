"""lnorm without wandb and tensorflow-datasets (a GPU image without them, say): it runs
when they are not asked for, and says in one line what to install when they are.

The packages are hidden by ``sys.modules[name] = None``, which makes their import fail
as a missing package's does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import ml_collections
import numpy as np
import pytest

from lnorm import data
from lnorm.data import tfds_source
from lnorm.errors import ConfigError
from lnorm.training import metrics_writer
from tests.helpers import REPO
from tests.test_data_parsers import idx_bytes

#: What the GPU image lacks that lnorm can import.
MISSING = ("wandb", "tensorflow_datasets", "mlxtend", "nltk")


@pytest.fixture
def without(monkeypatch):
  for name in MISSING:
    monkeypatch.setitem(sys.modules, name, None)
  monkeypatch.delenv("WANDB_MODE", raising=False)
  monkeypatch.delenv("WANDB_API_KEY", raising=False)


def test_wandb_auto_is_off_without_wandb(without):
  assert not metrics_writer.wandb_installed()
  mode, why = metrics_writer.wandb_mode("auto")
  assert mode == "disabled" and "wandb is not installed" in why


@pytest.mark.parametrize("configured", ["online", "offline"])
def test_asking_for_wandb_without_it_names_the_install(configured, without, tmp_path):
  config = ml_collections.ConfigDict({"mode": configured, "project": "p"})
  with pytest.raises(ConfigError) as e:
    metrics_writer.MetricWriter(str(tmp_path), {}, config)
  message = str(e.value)
  assert message.startswith(f"wandb logging in mode {configured} is asked for "
                            f"(wandb.mode={configured} in the config), but wandb is not "
                            "installed")
  assert "`pip install wandb`" in message and "--config.wandb.mode=disabled" in message


def test_wandb_mode_from_the_environment_is_asking_too(without, monkeypatch, tmp_path):
  monkeypatch.setenv("WANDB_MODE", "offline")
  config = ml_collections.ConfigDict({"mode": "auto", "project": "p"})
  with pytest.raises(ConfigError, match=r"\(WANDB_MODE=offline in the environment.*"
                                        r"pip install wandb"):
    metrics_writer.MetricWriter(str(tmp_path), {}, config)


def test_wandb_installed_is_what_the_other_tests_assume():
  # The fixture, not the machine, makes wandb missing above.
  assert metrics_writer.wandb_installed()
  assert metrics_writer.wandb_mode("auto")[0] in ("online", "offline", "disabled")


def test_tfds_is_passed_over_under_auto_without_tensorflow_datasets(without, tmp_path):
  (tmp_path / "mnist").mkdir()  # A folder TFDS would look into.
  assert not tfds_source.is_prepared("mnist", str(tmp_path))
  with pytest.raises(data.DatasetNotFoundError) as e:
    tfds_source.read_splits("mnist", ["train"], str(tmp_path), False, dict, "mnist")
  assert "tensorflow-datasets is not installed" in str(e.value)
  assert "`pip install tensorflow-datasets`" in str(e.value)


def test_asking_for_tfds_without_tensorflow_datasets_names_the_install(without, tmp_path):
  with pytest.raises(data.DataError) as e:
    data.load("mnist", {"source": "tfds", "tfds_data_dir": str(tmp_path)})
  assert str(e.value).startswith("The TFDS source of mnist is asked for, but "
                                 "tensorflow-datasets is not installed")
  assert "`pip install tensorflow-datasets`" in str(e.value)


def _mnist_files(folder) -> None:
  rng = np.random.default_rng(0)
  for prefix, n in (("train", 40), ("t10k", 12)):
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    (folder / f"{prefix}-images-idx3-ubyte").write_bytes(idx_bytes(images))
    labels = rng.integers(0, 10, n, dtype=np.uint8)
    (folder / f"{prefix}-labels-idx1-ubyte").write_bytes(idx_bytes(labels))


#: ``python -c``: hide the packages, then the command line.
_HIDDEN = ("import sys\nfor n in {names!r}: sys.modules[n] = None\n"
           "from lnorm import cli\nsys.exit(cli.main(sys.argv[1:]))\n")


def _train(tmp_path, *overrides):
  env = {k: v for k, v in os.environ.items() if k not in ("WANDB_MODE", "WANDB_API_KEY")}
  argv = ["train", "--config", os.path.join(REPO, "configs/perm_mnist.py:smoke=true"),
          "--workdir", str(tmp_path / "run"), "--config.data.source=files",
          f"--config.data.data_dir={tmp_path}", "--config.data.validation_size=8",
          "--config.batch_size=8", "--config.max_steps=2", "--config.progress_bar=false",
          *overrides]
  return subprocess.run([sys.executable, "-c", _HIDDEN.format(names=MISSING), *argv],
                        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def test_lnorm_train_runs_without_them_and_says_what_to_install_when_asked(tmp_path):
  _mnist_files(tmp_path)
  done = _train(tmp_path)
  assert done.returncode == 0, done.stderr[-3000:]
  with open(tmp_path / "run" / "config.json") as f:
    assert json.load(f)["config"]["wandb.mode"] == "auto"
  asked = _train(tmp_path, "--config.wandb.mode=offline", "--config.max_steps=3")
  assert asked.returncode == 2
  assert asked.stderr.strip().splitlines()[-1].startswith(
      "lnorm: error: wandb logging in mode offline is asked for")
  tfds = _train(tmp_path, "--config.data.source=tfds")
  assert tfds.returncode == 2 and "`pip install tensorflow-datasets`" in tfds.stderr
