"""Normalizers selected by name: ``none``, ``ln``, ``rms``, ``prms``, ``dyt``,
``scalenorm``, ``ln_simple``, ``bn``, ``wn``, ``bln``, or by import path.

A model asks ``make_norm(name, options)`` for a :class:`Norm` and builds its layers
from it; it never tests the name. A ``Norm`` says how to build a linear layer (plain
or weight-normalized) and which activation normalizer to apply (identity for
``none`` and ``wn``), plus two placement defaults taken from the papers.

A name of the form ``module:attribute`` (``my_norms:my_norm``) is a normalizer the
user wrote in their own file (:mod:`lnorm.normalization.user`); every experiment that
accepts ``ln`` accepts it, in LN's places (:func:`check_norm_choice`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Mapping, Sequence

import flax.linen as nn

from lnorm.errors import ConfigError
from lnorm.normalization import functional
from lnorm.normalization.functional import (
    BLN_STATISTICS, bln_inference_configurations, parse_bln_inference)
from lnorm.normalization.modules import (
    BatchLayerNorm, BatchNorm, Dense, DynamicTanh, Identity, LayerNorm, RMSNorm, ScaleNorm,
    WeightNormDense, finalize_epoch_statistics)
from lnorm.normalization.user import (
    ImportedNorm, UserNormError, UserNormalizer, is_import_path, load_user_norm)

ModuleFactory = Callable[..., nn.Module]


@dataclasses.dataclass(frozen=True)
class Norm:
  """How a normalization scheme enters a network."""

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


def _axes_option(o: Mapping[str, Any], key: str, default):
  value = o.get(key, default)
  return tuple(value) if isinstance(value, (list, tuple)) else value


def _none(_: Mapping[str, Any]) -> Norm:
  return Norm("none", nn.Dense, Identity)


def _ln(o: Mapping[str, Any]) -> Norm:
  # ``axes``: the normalized axes, the last by default (a conv map may use (1, 2, 3)).
  layer = functools.partial(LayerNorm, axes=_axes_option(o, "axes", -1),
                            eps=o.get("eps", 1e-5),
                            scale_init=nn.initializers.constant(o.get("scale_init", 1.0)))
  return Norm("ln", nn.Dense, layer, has_bias=True)


def _rms(o: Mapping[str, Any], name: str = "rms", partial: float = 1.0) -> Norm:
  # Gain and bias as LN's: the bias is the layer's b after the normalization (RMSNorm
  # paper eq. 4), so the linear map before it needs none.
  layer = functools.partial(RMSNorm, axes=_axes_option(o, "axes", -1), eps=o.get("eps", 1e-5),
                            partial=partial,
                            scale_init=nn.initializers.constant(o.get("scale_init", 1.0)))
  return Norm(name, nn.Dense, layer, has_bias=True)


def _prms(o: Mapping[str, Any]) -> Norm:
  """pRMSNorm: the RMS from the first ``p`` of the summed inputs (paper: 6.25%)."""
  return _rms(o, "prms", partial=o.get("p", 0.0625))


def _dyt(o: Mapping[str, Any]) -> Norm:
  """DyT: ``gamma * tanh(alpha * x) + beta``; its beta is the layer's bias, as LN's."""
  layer = functools.partial(DynamicTanh, axes=_axes_option(o, "axes", -1),
                            alpha_init=o.get("alpha_init", 0.5))
  return Norm("dyt", nn.Dense, layer, has_bias=True)


def _scalenorm(o: Mapping[str, Any]) -> Norm:
  """ScaleNorm: one scalar gain, no bias, so the linear map keeps its own."""
  layer = functools.partial(ScaleNorm, axes=_axes_option(o, "axes", -1),
                            eps=o.get("eps", 1e-5), scale_init=o.get("scale_init"))
  return Norm("scalenorm", nn.Dense, layer)


def _ln_simple(o: Mapping[str, Any]) -> Norm:
  """LayerNorm-simple (Xu et al. 2019): LN without its gain and bias."""
  layer = functools.partial(LayerNorm, axes=_axes_option(o, "axes", -1),
                            eps=o.get("eps", 1e-5), use_scale=False, use_bias=False)
  return Norm("ln_simple", nn.Dense, layer)


def _imported(name: str, o: Mapping[str, Any]) -> Norm:
  """A user's normalizer where LN goes: after the linear map, which keeps its bias
  (lnorm cannot know whether the normalizer adds one), hidden layers only."""
  layer = functools.partial(ImportedNorm, normalizer=load_user_norm(name),
                            axes=_axes_option(o, "axes", -1))
  return Norm(name, nn.Dense, layer)


def _bn(o: Mapping[str, Any]) -> Norm:
  layer = functools.partial(
      # ``axes``: the reduced axes; None = all but the last (per channel for NHWC maps).
      BatchNorm, axes=_axes_option(o, "axes", None), eps=o.get("eps", 1e-5),
      momentum=o.get("momentum", 0.99),
      unbiased=o.get("unbiased", False),
      scale_init=nn.initializers.constant(o.get("scale_init", 1.0)))
  return Norm("bn", nn.Dense, layer, normalizes_logits=True, has_bias=True)


def _wn(o: Mapping[str, Any]) -> Norm:
  dense = functools.partial(WeightNormDense, data_init=o.get("data_init", False))
  return Norm("wn", dense, Identity, normalizes_logits=True)


def _bln(o: Mapping[str, Any]) -> Norm:
  layer = functools.partial(
      BatchLayerNorm, eps=o.get("eps", 1e-4), mix_eps=o.get("mix_eps", 1e-4),
      inference=o.get("inference", "pppp"), population=o.get("population", "epoch_mean"),
      momentum=o.get("momentum", 0.99),
      batch_axes=tuple(o.get("batch_axes", (0,))),
      feature_axes=tuple(o.get("feature_axes", (-1,))))
  return Norm("bln", nn.Dense, layer, default_position="post", has_bias=True)


NORMS: dict[str, Callable[[Mapping[str, Any]], Norm]] = {
    "none": _none, "ln": _ln, "rms": _rms, "prms": _prms, "dyt": _dyt,
    "scalenorm": _scalenorm, "ln_simple": _ln_simple, "bn": _bn, "wn": _wn, "bln": _bln,
}

#: The normalizers that work per example, LN and its successors (DyT has no statistics
#: at all): each works wherever LN does (a batch of one, recurrent steps, padded
#: sequences), and every experiment that accepts ``ln`` accepts them all, as it
#: accepts a normalizer named by import path.
PER_EXAMPLE_NORMS = ("ln", "rms", "prms", "dyt", "scalenorm", "ln_simple")


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
  return NORMS[name](dict(options or {}))


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
    "BLN_STATISTICS", "BatchLayerNorm", "BatchNorm", "Dense", "DynamicTanh", "Identity",
    "ImportedNorm", "LayerNorm", "NORMS", "Norm", "PER_EXAMPLE_NORMS", "RMSNorm", "ScaleNorm",
    "UnknownNormError", "UserNormError", "UserNormalizer", "WeightNormDense",
    "bln_inference_configurations", "check_norm_choice", "finalize_epoch_statistics",
    "functional", "is_import_path", "load_user_norm", "make_norm", "parse_bln_inference",
]
