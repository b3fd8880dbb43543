"""The benchmark's headline: one row per normalizer, one column per experiment, each
cell the updates a normalizer needs to reach the baseline's best, as a ratio to the
baseline's own (``lnorm report RUNS... --by-norm``).

Every number comes from :func:`lnorm.analysis.compare.compare`, on the metric and the finished
runs ``lnorm report`` takes (:func:`lnorm.analysis.report._target_metric`): the baseline is
``norm=none`` and a column's target the mean over the baseline's seeds of each one's
best value. This module only decides which runs go in which cell:

- an experiment's **columns** are the values of the fields its baseline runs differ
  in (perm-MNIST at batch 4 and at batch 128 are two columns with two targets);
  usually one column per experiment;
- a normalizer's **rows** are the values of the fields its runs differ in within a
  column, seeds aside (``ln`` with ``norm_options.ln.scale_init`` 1.0 and 0.1 is two
  rows); usually one row per normalizer. Another experiment's ``ln`` runs at gain
  1.0 join the row of gain 1.0 (see :func:`_rows`).

Each variant is compared with the column's baseline runs alone, so that a field only
that variant sets does not split it from the baseline (``lnorm compare`` would
compare within each value of such a field, and find no baseline there).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

from lnorm.analysis import compare
from lnorm.analysis import report
from lnorm.analysis import runs as runs_lib
from lnorm.errors import UserError
from lnorm.analysis.runs import Run

BASELINE = "norm=none"
#: Rows in this order first; any other normalizer after them, alphabetically.
NORM_ORDER = ("none", "ln", "rms", "prms")


@dataclasses.dataclass
class Cell:
  """A row's entry in one column: the ratio text, or "—" and why, and its runs."""
  text: str
  runs: list[Run]


@dataclasses.dataclass
class Column:
  """One experiment (and, when its baseline runs differ in a field, one value of it)."""
  experiment: str
  context: str  # The fields of the baseline runs that make this column, e.g. batch_size=4.
  metric: str | None
  cells: dict[tuple[str, str], Cell]  # By row: (norm, variant).
  target: str = ""  # "test/error <= 0.021, the mean best of 2 baseline runs".
  problem: str = ""  # Why the column has no numbers, when it has none.

  @property
  def title(self) -> str:
    where = f", {self.context}" if self.context else ""
    return f"{self.experiment}{where}: {self.metric or 'no target metric'}"


@dataclasses.dataclass
class NormTable:
  columns: list[Column]
  unfinished: list[str]

  @property
  def rows(self) -> list[tuple[str, str]]:
    """Every (norm, variant) of any column: none first, then NORM_ORDER, then the
    others alphabetically; within a norm, the plain row before its variants."""
    found = {row for c in self.columns for row in c.cells}
    rank = {n: i for i, n in enumerate(NORM_ORDER)}
    return sorted(found, key=lambda r: (rank.get(r[0], len(rank)), r))

  def markdown(self, out: str | None = None) -> str:
    """The table, with links relative to the folder of ``out`` (where it is written),
    or to the current directory."""
    base = os.path.dirname(os.path.abspath(out)) if out else os.getcwd()
    return markdown(self, base)


# --- which runs go where ----------------------------------------------------------------


def collect(paths: Sequence[str]) -> NormTable:
  """The table of the finished runs at or under ``paths``, experiments in the order of
  ``paths``."""
  return from_runs(runs_lib.load_runs(paths), paths)


def from_runs(runs: Sequence[Run], paths: Sequence[str] = ()) -> NormTable:
  finished = [r for r in runs if r.finished]
  if not finished:
    raise UserError("No finished runs found (a run is finished when it logged its last "
                    "epoch), so there is nothing to put in the table.")
  runs_lib.check_same_data(finished, "lnorm report --by-norm")
  by_experiment: dict[str, list[Run]] = {}
  for r in sorted(finished, key=lambda r: _path_rank(r, paths)):  # Stable: load order next.
    by_experiment.setdefault(str(r.config.get("experiment", "?")), []).append(r)
  parts = []  # (experiment, its metric, column context, the column's runs).
  for experiment, members in by_experiment.items():
    metric = report._target_metric(experiment, members)  # pylint: disable=protected-access
    context_keys = _differing_keys([r for r in members if _is_baseline(r)])
    parts += [(experiment, metric, context, column_runs)
              for context, column_runs in _group(members, context_keys).items()]
  values = _variant_values([p[3] for p in parts])
  columns = [_column(experiment, context, metric, members, values)
             for experiment, metric, context, members in parts]
  return NormTable(columns, [r.path for r in runs if not r.finished])


def _path_rank(run: Run, paths: Sequence[str]) -> int:
  """The index of the first of ``paths`` that holds ``run``."""
  path = os.path.abspath(run.path)
  for i, root in enumerate(paths):
    root = os.path.abspath(root)
    if os.path.commonpath([path, root]) == root:
      return i
  return len(paths)


def _settings(run: Run) -> dict:
  return {k: v for k, v in run.config.items() if not runs_lib.is_seed(k)}


def _differing_keys(runs: Sequence[Run]) -> list[str]:
  """The fewest config fields that tell ``runs`` apart, seeds and fields that do not
  change results aside."""
  return runs_lib.distinguishing_keys(
      runs_lib.without_newer_fields([_settings(r) for r in runs]),
      ignore=runs_lib.LABEL_IGNORE)


def _group(runs: Sequence[Run], keys: Sequence[str]) -> dict[str, list[Run]]:
  groups: dict[str, list[Run]] = {}
  for r in runs:
    groups.setdefault(runs_lib.setting_name(r.config, keys), []).append(r)
  return groups


def _is_baseline(run: Run) -> bool:
  return compare.matches(run.config, compare.parse_baseline(BASELINE))


def _norm(run: Run) -> str:
  return "none" if _is_baseline(run) else str(run.config.get("norm"))


def _variant_values(columns: Sequence[Sequence[Run]]) -> dict[str, dict[str, set[str]]]:
  """For each normalizer, the fields its runs differ in within some column, and the
  values they take there (ln's ``norm_options.ln.scale_init``: 1.0 and 0.1)."""
  found: dict[str, dict[str, set[str]]] = {}
  for runs in columns:
    for norm, members in _by_norm(runs).items():
      for k in _differing_keys(members):
        found.setdefault(norm, {}).setdefault(k, set()).update(_value(r, k) for r in members)
  return found


def _value(run: Run, key: str) -> str:
  return runs_lib.format_value(run.config.get(key))


def _by_norm(runs: Sequence[Run]) -> dict[str, list[Run]]:
  groups: dict[str, list[Run]] = {}
  for r in runs:
    groups.setdefault(_norm(r), []).append(r)
  return groups


def _rows(runs: Sequence[Run],
          values: dict[str, dict[str, set[str]]]) -> dict[tuple[str, str], list[Run]]:
  """The runs of each row, (norm, variant). The variant names the fields the norm's
  runs differ in within this column, and those they differ in elsewhere where this
  run's value is one of theirs: ln with gain 1.0 joins the row "ln, gain=1.0" of the
  experiment that also ran gain 0.1, but a learning rate that only one experiment
  varied does not split ln's row in the others. Empty when the runs differ in their
  seeds only."""
  rows: dict[tuple[str, str], list[Run]] = {}
  for norm, members in _by_norm(runs).items():
    here = _differing_keys(members)
    seen = values.get(norm, {})
    for r in members:
      keys = [k for k in seen if k in r.config and (k in here or _value(r, k) in seen[k])]
      rows.setdefault((norm, runs_lib.setting_name(r.config, keys)), []).append(r)
  return rows


def _column(experiment: str, context: str, metric: str | None, runs: Sequence[Run],
            values: dict[str, dict[str, set[str]]]) -> Column:
  baseline = [r for r in runs if _is_baseline(r)]
  rows = _rows([r for r in runs if not _is_baseline(r)], values)
  column = Column(experiment, context, metric, {})
  reference = None
  if metric is None:
    column.problem = "no held-out metric that every run logged"
  elif not baseline:
    column.problem = f"no baseline run ({BASELINE})"
  else:
    try:
      (reference,) = compare.compare(baseline, metric, BASELINE)
    except UserError as e:  # The baseline logged no finite value: there is no target.
      column.problem = str(e)
  if reference is None:
    short = "— no baseline" if not baseline else "— no target"
    column.cells = {row: Cell(short, members)
                    for row, members in [(("none", ""), baseline), *rows.items()] if members}
    return column
  column.target = _target_text(reference)
  column.cells[("none", "")] = _cell(reference.baseline_group, baseline)
  for row, members in rows.items():
    # Alone with the baseline, a variant's fields are implied by its norm: one table.
    (c,) = compare.compare(baseline + members, metric, BASELINE)
    column.cells[row] = _cell(next(g for g in c.groups if not g.is_baseline), members)
  return column


def _target_text(c: compare.Comparison) -> str:
  n = len([r for r in c.baseline_group.runs if r.best is not None])
  source = "the best of the baseline run" if n == 1 else (
      f"the mean of the best values of {n} baseline runs")
  return f"{c.metric} {'<=' if c.lower_is_better else '>='} {c.target:.6g}, {source}"


def _cell(group: compare.Group, runs: list[Run]) -> Cell:
  """``0.65 ± 0.07× (2/2), time 0.70 ± 0.05×``: the updates ratio over the runs that
  reached the target, how many did out of how many ran, and the time ratio."""
  counts = f"({len(group.reached)}/{len(group.runs)})"
  if not group.reached:
    return Cell(f"— never reached {counts}", runs)
  steps = compare._pm(group.stat("step_ratio"), ".2f", ".2f", "×")  # pylint: disable=protected-access
  seconds = compare._pm(group.stat("seconds_ratio"), ".2f", ".2f", "×")  # pylint: disable=protected-access
  return Cell(f"{steps} {counts}, time {seconds}", runs)


# --- presenting --------------------------------------------------------------------------


def row_label(row: tuple[str, str]) -> str:
  norm, variant = row
  name = f"{norm}, {variant}" if variant else norm
  return f"{name} (baseline)" if (norm, variant) == ("none", "") else name


def _link(text: str, path: str, base: str) -> str:
  target = os.path.relpath(os.path.abspath(path), base)
  if any(ch in target for ch in " ()<>"):
    target = f"<{target}>"
  return f"[{text}]({target})"


def _links(runs: Sequence[Run], base: str) -> str:
  """``seeds [0](runs/ln_s0), [1](runs/ln_s1)``; by number when the seeds do not tell
  the runs apart."""
  seeds = [r.config.get("seed") for r in runs]
  by_seed = None not in seeds and len(set(map(str, seeds))) == len(seeds)
  names = [str(s) for s in seeds] if by_seed else [str(i) for i in range(1, len(runs) + 1)]
  noun = ("seed" if by_seed else "run") + ("s" if len(runs) > 1 else "")
  return f"{noun} " + ", ".join(_link(n, r.path, base) for n, r in zip(names, runs))


def _cell_text(cell: Cell | None, base: str) -> str:
  if cell is None:
    return "— no runs"
  return f"{cell.text} · {_links(cell.runs, base)}"


def notes(table: NormTable, base: str) -> list[str]:
  out = [
      f"Each cell: the updates a normalizer needs to reach its column's target, divided "
      f"by the updates the baseline ({BASELINE}) needs, as mean ± std over the seeds "
      "that reached it; (reached/ran) counts the seeds that reached the target and the "
      "seeds run. `time`: the same ratio of training time (compilation and evaluation "
      "excluded), n/a where a run's log does not give it. The numbers are those of "
      "`lnorm compare`, which gives every run's.", "",
      "Time ratios are only meaningful between runs measured on equally loaded machines "
      "(the same hardware, nothing else running); on a shared machine compare updates.",
      "", "Targets:"]
  out += [f"- {c.experiment}{f', {c.context}' if c.context else ''}: "
          f"{c.target or 'none: ' + c.problem.rstrip('.')}." for c in table.columns]
  if table.unfinished:
    out += ["", "Not finished (left out): " + ", ".join(
        _link(os.path.relpath(os.path.abspath(u), base), u, base) for u in table.unfinished)]
  return out


def markdown(table: NormTable, base: str) -> str:
  """The table and its notes, links relative to the folder ``base``."""
  header = ["normalizer"] + [c.title for c in table.columns]
  lines = ["## Updates to target by normalizer", "",
           "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
  for row in table.rows:
    cells = [row_label(row)] + [_cell_text(c.cells.get(row), base) for c in table.columns]
    lines.append("| " + " | ".join(x.replace("|", "\\|") for x in cells) + " |")
  return "\n".join(lines + [""] + notes(table, base)) + "\n"
