"""A normalizer from the user's own file, named by an import path ``module:attribute``.

``--config.norm=my_norms:my_norm`` imports ``my_norms`` (a file on ``PYTHONPATH``)
and takes its attribute ``my_norm``, in one of two forms, each mapping activations
``[..., F]`` to ``[..., F]`` per example:

* a plain function of the activations, ``my_norm(x) -> y``;
* a Flax module class, constructed without arguments and called on the activations,
  ``my_norm()(x) -> y``; it may declare parameters (``self.param``).

:class:`ImportedNorm` gives it the signature every lnorm normalizer has, so that it
goes wherever ``ln`` goes: after the MLPs' linear maps and, in the LSTM and GRU
cells, in LN's places. It sees no mask and no time step: padded rows pass through it
like real ones and are masked downstream, and it keeps no per-step state, so the
recurrent cells run it step by step (``lnorm.rnn``), never through the fused
recurrences, which know only lnorm's own row normalizers.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import math
from typing import Any, Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from lnorm.config import is_import_path  # pylint: disable=unused-import  (re-exported)
from lnorm.errors import ConfigError
from lnorm.normalization import functional as F


class UserNormError(ConfigError, ValueError):
  """A normalizer named by import path that cannot be loaded or used."""


@dataclasses.dataclass(frozen=True)
class UserNormalizer:
  """A normalizer loaded from ``path``: a function or a Flax module class."""

  path: str  # "module:attribute", as the config names it
  target: Callable[..., Any]
  #: The file it was defined in (None for a module without one).
  source: str | None

  @property
  def is_module(self) -> bool:
    return inspect.isclass(self.target) and issubclass(self.target, nn.Module)

  @property
  def form(self) -> str:
    """'module' (a Flax module class) or 'function'."""
    return "module" if self.is_module else "function"


def load_user_norm(path: str) -> UserNormalizer:
  """Imports ``module:attribute``, with an error naming what is wrong and its fix."""
  module_name, _, attribute = path.partition(":")
  module_name, attribute = module_name.strip(), attribute.strip()
  if not module_name or not attribute or ":" in attribute:
    raise UserNormError(
        f"norm={path!r} is not an import path of the form module:attribute (for "
        "example my_norms:my_norm, with my_norms.py on PYTHONPATH).")
  try:
    module = importlib.import_module(module_name)
  except ModuleNotFoundError as e:
    if e.name is not None and module_name.startswith(e.name):
      raise UserNormError(
          f"norm={path!r}: no module {module_name!r} on the Python path. Put the folder "
          f"holding {module_name.replace('.', '/')}.py on PYTHONPATH (PYTHONPATH=/that/"
          "folder lnorm train ...).") from None
    raise UserNormError(f"norm={path!r}: importing {module_name!r} failed: {e}") from e
  except Exception as e:  # pylint: disable=broad-except  (the user's own module code)
    raise UserNormError(f"norm={path!r}: importing {module_name!r} failed: "
                        f"{type(e).__name__}: {e}") from e
  source = getattr(module, "__file__", None)
  if not hasattr(module, attribute):
    defined = sorted(n for n, v in vars(module).items()
                     if callable(v) and not n.startswith("_")
                     and getattr(v, "__module__", None) == module.__name__)
    raise UserNormError(
        f"norm={path!r}: module {module_name!r} ({source}) has no attribute "
        f"{attribute!r}. It defines: {', '.join(defined) or '(no functions or classes)'}.")
  target = getattr(module, attribute)
  if not callable(target):
    raise UserNormError(
        f"norm={path!r}: {attribute!r} is a {type(target).__name__}, not a function of "
        "the activations or a Flax module class.")
  if inspect.isclass(target) and not issubclass(target, nn.Module):
    raise UserNormError(
        f"norm={path!r}: {attribute!r} is a class but not a Flax module (flax.linen."
        "Module); give a function of the activations or an nn.Module subclass.")
  return UserNormalizer(path, target, source)


class ImportedNorm(nn.Module):
  """A user's normalizer in lnorm's signature, ``norm(x, *, train, step=None,
  mask=None)``, the same in feed-forward layers and recurrent cells.

  ``axes`` are the normalized axes, as LN's: they are moved last and merged into one
  feature axis for the call (a conv map ``[B, H, W, C]`` with ``axes=(1, 2, 3)`` is
  normalized as ``[B, H*W*C]``), then restored. A normalizer that changes the shape
  is refused when the model is first built, as is one that changes the dtype or whose
  output for one example depends on the others (:func:`check_per_example`).
  """

  normalizer: UserNormalizer
  axes: int | Sequence[int] = -1

  #: Never run by the fused recurrences, which know only lnorm's own row normalizers.
  fusable = False

  @nn.compact
  def __call__(self, x, *, train: bool = False, step=None, mask=None):
    del train, step, mask
    axes = F._normalize_axes(self.axes, x.ndim)  # pylint: disable=protected-access
    kept = tuple(a for a in range(x.ndim) if a not in axes)
    moved = jnp.transpose(x, kept + axes)
    rows = moved.reshape(moved.shape[:len(kept)] + (math.prod(x.shape[a] for a in axes),))
    y = self._call_user(rows)
    if getattr(y, "shape", None) != rows.shape:
      raise UserNormError(
          f"The normalizer {self.normalizer.path} ({self.normalizer.form}) changed the "
          f"shape of its input from {rows.shape} to {getattr(y, 'shape', type(y))}: a "
          "normalizer must map activations [..., F] to the same shape.")
    if y.dtype != rows.dtype:
      # A lower precision would go on silently through the rest of the network.
      raise UserNormError(
          f"The normalizer {self.normalizer.path} ({self.normalizer.form}) returned "
          f"{y.dtype} for {rows.dtype} activations: a normalizer must keep the dtype of "
          "its input (compute in float32 if you like, and return y.astype(x.dtype)).")
    if self.is_initializing() and rows.ndim > 1:
      check_per_example(self.normalizer, tuple(rows.shape[1:]))
    y = jnp.reshape(y, moved.shape)
    return jnp.transpose(y, tuple(int(i) for i in _inverse(kept + axes)))

  def _call_user(self, rows):
    if not self.normalizer.is_module:
      return self.normalizer.target(rows)
    try:
      module = self.normalizer.target()
    except TypeError as e:
      raise UserNormError(
          f"The normalizer {self.normalizer.path} is a Flax module class, which lnorm "
          f"constructs without arguments: {e}. Give every field a default.") from e
    return module(rows)


#: The per-example check's batch: example 0 and two others, which the second batch
#: scales and shifts, so that a mean, a variance or a maximum over the batch moves.
_PROBE_EXAMPLES = 3

#: How far example 0's output may move, relative to its size: a per-example
#: normalizer computes it from example 0 alone, the same floats in both batches; one
#: that reduces over the batch moves it by about its own size.
_PROBE_TOLERANCE = 1e-4


def probe_batches(example_shape: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
  """Two float32 batches of three examples of ``example_shape`` that differ only in
  examples 1 and 2."""
  batch = np.random.default_rng(0).normal(size=(_PROBE_EXAMPLES, *example_shape))
  batch = (batch + 0.5).astype(np.float32)
  others_changed = batch.copy()
  others_changed[1:] = 3.0 * batch[1:] + 2.0
  return batch, others_changed


def batch_dependence(normalize: Callable[[Any], Any], example_shape: Sequence[int]) -> float:
  """How far ``normalize``'s output for example 0 moves, relative to its size, between
  the two :func:`probe_batches`: 0 for a per-example normalizer. Eager."""
  batch, others_changed = probe_batches(example_shape)
  first = np.asarray(normalize(jnp.asarray(batch)), np.float64)[0]
  second = np.asarray(normalize(jnp.asarray(others_changed)), np.float64)[0]
  # The same NaN or inf in both (0/0 on some row) is the same output.
  same = (first == second) | (np.isnan(first) & np.isnan(second))
  moved = np.where(same, 0.0, np.nan_to_num(np.abs(first - second), nan=np.inf))
  return float(moved.max() / (1.0 + np.abs(np.nan_to_num(first)).max()))


def check_per_example(normalizer: UserNormalizer, example_shape: tuple[int, ...]) -> None:
  """Refuses a user's normalizer whose output for one example depends on the other
  examples of its batch (statistics over axis 0, as BN's): it goes where LN goes, which
  needs it per example (a batch of one, recurrent steps, evaluation in other batch
  sizes), and would otherwise train without a word. The normalizer alone, not the
  model: cheap (a few eager operations on three examples, at each initialisation of a
  layer that holds it), and exact about which layer is at fault; a module form is
  initialised afresh for it."""
  with jax.ensure_compile_time_eval():  # Concrete values, even while a model is traced.
    normalize = normalizer.target
    if normalizer.is_module:
      module = normalizer.target(parent=None)
      variables = module.init(jax.random.key(0), probe_batches(example_shape)[0])
      normalize = functools.partial(module.apply, variables)
    moved = batch_dependence(normalize, example_shape)
  if moved > _PROBE_TOLERANCE:
    raise UserNormError(
        f"The normalizer {normalizer.path} ({normalizer.form}) is not per example: its "
        f"output for one example moved (by {moved:.2g} of its size) when only the other "
        "examples of the batch changed, so it reduces over the batch axis. A normalizer "
        "named by import path goes where LN goes and must compute each example's output "
        "from that example alone: reduce over the feature axis (axis=-1, keepdims=True), "
        "not axis 0.")


def _inverse(permutation: Sequence[int]) -> list[int]:
  inverse = [0] * len(permutation)
  for i, p in enumerate(permutation):
    inverse[p] = i
  return inverse
