"""Normalizers selected by name (``none``, ``ln``, ``rms``, ``bn``, ``bln``, ...: the
registered :data:`DEFINITIONS`) or by import path.

Each normalizer is defined once, in :mod:`lnorm.normalization.modules`: its module and
its :class:`NormDefinition` (options with defaults and checks, its feed-forward
:class:`Norm` and how it enters the recurrent cells; :mod:`lnorm.normalization.
registry`). A model asks ``make_norm(name, options)`` for a :class:`Norm` and builds
its layers from it; it never tests the name. A ``Norm`` says how to build a linear
layer (plain or weight-normalized) and which activation normalizer to apply (identity
for ``none`` and ``wn``), plus two placement defaults taken from the papers.

A name of the form ``module:attribute`` (``my_norms:my_norm``) is a normalizer the
user wrote in their own file (:mod:`lnorm.normalization.user`); every experiment that
accepts ``ln`` accepts it, in LN's places (:func:`check_norm_choice`).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping, Sequence

import flax.linen as nn

from lnorm.errors import ConfigError
from lnorm.normalization import functional
from lnorm.normalization.functional import (
    BLN_STATISTICS, bln_inference_configurations, parse_bln_inference)
from lnorm.normalization.modules import (
    BatchLayerNorm, BatchNorm, Dense, DynamicTanh, Identity, LayerNorm, RMSNorm, ScaleNorm,
    StepBatchNorm, WeightNormDense, finalize_epoch_statistics)
from lnorm.normalization.registry import (
    DEFINITIONS, InCells, Norm, NormDefinition, axes_option)
from lnorm.normalization.user import (
    ImportedNorm, UserNormError, UserNormalizer, is_import_path, load_user_norm)

#: name -> ``options -> Norm`` (the feed-forward layer), for each registered normalizer.
NORMS: dict[str, Callable[[Mapping[str, Any]], Norm]] = {
    name: (lambda options, d=definition: d.feed_forward(d.resolve(options)))
    for name, definition in DEFINITIONS.items()}

#: The normalizers that work per example, LN and its successors (DyT has no statistics
#: at all): each works wherever LN does (a batch of one, recurrent steps, padded
#: sequences), and every experiment that accepts ``ln`` accepts them all, as it
#: accepts a normalizer named by import path.
PER_EXAMPLE_NORMS = tuple(name for name, d in DEFINITIONS.items() if d.per_example)


def _imported(name: str, o: Mapping[str, Any]) -> Norm:
  """A user's normalizer where LN goes: after the linear map, which keeps its bias
  (lnorm cannot know whether the normalizer adds one), hidden layers only."""
  layer = functools.partial(ImportedNorm, normalizer=load_user_norm(name),
                            axes=axes_option(o.get("axes", -1)))
  return Norm(name, nn.Dense, layer)


class UnknownNormError(ConfigError, ValueError):
  """A normalizer name that is not registered; the CLI prints it without a trace."""


def make_norm(name: str, options: Mapping[str, Any] | None = None) -> Norm:
  """The :class:`Norm` called ``name`` (or imported from ``module:attribute``),
  configured by ``options`` (its config block)."""
  if is_import_path(name):
    return _imported(name, dict(options or {}))
  if name not in NORMS:
    raise UnknownNormError(
        f"Unknown normalizer {name!r}. Valid choices: {', '.join(NORMS)}, or your own "
        "as module:attribute (docs/extending.md).")
  return NORMS[name](options)


def definition(name: str) -> NormDefinition:
  """The registered :class:`NormDefinition` called ``name``."""
  if name not in DEFINITIONS:
    raise UnknownNormError(
        f"Unknown normalizer {name!r}. Valid choices: {', '.join(DEFINITIONS)}.")
  return DEFINITIONS[name]


def check_norm_choice(name: str, choices: Sequence[str], experiment: str) -> None:
  """Refuses a ``norm`` the experiment does not take. A normalizer named by import
  path goes where LN goes, so an experiment that accepts ``ln`` accepts it; it is
  imported here, so that a bad path fails before any data is loaded."""
  if is_import_path(name) and "ln" in choices:
    load_user_norm(name)
    return
  if name not in choices:
    extra = (", or your own as module:attribute (docs/extending.md)"
             if "ln" in choices else "")
    raise ConfigError(f"Normalizer {name!r} is not available for experiment "
                      f"{experiment!r}. Valid choices: {', '.join(choices)}{extra}.")


__all__ = [
    "BLN_STATISTICS", "BatchLayerNorm", "BatchNorm", "DEFINITIONS", "Dense", "DynamicTanh",
    "Identity", "ImportedNorm", "InCells", "LayerNorm", "NORMS", "Norm", "NormDefinition",
    "PER_EXAMPLE_NORMS", "RMSNorm", "ScaleNorm", "StepBatchNorm", "UnknownNormError",
    "UserNormError", "UserNormalizer", "WeightNormDense", "axes_option",
    "bln_inference_configurations", "check_norm_choice", "definition",
    "finalize_epoch_statistics",
    "functional", "is_import_path", "load_user_norm", "make_norm", "parse_bln_inference",
]
