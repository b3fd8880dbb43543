"""Curves from ``metrics.jsonl``: any metric against step or epoch, and the papers'
figures by name (``FIGURES``), each in the paper's layout and against its horizontal
axis.

Runs are found by their ``metrics.jsonl`` (a run directory, or any directory above
several, such as a sweep's). Each line is labelled by its run's experiment when
several are plotted and by the config fields in which its run differs from the others
of its experiment (``lnorm.analysis.runs.label_runs``), else by its directory name. Figures
are written as PNG and SVG with matplotlib's non-interactive Agg backend, so they
work on a headless machine and in tests.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
import textwrap
from typing import Any, Mapping, Sequence

from lnorm.analysis import compare
from lnorm.analysis import seed_bands
from lnorm.analysis import specs
from lnorm.errors import UserError
from lnorm.analysis.runs import (LABEL_IGNORE, Run, is_ignored, is_seed, label_runs, load_runs,
                                 summary_metrics)
from lnorm.training.experiments import EXPERIMENTS


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
  # No date and fixed element ids: the same records draw the same bytes, so that a
  # regenerated figure shows in a diff only when what it draws changed.
  with _pyplot().rc_context({"svg.hashsalt": "lnorm"}):
    fig.savefig(paths[1], bbox_inches="tight", metadata={"Date": None})
  _pyplot().close(fig)
  return paths


def _draw(ax, runs: Sequence[Run], metric: str, x: str, logy: bool, title: str = "",
          target: str | None = None) -> int:
  """One line per run that logged ``metric``; with ``target`` (a baseline such as
  ``norm=none``) also the baseline's best and where each run first reaches it."""
  colors = _draw_lines(ax, runs, metric, x)
  if target and colors and not _derived(metric):
    _draw_target(ax, [r for r in runs if r.path in colors and r.records(metric)], metric, x,
                 target, colors)
  _finish_axes(ax, metric, x, logy, title or metric, bool(colors))
  return len(colors)


def _draw_lines(ax, runs: Sequence[Run], metric: str, x: str, name: str = "",
                style: str = "-", colors: Mapping[str, str] | None = None,
                logx: bool = False) -> dict[str, str]:
  """Draws ``metric`` of each run that logged it, labelled by the run (and ``name``),
  in the run's colour from ``colors`` if it has one; returns run path -> colour."""
  drawn = {}
  for r in runs:
    xs, ys = series(r, metric, x)
    if logx:  # Steps start at 1; a point at 0 has no place on a log axis.
      xs, ys = [a for a in xs if a > 0], [b for a, b in zip(xs, ys) if a > 0]
    if not xs:
      continue
    marker = "o" if len(xs) <= 30 else None
    color = (colors or {}).get(r.path)
    (line,) = ax.plot(xs, ys, style, label=f"{r.label} {name}".strip(), marker=marker,
                      markersize=3, color=color)
    drawn[r.path] = line.get_color()
  return drawn


def _finish_axes(ax, ylabel: str, x: str, logy: bool, title: str, drawn: bool,
                 logx: bool = False, legend: bool = True) -> None:
  if logy and drawn:
    ax.set_yscale("log")
    low, high = ax.get_ylim()
    if low > 0 and high / low >= 10:
      # Minor labels crowd an axis with a decade's major label; on a narrower range
      # (a short run's loss) they are the only numbers the axis has.
      from matplotlib.ticker import NullFormatter  # pylint: disable=g-import-not-at-top
      ax.yaxis.set_minor_formatter(NullFormatter())
  if logx and drawn:
    ax.set_xscale("log")
  ax.set_xlabel("updates" if x == "step" else x)
  ax.set_ylabel(ylabel)
  ax.set_title(title)
  ax.grid(True, alpha=0.3)
  if drawn and legend:
    ax.legend(fontsize="small")


#: A derived metric: ``exp(validation/token_nll)`` is the perplexity of a run that
#: logged only the per-token NLL.
_DERIVED = re.compile(r"^exp\((?P<metric>[^()]+)\)$")


def _derived(metric: str) -> re.Match | None:
  return _DERIVED.match(metric)


def series(run: Run, metric: str, x: str) -> tuple[list[float], list[float]]:
  """``run.series``, and for ``exp(m)`` the exponential of ``m``'s series (overflow to
  infinity, which matplotlib leaves out)."""
  derived = _derived(metric)
  if not derived:
    return run.series(metric, x)
  xs, ys = run.series(derived["metric"], x)
  return xs, [math.exp(y) if y < 700 else math.inf for y in ys]


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


def _save_panels(fig, runs: Sequence[Run], metrics: Sequence[str], drawn: int, title: str,
                 out: str) -> list[str]:
  """Saves a figure of metric panels, titled by ``title`` or the runs' one experiment;
  a UserError naming the metrics the runs did log when no panel drew anything."""
  if not drawn:
    _pyplot().close(fig)
    available = sorted({k for r in runs for p in r.points for k in p if k not in ("step", "epoch")})
    raise UserError(f"No run logged {', '.join(metrics)}. Metrics found: {', '.join(available)}.")
  experiments = {r.config.get("experiment") for r in runs} - {None}
  title = title or (experiments.pop() if len(experiments) == 1 else "")
  if title:
    fig.suptitle(title)
  return _save(fig, out)


def plot_metrics(runs: Sequence[Run], metrics: Sequence[str], out: str, x: str = "epoch",
                 logy: bool = False, title: str = "", target: str | None = None) -> list[str]:
  """One panel per metric, one line per run; returns the PNG and SVG paths.

  ``target``: a baseline (``norm=none``) whose best value each panel draws as a line,
  with a star where each run first reaches it (see ``lnorm.analysis.compare``). Without a
  ``title``, runs of one experiment are titled by it (the legend then names only what
  differs between them).
  """
  if x not in ("epoch", "step"):
    raise UserError(f"--x must be 'epoch' or 'step', not {x!r}.")
  plt = _pyplot()
  # Constrained layout keeps the figure's title clear of a panel's title.
  fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 3.8), squeeze=False,
                           layout="constrained")
  drawn = 0
  for ax, metric in zip(axes[0], metrics):
    drawn += _draw(ax, runs, metric, x, logy, target=target)
  return _save_panels(fig, runs, metrics, drawn, title, out)


#: One colour per normalizer, so that every experiment's figure draws LN alike.
NORM_COLORS = {"none": "black", "ln": "tab:blue", "rms": "tab:orange", "bn": "tab:green",
               "bln": "tab:red", "wn": "tab:purple", "ln_cell": "tab:brown",
               "dyt": "tab:pink", "scalenorm": "tab:olive", "ln_simple": "tab:cyan"}


def _band_color(runs: Sequence[Run]) -> str | None:
  norms = {str(r.config.get("norm")) for r in runs}
  return NORM_COLORS.get(norms.pop()) if len(norms) == 1 else None


#: More settings than this in one panel and their bands hide each other (the attentive
#: reader's seven): each setting then gets a panel of its own, the others' means
#: drawn thin and grey behind its band.
MAX_BANDS_PER_PANEL = 3
#: Panels per row of a figure with one panel per setting.
SETTING_COLUMNS = 4


@dataclasses.dataclass
class _Setting:
  """One setting's band of one metric (None: no point every seed logged), and its
  legend text."""
  label: str
  band: seed_bands.Band | None
  text: str
  color: str


def plot_seed_bands(runs: Sequence[Run], metrics: Sequence[str], out: str, x: str = "step",
                    logy: bool = False, title: str = "", logx: bool = False) -> list[str]:
  """Each setting's mean over its seeds with its 95% interval as a band
  (``lnorm.analysis.seed_bands``); returns the PNG and SVG paths. Up to
  MAX_BANDS_PER_PANEL settings share one panel per metric, their legend outside it;
  more get a panel each (a row per metric). A setting none of whose points every seed
  logged is said so, in a note or its own panel, never as an empty legend entry.
  ``logx``: a log horizontal axis, from the first update (Figure 5's)."""
  if x not in ("epoch", "step"):
    raise UserError(f"--x must be 'epoch' or 'step', not {x!r}.")
  groups = seed_bands.group_by_setting(runs)
  per_metric = [_settings(groups, metric, x, logx) for metric in metrics]
  drawn = sum(s.band is not None for settings in per_metric for s in settings)
  if len(groups) <= MAX_BANDS_PER_PANEL:
    fig = _shared_panels(metrics, per_metric, x, logy, logx)
  else:
    fig = _panel_per_setting(metrics, per_metric, x, logy, logx)
  return _save_panels(fig, runs, metrics, drawn, title, out)


def _settings(groups: Mapping[str, Sequence[Run]], metric: str, x: str,
              logx: bool) -> list[_Setting]:
  out = []
  # A normalizer keeps its colour across figures, unless two settings here share it
  # (the Transformer's placement cells, all LN): then each setting needs its own.
  colors = [_band_color(group) for group in groups.values()]
  if len(set(colors)) < len(colors):
    colors = [None] * len(colors)
  for i, (label, group) in enumerate(groups.items()):
    b = seed_bands.band(label, group, metric, x)
    if b is not None and logx:
      b = seed_bands.from_x(b, 1)
    seeds = f"{len(group)} seed{'s' if len(group) > 1 else ''}"
    diverged = sum(r.diverged for r in group)
    seeds += f", {diverged} diverged" if diverged else ""
    out.append(_Setting(label or "mean", b, f"{label or 'mean'} ({seeds})",
                        colors[i] or f"C{i % 10}"))
  return out


def _draw_band(ax, s: _Setting) -> None:
  (line,) = ax.plot(s.band.xs, s.band.mean, label=s.text, color=s.color, zorder=3,
                    marker="o" if len(s.band.xs) <= 30 else None, markersize=3)
  if s.band.seeds > 1:
    ax.fill_between(s.band.xs, s.band.low, s.band.high, color=line.get_color(), alpha=0.2,
                    linewidth=0, zorder=2)


_NOT_DRAWN = "no point that every seed logged"


def _shared_panels(metrics, per_metric, x, logy, logx):
  """One panel per metric, every setting in it, the legend to the right of it."""
  fig, axes = _pyplot().subplots(1, len(metrics), figsize=(7.5 * len(metrics), 4),
                                 squeeze=False, layout="constrained")
  for ax, metric, settings in zip(axes[0], metrics, per_metric):
    for s in settings:
      if s.band is not None:
        _draw_band(ax, s)
    drawn = any(s.band is not None for s in settings)
    _finish_axes(ax, f"{metric} (mean, 95% band)", x, logy, metric, drawn, logx, legend=False)
    if drawn:
      missing = [s.text for s in settings if s.band is None]
      legend = ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1),
                         borderaxespad=0, title=(f"not drawn ({_NOT_DRAWN}):\n"
                                                 + "\n".join(missing)) if missing else None,
                         title_fontsize="small")
      legend._legend_box.align = "left"  # pylint: disable=protected-access
  return fig


def _panel_per_setting(metrics, per_metric, x, logy, logx):
  """A row of panels per metric, one panel per setting: its band over the other
  settings' means in grey, on axes shared across the row."""
  count = len(per_metric[0])
  columns = min(count, SETTING_COLUMNS)
  rows_per_metric = -(-count // columns)
  fig, axes = _pyplot().subplots(rows_per_metric * len(metrics), columns, squeeze=False,
                                 sharex=True, sharey="row" if len(metrics) > 1 else True,
                                 figsize=(3.6 * columns, 2.9 * rows_per_metric * len(metrics)),
                                 layout="constrained")
  for m, (metric, settings) in enumerate(zip(metrics, per_metric)):
    cells = [axes[m * rows_per_metric + i // columns][i % columns]
             for i in range(rows_per_metric * columns)]
    for ax, s in zip(cells, settings):
      for other in settings:
        if other is not s and other.band is not None:
          ax.plot(other.band.xs, other.band.mean, color="0.75", linewidth=0.8, zorder=1)
      if s.band is not None:
        _draw_band(ax, s)
      else:
        ax.text(0.5, 0.5, _NOT_DRAWN, transform=ax.transAxes, ha="center", va="center",
                fontsize="small", color="0.2", zorder=4,
                bbox={"facecolor": "white", "edgecolor": "0.6", "boxstyle": "round"})
      _finish_axes(ax, f"{metric}", x, logy, s.text, s.band is not None, logx, legend=False)
      ax.title.set_fontsize("small")
    for i, ax in enumerate(cells):
      if i >= len(settings):
        ax.set_visible(False)
        continue
      # Labels once: the y axis at the left of a row, the x axis under a column's last
      # panel (the axes are shared).
      if i % columns:
        ax.set_ylabel("")
      if i + columns < len(settings):
        ax.set_xlabel("")
      else:  # Above an empty cell: its tick labels too, which sharing hid.
        ax.xaxis.set_tick_params(labelbottom=True)
  return fig


# --- the papers' figures -----------------------------------------------------------------


#: The figures are declared in their experiments' specs (lnorm.analysis.specs).
Line, Panel, Figure = specs.Line, specs.Panel, specs.Figure
FIGURES: dict[str, Figure] = specs.figures()


def _matches(run: Run, where: Mapping[str, Any]) -> bool:
  return all(k in run.config and str(run.config[k]) == str(v) for k, v in where.items())


def _choose(candidates: Sequence[str], runs: Sequence[Run], x: str) -> str:
  """The candidate metric to draw (see Panel.metrics)."""
  points = {m: max((len(series(r, m, x)[0]) for r in runs), default=0) for m in candidates}
  return next((m for m in candidates if points[m] >= 2),
              next((m for m in candidates if points[m]), candidates[0]))


def _of_experiment(name: str, spec: Figure, runs: Sequence[Run]) -> list[Run]:
  """The runs of the figure's experiment (runs without a config count as such);
  a UserError naming the experiments found when there are none, a warning naming
  the runs left out otherwise."""
  mine = [r for r in runs if r.config.get("experiment", spec.experiment) == spec.experiment]
  others = [r for r in runs if r not in mine]
  found = sorted({str(r.config.get("experiment")) for r in others})
  if not mine:
    raise UserError(
        f"Figure {name} needs runs of experiment {spec.experiment!r}; the runs given are "
        f"of {', '.join(found)} ({', '.join(r.path for r in others[:3])}"
        f"{', ...' if len(others) > 3 else ''}). Figures for those: "
        f"{', '.join(n for e in found for n in figures_for(e)) or 'none'}.")
  if others:
    logging.warning("Figure %s: left out %d runs of %s, not %s.", name, len(others),
                    ", ".join(found), spec.experiment)
  return mine


def plot_figure(name: str, runs: Sequence[Run], out: str, x: str | None = None,
                target: str | None = None) -> list[str]:
  """Lays out the paper's figure ``name`` (see FIGURES) from ``runs``, against the
  paper's horizontal axis unless ``x`` says otherwise; ``target`` as in
  :func:`plot_metrics`, per panel. A panel no run logged says so; the figure fails
  only when no panel has data."""
  if name not in FIGURES:
    raise UserError(f"Unknown figure {name!r}. Figures: {', '.join(sorted(FIGURES))}.")
  spec = FIGURES[name]
  x = x or spec.x
  runs = _of_experiment(name, spec, runs)
  # A panel for settings no run has (batch 128 in a sweep at batch 4) is left out; a
  # panel whose runs did not log its metric stays, saying what would log it.
  panels = [p for p in spec.panels if any(_matches(r, p.where) for r in runs)] or list(
      spec.panels)
  if len(panels) < len(spec.panels):
    left_out = [p for p in spec.panels if p not in panels]
    logging.info("Figure %s: drawn without its panels %s; no run has their settings (%s).",
                 name, ", ".join(f"'{p.title}'" for p in left_out),
                 "; ".join(dict.fromkeys(",".join(f"{k}={v}" for k, v in p.where.items())
                                         for p in left_out)))
  plt = _pyplot()
  cols = min(spec.columns, len(panels))
  rows = math.ceil(len(panels) / cols)
  fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.8 * rows + 0.6),
                           squeeze=False, layout="constrained")
  drawn = 0
  for ax, panel in zip(axes.flat, panels):
    n = _draw_panel(ax, panel, [r for r in runs if _matches(r, panel.where)], x, spec.logx,
                    target)
    if not n:
      _say_empty(ax, panel)
    drawn += n
  for ax in list(axes.flat)[len(panels):]:
    ax.set_visible(False)
  label_runs(runs)
  if not drawn:
    plt.close(fig)
    wanted = "; ".join(f"{p.title}: {', '.join(p.metrics)}"
                       + (f" at {dict(p.where)}" if p.where else "") for p in spec.panels)
    logged = sorted({k for r in runs for p in r.points for k in p if k not in ("step", "epoch")})
    raise UserError(f"Figure {name}: no run matches any panel ({wanted}). The runs logged: "
                    f"{', '.join(logged) or 'nothing'}.")
  # Wrapped to the figure's width by hand: constrained layout then makes room for it.
  fig.suptitle(textwrap.fill(spec.description, int(95 * cols)), fontsize="small")
  return _save(fig, out)


def _say_empty(ax, panel: Panel) -> None:
  """Writes into an empty panel what no run logged, and what would log it."""
  why = [f"no run logged {' or '.join(panel.metrics)}"] + (
      [f"({panel.missing})"] if panel.missing else [])
  ax.text(0.5, 0.5, "\n".join(textwrap.fill(w, 36) for w in why), ha="center",
          va="center", transform=ax.transAxes, fontsize="small")
  ax.set_xticks([])
  ax.set_yticks([])


def _draw_panel(ax, panel: Panel, runs: Sequence[Run], x: str, logx: bool,
                target: str | None) -> int:
  """The panel's main metric (and its other lines) for ``runs``; how many runs drew."""
  label_runs(runs)  # Within a panel, only what differs there.
  metric = _choose(panel.metrics, runs, x)
  if not panel.lines and not logx:
    return _draw(ax, runs, metric, x, panel.logy, panel.title, target)
  colors = _draw_lines(ax, runs, metric, x, panel.name, "-", logx=logx)
  drawn = [metric]
  for line in panel.lines:
    drawn.append(_choose(line.metrics, runs, x))
    _draw_lines(ax, runs, drawn[-1], x, line.name, line.style, colors, logx)
  _finish_axes(ax, ", ".join(drawn), x, panel.logy, panel.title, bool(colors), logx)
  return len(colors)


def default_name(metrics: Sequence[str], x: str = "epoch", logy: bool = False,
                 target: str | None = None) -> str:
  """A file name (no extension) that says what ``plot_metrics`` drew, so that plots of
  other metrics do not overwrite each other: ``train-loss+test-error_by_step_log``."""
  name = "+".join(re.sub(r"[^A-Za-z0-9_.-]+", "-", m).strip("-") for m in metrics)
  name += "_by_step" if x == "step" else ""
  name += "_log" if logy else ""
  name += f"_target-{re.sub(r'[^A-Za-z0-9_.=-]+', '-', target)}" if target else ""
  return name


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
  """Everything a finished sweep draws: each paper figure whose settings its members
  are (:func:`not_the_figures_settings`), and the default metrics, into
  ``sweep_dir/figures``."""
  runs = load_runs([sweep_dir])
  out_dir = os.path.join(sweep_dir, "figures")
  paths = []
  for name in figures_for(experiment):
    why = not_the_figures_settings(FIGURES[name], runs)
    if why:
      logging.info("Figure %s not drawn: %s.", name, why)
      continue
    try:
      paths += plot_figure(name, runs, os.path.join(out_dir, name))
    except UserError as e:  # E.g. no run logged a panel's metric.
      logging.info("Figure %s not drawn: %s", name, e)
  metrics = default_metrics(runs)
  if metrics:
    paths += plot_metrics(runs, metrics, os.path.join(out_dir, "curves"),
                          logy=False, title=os.path.basename(os.path.abspath(sweep_dir)))
  return paths


def not_the_figures_settings(spec: Figure, runs: Sequence[Run]) -> str | None:
  """Why the runs of a sweep are not the settings of the paper's figure ``spec``, or
  None when they are: the sweep's members (their overrides) vary the normalizer, and
  nothing but the normalizer, the seed and the figure's fields (:func:`figure_fields`)
  or what those determine (the steps per call of a batch size), each run at a value
  one of its panels shows. A learning-rate sweep is not Figure 6, whatever its batch
  size."""
  settings = [r.overrides for r in runs]
  keys = list(dict.fromkeys(k for s in settings for k in s if not is_ignored(k, LABEL_IGNORE)))
  varied = [k for k in keys if len({repr(s.get(k)) for s in settings}) > 1]
  figure = [k for k in varied if k == "norm" or is_seed(k) or k in figure_fields(spec)]
  others = [k for k in varied if k not in figure and not _determined(k, figure, settings)]
  if others:
    named = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    return f"the sweep varies {named}, which the figure does not"
  if "norm" not in varied:
    return "the sweep does not vary the normalizer, which the figure compares"
  shown_fields = {k for p in spec.panels for k in p.where}
  for r in runs:
    if not any(_matches(r, p.where) for p in spec.panels):
      at = ", ".join(f"{k}={r.config.get(k)}" for k in sorted(shown_fields))
      return f"its run {r.name} is at {at}, which no panel of the figure shows"
  return None


def _determined(key: str, by: Sequence[str], settings: Sequence[Mapping[str, Any]]) -> bool:
  """Whether each combination of the values of ``by`` comes with one value of ``key``."""
  seen: dict[tuple, str] = {}
  for s in settings:
    value = seen.setdefault(tuple(repr(s.get(k)) for k in by), repr(s.get(key)))
    if value != repr(s.get(key)):
      return False
  return True


def figure_fields(spec: Figure) -> set[str]:
  """The config fields the runs of a paper's figure differ in besides the normalizer
  and the seed: those its panels are drawn at (Figure 6's batch size), and those that
  name its experiment's variants in the benchmark, which are the paper's settings (the
  reader's LN gain, 1.0 and 0.1 in Figure 2)."""
  experiment = (specs.spec(spec.experiment) if spec.experiment in EXPERIMENTS else None)
  variants = [v for s in experiment.scales.values() for v in s.variants] if experiment else []
  return {k for p in spec.panels for k in p.where} | {k for v in variants for k in v}
