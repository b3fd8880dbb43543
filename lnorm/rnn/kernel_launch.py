"""Launching the recurrences' step kernels: Pallas on Triton for an NVIDIA GPU, Pallas's
interpreter elsewhere.

A step kernel (:mod:`lnorm.rnn.pallas_steps`) reads and writes ``[B, H]`` rows of a
layer's state and one time step of ``[T, B, F]`` arrays. Each program of its grid
handles a :class:`Block` of rows, each row as tiles of H columns padded to a power of
two (Triton's tiles have power-of-two sizes): loads and stores are masked to the real
rows and columns, so H and B need not be powers of two (400, 240, ...).

The arrays a step writes one time step of (the saved activations, the gradients of the
projected inputs) are passed in and written in place (``input_output_aliases``),
rather than returned a step at a time and copied into them by a kernel of their own.

Which kernel runs is decided when the step is lowered, per platform
(``lax.platform_dependent``), not by the backend of the process that traces: a step
exported on a CPU host for cuda (``lnorm check``) carries the Triton kernels, as a step
traced on a GPU does, and the same step on a CPU (or a TPU) runs the kernels through
Pallas's interpreter, slowly: it is how the tests check them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp

#: The custom call a Pallas kernel lowers to for an NVIDIA GPU: its Triton module,
#: which XLA compiles for the device. ``jax.export`` refuses it unless told (it has no
#: compatibility guarantee across jaxlib versions), as ``lnorm check`` does.
TRITON_CUSTOM_CALL = "__gpu$xla.gpu.triton"

#: Entries of one ``[rows, width]`` tile a program holds. A step holds about a dozen
#: tiles (the gates, their inputs, the state): at 1024 entries, about 100 registers
#: per thread of NUM_WARPS warps. A first guess, to be tuned on a GPU.
TILE_ENTRIES = 1024
NUM_WARPS = 4


def _pallas():
  """Pallas and its Triton module, imported at the first kernel rather than with lnorm
  (they take 0.2 s, which every command would pay)."""
  # pylint: disable=g-import-not-at-top
  from jax.experimental import pallas
  from jax.experimental.pallas import triton
  return pallas, triton


def _power_of_two_at_least(n: int) -> int:
  return 1 << max(0, n - 1).bit_length()


@dataclasses.dataclass(frozen=True)
class Launch:
  """The grid of a step kernel over a batch of ``batch`` rows of ``width`` columns
  (H): ``block_rows`` rows per program."""

  batch: int
  width: int

  @property
  def padded_width(self) -> int:
    return _power_of_two_at_least(self.width)

  @property
  def block_rows(self) -> int:
    return max(1, min(_power_of_two_at_least(self.batch),
                      TILE_ENTRIES // self.padded_width))

  @property
  def grid(self) -> tuple[int]:
    return (-(-self.batch // self.block_rows),)


@dataclasses.dataclass(frozen=True)
class Block:
  """The rows of one program, and how it reads and writes them.

  A ``[B, F]`` ref is read as tiles of the block's rows and H (padded) columns from
  column ``start``; a ``[T, B, F]`` ref the same at time step ``step``. A tile's entries
  past the batch's rows or the H columns read as 0 and are not written.
  """

  rows: jax.Array  # [block_rows]: the rows' indices in the batch
  columns: jax.Array  # [1, padded width]
  batch: int
  width: int

  @classmethod
  def of_program(cls, grid: Launch) -> "Block":
    first = _pallas()[0].program_id(0) * grid.block_rows
    return cls(first + jnp.arange(grid.block_rows),
               jnp.arange(grid.padded_width)[None, :], grid.batch, grid.width)

  @property
  def real_rows(self) -> jax.Array:
    """``[rows, 1]``: true at the rows of the batch (the last block may overhang it)."""
    return (self.rows < self.batch)[:, None]

  @property
  def valid(self) -> jax.Array:
    """``[rows, padded width]``: true at the real rows and columns."""
    return jnp.logical_and(self.real_rows, self.columns < self.width)

  def _index(self, step, start: int):
    index = (self.rows[:, None], start + self.columns)
    return index if step is None else (step, *index)

  def load(self, ref, start: int = 0, step=None) -> jax.Array:
    return _load(ref.at[self._index(step, start)], self.valid)

  def store(self, ref, value, start: int = 0, step=None) -> None:
    _store(ref.at[self._index(step, start)], value, self.valid)

  def load_per_row(self, ref, step=None) -> jax.Array:
    """One value per row of a ``[B]`` (or, at ``step``, ``[T, B]``) ref: ``[rows, 1]``."""
    index = self.rows if step is None else (step, self.rows)
    return _load(ref.at[index], self.rows < self.batch)[:, None]

  def store_per_row(self, ref, value, step=None) -> None:
    index = self.rows if step is None else (step, self.rows)
    _store(ref.at[index], value[:, 0], self.rows < self.batch)

  def load_vector(self, ref, start: int) -> jax.Array:
    """Entries ``start`` to ``start + width`` of a ``[F]`` ref (a gain): ``[1, width]``."""
    return _load(ref.at[start + self.columns[0]], self.columns[0] < self.width)[None, :]


def _load(ref, mask) -> jax.Array:
  """The entries of ``ref`` where ``mask`` holds, zero elsewhere (never read)."""
  return _pallas()[1].load(ref, mask=mask, other=jnp.zeros((), ref.dtype))


def _store(ref, value, mask) -> None:
  _pallas()[1].store(ref, value.astype(ref.dtype), mask=mask)


def _flat(tree) -> tuple[list, Any]:
  """The array leaves of ``tree`` (a scalar as shape [1]: a kernel reads refs) and its
  structure."""
  leaves, treedef = jax.tree.flatten(tree)
  return [jnp.reshape(leaf, (1,)) if jnp.ndim(leaf) == 0 else leaf for leaf in leaves], treedef


def launch(body: Callable, grid: Launch, *, name: str, inputs: dict,
           outputs: dict[str, jax.ShapeDtypeStruct], updated: dict[str, jax.Array]):
  """Runs ``body(block, ins, outs)`` as a Pallas kernel over ``grid``.

  ``inputs`` are read only (each a pytree of arrays: its refs reach ``body`` in the same
  structure, a scalar as a ``[1]`` ref); ``outputs`` are new arrays; ``updated`` are
  arrays that ``body`` writes parts of in place (their refs in ``outs``; what it does
  not write keeps its value). Returns ``(outputs, updated)`` as dicts of arrays.
  """
  in_leaves, in_tree = _flat(inputs)
  out_names, updated_names = list(outputs), list(updated)
  updated_leaves = [updated[k] for k in updated_names]
  n_in = len(in_leaves)

  def kernel(*refs):
    ins = jax.tree.unflatten(in_tree, refs[:n_in])
    written = refs[n_in + len(updated_leaves):]
    outs = dict(zip(out_names + updated_names, written))
    body(Block.of_program(grid), ins, outs)

  out_shape = [outputs[k] for k in out_names] + [
      jax.ShapeDtypeStruct(a.shape, a.dtype) for a in updated_leaves]
  aliases = {n_in + i: len(out_names) + i for i in range(len(updated_leaves))}

  pl, plgpu = _pallas()

  def call(interpret: bool):
    def run(*args):
      return pl.pallas_call(
          kernel, out_shape=out_shape, grid=grid.grid, input_output_aliases=aliases,
          interpret=interpret, name=name,
          compiler_params=None if interpret else plgpu.CompilerParams(num_warps=NUM_WARPS),
      )(*args)
    return run

  results = jax.lax.platform_dependent(*in_leaves, *updated_leaves, cuda=call(False),
                                       default=call(True))
  return (dict(zip(out_names, results[:len(out_names)])),
          dict(zip(updated_names, results[len(out_names):])))
