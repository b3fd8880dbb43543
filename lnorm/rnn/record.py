"""What a run's record (``config.json``) says about its normalizer: where it came from
and how the recurrent cells that take it ran.

The fused recurrences run LN, RMSNorm, ScaleNorm, LayerNorm-simple and the identity;
every other normalizer in an LSTM or GRU cell (DyT, a user's) runs step by step under ``nn.scan`` (:func:`lnorm.rnn.cells.
recurrence_path`). The record says which, so that a timing or a result can be read
for what it is.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Iterator

import flax.linen as nn

from lnorm.normalization import is_import_path, load_user_norm
from lnorm.rnn.cells import recurrence_path


def normalizer_record(model: nn.Module, norm: str | None) -> dict[str, Any]:
  """``{"recurrence": "fused" | "step-by-step" | [both, when cells differ]}`` for a
  model whose fields hold recurrent cell factories (none for a model without, or
  whose cells are built inside it and never take the normalizer, as BLN-IMDb's),
  and ``"norm_source"`` (import path, form, file) for a normalizer named by import
  path."""
  record: dict[str, Any] = {}
  paths = sorted({recurrence_path(f) for f in _cell_factories(model, set())})
  if paths:
    record["recurrence"] = paths[0] if len(paths) == 1 else paths
  if is_import_path(norm):
    user = load_user_norm(norm)
    record["norm_source"] = {"path": user.path, "form": user.form, "file": user.source}
  return record


def _is_cell_factory(value: Any) -> bool:
  if not isinstance(value, functools.partial) or "norms" not in value.keywords:
    return False
  func = value.func
  return isinstance(func, type) and issubclass(func, nn.RNNCellBase)


def _cell_factories(value: Any, seen: set[int]) -> Iterator[functools.partial]:
  """The cell factories held by a module's fields, its submodules' fields, and so on."""
  if id(value) in seen:
    return
  seen.add(id(value))
  if _is_cell_factory(value):
    yield value
  elif isinstance(value, nn.Module):
    for field in dataclasses.fields(value):
      if field.name not in ("parent", "name"):
        yield from _cell_factories(getattr(value, field.name, None), seen)
  elif isinstance(value, (list, tuple)):
    for item in value:
      yield from _cell_factories(item, seen)
