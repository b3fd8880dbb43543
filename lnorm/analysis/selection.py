"""Model selection on validation: the best setting of a sweep, and its test metrics
where it was selected, never its best test values.

For runs and one validation metric (``validation/error``; lower or higher is better
as its name says, :func:`lnorm.analysis.runs.lower_is_better`):

- each run's **best** value is its best finite value of the metric over every point
  that measured it (epoch ends and mid-epoch evaluations). The run is **selected at**
  the first point where it reached that value: the checkpoint or epoch a researcher
  would keep;
- its **test metrics** are those of the model at that point (``Run.test_at``: logged
  there, or measured at the end on the model the run kept from there, by
  ``select_on`` or by a task that keeps its own, as order-embeddings does); none when
  the run kept another model;
- runs are grouped into **settings** by every field but the seed (``seed``,
  ``*.seed``); a setting's score is the mean over its runs of each run's best value,
  given with the sample standard deviation. A sweep's setting is named by the keys
  the sweep names its members by, with the values as typed (``3e-4``), every drawn key
  of a random search included, so that ``lnorm sweep --select`` and ``lnorm report
  --select`` name it alike; other runs by the fewest config fields that tell them
  apart;
- the **selected setting** has the best score. Its **test metrics** (every ``test/...``
  metric) are read at each run's selected point, and averaged over its runs.

Runs that never logged a finite value of the metric are listed, not counted. Runs
trained on different data are refused (:func:`lnorm.analysis.runs.check_same_data`).
``lnorm sweep --select`` and ``lnorm report --select`` both print this; nothing here
imports JAX.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any, Mapping, Sequence

from lnorm.analysis import runs as runs_lib
from lnorm.errors import UserError
from lnorm.analysis.runs import Run
from lnorm.training.defaults import is_complete

#: The split whose metrics are reported for the selected setting.
TEST_PREFIX = runs_lib.TEST_PREFIX


@dataclasses.dataclass
class RunChoice:
  """One run: its best value of the metric and where it was selected."""
  run: Run
  label: str  # Within its setting: the seed (``seed=1``), else the run's name.
  best: float | None  # None: no finite value of the metric.
  step: int | None = None
  epoch: float | None = None
  test: dict[str, float] = dataclasses.field(default_factory=dict)
  finished: bool = True


@dataclasses.dataclass
class Setting:
  """The runs (seeds) of one setting."""
  name: str
  runs: list[RunChoice]

  @property
  def scored(self) -> list[RunChoice]:
    return [r for r in self.runs if r.best is not None]

  @property
  def mean(self) -> float | None:
    values = [r.best for r in self.scored]
    return statistics.fmean(values) if values else None

  @property
  def std(self) -> float | None:
    values = [r.best for r in self.scored]
    return statistics.stdev(values) if len(values) > 1 else (0.0 if values else None)

  def test_metrics(self) -> list[str]:
    names: list[str] = []
    for r in self.scored:
      names += [k for k in r.test if k not in names]
    return names

  def test_stat(self, metric: str) -> tuple[float, float, int] | None:
    """(mean, std, n) of ``metric`` at the runs' selected points."""
    values = [r.test[metric] for r in self.scored if metric in r.test]
    if not values:
      return None
    return (statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0,
            len(values))


@dataclasses.dataclass
class Selection:
  metric: str
  lower_is_better: bool
  settings: list[Setting]

  @property
  def best(self) -> Setting | None:
    scored = [s for s in self.settings if s.mean is not None]
    if not scored:
      return None
    return (min if self.lower_is_better else max)(scored, key=lambda s: s.mean)

  @property
  def without(self) -> list[RunChoice]:
    """Runs that logged no finite value of the metric."""
    return [r for s in self.settings for r in s.runs if r.best is None]

  def text(self) -> str:
    return format_text(self)

  def markdown(self) -> str:
    return format_markdown(self)

  def to_dict(self) -> dict[str, Any]:
    best = self.best
    return {
        "metric": self.metric, "lower_is_better": self.lower_is_better,
        "selected": best.name if best else None,
        "settings": [{
            "setting": s.name, "mean": s.mean, "std": s.std, "runs": [{
                "path": r.run.path, "label": r.label, "best": r.best, "step": r.step,
                "epoch": r.epoch, "finished": r.finished,
                "test": r.test} for r in s.runs],
        } for s in self.settings],
    }


# --- computing --------------------------------------------------------------------------------


def select(runs: Sequence[Run], metric: str,
           settings: Mapping[str, Mapping[str, Any]] | None = None,
           lower_is_better: bool | None = None,
           keys: Sequence[str] | None = None) -> Selection:
  """The best setting of ``runs`` on ``metric`` (see the module's docstring).

  ``settings`` (run path -> fields) gives the fields that define each run's setting,
  and ``keys`` those that name it; by default a sweep member's overrides and its
  sweep's ``setting_keys`` (``Run.overrides``), else the run's config.json and the
  fewest fields that tell the runs apart. Seed fields are dropped either way. Raises
  UserError when no run logged ``metric``.
  """
  if settings is None and runs and all(r.overrides for r in runs):
    settings = {r.path: r.overrides for r in runs}
    if keys is None and len({r.setting_keys for r in runs}) == 1 and runs[0].setting_keys:
      keys = runs[0].setting_keys
  if not runs:
    raise UserError("No runs to select from.")
  if lower_is_better is None:
    lower_is_better = runs_lib.lower_is_better(metric)
  if not any(r.records(metric) for r in runs):
    logged = runs_lib.metric_names(p for r in runs for p in r.points)
    raise UserError(f"No run logged {metric}, so there is nothing to select on. Metrics "
                    f"they logged: {', '.join(logged) or 'none'}.")
  runs_lib.check_same_data(runs, "Selecting on " + metric)
  fields = [{k: v for k, v in (settings[r.path] if settings is not None else r.config).items()
             if not runs_lib.is_seed(k)} for r in runs]
  if keys is None:
    keys = runs_lib.distinguishing_keys(runs_lib.without_newer_fields(fields),
                                        ignore=runs_lib.LABEL_IGNORE)
  else:  # Every named key that varies: a random search's draws differ in each of them.
    keys = [k for k in keys if not runs_lib.is_seed(k)
            and len({str(f.get(k)) for f in fields}) > 1]
  groups: dict[str, list[RunChoice]] = {}
  for run, f in zip(runs, fields):
    name = runs_lib.setting_name(f, keys) if keys else "all runs"
    if settings is None and not run.config:
      name = run.name  # No config.json: the run is its own setting.
    groups.setdefault(name, []).append(_choose(run, metric, lower_is_better))
  for members in groups.values():
    _label_within(members)
  return Selection(metric, lower_is_better, [Setting(n, rs) for n, rs in groups.items()])


def _label_within(choices: Sequence[RunChoice]) -> None:
  """Tells a setting's runs apart by the seed fields that differ between them
  (``seed=1``, not the ``data.seed`` they share), else by their names."""
  seeds = sorted({k for c in choices for k in c.run.config if runs_lib.is_seed(k)})
  seeds = [k for k in seeds if len({str(c.run.config.get(k)) for c in choices}) > 1]
  for c in choices:
    label = ",".join(f"{k}={c.run.config.get(k)}" for k in seeds)
    c.label = label or c.run.name


def _choose(run: Run, metric: str, lower: bool) -> RunChoice:
  finished = is_complete(run.config, run.epochs) if run.config else True
  finite = [(p, float(p[metric])) for p in run.records(metric) if math.isfinite(p[metric])]
  if not finite:
    return RunChoice(run, run.name, None, finished=finished)
  best = (min if lower else max)(v for _, v in finite)
  point = next(p for p, v in finite if v == best)  # The first time it got there.
  step = point.get("step")
  return RunChoice(run, run.name, best, step=step, epoch=point.get("epoch"),
                   test=run.test_at(step),
                   finished=finished)


# --- presenting --------------------------------------------------------------------------------


def _num(v: float | None) -> str:
  return "—" if v is None else f"{v:.4g}"


def _pm(mean: float | None, std: float | None, n: int) -> str:
  if mean is None:
    return "—"
  return f"{mean:.4g}" if n <= 1 else f"{mean:.4g} ± {std:.2g}"


def _where(c: RunChoice) -> str:
  if c.best is None:
    return "—"
  epoch = c.epoch  # Fractional for a mid-epoch evaluation: two decimals tell them apart.
  at = f"epoch {round(epoch, 2):g}, " if isinstance(epoch, (int, float)) else ""
  return f"{at}step {c.step}"


def settings_rows(sel: Selection) -> tuple[list[str], list[list[str]]]:
  best = sel.best
  header = ["setting", "runs", f"best {sel.metric}"]
  body = [[s.name + (" (selected)" if s is best else ""),
           f"{len(s.scored)}/{len(s.runs)}" if len(s.scored) < len(s.runs) else str(len(s.runs)),
           _pm(s.mean, s.std, len(s.scored))] for s in sel.settings]
  return header, body


def selected_rows(sel: Selection) -> tuple[list[str], list[list[str]]]:
  """The selected setting's runs at their selected points, then the mean over them."""
  best = sel.best
  metrics = best.test_metrics()
  header = ["run", "selected at", sel.metric] + metrics
  body = [[c.label, _where(c), _num(c.best)] + [_num(c.test.get(m)) for m in metrics]
          for c in best.scored]
  if len(best.scored) > 1:
    stats = [best.test_stat(m) for m in metrics]
    body.append(["mean", "", _pm(best.mean, best.std, len(best.scored))] +
                [_pm(*s) if s else "—" for s in stats])
  return header, body


def notes(sel: Selection) -> list[str]:
  out = []
  if sel.without:
    out.append(f"No {sel.metric} logged (not counted): "
               f"{', '.join(r.run.name for r in sel.without)}.")
  unfinished = [r.run.name for s in sel.settings for r in s.runs if not r.finished]
  if unfinished:
    out.append(f"Not finished (selected on what they logged so far): {', '.join(unfinished)}.")
  best = sel.best
  if best is not None and not best.test_metrics():
    out.append(f"The selected runs logged no {TEST_PREFIX}... metric where they were "
               "selected.")
  if sel.metric.startswith(TEST_PREFIX):
    out.append("Selected on a test metric: the test values above are optimistic; select "
               "on a validation metric for an unbiased estimate.")
  return out


def _table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
  widths = [max(len(x) for x in col) for col in zip(header, *body)]
  lines = ["  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip()
           for row in [header, *body]]
  lines.insert(1, "  ".join("-" * w for w in widths))
  return lines


def _markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
  lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
  return lines + ["| " + " | ".join(x.replace("|", "\\|") for x in row) + " |" for row in body]


def _intro(sel: Selection) -> str:
  return (f"Selection on {sel.metric} ({'lower' if sel.lower_is_better else 'higher'} is "
          f"better): each setting's mean over its runs of each run's best {sel.metric} "
          "(over every evaluation, mid-epoch ones included, as summary.csv's best).")


def _selected_intro(sel: Selection) -> str:
  best = sel.best
  return (f"Selected: {best.name}. Its test metrics where each run's {sel.metric} was best "
          "(not its best test values):")


def format_text(sel: Selection) -> str:
  lines = [_intro(sel), "", *_table(*settings_rows(sel)), ""]
  if sel.best is not None:
    lines += [_selected_intro(sel), "", *_table(*selected_rows(sel)), ""]
  return "\n".join(lines + notes(sel)).rstrip("\n") + "\n"


def format_markdown(sel: Selection) -> str:
  lines = [f"## Selection on {sel.metric}", "", _intro(sel), "",
           *_markdown_table(*settings_rows(sel)), ""]
  if sel.best is not None:
    lines += [_selected_intro(sel), "", *_markdown_table(*selected_rows(sel)), ""]
  return "\n".join(lines + notes(sel)).rstrip("\n") + "\n"
