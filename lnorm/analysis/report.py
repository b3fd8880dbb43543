"""Every finished run under a directory, beside the published number, in one table.

A run is finished when its epoch records reach the length its config asks for
(``num_epochs``, or ``max_steps`` updates).
Each row is one (run setting, metric): the paper's value and its source
(``lnorm.analysis.published``), the measured final value, the best value over every evaluation
with the epoch it was logged at, where the data came from and how much of it, and
the epochs run against the paper's. Runs on synthetic data, or on fewer training
examples than the full dataset, are marked.

When an experiment's finished runs differ in the normalizer, a section "Updates to
target" follows (``lnorm.analysis.compare``): on the experiment's main held-out metric, the
updates and time each normalizer needs to reach the best value of the baseline, no
normalization (``norm=none``) where it was run and else batch normalization, the
baseline of the BLN paper.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Sequence

from lnorm.analysis import compare
from lnorm.analysis import published as results
from lnorm.analysis import runs as runs_lib
from lnorm.errors import UserError
from lnorm.analysis.runs import Run


#: The baselines ``lnorm report`` tries, in order, for its updates-to-target tables.
REPORT_BASELINES = ("norm=none", "norm=bn")


@dataclasses.dataclass
class Row:
  experiment: str
  setting: str
  metric: str
  paper: str
  source: str
  measured: str
  best: str  # The best value over every evaluation (see _best).
  data: str
  epochs: str
  run: str
  best_epoch: str = ""  # Where the best value was logged.

  @property
  def best_at(self) -> str:
    """The best value and, in brackets, the epoch it was logged at."""
    return f"{self.best} ({self.best_epoch})" if self.best_epoch else self.best


def data_description(run: Run) -> tuple[str, bool]:
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
  if partial and isinstance(fraction, (int, float)) and fraction < 1:
    # A subset protocol (BLN's 20%) is named by its fraction; the share of the whole
    # dataset would count the held-out validation images too (28% of CIFAR-10).
    marks.append(f"PARTIAL ({fraction:.0%} training subset)")
  elif partial:
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


def _best(run: Run, metric: str) -> tuple[float | None, float | None]:
  """(best value, the epoch it was logged at) over the records ``lnorm compare`` takes
  its best from (mid-epoch evaluations included), so that the report's best and the
  comparison's target agree; the first such point where several tie."""
  source = run.epochs if runs_lib.is_training_metric(metric) else run.points
  found = [(results.metric_value(r, metric), r.get("epoch")) for r in source]
  found = [(v, e) for v, e in found if v is not None and math.isfinite(v)]
  if not found:
    return None, None
  sign = 1 if runs_lib.lower_is_better(metric) else -1
  return min(found, key=lambda ve: sign * ve[0])


def _epoch(epoch: float | None) -> str:
  return "" if not isinstance(epoch, (int, float)) else f"{round(float(epoch), 2):g}"


def _measured(run: Run, metric: str) -> float | None:
  """The last epoch record's value; for a metric measured after training (``lnorm
  evaluate`` writes ``eval/...`` points), the last point that carries it."""
  value = results.metric_value(run.epochs[-1], metric)
  if value is None and run.records(metric):
    value = results.metric_value(run.records(metric)[-1], metric)
  return value


def _reference_variants(run: Run, metric: str) -> list[tuple[str, float]]:
  """``eval/m`` measured on reference encoders, logged as ``eval_<encoder>/m``
  (skip-thoughts' random and bag-of-words encoders): (encoder=<name>, last value)."""
  split, _, name = metric.partition("/")
  if split != "eval":
    return []
  found = {}
  for record in run.points:
    for key, value in record.items():
      prefix, _, rest = key.partition("/")
      if (rest == name and prefix.startswith("eval_") and isinstance(value, (int, float))
          and not isinstance(value, bool)):
        found[prefix[len("eval_"):]] = float(value)
  return [(f"encoder={k}", v) for k, v in sorted(found.items())]


def _default_metrics(run: Run) -> list[str]:
  last = run.epochs[-1]
  return [k for k in last if k.startswith("test/")][:2] or [
      k for k in last if k.startswith("validation/")][:2] or ["train/loss"]


@dataclasses.dataclass
class Comparisons:
  """An experiment's updates-to-target tables, or why there are none."""
  experiment: str
  tables: list[compare.Comparison]
  problem: str = ""


@dataclasses.dataclass
class Report:
  rows: list[Row]
  unfinished: list[str]
  comparisons: list[Comparisons] = dataclasses.field(default_factory=list)

  def markdown(self) -> str:
    return markdown(self.rows, self.unfinished, self.comparisons)


def collect(paths: Sequence[str]) -> Report:
  """Report rows for the finished runs under ``paths``, the unfinished runs, and the
  updates-to-target tables of experiments whose runs differ in the normalizer."""
  runs = runs_lib.load_runs(paths)
  finished = [r for r in runs if r.finished]
  unfinished = [r.path for r in runs if not r.finished]
  by_experiment: dict[str, list[Run]] = {}
  for r in finished:
    by_experiment.setdefault(r.config.get("experiment", "?"), []).append(r)
  rows, comparisons = [], []
  for experiment, group in by_experiment.items():
    runs_lib.label_runs(group)  # The setting: what differs within the experiment.
    for run in group:
      data, _ = data_description(run)
      published = results.published_for(experiment, run.config)
      epochs_run = runs_lib.epochs_done(run.epochs)
      metrics = [(p.metric, p) for p in published] or [
          (m, None) for m in _default_metrics(run)]
      for metric, p in metrics:
        measured = _measured(run, metric)
        best, best_epoch = _best(run, metric)
        paper_epochs = f" (paper: {p.paper_epochs})" if p and p.paper_epochs else ""
        paper = "—" if p is None else (_fmt(p.value) if p.value is not None else
                                       f"not given ({p.note})")
        rows.append(Row(
            experiment=experiment, setting=run.label, metric=metric, paper=paper,
            source=p.source if p else "no published number",
            measured=_fmt(measured), best=_fmt(best), best_epoch=_epoch(best_epoch),
            data=data, epochs=f"{epochs_run}{paper_epochs}", run=run.path))
        for variant, value in _reference_variants(run, metric):
          rows.append(Row(
              experiment=experiment, setting=f"{run.label}, {variant}", metric=metric,
              paper="—", source="reference encoder (lnorm evaluate --encoder)",
              measured=_fmt(value), best="—", data=data, epochs=str(epochs_run),
              run=run.path))
    if len({str(r.config.get("norm")) for r in group}) > 1:
      comparisons.append(_updates_to_target(experiment, group))
  return Report(rows, unfinished, comparisons)


def _target_metric(experiment: str, runs: Sequence[Run]) -> str | None:
  """The held-out metric the experiment's paper reports (else the first logged) that
  every run logged (every run that did not stop as not finite), among those with the
  most evaluations, on validation when a validation curve exists: a target and a
  crossing are decisions, taken on validation only; test is for reporting. Updates to
  a target need a curve, so a split evaluated only at the end of a run is passed
  over for one evaluated along it."""
  published = [p.metric for p in results.PUBLISHED if p.experiment == experiment]
  # A run that stopped as not finite has what it logged before: it cannot veto a metric.
  runs = [r for r in runs if not r.diverged] or list(runs)
  logged = runs_lib.summary_metrics([p for r in runs for p in r.epochs])
  candidates = [m for m in dict.fromkeys(published + logged)
                if m.split("/")[0] in ("test", "validation")
                and all(r.records(m) for r in runs)]
  if not candidates:
    return None
  evaluations = {m: min(len(r.records(m)) for r in runs) for m in candidates}
  curves = [m for m in candidates if m.startswith("validation/") and evaluations[m] > 1]
  # Stable: the published metric first among curves of equal length.
  return min(curves or candidates, key=lambda m: (-evaluations[m],
                                                  not m.startswith("validation/")))


def _updates_to_target(experiment: str, runs: Sequence[Run]) -> Comparisons:
  metric = _target_metric(experiment, runs)
  if metric is None:
    return Comparisons(experiment, [], "no held-out metric that every run logged")
  baseline = next((b for b in REPORT_BASELINES
                   if any(compare.matches(r.config, compare.parse_baseline(b)) for r in runs)),
                  None)
  if baseline is None:
    return Comparisons(experiment, [], f"no baseline run ({' or '.join(REPORT_BASELINES)})")
  try:
    return Comparisons(experiment, compare.compare(runs, metric, baseline))
  except UserError as e:
    return Comparisons(experiment, [], str(e))


COLUMNS = (("experiment", "experiment"), ("setting", "setting"), ("metric", "metric"),
           ("paper", "paper"), ("source", "source"), ("measured", "measured (final)"),
           ("best_at", "best (at epoch)"), ("data", "data: source, amount"),
           ("epochs", "epochs run"))


def markdown(rows: Sequence[Row], unfinished: Sequence[str] = (),
             comparisons: Sequence[Comparisons] = ()) -> str:
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
  if comparisons:
    lines += ["", "## Updates to target"]
  for c in comparisons:
    if c.problem:
      lines += ["", f"{c.experiment}: not computed: {c.problem}"]
    for table in c.tables:
      where = f", {table.context}" if table.context else ""
      lines += ["", f"### {c.experiment}{where}: {table.metric} against {table.baseline}", "",
                compare.markdown(table).rstrip("\n")]
  return "\n".join(lines) + "\n"
