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

On a CPU, LN, RMSNorm, ScaleNorm, LayerNorm-simple and the identity run through the
fused recurrences; DyT, recurrent BN and imported normalizers step by step. On an
NVIDIA GPU every per-example normalizer runs through the Pallas step kernels and the
plain LSTM through cuDNN (the ``impl`` option, :mod:`lnorm.rnn.implementation`;
:func:`recurrence_path` says which, and the run's ``config.json`` records it).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Mapping

from lnorm.models.initializers import recurrent_initializer
from lnorm.normalization import (
    DEFINITIONS, Dense, ImportedNorm, Identity, InCells, is_import_path, load_user_norm)
from lnorm.rnn import implementation
from lnorm.rnn.cells import (
    CellNorms, CellFactory, GRUCell, LSTMCell, bind_norms, recurrence_path)

#: The normalizers the cells take (those whose definition has ``in_cells``).
_IN_CELLS = {name: d for name, d in DEFINITIONS.items() if d.in_cells is not None}

#: Each normalizer option the cells take, spelled ``<norm>_<option>`` as keyword
#: arguments of ``make_lstm_cell``/``make_gru_cell`` (``ln_eps``, ``bn_max_steps``),
#: with its default: a flat view of the definitions' options, not a second schema.
DEFAULT_OPTIONS: dict[str, Any] = {
    f"{name}_{option}": default for name, d in _IN_CELLS.items()
    for option, default in {**d.options, **d.placement}.items() if option != "axes"}


def _cell_norms(name: str, places: InCells) -> CellNorms:
  return CellNorms(name, places.dense or Dense, places.input_norm, places.hidden_norm,
                   places.cell_norm, input_norm_has_bias=places.input_norm_has_bias)


def _everywhere(name: str) -> Callable[[Mapping], CellNorms]:
  definition = DEFINITIONS[name]
  return lambda o: _cell_norms(name, definition.in_cells(definition.resolve(o.get(name))))


def _cell_only(name: str) -> Callable[[Mapping], CellNorms]:
  """A per-example normalizer on the LSTM's c alone (``ln_cell``: DRAW's LN)."""
  definition = DEFINITIONS[name]

  def norms(o):
    places = definition.in_cells(definition.resolve(o.get(name)))
    return CellNorms(f"{name}_cell", Dense, Identity, Identity, places.cell_norm)
  return norms


#: variant -> (normalizer options by name -> CellNorms). Every normalizer the cells
#: take, in all its places; a per-example one also as ``<name>_cell`` on c only.
LSTM_VARIANTS: dict[str, Callable[[Mapping], CellNorms]] = {}
for _name, _definition in _IN_CELLS.items():
  LSTM_VARIANTS[_name] = _everywhere(_name)
  if _definition.per_example:
    LSTM_VARIANTS[f"{_name}_cell"] = _cell_only(_name)
del _name, _definition

#: The GRU takes no per-step BN and no norm on c alone.
GRU_VARIANTS: dict[str, Callable[[Mapping], CellNorms]] = {
    name: LSTM_VARIANTS[name] for name, d in _IN_CELLS.items()
    if d.per_example or name in ("none", "wn")}


def _imported(path: str) -> CellNorms:
  norm = functools.partial(ImportedNorm, normalizer=load_user_norm(path))
  return CellNorms(path, Dense, norm, norm, norm)


def _norms(kind: str, table, variant: str, options: Mapping) -> CellNorms:
  if is_import_path(variant):
    return _imported(variant)
  if variant not in table:
    raise ValueError(
        f"Unknown {kind} variant {variant!r}. Valid choices: {', '.join(table)}, or your "
        "own normalizer as module:attribute.")
  return table[variant](options)


def _flat_key(key: str) -> tuple[str, str] | None:
  """``'ln_simple_eps'`` -> ``('ln_simple', 'eps')``; None for a cell field."""
  if key not in DEFAULT_OPTIONS:
    return None
  name = max((n for n in _IN_CELLS if key.startswith(n + "_")), key=len)
  return name, key[len(name) + 1:]


def _split(options: dict) -> tuple[dict, dict]:
  """The normalizer options, by normalizer (``{'ln': {'eps': ...}}``), and the rest."""
  norm_opts: dict[str, dict] = {}
  cell_opts = {}
  for key, value in options.items():
    parsed = _flat_key(key)
    if parsed is None:
      cell_opts[key] = value
    else:
      norm_opts.setdefault(parsed[0], {})[parsed[1]] = value
  return norm_opts, cell_opts


def make_lstm_cell(variant: str = "none", **options) -> CellFactory:
  """``factory(hidden_size, name=...) -> LSTMCell`` for one of LSTM_VARIANTS.

  ``options``: any of DEFAULT_OPTIONS, plus the LSTMCell fields ``forget_bias``,
  ``kernel_init``, ``recurrent_kernel_init``, ``carry_init``, ``dropout`` and
  ``recurrent_dropout`` (Keras's per-sequence masks on x and h, in training), and
  ``impl`` ('auto', 'scan', 'cudnn' or 'pallas': :mod:`lnorm.rnn.implementation`).
  """
  return _cell_factory(LSTMCell, LSTM_VARIANTS, variant, options)


def _cell_factory(cell_cls, variants, variant: str, options: dict) -> CellFactory:
  norm_opts, cell_opts = _split(options)
  implementation.check_impl(cell_opts.get("impl", cell_cls.impl))
  _check_fields(cell_cls, cell_opts, cell_cls.kind)
  factory = bind_norms(cell_cls, _norms(cell_cls.kind, variants, variant, norm_opts),
                       **cell_opts)
  if cell_opts.get("impl") in ("cudnn", "pallas"):
    recurrence_path(factory)  # Refuses, in one line, a cell that impl cannot run here.
  return factory


def make_gru_cell(variant: str = "none", **options) -> CellFactory:
  """``factory(hidden_size, name=...) -> GRUCell`` for one of GRU_VARIANTS.

  ``options`` as ``make_lstm_cell``'s (no ``forget_bias``); ``impl`` (the config's
  ``lstm_impl``, which ``cell_options`` passes to either cell) may be 'auto', 'scan' or
  'pallas': cuDNN runs no GRU.
  """
  return _cell_factory(GRUCell, GRU_VARIANTS, variant, options)


def cell_options(config) -> dict[str, Any]:
  """The cell options an experiment's config sets for every recurrent variant: the
  options of each normalizer the cells take (``norm_options.<name>``, as
  ``<name>_<option>``), how the recurrent matrix starts (``recurrent_init``, one of
  ``lnorm.models.initializers.RECURRENT_INITS``) and how the cells run (``lstm_impl``,
  :mod:`lnorm.rnn.implementation`). Pass them to ``make_lstm_cell``/``make_gru_cell`` beside the
  experiment's own options. A block or field the config lacks (a run saved before it
  existed) keeps its default."""
  options = {}
  for name, definition in _IN_CELLS.items():
    block = config.norm_options.get(name) or {}
    for option in definition.options:
      if block.get(option) is not None:
        options[f"{name}_{option}"] = block.get(option)
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
