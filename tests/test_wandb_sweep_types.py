"""The wandb sweep file's types, compared as types: wandb's ``int_uniform`` needs
integer bounds (``1.0 == 1`` would hide floats), and grid values keep the type of the
config field they set."""

from __future__ import annotations

import pytest

from tests.test_wandb_sweep import _write_sweep


def _parameters(tmp_path, *argv):
  config = _write_sweep(tmp_path, "--config", "configs/perm_mnist.py", "--workdir", "runs/t",
                        "--select", "validation/error", *argv)
  return config["parameters"], (tmp_path / "sweep.yaml").read_text()


def test_an_int_range_is_written_as_integers(tmp_path):
  params, text = _parameters(tmp_path, "--random", "2", "--int", "num_epochs=1:3")
  p = params["num_epochs"]
  assert p["distribution"] == "int_uniform"
  assert type(p["min"]) is int and type(p["max"]) is int
  assert "min: 1\n" in text and "max: 3\n" in text


@pytest.mark.parametrize("flag,kind", [("--uniform", "uniform"),
                                       ("--loguniform", "log_uniform_values")])
def test_a_float_range_given_as_integers_is_written_as_floats(tmp_path, flag, kind):
  params, _ = _parameters(tmp_path, "--random", "2", flag, "optimizer.learning_rate=1:10")
  p = params["optimizer.learning_rate"]
  assert p["distribution"] == kind
  assert type(p["min"]) is float and type(p["max"]) is float
  assert (p["min"], p["max"]) == (1.0, 10.0)


def test_grid_values_take_the_type_of_their_field(tmp_path):
  params, _ = _parameters(tmp_path, "--grid", "seed=0,1", "--grid",
                          "optimizer.learning_rate=1,0.5", "--grid", "norm=ln,bn",
                          "--config.data.permute_pixels=true")
  assert [type(v) for v in params["seed"]["values"]] == [int, int]
  assert [type(v) for v in params["optimizer.learning_rate"]["values"]] == [float, float]
  assert params["norm"]["values"] == ["ln", "bn"]
  assert params["data.permute_pixels"] == {"value": True}
