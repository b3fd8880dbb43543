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


# --- a config whose own arithmetic fails on its argument (issue 45, item 4) ----------------


def test_batch_size_zero_in_the_config_argument_is_one_line_naming_it():
  # perm_mnist divides 256 by the batch size (its spec's batch_fields) before any
  # bounds check sees it; the message names the config's line that asked.
  with pytest.raises(ConfigError) as e:
    config_lib.load_config("configs/perm_mnist.py:norm=ln,batch_size=0")
  path = config_lib.resolve_config_path("configs/perm_mnist.py")
  assert str(e.value) == (
      "--config configs/perm_mnist.py:norm=ln,batch_size=0: get_config failed with "
      f"ZeroDivisionError: integer division or modulo by zero at line 40 of {path} "
      "(`c.update_from_flattened_dict(spec.batch_fields(args[\"batch_size\"]))`). Give "
      "batch_size=0 a positive value.")


def test_a_config_that_fails_otherwise_says_to_check_its_argument(tmp_path):
  (tmp_path / "mine.py").write_text(
      "def get_config(arg=None):\n"
      "  width = int(arg.partition('=')[2])\n"
      "  return [1, 2][width]\n")
  with pytest.raises(ConfigError) as e:
    config_lib.load_config(f"{tmp_path}/mine.py:width=5")
  assert str(e.value) == (
      f"--config {tmp_path}/mine.py:width=5: get_config failed with IndexError: list index "
      f"out of range at line 3 of {tmp_path}/mine.py (`return [1, 2][width]`). Check the "
      "values after the colon.")
  # A division by zero where no value is 0: nothing to blame by name.
  (tmp_path / "odd.py").write_text(
      "def get_config(arg=None):\n"
      "  return 1 // (int(arg.partition('=')[2]) - 5)\n")
  with pytest.raises(ConfigError, match=r"ZeroDivisionError.*Check the values after the "
                     r"colon\.$"):
    config_lib.load_config(f"{tmp_path}/odd.py:width=5")
