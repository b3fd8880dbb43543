"""Curves from ``metrics.jsonl``: any metric against step or epoch, and the papers'
figures by name.

Runs are found by their ``metrics.jsonl`` (a run directory, or any directory above
several, such as a sweep's). Each line is labelled by the config fields in which its
run differs from the others (``config.json``), else by its directory name. Figures
are written as PNG and SVG with matplotlib's non-interactive Agg backend, so they
work on a headless machine and in tests.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Mapping, Sequence

from lnorm import compare
from lnorm.errors import UserError
from lnorm.runs import Run, label_runs, load_runs, summary_metrics


def _pyplot():
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  return plt


def _save(fig, out: str) -> list[str]:
  """Writes ``out`` (without extension) as .png and .svg."""
  base, ext = os.path.splitext(out)
  if ext.lower() not in (".png", ".svg"):
    base = out
  os.makedirs(os.path.dirname(os.path.abspath(base)), exist_ok=True)
  paths = [base + ".png", base + ".svg"]
  fig.savefig(paths[0], dpi=120, bbox_inches="tight")
  fig.savefig(paths[1], bbox_inches="tight")
  _pyplot().close(fig)
  return paths


def _draw(ax, runs: Sequence[Run], metric: str, x: str, logy: bool, title: str = "",
          target: str | None = None) -> int:
  """One line per run that logged ``metric``; with ``target`` (a baseline such as
  ``norm=none``) also the baseline's best and where each run first reaches it."""
  colors = {}
  for r in runs:
    xs, ys = r.series(metric, x)
    if not xs:
      continue
    marker = "o" if len(xs) <= 30 else None
    (line,) = ax.plot(xs, ys, label=r.label, marker=marker, markersize=3)
    colors[r.path] = line.get_color()
  if target and colors:
    _draw_target(ax, [r for r in runs if r.path in colors and r.records(metric)], metric, x,
                 target, colors)
  if logy and colors:
    ax.set_yscale("log")
    from matplotlib.ticker import NullFormatter  # pylint: disable=g-import-not-at-top
    ax.yaxis.set_minor_formatter(NullFormatter())  # Crowded labels on a narrow range.
  ax.set_xlabel(x)
  ax.set_ylabel(metric)
  ax.set_title(title or metric)
  ax.grid(True, alpha=0.3)
  if colors:
    ax.legend(fontsize="small")
  return len(colors)


def _draw_target(ax, runs: Sequence[Run], metric: str, x: str, baseline: str,
                 colors: Mapping[str, str]) -> None:
  """The target of ``lnorm compare`` as a dashed line, each run's crossing as a star."""
  for c in compare.compare(runs, metric, baseline):
    where = f", {c.context}" if c.context else ""
    ax.axhline(c.target, color="0.35", linestyle="--", linewidth=1,
               label=f"target: {c.baseline_group.setting}'s best{where}")
    for result in (res for g in c.groups for res in g.runs if res.reached):
      at = result.step if x == "step" else result.epoch
      if at is not None:
        ax.plot([at], [result.value], linestyle="none", marker="*", markersize=11,
                markeredgecolor="black", markeredgewidth=0.5, color=colors[result.run.path],
                zorder=3)


def plot_metrics(runs: Sequence[Run], metrics: Sequence[str], out: str, x: str = "epoch",
                 logy: bool = False, title: str = "", target: str | None = None) -> list[str]:
  """One panel per metric, one line per run; returns the PNG and SVG paths.

  ``target``: a baseline (``norm=none``) whose best value each panel draws as a line,
  with a star where each run first reaches it (see ``lnorm.compare``). Without a
  ``title``, runs of one experiment are titled by it (the legend then names only what
  differs between them).
  """
  if x not in ("epoch", "step"):
    raise UserError(f"--x must be 'epoch' or 'step', not {x!r}.")
  plt = _pyplot()
  fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.8), squeeze=False)
  drawn = 0
  for ax, metric in zip(axes[0], metrics):
    drawn += _draw(ax, runs, metric, x, logy, target=target)
  if not drawn:
    plt.close(fig)
    available = sorted({k for r in runs for p in r.points for k in p if k not in ("step", "epoch")})
    raise UserError(f"No run logged {', '.join(metrics)}. Metrics found: {', '.join(available)}.")
  experiments = {r.config.get("experiment") for r in runs} - {None}
  title = title or (experiments.pop() if len(experiments) == 1 else "")
  if title:
    fig.suptitle(title)
  return _save(fig, out)


# --- the papers' figures -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Panel:
  metrics: tuple[str, ...]  # The first one a run logged is drawn.
  where: Mapping[str, Any]  # Config fields a run must have, e.g. {"batch_size": 128}.
  title: str
  logy: bool = False


@dataclasses.dataclass(frozen=True)
class Figure:
  experiment: str
  description: str
  panels: tuple[Panel, ...]
  columns: int = 2


FIGURES = {
    "ln-fig6": Figure(
        "perm_mnist",
        "LN paper Figure 6: permutation-invariant MNIST, train NLL and test error per "
        "epoch for the baseline, BN and LN at batch sizes 128 and 4.",
        (Panel(("train/nll", "train/loss"), {"batch_size": 128}, "train NLL, batch 128", True),
         Panel(("test/error",), {"batch_size": 128}, "test error, batch 128"),
         Panel(("train/nll", "train/loss"), {"batch_size": 4}, "train NLL, batch 4", True),
         Panel(("test/error",), {"batch_size": 4}, "test error, batch 4"))),
    "ln-fig4": Figure(
        "draw",
        "LN paper Figure 4: DRAW on binarized MNIST, the test variational bound (nats) per "
        "epoch for the baseline, WN and LN.",
        (Panel(("test/nll_bound", "test/bound", "test/nll"), {}, "test variational bound (nats)"),),
        columns=1),
    "bln-cifar": Figure(
        "bln_cifar",
        "BLN paper sec. 4: CIFAR-10 LeNet-5, test error per epoch for BLN, BN and LN at "
        "batch sizes 25 and 1.",
        (Panel(("test/error",), {"batch_size": 25}, "test error, batch 25"),
         Panel(("test/error",), {"batch_size": 1}, "test error, batch 1"))),
    "bln-imdb": Figure(
        "bln_imdb",
        "BLN paper sec. 4: IMDB LSTM, test error per epoch for BLN, BN and LN at batch "
        "sizes 25 and 1.",
        (Panel(("test/error",), {"batch_size": 25}, "test error, batch 25"),
         Panel(("test/error",), {"batch_size": 1}, "test error, batch 1"))),
}


def _matches(run: Run, where: Mapping[str, Any]) -> bool:
  return all(k in run.config and str(run.config[k]) == str(v) for k, v in where.items())


def plot_figure(name: str, runs: Sequence[Run], out: str, x: str = "epoch",
                target: str | None = None) -> list[str]:
  """Lays out the paper's figure ``name`` (see FIGURES) from ``runs``; ``target`` as in
  :func:`plot_metrics`, per panel."""
  if name not in FIGURES:
    raise UserError(f"Unknown figure {name!r}. Figures: {', '.join(sorted(FIGURES))}.")
  spec = FIGURES[name]
  runs = [r for r in runs if r.config.get("experiment", spec.experiment) == spec.experiment]
  if not runs:
    raise UserError(f"Figure {name} needs runs of experiment {spec.experiment!r}; none found.")
  plt = _pyplot()
  cols = min(spec.columns, len(spec.panels))
  rows = math.ceil(len(spec.panels) / cols)
  fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows), squeeze=False)
  drawn = 0
  for ax, panel in zip(axes.flat, spec.panels):
    chosen = [r for r in runs if _matches(r, panel.where)]
    label_runs([r for r in chosen])  # Within a panel, only what differs there.
    metric = next((m for m in panel.metrics if any(r.series(m, x)[0] for r in chosen)),
                  panel.metrics[0])
    n = _draw(ax, chosen, metric, x, panel.logy, panel.title, target)
    if not n:
      ax.text(0.5, 0.5, "no runs", ha="center", va="center", transform=ax.transAxes)
    drawn += n
  for ax in list(axes.flat)[len(spec.panels):]:
    ax.set_visible(False)
  label_runs(runs)
  if not drawn:
    plt.close(fig)
    wanted = "; ".join(f"{p.title}: {', '.join(p.metrics)}"
                       + (f" at {dict(p.where)}" if p.where else "") for p in spec.panels)
    raise UserError(f"Figure {name}: no run matches any panel ({wanted}).")
  fig.suptitle(spec.description, fontsize="small", wrap=True)
  fig.tight_layout()
  return _save(fig, out)


def figures_for(experiment: str | None) -> list[str]:
  return [n for n, f in FIGURES.items() if f.experiment == experiment]


def default_metrics(runs: Sequence[Run]) -> list[str]:
  """The training loss and the test (else validation) metrics, for a quick look."""
  metrics = summary_metrics([p for r in runs for p in r.epochs])
  test = [m for m in metrics if m.startswith("test/")] or [
      m for m in metrics if m.startswith("validation/")]
  train = [m for m in metrics if m.startswith("train/")][:1]
  return (train + test)[:4]


def sweep_figures(sweep_dir: str, experiment: str | None) -> list[str]:
  """Everything a finished sweep draws: the paper's figure if one matches, and the
  default metrics, into ``sweep_dir/figures``."""
  runs = load_runs([sweep_dir])
  out_dir = os.path.join(sweep_dir, "figures")
  paths = []
  for name in figures_for(experiment):
    try:
      paths += plot_figure(name, runs, os.path.join(out_dir, name))
    except UserError:
      pass  # The sweep does not cover this figure's settings.
  metrics = default_metrics(runs)
  if metrics:
    paths += plot_metrics(runs, metrics, os.path.join(out_dir, "curves"),
                          logy=False, title=os.path.basename(os.path.abspath(sweep_dir)))
  return paths
