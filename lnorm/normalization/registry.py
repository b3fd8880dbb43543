"""One definition per normalizer, read by the feed-forward layers and the recurrent cells.

A :class:`NormDefinition` says everything about one normalizer that is not its
arithmetic (its module in :mod:`lnorm.normalization.modules`, which declares its
parameters and their initialisation, over the pure functions of
:mod:`lnorm.normalization.functional`):

* ``options``: every option a config may set, with its default. This is the one
  schema: a config's ``norm_options.<name>`` block is built from it
  (``lnorm.training.defaults.norm_options``), ``make_norm`` and the recurrent cells
  resolve their options against it, and ``config.json`` records the resolved block.
* ``placement``: what the model says, not the config (the normalized axes of a
  conv map, the time steps recurrent BN keeps statistics for), with defaults.
* ``feed_forward``: the :class:`Norm` of an MLP or conv layer, from the options.
* ``in_cells``: how it enters an LSTM or GRU cell (:class:`InCells`), from the same
  options; None for a normalizer the cells do not take (BLN).
* ``check``: refuses option values no run can use, in one line.

Every module follows it with ``register(...)``; the registry's order is the order
in which choices are listed.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any, Callable, Mapping

import flax.linen as nn

from lnorm.errors import ConfigError

ModuleFactory = Callable[..., nn.Module]
Options = Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Norm:
  """How a normalization scheme enters a feed-forward network."""

  name: str
  #: ``dense(features, use_bias=..., name=...)``: the linear map.
  dense: ModuleFactory
  #: ``layer(name=...)`` returns a module called as ``(x, *, train, mask=None)``.
  layer: ModuleFactory
  #: 'pre' = g(N(Wx)) (LN and BN papers); 'post' = N(g(Wx + b)) (BLN paper eq. 27).
  default_position: str = "pre"
  #: Whether the output (logit) layer is normalized too: the LN paper put BN on all
  #: layers but LN on the hidden layers only.
  normalizes_logits: bool = False
  #: Whether ``layer`` adds its own bias, making a preceding linear bias redundant.
  has_bias: bool = False


@dataclasses.dataclass(frozen=True)
class InCells:
  """How a normalizer enters a recurrent cell: module factories (called with
  ``name=...``, then as ``norm(x, *, train, step, mask=None)``) for W_x x, W_h h and
  the LSTM's c, and the linear map of W_x and W_h (None: lnorm's plain ``Dense``).
  ``lnorm.rnn.CellNorms`` is this with the variant's name."""

  input_norm: ModuleFactory
  hidden_norm: ModuleFactory
  cell_norm: ModuleFactory
  dense: ModuleFactory | None = None
  #: Whether ``input_norm`` adds its own bias (the GRU then drops its input bias).
  input_norm_has_bias: bool = False


@dataclasses.dataclass(frozen=True)
class NormDefinition:
  """One normalizer: its options with their defaults, and how it enters a layer."""

  name: str
  #: option -> default: ``norm_options.<name>`` of every config.
  options: Options
  #: resolved options -> the feed-forward :class:`Norm`.
  feed_forward: Callable[[Options], Norm]
  #: resolved options -> :class:`InCells`; None: the recurrent cells do not take it.
  in_cells: Callable[[Options], InCells] | None = None
  #: Per-example statistics (or none), as LN's: it works wherever LN does (a batch of
  #: one, recurrent steps, padded sequences), so every experiment that accepts ``ln``
  #: accepts it, and an LSTM also takes it on c alone (``<name>_cell``).
  per_example: bool = False
  #: option -> default for what the model sets rather than the config.
  placement: Options = dataclasses.field(default_factory=dict)
  #: resolved options -> None, or a ConfigError naming the bad value and its fix.
  check: Callable[[Options], None] | None = None

  def resolve(self, options: Options | None = None) -> dict[str, Any]:
    """The defaults, overridden by ``options`` (a config block, possibly of a run
    saved before an option existed); an option this normalizer does not have is
    refused, with the ones it has."""
    given = dict(options or {})
    known = {**self.placement, **self.options}
    unknown = sorted(set(given) - set(known))
    if unknown:
      raise ConfigError(
          f"Normalizer {self.name!r} has no option(s) {', '.join(unknown)}; its options: "
          f"{', '.join(known) or '(none)'}.")
    # None stands for the default (an unset placeholder of the config).
    resolved = {**known, **{k: v for k, v in given.items() if v is not None}}
    if self.check is not None:
      self.check(resolved)
    return resolved


#: name -> definition, in the order choices are listed.
DEFINITIONS: dict[str, NormDefinition] = {}


def register(definition: NormDefinition) -> NormDefinition:
  if definition.name in DEFINITIONS:
    raise ValueError(f"Normalizer {definition.name!r} is defined twice.")
  DEFINITIONS[definition.name] = definition
  return definition


def options(**defaults: Any) -> Options:
  """An option schema, option -> default, read-only: a definition registers it and its
  module's fields take their defaults from it (lnorm.normalization.modules)."""
  return types.MappingProxyType(defaults)


#: Where a per-example normalizer (and the identity) goes unless the model says
#: otherwise: over the last axis.
PER_EXAMPLE_PLACEMENT = options(axes=-1)


def axes_option(value):
  """A config's axes (a list from JSON, a tuple, an int or None) as modules take them."""
  return tuple(value) if isinstance(value, (list, tuple)) else value


def per_example(name: str, module: ModuleFactory, options: Options,
                fields: Callable[[Options], dict[str, Any]], *, has_bias: bool,
                in_cells: Mapping[str, Any] | None = None,
                check: Callable[[Options], None] | None = None) -> NormDefinition:
  """The definition of a per-example normalizer: ``module(**fields(options))`` over
  the layer's ``axes`` (the last by default) after a feed-forward linear map, and in
  all three places of a recurrent cell over the last axis, with ``in_cells`` fields
  on top there (the RMSNorm authors' cells: ``use_bias=False``).

  ``has_bias``: whether the module adds its own bias (the linear map before it then
  has none); in the cells, unless ``in_cells`` sets ``use_bias=False``."""
  cell_fields = dict(in_cells or {})
  cell_has_bias = has_bias and cell_fields.get("use_bias", True)

  def feed_forward(o: Options) -> Norm:
    layer = functools.partial(module, axes=axes_option(o["axes"]), **fields(o))
    return Norm(name, nn.Dense, layer, has_bias=has_bias)

  def cells(o: Options) -> InCells:
    norm = functools.partial(module, **fields(o), **cell_fields)
    return InCells(norm, norm, norm, input_norm_has_bias=cell_has_bias)

  return NormDefinition(name, options, feed_forward, cells, per_example=True,
                        placement=PER_EXAMPLE_PLACEMENT, check=check)


def constant(value: float):
  """``nn.initializers.constant``: options hold numbers, modules initializers."""
  return nn.initializers.constant(value)
