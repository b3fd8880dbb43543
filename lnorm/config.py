"""Loading ml_collections config files with a typed string argument and dotted overrides.

``configs/perm_mnist.py:norm=ln,batch_size=4`` calls ``get_config("norm=ln,batch_size=4")``
in that file; ``--config.optimizer.learning_rate=3e-4`` then overrides one field.
Configs are locked after loading, so a typo fails loudly and lists the valid fields.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import pathlib
import traceback
from typing import Any, Iterable, Sequence

import ml_collections
from ml_collections import config_dict

from lnorm.errors import ConfigError

#: The repository's configs/ folder, found from the package so that a config can be
#: named from any working directory.
CONFIGS_DIR = pathlib.Path(__file__).resolve().parent.parent / "configs"


def parse_arg_string(arg: str | None, defaults: dict[str, Any],
                     choices: dict[str, Sequence[Any]] | None = None) -> dict[str, Any]:
  """Parses ``"norm=ln,batch_size=4"`` into typed values, checked against ``defaults``.

  Used by every config's ``get_config(arg)``: each key must be one of ``defaults``,
  and its value is converted to the default's type and, for a key of ``choices``,
  must be one of them (``choices={"scale": ("paper", "cpu")}``).
  """
  values = dict(defaults)
  if arg:
    for item in arg.split(","):
      if item.strip():
        key, raw = _split_item(item, defaults)
        values[key] = _convert(raw, defaults[key], key)
  for key, allowed in (choices or {}).items():
    if values[key] not in allowed:
      raise ConfigError(f"Unknown {key} {values[key]!r}. Valid choices: "
                        f"{', '.join(map(str, allowed))}.")
  return values


def _split_item(item: str, defaults: dict[str, Any]) -> tuple[str, str]:
  if "=" not in item:
    raise ConfigError(f"Config argument {item!r} is not of the form key=value. "
                      f"Valid keys: {', '.join(defaults)}.")
  key, raw = (part.strip() for part in item.split("=", 1))
  if key not in defaults:
    raise ConfigError(f"Unknown config argument {key!r}{did_you_mean(key, defaults)}. "
                      f"Valid keys: {', '.join(defaults)}.")
  return key, raw


def did_you_mean(name: str, choices: Iterable[str]) -> str:
  """`` (did you mean 'x'?)`` for the choice closest to a misspelt ``name``, else ''."""
  close = difflib.get_close_matches(name, list(choices), n=1)
  return f" (did you mean {close[0]!r}?)" if close else ""


def _convert(raw: str, like: Any, key: str) -> Any:
  """Converts a command-line string to the type of ``like``."""
  target = type(like)
  try:
    if isinstance(like, bool):
      lowered = raw.lower()
      if lowered in ("true", "1", "yes"):
        return True
      if lowered in ("false", "0", "no"):
        return False
      raise ValueError("expected true or false")
    if isinstance(like, int):
      return int(raw)
    if isinstance(like, float):
      return float(raw)
    if isinstance(like, str):
      return raw
    if isinstance(like, tuple):
      value = ast.literal_eval(raw) if raw.startswith("(") else tuple(
          _literal(s) for s in raw.split(",") if s)
      return tuple(value) if isinstance(value, (tuple, list)) else (value,)
    return _literal(raw)
  except (ValueError, SyntaxError) as e:
    raise ConfigError(f"Config value {key}={raw!r} is not a valid {target.__name__}: {e}.")


def _literal(raw: str) -> Any:
  try:
    return ast.literal_eval(raw)
  except (ValueError, SyntaxError):
    return raw


def is_import_path(name: Any) -> bool:
  """Whether a ``norm`` value names a normalizer by import path (``module:attribute``)
  rather than by a registered name. Here, without JAX, for the commands that only
  plan runs (``lnorm benchmark``); ``lnorm.normalization`` loads such a normalizer."""
  return isinstance(name, str) and ":" in name


def resolve_config_path(path: str) -> pathlib.Path:
  """A config path as given, else relative to the repository's configs/ folder."""
  candidates = [pathlib.Path(path)]
  name = pathlib.Path(path).name
  candidates += [CONFIGS_DIR / name, CONFIGS_DIR / f"{name}.py"]
  for c in candidates:
    if c.is_file():
      return c.resolve()
  available = sorted(p.stem for p in CONFIGS_DIR.glob("*.py") if not p.stem.startswith("_"))
  raise ConfigError(f"Config file {path!r} not found (also looked in {CONFIGS_DIR}). "
                    f"Available configs: {', '.join(available)}.")


def _load_module(path: pathlib.Path):
  spec = importlib.util.spec_from_file_location(f"lnorm_config_{path.stem}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def load_config_module(path: str):
  return _load_module(resolve_config_path(path))


def load_config(spec: str) -> ml_collections.ConfigDict:
  """Loads ``path.py[:arg]`` and returns its locked config."""
  path, _, arg = spec.partition(":")
  module = load_config_module(path)
  if not hasattr(module, "get_config"):
    raise ConfigError(f"{path} defines no get_config(arg).")
  try:
    config = module.get_config(arg or None)
  except ConfigError:
    raise
  except Exception as e:  # pylint: disable=broad-except  (a config's own arithmetic)
    raise ConfigError(_get_config_failed(spec, arg, e)) from None
  config.lock()
  return config


def _get_config_failed(spec: str, arg: str, error: Exception) -> str:
  """One line for a config file whose get_config fails on its argument: the error,
  the line of the config file it came from, and the argument's values to check (a
  config may divide by ``batch_size`` before any bounds check sees it)."""
  path = str(resolve_config_path(spec.partition(":")[0]))
  frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == path]
  where = f" at line {frames[-1].lineno} of {path} (`{frames[-1].line}`)" if frames else ""
  message = f"--config {spec}: get_config failed with {type(error).__name__}: {error}{where}."
  zeros = [item.strip() for item in (arg or "").split(",")
           if item.partition("=")[2].strip() in ("0", "0.0")]
  if isinstance(error, ZeroDivisionError) and zeros:
    return message + f" Give {', '.join(zeros)} a positive value."
  return message + " Check the values after the colon." if arg else message


def apply_overrides(config: ml_collections.ConfigDict, overrides: dict[str, str]) -> None:
  """Applies ``{"optimizer.learning_rate": "3e-4"}`` in place, typed by the field."""
  for dotted, raw in overrides.items():
    *parents, leaf = dotted.split(".")
    node = config
    for i, part in enumerate(parents):
      if not isinstance(node, ml_collections.ConfigDict) or part not in node:
        _unknown_field(".".join(parents[:i + 1]), node)
      node = node[part]
    if not isinstance(node, ml_collections.ConfigDict) or leaf not in node:
      _unknown_field(dotted, node)
    current = node.get_ref(leaf).get() if hasattr(node, "get_ref") else node[leaf]
    field_type = node.get_type(leaf) if hasattr(node, "get_type") else type(current)
    if current is None and field_type is not type(None):
      value = _convert(raw, field_type(), dotted) if field_type in (int, float, str, bool) else _literal(raw)
    elif isinstance(current, ml_collections.ConfigDict):
      raise ConfigError(f"{dotted} is a group of fields, not a value: set one of "
                        f"{', '.join(current.keys())} instead.")
    else:
      value = _convert(raw, current, dotted)
    try:
      with node.unlocked() if hasattr(node, "unlocked") else _null():
        node[leaf] = value
    except TypeError as e:
      raise ConfigError(f"Cannot set {dotted}={raw!r}: {e}")


class _null:
  def __enter__(self):
    return self

  def __exit__(self, *args):
    return False


def _unknown_field(dotted: str, node: Any) -> None:
  keys = list(node.keys()) if isinstance(node, ml_collections.ConfigDict) else []
  leaf = dotted.split(".")[-1]
  raise ConfigError(f"Unknown config field {dotted!r}{did_you_mean(leaf, keys)}. "
                    f"Valid fields here: {', '.join(keys) or '(none)'}.")


def split_config_overrides(argv: list[str]) -> tuple[list[str], dict[str, str]]:
  """Separates ``--config.x.y=v`` (or ``--config.x.y v``) from the other arguments."""
  rest, overrides = [], {}
  i = 0
  while i < len(argv):
    arg = argv[i]
    if arg.startswith("--config."):
      key = arg[len("--config."):]
      if "=" in key:
        key, value = key.split("=", 1)
      elif i + 1 < len(argv):
        i += 1
        value = argv[i]
      else:
        raise ConfigError(f"{arg} needs a value: {arg}=VALUE.")
      overrides[key] = value
    else:
      rest.append(arg)
    i += 1
  return rest, overrides


def to_flat_dict(config: ml_collections.ConfigDict, prefix: str = "") -> dict[str, Any]:
  """``{"optimizer.learning_rate": 1e-3, ...}``: for comparisons and sweep names."""
  flat = {}
  for key, value in config.items():
    name = f"{prefix}{key}"
    if isinstance(value, ml_collections.ConfigDict):
      flat.update(to_flat_dict(value, name + "."))
    else:
      flat[name] = list(value) if isinstance(value, tuple) else value
  return flat


placeholder = config_dict.placeholder
