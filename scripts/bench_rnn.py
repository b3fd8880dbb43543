"""Forward+backward time of one recurrent layer: ours vs flax vs PyTorch.

    python scripts/bench_rnn.py                 # batch 32, 100 steps, input 57, hidden 400
    python scripts/bench_rnn.py --repeats 20 --hidden 256
    python scripts/bench_rnn.py --torch-threads 1,2 --json perf/rnn.json
    python scripts/bench_rnn.py --rows gru gru_scan torch_gru   # only these rows
    python scripts/bench_rnn.py --rows ln_lstm dyt_lstm scalenorm_lstm ln_simple_lstm
    python scripts/bench_rnn.py --batch 64 --hidden 240 --input 240   # the reader's layer

The default size is the handwriting model's first layer (docs/experiments.md sec. 3),
for the LSTM and the GRU rows alike. Each
row times a jitted (or eager, for PyTorch) forward+backward of ``sum(h^2)/B`` with
respect to the parameters and the input, warm-up excluded, median of ``--repeats``.
All rows are measured in the same run, their repeats interleaved, so that the ratios
share the machine's load.
The PyTorch rows are skipped with a message when torch is not installed. ``--json PATH``
also writes the rows, the ratios, the arguments and the machine to a JSON file.

On an NVIDIA GPU the rows run as the experiments do there (``lstm_impl=auto``): the
plain LSTM through cuDNN, the normalized cells through the Pallas step kernels, and
each family has a ``*_pallas`` twin (``impl='pallas'``: the plain GRU's is the only
way to time it through the kernels) and a ``*_fused`` one (``impl='scan'``, lnorm's own
recurrence, what ran there before the kernels). Elsewhere those rows run only when
``--rows`` names them: the kernels are then interpreted, which times nothing useful.
"""

from __future__ import annotations

import argparse
import statistics
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from lnorm.rnn import RecurrentLayer, implementation, make_gru_cell, make_lstm_cell
from lnorm.training import process
from lnorm.training import throughput


def _measure(runners: dict, repeats: int, warmup: int = 2) -> dict:
  """Median and minimum ms per runner. The repeats are interleaved (every runner once
  per round), so that a change in the load of a shared machine hits all rows alike."""
  for fn in runners.values():
    for _ in range(warmup):
      fn()
  times = {name: [] for name in runners}
  for _ in range(repeats):
    for name, fn in runners.items():
      start = time.perf_counter()
      fn()
      times[name].append((time.perf_counter() - start) * 1e3)
  return {name: (statistics.median(t), min(t)) for name, t in times.items()}


class NaiveLNLSTMCell(nn.RNNCellBase):
  """The usual first attempt: both projections and every LN inside the scanned cell."""

  features: int

  @nn.compact
  def __call__(self, carry, x):
    c, h = carry
    ln = lambda name: nn.LayerNorm(epsilon=1e-5, use_fast_variance=False, name=name)
    gates = (ln("ln_h")(nn.Dense(4 * self.features, use_bias=False)(h))
             + ln("ln_x")(nn.Dense(4 * self.features)(x)))
    f, i, o, g = jnp.split(gates, 4, axis=-1)
    c = nn.sigmoid(f) * c + nn.sigmoid(i) * jnp.tanh(g)
    h = nn.sigmoid(o) * jnp.tanh(ln("ln_c")(c))
    return (c, h), h

  @nn.nowrap
  def initialize_carry(self, rng, input_shape):
    shape = tuple(input_shape[:-1]) + (self.features,)
    return jnp.zeros(shape), jnp.zeros(shape)

  @property
  def num_feature_axes(self):
    return 1


#: Our layers: row name -> (cell factory, variant). Each row runs the layer as the
#: experiments do (the fused recurrence, except for DyT, which has none and scans);
#: its ``_scan`` twin scans the cell step by step.
OUR_ROWS = {
    "lstm": (make_lstm_cell, "none"), "ln_lstm": (make_lstm_cell, "ln"),
    "rms_lstm": (make_lstm_cell, "rms"),
    "gru": (make_gru_cell, "none"), "ln_gru": (make_gru_cell, "ln"),
    "rms_gru": (make_gru_cell, "rms"),
    **{f"{norm}_{kind}": (make, norm) for norm in ("dyt", "scalenorm", "ln_simple")
       for kind, make in (("lstm", make_lstm_cell), ("gru", make_gru_cell))},
}
#: LN's successors, in the LSTM and in the GRU.
SUCCESSOR_ROWS = {kind: tuple(f"{norm}_{kind}" for norm in ("dyt", "scalenorm", "ln_simple"))
                  for kind in ("lstm", "gru")}


def _our_layer(name: str, hidden: int, unroll: int, fused: bool, impl: str):
  make, variant = OUR_ROWS[name]
  layer = RecurrentLayer(make(variant, impl=impl), hidden, unroll=unroll, fused=fused)
  return layer, lambda v, x: layer.apply(v, x).outputs


#: Each of our rows' twins: suffix -> (RecurrentLayer's ``fused``, the cells' ``impl``).
#: ``_fused`` is lnorm's own recurrence (``impl='scan'``), which a CPU's rows run anyway.
TWINS = {"": (True, "auto"), "_scan": (False, "auto"), "_pallas": (True, "pallas"),
         "_fused": (True, "scan")}
#: The twins that time the Pallas kernels, and on a GPU what they replaced.
PALLAS_TWINS = ("_pallas", "_fused")


def jax_models(hidden: int, unroll: int = 1, naive: bool = True,
               pallas: bool = False) -> dict:
  """The jax rows: name -> (flax module, ``apply(variables, x)`` returning h [B, T, H]).

  ``lstm``, ``ln_lstm``, ``rms_lstm``, ``gru``, ``ln_gru`` and ``rms_gru`` are our
  layer as the experiments run it (on a CPU the fused recurrences of lnorm.rnn.fused
  and lnorm.rnn.fused_gru); ``*_scan`` the same layer scanning the cell step by step
  (``fused=False``), as every cell with recurrent BN runs. ``dyt_*``, ``scalenorm_*``
  and ``ln_simple_*`` (LSTM and GRU) are LN's successors; DyT has no fused
  recurrence, so its row and its twin both scan. ``flax_optimized_lstm``
  and ``flax_gru`` are flax's cells under ``nn.RNN`` (flax's GRU is the cuDNN
  variant, reset gate on U h + b, with biases on both halves). ``unroll`` is our
  layer's scan unroll; ``naive`` adds the naive flax LN-LSTM row; ``pallas`` the
  ``*_pallas`` twins, through the Pallas step kernels, and the ``*_fused`` ones, through
  lnorm's own recurrence (``impl='scan'``: what a GPU's rows ran before the kernels).
  """
  models = {}
  twins = {k: v for k, v in TWINS.items() if pallas or k not in PALLAS_TWINS}
  for family in (("lstm", "ln_lstm"), ("rms_lstm",), ("gru", "ln_gru", "rms_gru"),
                 SUCCESSOR_ROWS["lstm"], SUCCESSOR_ROWS["gru"]):
    for suffix, (fused, impl) in twins.items():
      for name in family:
        models[name + suffix] = _our_layer(name, hidden, unroll, fused, impl)
    if family[0] == "lstm":
      models["flax_optimized_lstm"] = (nn.RNN(nn.OptimizedLSTMCell(hidden)), None)
      if naive:
        models["naive_flax_ln_lstm"] = (nn.RNN(NaiveLNLSTMCell(hidden)), None)
  models["flax_gru"] = (nn.RNN(nn.GRUCell(hidden)), None)
  return models


def train_step(model, x, apply=None):
  """(jitted value_and_grad of sum(h^2)/B w.r.t. the parameters and x, parameters)."""
  # Jitted, the init is one compiled program instead of one per op, seconds less each.
  variables = jax.jit(model.init)(jax.random.key(0), x)
  apply = apply or (lambda v, x: model.apply(v, x))

  def loss(params, x):
    h = apply({"params": params}, x)
    return jnp.sum(jnp.square(h)) / x.shape[0]

  return jax.jit(jax.value_and_grad(loss, argnums=(0, 1))), variables["params"]


def _jax_runner(model, x, apply=None):
  """(runner, compile seconds) of a jitted value_and_grad of sum(h^2)/B."""
  step, params = train_step(model, x, apply)
  start = time.perf_counter()
  compiled = step.lower(params, x).compile()
  compile_s = time.perf_counter() - start
  run = lambda: jax.block_until_ready(compiled(params, x))
  return run, compile_s


def _torch_runners(args, x_np):
  try:
    import torch
  except ImportError:
    print("torch is not installed: skipping the PyTorch rows "
          "(pip install 'torch>=2.3', see pyproject's [bench] extra).")
    return {}
  torch.manual_seed(0)
  x = torch.tensor(x_np, requires_grad=True)

  lstm = torch.nn.LSTM(args.input, args.hidden, batch_first=True)

  def fused():
    lstm.zero_grad(set_to_none=True)
    h, _ = lstm(x)
    (h.square().sum() / x.shape[0]).backward()


  class EagerLNLSTM(torch.nn.Module):
    """The usual PyTorch LN-LSTM: a Python loop over time around an LSTM cell."""

    def __init__(self, n_in, n_hidden):
      super().__init__()
      self.hidden = n_hidden
      self.w_x = torch.nn.Linear(n_in, 4 * n_hidden)
      self.w_h = torch.nn.Linear(n_hidden, 4 * n_hidden, bias=False)
      self.ln_x = torch.nn.LayerNorm(4 * n_hidden)
      self.ln_h = torch.nn.LayerNorm(4 * n_hidden)
      self.ln_c = torch.nn.LayerNorm(n_hidden)

    def forward(self, x):
      b = x.shape[0]
      h = x.new_zeros(b, self.hidden)
      c = x.new_zeros(b, self.hidden)
      outs = []
      for t in range(x.shape[1]):
        gates = self.ln_x(self.w_x(x[:, t])) + self.ln_h(self.w_h(h))
        f, i, o, g = gates.chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(self.ln_c(c))
        outs.append(h)
      return torch.stack(outs, dim=1)

  ln_lstm = EagerLNLSTM(args.input, args.hidden)

  def eager():
    ln_lstm.zero_grad(set_to_none=True)
    h = ln_lstm(x)
    (h.square().sum() / x.shape[0]).backward()

  gru = torch.nn.GRU(args.input, args.hidden, batch_first=True)

  def fused_gru():
    gru.zero_grad(set_to_none=True)
    h, _ = gru(x)
    (h.square().sum() / x.shape[0]).backward()

  def with_threads(fn, n):
    def run():
      torch.set_num_threads(n)
      fn()
    return run

  # On a loaded machine PyTorch's OpenMP pool can be many times slower with 2
  # threads than with 1 (its barriers wait for descheduled threads): every thread
  # count in --torch-threads is timed and the fastest is taken as the PyTorch row.
  runners = {}
  for n in args.torch_threads:
    runners[f"torch_lstm@{n}"] = with_threads(fused, n)
    runners[f"torch_eager_ln_lstm@{n}"] = with_threads(eager, n)
    runners[f"torch_gru@{n}"] = with_threads(fused_gru, n)
  return {name: run for name, run in runners.items() if _wanted(args, name)}


def _wanted(args, name: str) -> bool:
  """Whether ``--rows`` (None: all) selects the row ``name`` (PyTorch's without @n)."""
  return args.rows is None or name.split("@")[0] in args.rows


#: The ratios printed and recorded, numerator first; those whose rows ran.
RATIOS = (("ln_lstm", "naive_flax_ln_lstm"), ("ln_lstm", "torch_eager_ln_lstm"),
          ("ln_lstm", "lstm"), ("lstm", "torch_lstm"), ("lstm", "flax_optimized_lstm"),
          ("lstm", "lstm_scan"), ("ln_lstm", "ln_lstm_scan"),
          ("flax_optimized_lstm", "torch_lstm"),
          ("naive_flax_ln_lstm", "torch_eager_ln_lstm"),
          ("rms_lstm", "ln_lstm"), ("rms_lstm", "rms_lstm_scan"),
          ("gru", "gru_scan"), ("ln_gru", "ln_gru_scan"), ("rms_gru", "rms_gru_scan"),
          ("ln_gru", "gru"), ("rms_gru", "gru"), ("rms_gru", "ln_gru"),
          ("gru", "torch_gru"), ("gru", "flax_gru"), ("flax_gru", "torch_gru"),
          # LN's successors against LN, each as the experiments run it, and both
          # scanned step by step.
          *((row + suffix, f"ln_{kind}{suffix}") for kind in ("lstm", "gru")
            for row in SUCCESSOR_ROWS[kind] for suffix in ("", "_scan")),
          # The Pallas kernels (issue 59's goals on a GPU, where ``lstm`` is cuDNN's:
          # LN-LSTM / LSTM <= 1.5, LN-GRU / GRU <= 1.3), and against the scans.
          ("ln_lstm_pallas", "lstm"), ("ln_gru_pallas", "gru"),
          ("ln_gru_pallas", "gru_pallas"), ("gru_pallas", "gru"),
          ("ln_lstm_pallas", "ln_lstm_fused"), ("ln_gru_pallas", "ln_gru_fused"),
          ("rms_lstm_pallas", "ln_lstm_pallas"), ("rms_gru_pallas", "ln_gru_pallas"))


def add_shape_arguments(parser: argparse.ArgumentParser) -> None:
  """The layer and sequence sizes (handwriting's by default), shared with
  scripts/hlo_rnn_step.py so that its counts describe the step timed here."""
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--steps", type=int, default=100)
  parser.add_argument("--input", type=int, default=57)
  parser.add_argument("--hidden", type=int, default=400)
  parser.add_argument("--unroll", type=int, default=1, help="our layer's scan unroll")


def random_inputs(args) -> np.ndarray:
  """A [batch, steps, input] float32 sequence, the same in every script and run."""
  return np.random.default_rng(0).standard_normal(
      (args.batch, args.steps, args.input)).astype(np.float32)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  add_shape_arguments(parser)
  parser.add_argument("--repeats", type=int, default=10)
  parser.add_argument("--torch-threads", type=lambda s: [int(n) for n in s.split(",")],
                      default=[1], help="PyTorch intra-op thread counts to try, e.g. 1,2")
  parser.add_argument("--no-naive", action="store_true",
                      help="skip the naive flax LN-LSTM row")
  parser.add_argument("--rows", nargs="+", default=None, metavar="ROW",
                      help="time only these rows (PyTorch's without the @threads)")
  throughput.add_json_flag(parser)
  args = parser.parse_args(argv)
  process.set_up()  # As `lnorm train` runs: one XLA:CPU thread ($PJRT_NPROC), freed memory kept.

  x_np = random_inputs(args)
  x = jnp.asarray(x_np)
  print(f"batch {args.batch}, steps {args.steps}, input {args.input}, hidden "
        f"{args.hidden}; forward+backward, median of {args.repeats}; jax "
        f"{jax.__version__} on {jax.devices()[0].platform}")

  runners, compile_s = {}, {}
  # Interpreted, the kernels time nothing useful: only on request without an NVIDIA GPU.
  pallas = implementation.on_nvidia_gpu() or any(
      row.endswith(PALLAS_TWINS) for row in args.rows or ())
  for name, (model, apply) in jax_models(args.hidden, args.unroll, naive=not args.no_naive,
                                         pallas=pallas).items():
    if _wanted(args, name):
      runners[name], compile_s[name] = _jax_runner(model, x, apply)
  runners.update(_torch_runners(args, x_np))
  measured = _measure(runners, args.repeats)
  rows = {}
  for name, (median, best) in measured.items():
    base = name.split("@")[0]
    if base not in rows or median < rows[base][0]:
      rows[base] = (median, best, name)

  width = max(map(len, measured))
  print(f"{'row':<{width}}  {'median':>9}     {'min':>9}")
  for name, (median, best) in measured.items():
    extra = f"   (compile {compile_s[name]:.2f} s)" if name in compile_s else ""
    print(f"{name:<{width}}  {median:9.2f} ms  {best:9.2f} ms{extra}")
  if "ln_lstm" in compile_s:
    print(f"compile time of the LN-LSTM train step (value_and_grad, jit): "
          f"{compile_s['ln_lstm']:.2f} s")

  print("ratios of medians (PyTorch rows: the faster thread count, " + ", ".join(
      f"{k}: {v[2]}" for k, v in rows.items() if k.startswith("torch")) + ")")
  # The numerator and denominator name the timed rows (with the thread count for
  # PyTorch), so that each value is the ratio of two of the record's rows.
  ratio_records = [{"name": f"{a} / {b}", "numerator": rows[a][2], "denominator": rows[b][2],
                    "value": rows[a][0] / rows[b][0]}
                   for a, b in RATIOS if a in rows and b in rows]
  for r in ratio_records:
    print(f"{r['name']}: {r['value']:.2f}x")

  if args.json:
    row_records = [{"name": name, "median_ms": median, "min_ms": best,
                    "compile_s": compile_s.get(name)}
                   for name, (median, best) in measured.items()]
    throughput.write_json(args.json, throughput.bench_record(args, row_records, ratio_records))


if __name__ == "__main__":
  main()
