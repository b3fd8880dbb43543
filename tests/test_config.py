"""Config files, typed arguments and dotted overrides."""

import pytest

from lnorm import config as config_lib
from lnorm.errors import ConfigError


def test_typed_arguments_and_overrides():
  c = config_lib.load_config("configs/perm_mnist.py:norm=bn,batch_size=4")
  assert c.norm == "bn" and c.batch_size == 4
  assert c.norm_options.bn.unbiased  # The paper's choice at batch size 4.
  config_lib.apply_overrides(c, {"optimizer.learning_rate": "3e-4", "hidden_sizes": "50,60",
                                 "progress_bar": "false", "data.data_dir": "/x"})
  assert c.optimizer.learning_rate == pytest.approx(3e-4)
  assert c.hidden_sizes == (50, 60)
  assert c.progress_bar is False
  assert c.data.data_dir == "/x"


def test_config_found_by_name_from_any_directory(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert config_lib.load_config("perm_mnist").experiment == "perm_mnist"


@pytest.mark.parametrize("spec, overrides, message", [
    ("configs/perm_mnist.py:nrom=ln", {}, "did you mean 'norm'"),
    ("configs/perm_mnist.py:batch_size=four", {}, "not a valid int"),
    ("configs/perm_mnist.py", {"optimizer.learning_rat": "1"}, "did you mean 'learning_rate'"),
    ("configs/perm_mnist.py", {"optimiser.name": "adam"}, "Valid fields here"),
    ("configs/perm_mnist.py", {"optimizer": "adam"}, "is a group of fields"),
    ("configs/no_such_config.py", {}, "Available configs: "),
])
def test_bad_config_input_names_the_fix(spec, overrides, message):
  with pytest.raises(ConfigError, match=message):
    c = config_lib.load_config(spec)
    config_lib.apply_overrides(c, overrides)


def test_split_config_overrides():
  rest, overrides = config_lib.split_config_overrides(
      ["train", "--config.a.b=1", "--workdir", "w", "--config.c", "2"])
  assert rest == ["train", "--workdir", "w"]
  assert overrides == {"a.b": "1", "c": "2"}


def test_a_value_outside_its_choices_is_named_with_the_valid_ones():
  from lnorm.config import parse_arg_string  # pylint: disable=g-import-not-at-top
  assert parse_arg_string("scale=cpu", {"scale": "paper"},
                          choices={"scale": ("paper", "cpu")}) == {"scale": "cpu"}
  with pytest.raises(ConfigError, match=r"Unknown scale 'gpu'\. Valid choices: paper, cpu\."):
    parse_arg_string("scale=gpu", {"scale": "paper"}, choices={"scale": ("paper", "cpu")})
