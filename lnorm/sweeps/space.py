"""What a sweep varies, given on the command line: grids, random draws, and the
override dicts (its members) they expand to.

  --grid optimizer.learning_rate=3e-4,1e-3,3e-3 --grid seed=0,1   # a 3 x 2 product
  --random 8 --loguniform optimizer.learning_rate=1e-4:1e-2 --grid seed=0,1

Members are override dicts of strings, ``{"optimizer.learning_rate": "3e-4"}``, the
form a config file's ``get_sweep(name)`` returns and ``--config.x=y`` takes, so that
``lnorm sweep`` names, runs, skips and resumes them as it does a named sweep.

Random draws are reproducible: the i-th value of a key is the i-th draw of a
generator seeded by (``--random-seed``, the key's name). The same command therefore
draws the same members and resumes them; raising N keeps the first N draws; adding a
key does not change the others' draws. Only ``random.Random.random()`` is used, whose
sequence Python keeps fixed across versions. A drawn float is rounded to
:data:`SIGNIFICANT_DIGITS` significant digits (and clipped into its bounds) before it
is used, and written with ``repr``: the member's name, its ``--config.x=`` override
and the config then hold the same number.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import math
import random
from typing import Any, Mapping, Sequence

from lnorm import config as config_lib
from lnorm.errors import ConfigError, UserError
from lnorm.analysis.runs import is_seed

#: Drawn floats keep this many significant digits (readable names, exact round trip).
SIGNIFICANT_DIGITS = 4

#: The random distributions, by their command-line flag (without the dashes).
KINDS = ("uniform", "loguniform", "int", "choice")


@dataclasses.dataclass(frozen=True)
class Distribution:
  """One randomly drawn key: ``kind`` is one of :data:`KINDS`; ``low``/``high`` bound
  uniform, loguniform and int (both ends included); ``values`` are the choices."""
  kind: str
  key: str
  low: float | int | None = None
  high: float | int | None = None
  values: tuple[str, ...] = ()

  @property
  def flag(self) -> str:
    return f"--{self.kind} {self.key}"

  def draw(self, u: float) -> str:
    """The value (as an override string) at ``u``, a uniform draw from [0, 1)."""
    if self.kind == "choice":
      return self.values[min(int(u * len(self.values)), len(self.values) - 1)]
    if self.kind == "int":
      return str(min(self.low + int(u * (self.high - self.low + 1)), self.high))
    if self.kind == "uniform":
      x = self.low + u * (self.high - self.low)
    else:  # loguniform: uniform in log space.
      x = math.exp(math.log(self.low) + u * (math.log(self.high) - math.log(self.low)))
    return format_float(min(max(round_significant(x), self.low), self.high))

  def to_dict(self) -> dict[str, Any]:
    out = {"kind": self.kind, "key": self.key}
    if self.kind == "choice":
      out["values"] = list(self.values)
    else:
      out.update(low=self.low, high=self.high)
    return out


@dataclasses.dataclass
class SweepSpace:
  """A sweep's members: a named sweep's (``named``), crossed with the product of the
  ``grid`` and with ``random`` draws of the ``distributions``."""
  named: list[dict[str, str]] | None = None
  grid: list[tuple[str, tuple[str, ...]]] = dataclasses.field(default_factory=list)
  random: int = 0
  distributions: list[Distribution] = dataclasses.field(default_factory=list)
  random_seed: int = 0

  def __post_init__(self):
    self._check_consistent()

  @property
  def keys(self) -> list[str]:
    """The keys this space varies, as members list them: the drawn keys, then the
    grid's (each in command-line order), seeds last."""
    keys = [d.key for d in self.distributions] + [k for k, _ in self.grid]
    return sorted(keys, key=is_seed)  # Stable: only moves the seeds.

  def _check_consistent(self) -> None:
    if self.random < 0:
      raise UserError(f"--random {self.random}: the number of random members must be "
                      "positive.")
    if self.random and not self.distributions:
      raise UserError(f"--random {self.random} draws from distributions: give at least one "
                      "--uniform, --loguniform, --int or --choice KEY=...")
    if self.distributions and not self.random:
      raise UserError(f"{self.distributions[0].flag}=... needs --random N, the number of "
                      "members to draw.")
    seen: set[str] = set()
    for key in self.keys:
      if key in seen:
        raise UserError(f"{key} is swept twice: give each key one --grid or one "
                        "distribution.")
      seen.add(key)
    named_keys = {k for m in self.named or () for k in m}
    clash = [k for k in self.keys if k in named_keys]
    if clash:
      raise UserError(f"{', '.join(clash)} is already set by the named sweep's members; "
                      "sweep it in one place only.")

  def draws(self) -> list[dict[str, str]]:
    """The ``random`` draws, one override dict each (empty without random search)."""
    if not self.random:
      return [{}]
    columns = {}
    for d in self.distributions:
      rng = random.Random(f"lnorm-sweep:{self.random_seed}:{d.key}")
      columns[d.key] = [d.draw(rng.random()) for _ in range(self.random)]
    return [{k: v[i] for k, v in columns.items()} for i in range(self.random)]

  def members(self) -> list[dict[str, str]]:
    """Every member's overrides: for each named member, each draw, each grid point
    (the last ``--grid`` varying fastest)."""
    grid = [dict(zip([k for k, _ in self.grid], point))
            for point in itertools.product(*[values for _, values in self.grid])]
    return [{**named, **draw, **point} for named in (self.named or [{}])
            for draw in self.draws() for point in grid]

  def to_dict(self) -> dict[str, Any]:
    """What ``sweep.json`` records, to tell how the members were made."""
    out: dict[str, Any] = {"grid": [[k, list(v)] for k, v in self.grid]}
    if self.random:
      out["random"] = {"n": self.random, "seed": self.random_seed,
                       "distributions": [d.to_dict() for d in self.distributions]}
    return out


# --- values ---------------------------------------------------------------------------------


def round_significant(x: float, digits: int = SIGNIFICANT_DIGITS) -> float:
  return float(f"{x:.{digits}g}")


def format_float(x: float) -> str:
  """The shortest text that reads back as exactly ``x`` (``repr``)."""
  return repr(float(x))


def split_values(text: str) -> list[str]:
  """``a,b,(1,2)``: comma-separated values; commas inside brackets belong to a tuple."""
  values, depth, current = [], 0, ""
  for ch in text:
    depth += ch in "(["
    depth -= ch in ")]"
    if ch == "," and depth == 0:
      values.append(current.strip())
      current = ""
    else:
      current += ch
  values.append(current.strip())
  return values


# --- parsing the command line ---------------------------------------------------------------


def _key_and_rest(flag: str, text: str, example: str) -> tuple[str, str]:
  key, eq, rest = text.partition("=")
  key = key.strip()
  if key.startswith("config."):
    key = key[len("config."):]  # --grid config.seed=0,1 means what --config.seed=0 does.
  if not eq or not key or not rest.strip():
    raise UserError(f"{flag} {text!r}: expected {example}.")
  return key, rest.strip()


def parse_grid(text: str) -> tuple[str, tuple[str, ...]]:
  """``optimizer.learning_rate=3e-4,1e-3`` -> (key, values)."""
  example = "KEY=V1,V2,... e.g. optimizer.learning_rate=3e-4,1e-3,3e-3"
  key, rest = _key_and_rest("--grid", text, example)
  values = split_values(rest)
  if any(not v for v in values):
    raise UserError(f"--grid {text!r} has an empty value; expected {example}.")
  if len(set(values)) < len(values):
    raise UserError(f"--grid {text!r} repeats a value.")
  return key, tuple(values)


def parse_distribution(kind: str, text: str) -> Distribution:
  """``--uniform KEY=LO:HI``, ``--loguniform``, ``--int`` and ``--choice KEY=A,B,C``."""
  flag = f"--{kind}"
  if kind == "choice":
    key, rest = _key_and_rest(flag, text, "KEY=A,B,C e.g. norm=ln,bn")
    values = tuple(split_values(rest))
    if any(not v for v in values):
      raise UserError(f"{flag} {text!r} has an empty value.")
    return Distribution(kind, key, values=values)
  example = "KEY=LO:HI e.g. " + ("num_layers=1:4" if kind == "int"
                                 else "optimizer.learning_rate=1e-4:1e-2")
  key, rest = _key_and_rest(flag, text, example)
  low_text, colon, high_text = rest.partition(":")
  number = int if kind == "int" else float
  try:
    low, high = number(low_text), number(high_text)
  except ValueError:
    raise UserError(f"{flag} {text!r}: the bounds must be {number.__name__}s; expected "
                    f"{example}.") from None
  if not colon or not low < high or (number is float and not (math.isfinite(low)
                                                               and math.isfinite(high))):
    raise UserError(f"{flag} {text!r}: expected {example}, with LO < HI.")
  if kind == "loguniform" and low <= 0:
    raise UserError(f"{flag} {text!r}: a log-uniform range must be positive (LO > 0).")
  return Distribution(kind, key, low=low, high=high)


# --- checking against the config ------------------------------------------------------------


def check_against_config(config_spec: str, space: SweepSpace,
                         extra: Mapping[str, str] | None = None) -> None:
  """Applies every grid value, both bounds of each range and every choice to the
  config, and checks the config each makes as ``lnorm train`` would before its data
  loads (``lnorm.training.task.check_config``), before anything runs: a typo in a key
  gets the config's "did you mean" error, a value of the wrong type or out of range
  (``--grid norm=lnn``, ``batch_size=0``) names its flag."""
  base = config_lib.load_config(config_spec)
  config_lib.apply_overrides(base, dict(extra or {}))
  for key, values in space.grid:
    _check_values(base, "--grid", key, values)
  for d in space.distributions:
    values = d.values if d.kind == "choice" else (
        (str(d.low), str(d.high)) if d.kind == "int" else
        (format_float(d.low), format_float(d.high)))
    hint = " (an integer field takes --int or --choice)" if d.kind in (
        "uniform", "loguniform") else ""
    _check_values(base, f"--{d.kind}", d.key, values, hint)


def _check_values(base, flag: str, key: str, values: Sequence[str], hint: str = "") -> None:
  for value in values:
    config = copy.deepcopy(base)
    try:
      config_lib.apply_overrides(config, {key: value})
    except ConfigError as e:
      raise ConfigError(f"{flag} {key}={value}: {e}{hint}") from None
    try:
      check_config(config)
    except ConfigError as e:
      raise ConfigError(f"{flag} {key}={value}: {e}") from None


def check_config(config) -> None:
  """``lnorm.training.task.check_config``, imported when first needed: it imports the
  experiment's module, and with it JAX (about 2 s), which --help and the analyses of
  finished sweeps need not pay."""
  from lnorm.training import task  # pylint: disable=g-import-not-at-top
  task.check_config(config)


def typed_value(base, key: str, value: str) -> Any:
  """``value`` as the field ``key`` of the config ``base`` holds it (3e-4 -> 0.0003,
  "True" -> True); ``base`` is left as it was."""
  config = copy.deepcopy(base)
  config_lib.apply_overrides(config, {key: value})
  node = config
  for part in key.split("."):
    node = node[part]
  return node
