"""The figure of a record of first updates (``lnorm.training.dynamics.trace``, one
per arm; scripts/reader_ln_dynamics.py): per update, the loss, the gradient before and
after its clip, Adam's second moment and normalised step for one parameter group,
the LSTM's saturation and its LN gain; and the growth of a perturbation of the
initial state along the sequence, at initialisation and at the last update."""

from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from lnorm.analysis import plotting

#: Panels drawn from the per-update columns: (column, title, log scale).
_PER_UPDATE = (
    ("loss", "training loss (chance: ln 10)", False),
    ("grad_norm", "gradient norm: before the clip (solid), handed to Adam (dashed)", True),
    ("{group}/sqrt_v_median", "median sqrt(v_hat), {group}", True),
    ("{group}/step_median", "median |m_hat| / sqrt(v_hat), {group}", True),
    ("cell_tanh_saturated", "share of |tanh(N(c))| > 0.99 (probe batch)", False),
    ("h_rms", "rms of the LSTM state h (probe batch)", False),
)


def _smooth(values: np.ndarray, window: int) -> np.ndarray:
  """A trailing mean over ``window`` updates (shorter at the start)."""
  sums = np.cumsum(np.insert(values, 0, 0.0))
  counts = np.minimum(np.arange(1, len(values) + 1), window)
  ends = np.arange(1, len(values) + 1)
  return (sums[ends] - sums[ends - counts]) / counts


def draw(arms: Mapping[str, Mapping[str, Any]], out: str, group: str,
         smooth: int = 10) -> list[str]:
  """``arms``: ``{name: trace record}``; writes ``out`` as .png and .svg and returns
  their paths. ``group``: the parameter group whose Adam moments are drawn. The loss
  is a trailing mean over ``smooth`` updates."""
  plt = plotting._pyplot()  # pylint: disable=protected-access
  panels = len(_PER_UPDATE) + 2
  columns = 4
  fig, axes = plt.subplots(math.ceil(panels / columns), columns,
                           figsize=(4.2 * columns, 3.4 * math.ceil(panels / columns)),
                           squeeze=False)
  axes = axes.ravel()
  colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
  for (name, record), colour in zip(arms.items(), colours):
    cols = {k: np.asarray(v, np.float64) for k, v in record["per_update"].items()}
    steps = cols["step"]
    for ax, (column, title, log) in zip(axes, _PER_UPDATE):
      key = column.format(group=group)
      if key not in cols:
        continue
      values = _smooth(cols[key], smooth) if key == "loss" else cols[key]
      ax.plot(steps, values, color=colour, lw=1.0, label=name)
      if key == "grad_norm":
        ax.plot(steps, cols["adam_input_norm"], color=colour, lw=0.8, ls="--")
      ax.set_title(title.format(group=group), fontsize=8)
      ax.set_yscale("log" if log else "linear")
      ax.set_xlabel("update", fontsize=8)
    probes = record["perturbation"]
    probed = record["perturbation_steps"]
    growth_ax, exponent_ax = axes[len(_PER_UPDATE)], axes[len(_PER_UPDATE) + 1]
    for probe, style in ((probes[0], "-"), (probes[-1], "--")):
      # -inf (a gradient below float32's range) is left out of the line.
      curve = np.asarray(probe["log_growth"], np.float64)
      growth_ax.plot(probed, curve / math.log(10), color=colour, ls=style, lw=1.0)
    exponent_ax.plot([p["step"] for p in probes], [p["lyapunov"] for p in probes],
                     color=colour, marker=".", lw=1.0)
  growth_ax.set_title("log10 |d(u . h_t) / d(c0, h0)|: at init (solid), at the end "
                      "(dashed)", fontsize=8)
  growth_ax.set_xlabel("passage token", fontsize=8)
  exponent_ax.set_title("growth per token (finite-time Lyapunov estimate)", fontsize=8)
  exponent_ax.axhline(0.0, color="grey", lw=0.5)
  exponent_ax.set_xlabel("update", fontsize=8)
  axes[0].axhline(math.log(10), color="grey", lw=0.5)
  for ax in axes[panels:]:
    ax.set_visible(False)
  for ax in axes[:panels]:
    ax.tick_params(labelsize=7)
  axes[0].legend(fontsize=7)
  fig.tight_layout()
  return plotting._save(fig, out)  # pylint: disable=protected-access
