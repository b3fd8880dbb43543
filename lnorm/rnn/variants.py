"""The ``norm`` switch of the recurrent cells: variant name -> :class:`CellNorms`.

LSTM: ``none``, ``ln`` (the LN paper's LN-LSTM), ``ln_cell`` (DRAW: LN on c only),
``bn`` (recurrent BN, Cooijmans et al. 2016), ``wn`` (weight-normalized W_h, W_x),
and every per-example normalizer (``lnorm.normalization.PER_EXAMPLE_NORMS``) in the
places of ``ln`` and, as ``<name>_cell``, in the place of ``ln_cell``: ``rms`` and
``prms`` (pRMSNorm), ``dyt``, ``scalenorm`` and ``ln_simple``.
GRU: ``none``, ``wn`` and every per-example normalizer in the places of ``ln`` (LN-GRU,
LN paper eq. 26-28). A normalizer named by import path (``my_norms:my_norm``, see
``lnorm.normalization.user``) goes in the places of ``ln`` in either cell.

The RMS variants follow the RMSNorm authors' RMS-LSTM and RMS-GRU: each RMSNorm has
a gain and no bias. The LSTM adds its gate bias b after the norms, as in every
variant; the GRU's input projection keeps its biases (b, b_x) unless the input
normalizer has its own (LN's and DyT's beta), as LN-GRU eq. 26-28 have it.

LN, RMSNorm, ScaleNorm, LayerNorm-simple and the identity run through the fused
recurrences; DyT, recurrent BN and imported normalizers step by step
(:func:`recurrence_path` says which, and the run's ``config.json`` records it).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import flax.linen as nn

from lnorm.errors import ConfigError
from lnorm.models.initializers import recurrent_initializer
from lnorm.normalization import (
    Dense, ImportedNorm, WeightNormDense, is_import_path, load_user_norm)
from lnorm.rnn import cudnn
from lnorm.rnn.cells import (
    CellNorms, CellFactory, GRUCell, LSTMCell, bind_norms, recurrence_path)
from lnorm.rnn.norms import (
    StepBatchNorm, StepDynamicTanh, StepIdentity, StepLayerNorm, StepLayerNormSimple,
    StepRMSNorm, StepScaleNorm)


def _ln(o) -> Callable[..., nn.Module]:
  return functools.partial(StepLayerNorm, eps=o["ln_eps"],
                           scale_init=nn.initializers.constant(o["ln_scale_init"]))


def _rms(o) -> Callable[..., nn.Module]:
  return functools.partial(StepRMSNorm, eps=o["rms_eps"],
                           scale_init=nn.initializers.constant(o["rms_scale_init"]))


def _prms(o) -> Callable[..., nn.Module]:
  return functools.partial(StepRMSNorm, eps=o["prms_eps"], partial=o["prms_p"],
                           scale_init=nn.initializers.constant(o["prms_scale_init"]))


def _dyt(o) -> Callable[..., nn.Module]:
  return functools.partial(StepDynamicTanh, alpha_init=o["dyt_alpha_init"])


def _scalenorm(o) -> Callable[..., nn.Module]:
  return functools.partial(StepScaleNorm, eps=o["scalenorm_eps"])


def _ln_simple(o) -> Callable[..., nn.Module]:
  return functools.partial(StepLayerNormSimple, eps=o["ln_simple_eps"])


def _bn(o, use_bias: bool) -> Callable[..., nn.Module]:
  return functools.partial(
      StepBatchNorm, max_steps=o["bn_max_steps"], eps=o["bn_eps"],
      momentum=o["bn_momentum"], use_bias=use_bias,
      scale_init=nn.initializers.constant(o["bn_scale_init"]))


def _wn_dense(o):
  return functools.partial(WeightNormDense, data_init=False)


#: Options shared by every variant (each is a config field of the experiments).
DEFAULT_OPTIONS: dict[str, Any] = {
    "ln_scale_init": 1.0,   # the attentive reader compares 1.0 with 0.1
    "ln_eps": 1e-5,         # the reference code's eps, inside the sqrt
    "rms_scale_init": 1.0,
    "rms_eps": 1e-5,        # the RMSNorm authors' eps in their RNNs, inside the sqrt
    "prms_scale_init": 1.0,
    "prms_eps": 1e-5,
    "prms_p": 0.0625,       # pRMSNorm's share of the entries (the paper's 6.25%)
    "dyt_alpha_init": 0.5,  # DyT's alpha at init (the paper's default)
    "scalenorm_eps": 1e-5,  # inside the sqrt of sum(x^2) (lnorm.normalization.functional)
    "ln_simple_eps": 1e-5,
    "bn_scale_init": 0.1,   # Cooijmans et al.
    "bn_eps": 1e-5,
    "bn_momentum": 0.99,
    "bn_max_steps": 256,    # rows of per-step population statistics
}

#: Per-example normalizer -> (its recurrent module from the options, whether it adds
#: its own bias). Each is a variant in all of LN's places and, for the LSTM, also as
#: ``<name>_cell`` on c only.
_PER_EXAMPLE: dict[str, tuple[Callable[[dict], Callable[..., nn.Module]], bool]] = {
    "ln": (_ln, True), "rms": (_rms, False), "prms": (_prms, False),
    "dyt": (_dyt, True), "scalenorm": (_scalenorm, False), "ln_simple": (_ln_simple, False),
}


def _everywhere(name: str, norm, has_bias: bool) -> Callable[[dict], CellNorms]:
  return lambda o: CellNorms(name, Dense, norm(o), norm(o), norm(o),
                             input_norm_has_bias=has_bias)


def _cell_only(name: str, norm) -> Callable[[dict], CellNorms]:
  return lambda o: CellNorms(f"{name}_cell", Dense, StepIdentity, StepIdentity, norm(o))


# Recurrent BN: W_h h and W_x x get gains only (the shared gate bias b shifts both,
# Cooijmans et al. set their betas to 0); c gets a gain and a bias.
LSTM_VARIANTS: dict[str, Callable[[dict], CellNorms]] = {
    "none": lambda o: CellNorms("none", Dense, StepIdentity, StepIdentity,
                                StepIdentity),
    "ln": _everywhere("ln", _ln, True),
    "ln_cell": _cell_only("ln", _ln),
    "bn": lambda o: CellNorms("bn", Dense, _bn(o, False), _bn(o, False),
                              _bn(o, True)),
    "wn": lambda o: CellNorms("wn", _wn_dense(o), StepIdentity, StepIdentity,
                              StepIdentity),
}
for _name, (_norm, _has_bias) in _PER_EXAMPLE.items():
  LSTM_VARIANTS.setdefault(_name, _everywhere(_name, _norm, _has_bias))
  LSTM_VARIANTS.setdefault(f"{_name}_cell", _cell_only(_name, _norm))
del _name, _norm, _has_bias

GRU_VARIANTS: dict[str, Callable[[dict], CellNorms]] = {
    name: LSTM_VARIANTS[name] for name in ("none", "ln", "wn", *_PER_EXAMPLE)}


def _imported(path: str) -> CellNorms:
  norm = functools.partial(ImportedNorm, normalizer=load_user_norm(path))
  return CellNorms(path, Dense, norm, norm, norm)


def _norms(kind: str, table, variant: str, options: dict) -> CellNorms:
  if is_import_path(variant):
    return _imported(variant)
  if variant not in table:
    raise ValueError(
        f"Unknown {kind} variant {variant!r}. Valid choices: {', '.join(table)}, or your "
        "own normalizer as module:attribute.")
  return table[variant]({**DEFAULT_OPTIONS, **options})


def _split(options: dict) -> tuple[dict, dict]:
  norm_opts = {k: v for k, v in options.items() if k in DEFAULT_OPTIONS}
  cell_opts = {k: v for k, v in options.items() if k not in DEFAULT_OPTIONS}
  return norm_opts, cell_opts


def make_lstm_cell(variant: str = "none", **options) -> CellFactory:
  """``factory(hidden_size, name=...) -> LSTMCell`` for one of LSTM_VARIANTS.

  ``options``: any of DEFAULT_OPTIONS, plus the LSTMCell fields ``forget_bias``,
  ``kernel_init``, ``recurrent_kernel_init``, ``carry_init``, ``dropout`` and
  ``recurrent_dropout`` (Keras's per-sequence masks on x and h, in training), and
  ``impl`` ('auto', 'scan' or 'cudnn': :mod:`lnorm.rnn.cudnn`).
  """
  norm_opts, cell_opts = _split(options)
  _check_fields(LSTMCell, cell_opts, "LSTM")
  factory = bind_norms(LSTMCell, _norms("LSTM", LSTM_VARIANTS, variant, norm_opts),
                       **cell_opts)
  cudnn.check_impl(cell_opts.get("impl", LSTMCell.impl))
  if cell_opts.get("impl") == "cudnn":
    recurrence_path(factory)  # Refuses, in one line, an LSTM cuDNN cannot run here.
  return factory


def make_gru_cell(variant: str = "none", **options) -> CellFactory:
  """``factory(hidden_size, name=...) -> GRUCell`` for one of GRU_VARIANTS.

  ``impl`` (the config's ``lstm_impl``, which ``cell_options`` passes to either cell)
  may be 'auto' or 'scan': the GRU always runs lnorm's own recurrence.
  """
  norm_opts, cell_opts = _split(options)
  impl = cell_opts.pop("impl", "auto")
  cudnn.check_impl(impl)
  if impl == "cudnn":
    raise ConfigError("lstm_impl='cudnn': cuDNN runs the plain LSTM only (jax.experimental"
                      ".rnn), and this model's cells are GRUs. Use --config.lstm_impl=auto "
                      "or scan.")
  _check_fields(GRUCell, cell_opts, "GRU")
  return bind_norms(GRUCell, _norms("GRU", GRU_VARIANTS, variant, norm_opts),
                    **cell_opts)


#: DEFAULT_OPTIONS key -> (config block of ``norm_options``, field): where
#: ``cell_options`` finds each normalizer option of the cells.
_CONFIG_FIELDS = {
    "ln_eps": ("ln", "eps"), "ln_scale_init": ("ln", "scale_init"),
    "rms_eps": ("rms", "eps"), "rms_scale_init": ("rms", "scale_init"),
    "prms_eps": ("prms", "eps"), "prms_scale_init": ("prms", "scale_init"),
    "prms_p": ("prms", "p"),
    "dyt_alpha_init": ("dyt", "alpha_init"), "scalenorm_eps": ("scalenorm", "eps"),
    "ln_simple_eps": ("ln_simple", "eps"),
}


def cell_options(config) -> dict[str, Any]:
  """The cell options an experiment's config sets for every recurrent variant: the
  normalizers' options (``norm_options.ln``, ``.rms``, ``.prms``, ``.dyt``,
  ``.scalenorm``, ``.ln_simple``) and how the recurrent matrix starts
  (``recurrent_init``, one of ``lnorm.models.initializers.RECURRENT_INITS``) and how an
  LSTM runs (``lstm_impl``, :mod:`lnorm.rnn.cudnn`). Pass them to
  ``make_lstm_cell``/``make_gru_cell`` beside the experiment's own options. A block
  or field the config lacks (a run saved before it existed) keeps its default."""
  options = {}
  for key, (block, field) in _CONFIG_FIELDS.items():
    value = (config.norm_options.get(block) or {}).get(field)
    if value is not None:
      options[key] = value
  if config.get("recurrent_init") is not None:
    options["recurrent_kernel_init"] = recurrent_initializer(config.recurrent_init)
  if config.get("lstm_impl") is not None:
    options["impl"] = config.lstm_impl
  return options


def _check_fields(cls, cell_opts: dict, kind: str) -> None:
  fields = set(cls.__dataclass_fields__) - {"hidden_size", "norms", "parent", "name"}
  unknown = set(cell_opts) - fields
  if unknown:
    raise ValueError(
        f"Unknown {kind} cell option(s) {sorted(unknown)}; valid options: "
        f"{', '.join(sorted(set(DEFAULT_OPTIONS) | fields))}.")
