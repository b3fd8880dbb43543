"""The ``rnn`` phase: one recurrent layer, forward and backward, at the papers' sizes.

XLA runs a recurrence as a loop of small kernels, one iteration per time step, which is
where a GPU user expects trouble; cuDNN runs a whole LSTM layer in its own kernels.
Each row times a jitted (for PyTorch, eager) forward and backward pass of
``sum(h^2) / B`` with respect to the parameters and the input ``x [B, T, I]`` (random
normal values, every sequence full length), the median of ``REPEATS`` calls after a
warm-up, each closed by a device synchronisation (:mod:`lnorm.gpucheck.timing`):

* lnorm's layers as the experiments run them: ``lstm`` (the fused recurrence of
  :mod:`lnorm.rnn.fused`, ``impl='scan'``), ``lstm_cudnn`` (the same layer and
  parameters through cuDNN, ``impl='cudnn'``: what ``auto`` picks on a GPU),
  ``ln_lstm`` (fused) and ``ln_lstm_scanned`` (its cell step by step under
  ``nn.scan``), ``gru`` and ``ln_gru`` (:mod:`lnorm.rnn.fused_gru`);
* ``jax_cudnn_lstm``: ``jax.experimental.rnn.lstm`` itself, with its own weights;
* PyTorch (:mod:`lnorm.gpucheck.torch_rnn`): ``torch_lstm`` and ``torch_gru``
  (cuDNN), ``torch_ln_lstm`` (the cell in Python) and ``torch_ln_lstm_compiled`` (the
  cell under ``torch.compile``, timed last since it compiles slowest).

Rows that cannot run here (cuDNN without a GPU, PyTorch not installed) are recorded as
skipped, with the reason. ``lnorm.analysis.gpu_report.RNN_RATIOS`` names the ratios the
report prints.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from lnorm.analysis import specs
from lnorm.errors import UserError
from lnorm.gpucheck import timing


@dataclasses.dataclass(frozen=True)
class Size:
  name: str  # The model whose layer this is.
  batch: int
  steps: int
  input: int
  hidden: int


#: The recurrent layers the experiments' specs declare at the papers' sizes (the
#: attentive reader's LSTMs, the handwriting model's upper layers). ``--toy``: one small
#: size that divides nothing evenly.
SIZES = {
    False: tuple(Size(s.name, layer.batch, layer.steps, layer.input, layer.hidden)
                 for s in specs.all_specs() for layer in s.gpu.recurrent_layers),
    True: (Size("toy", 3, 7, 5, 6),),
}
REPEATS = {False: 30, True: 3}
WARMUP = {False: 3, True: 1}

JAX_ROWS = ("lstm", "lstm_cudnn", "jax_cudnn_lstm", "ln_lstm", "ln_lstm_scanned", "gru",
            "ln_gru")
TORCH_ROWS = ("torch_lstm", "torch_gru", "torch_ln_lstm")
#: Timed after every other row of every size: its compilation takes longest.
LAST_ROWS = ("torch_ln_lstm_compiled",)

def random_inputs(size: Size) -> np.ndarray:
  return np.random.default_rng(0).standard_normal(
      (size.batch, size.steps, size.input)).astype(np.float32)


def _sum_of_squares(h: jax.Array, batch: int) -> jax.Array:
  return jnp.sum(jnp.square(h)) / batch


def _lnorm_layer(name: str, hidden: int):
  """(flax module, ``apply(variables, x) -> h``) of one of lnorm's rows."""
  # pylint: disable=g-import-not-at-top
  from lnorm.rnn import RecurrentLayer, make_gru_cell, make_lstm_cell
  cells = {"lstm": (make_lstm_cell, "none", {"impl": "scan"}),
           "lstm_cudnn": (make_lstm_cell, "none", {"impl": "cudnn"}),
           "ln_lstm": (make_lstm_cell, "ln", {}), "ln_lstm_scanned": (make_lstm_cell, "ln", {}),
           "gru": (make_gru_cell, "none", {}), "ln_gru": (make_gru_cell, "ln", {})}
  make, variant, options = cells[name]
  layer = RecurrentLayer(make(variant, **options), hidden, fused=name != "ln_lstm_scanned")
  return layer, lambda variables, x: layer.apply(variables, x).outputs


def _jax_row(name: str, size: Size, x: jax.Array) -> tuple[Callable[[], Any], float]:
  """(call, compile seconds) of a JAX row's jitted forward and backward pass."""
  if name == "jax_cudnn_lstm":
    return _jax_cudnn_row(size, x)
  layer, apply = _lnorm_layer(name, size.hidden)
  params = jax.jit(layer.init)(jax.random.key(0), x)["params"]

  def loss(params, x):
    return _sum_of_squares(apply({"params": params}, x), size.batch)

  return _compiled(jax.value_and_grad(loss, argnums=(0, 1)), params, x)


def _jax_cudnn_row(size: Size, x: jax.Array):
  if jax.default_backend() != "gpu":
    raise _Skipped(f"cuDNN needs an NVIDIA GPU; JAX runs on {jax.default_backend()}")
  from jax.experimental import rnn  # pylint: disable=g-import-not-at-top
  weights = rnn.init_lstm_weight(jax.random.key(0), size.input, size.hidden, 1, False)
  zeros = jnp.zeros((1, size.batch, size.hidden), jnp.float32)
  lengths = jnp.full((size.batch,), size.steps, jnp.int32)

  def loss(weights, x):
    y, _, _ = rnn.lstm(x, zeros, zeros, weights, lengths, input_size=size.input,
                       hidden_size=size.hidden, num_layers=1, dropout=0.0,
                       bidirectional=False)
    return _sum_of_squares(y, size.batch)

  return _compiled(jax.value_and_grad(loss, argnums=(0, 1)), weights, x)


def _compiled(fn, *args):
  start = time.perf_counter()
  compiled = jax.jit(fn).lower(*args).compile()
  return (lambda: compiled(*args)), time.perf_counter() - start


class _Skipped(Exception):
  """A row that cannot run here, and why."""


def _jax_build(name: str, size: Size, x: jax.Array):
  call, compile_s = _jax_row(name, size, x)
  return call, timing.jax_sync, compile_s


def _torch_build(name: str, size: Size, x: np.ndarray):
  try:
    from lnorm.gpucheck import torch_rnn  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise _Skipped(f"PyTorch is not installed ({e})") from e
  start = time.perf_counter()
  call = torch_rnn.rows(x, size.hidden, [name])[name]
  # torch.compile compiles in the first calls: the warm-up's time shows it.
  return call, torch_rnn.sync, time.perf_counter() - start


def _time_row(record, size: Size, name: str, build, *, toy: bool) -> None:
  """Builds and times one row, adding its figures, or why it did not run, to
  ``record``. ``warmup_s`` is the warm-up calls' time (PyTorch compiles there)."""
  item = {"size": size.name, "row": name, **dataclasses.asdict(size)}
  try:
    run, sync, compile_s = build()
    start = time.perf_counter()
    # torch.compile compiles over the first calls (a graph without, then with, the
    # state's gradient): at least three before the timing.
    for _ in range(max(WARMUP[toy], 3) if name in LAST_ROWS else WARMUP[toy]):
      sync(run())
    warmup_s = time.perf_counter() - start
    t = timing.time_repeats(run, repeats=REPEATS[toy], warmup=0, sync=sync)
    item.update(compile_s=compile_s, warmup_s=warmup_s, **t.record())
  except (_Skipped, UserError) as e:  # Cannot run here (cuDNN without a GPU): why.
    item["skipped"] = str(e)
  except Exception as e:  # pylint: disable=broad-except  (a row's failure is its record)
    item["error"] = f"{type(e).__name__}: {e}".splitlines()[0]
  record.add(item)


def run(record, toy: bool, rows: Sequence[str] | None = None) -> None:
  """Times every row at every size of :data:`SIZES` (``rows``: only these), adding
  each to ``record`` as it is timed."""
  wanted = lambda name: rows is None or name in rows
  inputs = {size: random_inputs(size) for size in SIZES[toy]}
  for size, x in inputs.items():
    for name in filter(wanted, JAX_ROWS):
      _time_row(record, size, name, lambda n=name: _jax_build(n, size, jnp.asarray(x)),
                toy=toy)
    for name in filter(wanted, TORCH_ROWS):
      _time_row(record, size, name, lambda n=name: _torch_build(n, size, x), toy=toy)
  for size, x in inputs.items():
    for name in filter(wanted, LAST_ROWS):
      _time_row(record, size, name, lambda n=name: _torch_build(n, size, x), toy=toy)

