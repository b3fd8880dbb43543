"""The PyTorch side of the recurrent-layer comparison: cuDNN's LSTM and GRU
(``nn.LSTM``, ``nn.GRU``), and an LN-LSTM written the usual way, its cell in Python
called once per time step, eager or under ``torch.compile``.

Imported only where torch is installed (it is optional). Float32 matmuls may use TF32
(``torch.set_float32_matmul_precision('high')``), as JAX's default precision does on
an NVIDIA GPU, so that both sides compute alike.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from torch import nn


class LNLSTMCell(nn.Module):
  """One step of the LN paper's LN-LSTM: ``LN(W_x x) + LN(W_h h) + b``, gates (f, i, o,
  g), ``h = sigmoid(o) tanh(LN(c))``."""

  def __init__(self, n_in: int, n_hidden: int):
    super().__init__()
    self.w_x = nn.Linear(n_in, 4 * n_hidden, bias=False)
    self.w_h = nn.Linear(n_hidden, 4 * n_hidden, bias=False)
    self.bias = nn.Parameter(torch.zeros(4 * n_hidden))
    self.ln_x = nn.LayerNorm(4 * n_hidden)
    self.ln_h = nn.LayerNorm(4 * n_hidden)
    self.ln_c = nn.LayerNorm(n_hidden)

  def forward(self, x_t, h, c):
    gates = self.ln_x(self.w_x(x_t)) + self.ln_h(self.w_h(h)) + self.bias
    f, i, o, g = gates.chunk(4, dim=1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(self.ln_c(c))
    return h, c


class LNLSTM(nn.Module):
  """The cell over ``x [B, T, I]`` in a Python loop; ``compiled``: the cell under
  ``torch.compile`` (one graph, forward and backward, called at every step)."""

  def __init__(self, n_in: int, n_hidden: int, compiled: bool = False):
    super().__init__()
    self.hidden = n_hidden
    self.cell = LNLSTMCell(n_in, n_hidden)
    self.step = torch.compile(self.cell) if compiled else self.cell

  def forward(self, x):
    h = x.new_zeros(x.shape[0], self.hidden)
    c = x.new_zeros(x.shape[0], self.hidden)
    outs = []
    for t in range(x.shape[1]):
      h, c = self.step(x[:, t], h, c)
      outs.append(h)
    return torch.stack(outs, dim=1)


def device() -> torch.device:
  return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def sync(_: Any = None) -> None:
  """Waits for the device's queued work (nothing to wait for on a CPU)."""
  if torch.cuda.is_available():
    torch.cuda.synchronize()


def rows(x_np: np.ndarray, hidden: int, names) -> dict[str, Callable[[], None]]:
  """name -> a call of one forward and backward pass of ``sum(h^2) / B`` over ``x``,
  for the rows ``names`` among ``torch_lstm``, ``torch_gru``, ``torch_ln_lstm`` and
  ``torch_ln_lstm_compiled``."""
  torch.manual_seed(0)
  torch.set_float32_matmul_precision("high")
  dev = device()
  x = torch.tensor(x_np, device=dev, requires_grad=True)
  n_in = x_np.shape[-1]
  builders = {
      "torch_lstm": lambda: _Sequence(nn.LSTM(n_in, hidden, batch_first=True)),
      "torch_gru": lambda: _Sequence(nn.GRU(n_in, hidden, batch_first=True)),
      "torch_ln_lstm": lambda: LNLSTM(n_in, hidden),
      "torch_ln_lstm_compiled": lambda: LNLSTM(n_in, hidden, compiled=True),
  }
  out = {}
  for name in names:
    module = builders[name]().to(dev)

    def run(module=module):
      module.zero_grad(set_to_none=True)
      x.grad = None
      h = module(x)
      (h.square().sum() / x.shape[0]).backward()
    out[name] = run
  return out


class _Sequence(nn.Module):
  """``nn.LSTM``/``nn.GRU`` returning their outputs only."""

  def __init__(self, rnn: nn.Module):
    super().__init__()
    self.rnn = rnn

  def forward(self, x):
    return self.rnn(x)[0]
