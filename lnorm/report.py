"""Every finished run under a directory, beside the published number, in one table.

A run is finished when its last epoch record reaches the configured ``num_epochs``.
Each row is one (run setting, metric): the paper's value and its source
(``lnorm.results``), the measured final value (and the best epoch's), where the data
came from and how much of it, and the epochs run against the paper's. Runs on
synthetic data, or on fewer training examples than the full dataset, are marked.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Sequence

from lnorm import plotting
from lnorm import results
from lnorm import sweep as sweep_lib
from lnorm.errors import UserError


@dataclasses.dataclass
class Row:
  experiment: str
  setting: str
  metric: str
  paper: str
  source: str
  measured: str
  best: str
  data: str
  epochs: str
  run: str


def _finished(run: plotting.Run) -> bool:
  target = run.config.get("num_epochs")
  return bool(run.epochs) and (target is None or int(run.epochs[-1].get("epoch", 0)) >= target)


def data_description(run: plotting.Run) -> tuple[str, bool]:
  """('files, 55000 train', partial?) from the run's config.json data record."""
  data = run.data or {}
  name = data.get("name") or run.config.get("data.name", "?")
  source = data.get("source", "?")
  sizes = data.get("num_examples", {}) or {}
  train = sizes.get("train")
  seen = sum(v for k, v in sizes.items() if k in ("train", "validation"))
  marks = []
  if data.get("synthetic") or source == "synthetic":
    marks.append("SYNTHETIC")
  full = results.FULL_TRAIN_EXAMPLES.get(name)
  fraction = run.config.get("data.subset_fraction", 1.0)
  partial = (full is not None and seen and seen < full) or (
      isinstance(fraction, (int, float)) and fraction < 1)
  if partial:
    marks.append(f"PARTIAL ({seen / full:.0%} of {name})" if full and seen else "PARTIAL")
  text = f"{name} ({source}), {train if train is not None else '?'} train"
  if marks:
    text += "; " + ", ".join(marks)
  return text, bool(marks)


def _fmt(v: float | None) -> str:
  if v is None:
    return "—"
  if isinstance(v, float) and not math.isfinite(v):
    return str(v)
  return f"{v:.4g}"


def _best(run: plotting.Run, metric: str) -> float | None:
  values = [results.metric_value(r, metric) for r in run.epochs]
  values = [v for v in values if v is not None and math.isfinite(v)]
  if not values:
    return None
  return (min if sweep_lib.lower_is_better(metric) else max)(values)


def _default_metrics(run: plotting.Run) -> list[str]:
  last = run.epochs[-1]
  return [k for k in last if k.startswith("test/")][:2] or [
      k for k in last if k.startswith("validation/")][:2] or ["train/loss"]


def collect(paths: Sequence[str]) -> tuple[list[Row], list[str]]:
  """Report rows for the finished runs under ``paths``, and the unfinished runs."""
  runs = plotting.load_runs(paths)
  finished = [r for r in runs if _finished(r)]
  unfinished = [r.path for r in runs if not _finished(r)]
  by_experiment: dict[str, list[plotting.Run]] = {}
  for r in finished:
    by_experiment.setdefault(r.config.get("experiment", "?"), []).append(r)
  rows = []
  for experiment, group in by_experiment.items():
    plotting.label_runs(group)  # The setting: what differs within the experiment.
    for run in group:
      data, _ = data_description(run)
      published = results.published_for(experiment, run.config)
      epochs_run = int(run.epochs[-1].get("epoch", 0))
      metrics = [(p.metric, p) for p in published] or [
          (m, None) for m in _default_metrics(run)]
      for metric, p in metrics:
        measured = results.metric_value(run.epochs[-1], metric)
        paper_epochs = f" (paper: {p.paper_epochs})" if p and p.paper_epochs else ""
        paper = "—" if p is None else (_fmt(p.value) if p.value is not None else
                                       f"not given ({p.note})")
        rows.append(Row(
            experiment=experiment, setting=run.label, metric=metric, paper=paper,
            source=p.source if p else "no published number",
            measured=_fmt(measured), best=_fmt(_best(run, metric)), data=data,
            epochs=f"{epochs_run}{paper_epochs}", run=run.path))
  return rows, unfinished


COLUMNS = (("experiment", "experiment"), ("setting", "setting"), ("metric", "metric"),
           ("paper", "paper"), ("source", "source"), ("measured", "measured (final)"),
           ("best", "best epoch"), ("data", "data: source, amount"), ("epochs", "epochs run"))


def markdown(rows: Sequence[Row], unfinished: Sequence[str] = ()) -> str:
  if not rows:
    raise UserError("No finished runs found (a run is finished when it logged its last "
                    "epoch).")
  lines = ["| " + " | ".join(title for _, title in COLUMNS) + " |",
           "|" + "|".join("---" for _ in COLUMNS) + "|"]
  for row in rows:
    lines.append("| " + " | ".join(str(getattr(row, k)).replace("|", "\\|")
                                   for k, _ in COLUMNS) + " |")
  if unfinished:
    lines += ["", f"Not finished (left out): {', '.join(os.path.relpath(u) for u in unfinished)}"]
  return "\n".join(lines) + "\n"
