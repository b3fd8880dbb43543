"""The ``rnn`` phase: one recurrent layer, forward and backward, at each recurrent
experiment's own sizes.

XLA runs a recurrence as a loop of small kernels, one iteration per time step, which is
where a GPU user expects trouble; cuDNN runs a whole LSTM layer in its own kernels, and
lnorm's normalized cells run through its Pallas step kernels on an NVIDIA GPU. The
layers are the experiments' own, as their specs give them (``GpuCheck
.recurrent_layers``: the attentive reader's passage LSTM at 400 steps and its question
LSTM at 100, the handwriting model's upper layers at 500, skip-thoughts' GRUs, DRAW's
encoder, order-embeddings' caption GRU). Each row times a jitted (for PyTorch, eager
or compiled) forward and backward pass of ``sum(h^2) / B`` with respect to the
parameters and the input ``x [B, T, I]`` (random normal values, every sequence full
length: every implementation runs all T steps, equal work), and records the
implementation it ran:

* LSTM layers: ``lstm`` and ``ln_lstm`` are lnorm's layers as the experiments run them
  (``lstm_impl=auto``: cuDNN and the Pallas kernels on an NVIDIA GPU, the fused
  recurrence elsewhere), ``lstm_fused`` and ``ln_lstm_fused`` the same layers through
  lnorm's fused recurrence (``impl='scan'``: what ran on a GPU before the kernels),
  ``jax_cudnn_lstm`` is ``jax.experimental.rnn.lstm`` itself with its own weights;
  PyTorch's ``torch_lstm`` (cuDNN), ``torch_ln_lstm`` (the LN cell in Python) and
  ``torch_ln_lstm_compiled`` (the cell under ``torch.compile``);
* GRU layers: ``gru`` and ``ln_gru`` as the experiments run them (the plain GRU fused,
  the LN-GRU through the kernels on an NVIDIA GPU), ``gru_pallas`` (the plain GRU
  through the kernels), ``ln_gru_fused`` (lnorm's fused recurrence) and PyTorch's
  ``torch_gru``.

Each experiment's layers are one worker process (``python -m lnorm.gpucheck layers``):
every row of every layer compiles first (``torch.compile`` in its warm-up calls), then
the workers time their rows one at a time (:mod:`lnorm.gpucheck.turns`), each row's
fastest, median and slowest of ``REPEATS`` calls (within ``BUDGET_S``). Rows that
cannot run here (cuDNN without an NVIDIA GPU, the kernels without one, where they
would be interpreted, PyTorch not installed) are recorded as skipped, with the reason.
``lnorm.analysis.gpu_report.RNN_RATIOS`` names the ratios the report prints.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from lnorm.analysis import specs
from lnorm.analysis.specs import RecurrentLayerSize
from lnorm.errors import UserError
from lnorm.gpucheck import ceilings
from lnorm.gpucheck import timing
from lnorm.gpucheck import turns

#: Each recurrent experiment's layers at the papers' sizes, by experiment; ``--toy``:
#: an LSTM and a GRU layer of sizes that divide nothing evenly.
LAYERS = {
    False: {s.name: s.gpu.recurrent_layers for s in specs.all_specs()
            if s.gpu.recurrent_layers},
    True: {"toy": (RecurrentLayerSize("lstm", "lstm", 3, 7, 5, 6),
                   RecurrentLayerSize("gru", "gru", 3, 7, 5, 6))},
}
REPEATS = {False: 30, True: 3}
WARMUP = {False: 3, True: 1}
#: Seconds of timed calls a row stops at, once timing.MIN_REPEATS ran (PyTorch's
#: Python-loop LN-LSTM takes about 0.35 s a call at 500 steps).
BUDGET_S = {False: 2.0, True: 1.0}
#: Seconds the driver sets aside for the timing, per worker: 5 to 16 rows, most of
#: them milliseconds a call (30 calls), the PyTorch LN-LSTM rows at BUDGET_S; the five
#: experiments' 75 s fit the phase's 100 s with its margin (an estimate from the H100
#: run's rows: no GPU has run this phase yet).
TIMING_S_PER_WORKER = {False: 15.0, True: 3.0}

ROWS = {
    "lstm": ("lstm", "lstm_fused", "jax_cudnn_lstm", "ln_lstm", "ln_lstm_fused",
             "torch_lstm", "torch_ln_lstm", "torch_ln_lstm_compiled"),
    "gru": ("gru", "gru_pallas", "ln_gru", "ln_gru_fused", "torch_gru"),
}
#: lnorm's rows: (cell factory's name, variant, impl).
LNORM_ROWS = {
    "lstm": ("lstm", "none", "auto"), "lstm_fused": ("lstm", "none", "scan"),
    "ln_lstm": ("lstm", "ln", "auto"), "ln_lstm_fused": ("lstm", "ln", "scan"),
    "gru": ("gru", "none", "auto"), "gru_pallas": ("gru", "none", "pallas"),
    "ln_gru": ("gru", "ln", "auto"), "ln_gru_fused": ("gru", "ln", "scan"),
}
#: The rows that force an implementation ``auto`` may pick too, by their ``auto`` row:
#: where ``auto`` picks the same (off an NVIDIA GPU), the row would time the same
#: program again and is skipped.
_AUTO_TWIN = {forced: auto for forced, (cell, variant, impl) in LNORM_ROWS.items()
              if impl != "auto" for auto, spec in LNORM_ROWS.items()
              if spec == (cell, variant, "auto")}
#: The implementation each PyTorch row runs, for the record.
TORCH_IMPLEMENTATIONS = {"torch_lstm": "PyTorch nn.LSTM (cuDNN)",
                         "torch_gru": "PyTorch nn.GRU (cuDNN)",
                         "torch_ln_lstm": "PyTorch, the cell in a Python loop",
                         "torch_ln_lstm_compiled": "PyTorch, the cell under torch.compile"}


class _Skipped(Exception):
  """A row that cannot run here, and why."""


def random_inputs(size: RecurrentLayerSize) -> np.ndarray:
  return np.random.default_rng(0).standard_normal(
      (size.batch, size.steps, size.input)).astype(np.float32)


def _sum_of_squares(h: jax.Array, batch: int) -> jax.Array:
  return jnp.sum(jnp.square(h)) / batch


def _compiled(fn, *args) -> tuple[Callable[[], Any], float]:
  start = time.perf_counter()
  compiled = jax.jit(fn).lower(*args).compile()
  return (lambda: compiled(*args)), time.perf_counter() - start


def _lnorm_row(name: str, size: RecurrentLayerSize, x: jax.Array):
  """(call, compile seconds, implementation) of one of lnorm's rows."""
  # pylint: disable=g-import-not-at-top
  from lnorm.rnn import RecurrentLayer, implementation, make_gru_cell, make_lstm_cell
  from lnorm.rnn.cells import recurrence_path
  cell, variant, impl = LNORM_ROWS[name]
  if impl == "pallas" and not implementation.on_nvidia_gpu():
    raise _Skipped("the Pallas kernels run on an NVIDIA GPU (elsewhere interpreted: "
                   "correct, and too slow to time)")
  make = make_lstm_cell if cell == "lstm" else make_gru_cell
  factory = make(variant, impl=impl)
  path = recurrence_path(factory)  # Refuses, in one line, what cannot run here.
  twin = _AUTO_TWIN.get(name)
  if twin is not None and recurrence_path(make(variant, impl="auto")) == path:
    raise _Skipped(f"the same program as {twin} here (impl auto runs the {path} "
                   f"recurrence on {jax.default_backend()})")
  layer = RecurrentLayer(factory, size.hidden)
  params = jax.jit(layer.init)(jax.random.key(0), x)["params"]

  def loss(params, x):
    return _sum_of_squares(layer.apply({"params": params}, x).outputs, size.batch)

  call, compile_s = _compiled(jax.value_and_grad(loss, argnums=(0, 1)), params, x)
  return call, compile_s, path


def _jax_cudnn_row(size: RecurrentLayerSize, x: jax.Array):
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

  call, compile_s = _compiled(jax.value_and_grad(loss, argnums=(0, 1)), weights, x)
  return call, compile_s, "cudnn (jax.experimental.rnn)"


def _build(name: str, size: RecurrentLayerSize, x: np.ndarray):
  """(call, sync, compile seconds, implementation) of one row."""
  if name in LNORM_ROWS:
    call, compile_s, path = _lnorm_row(name, size, jnp.asarray(x))
    return call, timing.jax_sync, compile_s, path
  if name == "jax_cudnn_lstm":
    call, compile_s, path = _jax_cudnn_row(size, jnp.asarray(x))
    return call, timing.jax_sync, compile_s, path
  try:
    from lnorm.gpucheck import torch_rnn  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise _Skipped(f"PyTorch is not installed ({e})") from e
  start = time.perf_counter()
  call = torch_rnn.rows(x, size.hidden, [name])[name]
  return call, torch_rnn.sync, time.perf_counter() - start, TORCH_IMPLEMENTATIONS[name]


def _row_key(experiment: str, size: RecurrentLayerSize, name: str) -> dict[str, Any]:
  return {"experiment": experiment, "size": f"{experiment} {size.name}", "row": name,
          **dataclasses.asdict(size)}


def prepare(experiment: str, toy: bool, rows: Sequence[str] | None = None
            ) -> tuple[dict[str, Any], Callable[[], dict[str, Any]]]:
  """Builds and compiles every row of the experiment's layers (``rows``: only these),
  warm-up calls included (``torch.compile`` compiles there): (what that found, the
  function that times them one by one). The worker's ``prepare`` (:func:`turns.serve`)."""
  from lnorm.training import process  # pylint: disable=g-import-not-at-top
  process.set_up()
  built, skipped = [], []
  for size in LAYERS[toy][experiment]:
    x = random_inputs(size)
    for name in ROWS[size.cell]:
      if rows is not None and name not in rows:
        continue
      key = _row_key(experiment, size, name)
      try:
        call, sync, compile_s, path = _build(name, size, x)
        start = time.perf_counter()
        # torch.compile compiles over the first calls (a graph without, then with, the
        # state's gradient): at least three before the timing.
        for _ in range(max(WARMUP[toy], 3) if name.endswith("_compiled") else WARMUP[toy]):
          sync(call())
        built.append((key, call, sync, {"compile_s": compile_s, "implementation": path,
                                        "warmup_s": time.perf_counter() - start}))
      except (_Skipped, UserError) as e:  # Cannot run here (cuDNN without a GPU): why.
        skipped.append({**key, "skipped": str(e)})
      except Exception as e:  # pylint: disable=broad-except  (a row's failure is its record)
        skipped.append({**key, "error": f"{type(e).__name__}: {e}".splitlines()[0]})
  info = {"experiment": experiment, "xla": ceilings.xla_environment()}

  def time_them() -> dict[str, Any]:
    items = list(skipped)
    for key, call, sync, found in built:
      t = timing.time_repeats(call, repeats=REPEATS[toy], warmup=0, sync=sync,
                              budget_s=BUDGET_S[toy])
      items.append({**key, **found, **t.record(), "xla": info["xla"]})
    sizes = [f"{experiment} {size.name}" for size in LAYERS[toy][experiment]]
    rows = ROWS["lstm"] + ROWS["gru"]
    return {"items": sorted(items, key=lambda i: (sizes.index(i["size"]),
                                                  rows.index(i["row"])))}

  return info, time_them


def run(record, toy: bool, *, work: str, deadline: float, workers: int,
        rows: Sequence[str] | None = None) -> None:
  """Compiles every experiment's layers in worker processes, ``workers`` at once, then
  times them one worker at a time, adding each row to ``record``."""
  jobs = [turns.Job(f"layers.{experiment}", {"experiment": experiment, "size": experiment,
                                              "row": "all"},
                    (sys.executable, "-m", "lnorm.gpucheck", "layers", "--experiment",
                     experiment) + (("--rows", ",".join(rows)) if rows else ())
                    + (("--toy",) if toy else ()))
          for experiment in LAYERS[toy]]
  turns.run(record, jobs, work=work, deadline=deadline, compilers=workers,
            timing_s=TIMING_S_PER_WORKER[toy])


def worker_main(argv: Sequence[str]) -> int:
  """``python -m lnorm.gpucheck layers``: one experiment's layers, compiled, then timed
  when their turn comes (:func:`turns.serve`)."""
  parser = argparse.ArgumentParser(prog="python -m lnorm.gpucheck layers")
  parser.add_argument("--experiment", required=True)
  parser.add_argument("--rows", default=None)
  parser.add_argument("--json", required=True)
  parser.add_argument("--ready", required=True)
  parser.add_argument("--toy", action="store_true")
  args = parser.parse_args(argv)
  if args.experiment not in LAYERS[args.toy]:
    parser.error(f"--experiment {args.experiment!r}: one of {', '.join(LAYERS[args.toy])}")
  rows = args.rows.split(",") if args.rows else None
  return turns.serve(lambda: prepare(args.experiment, args.toy, rows), args.json,
                     args.ready)
