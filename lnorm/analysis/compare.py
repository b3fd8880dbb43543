"""Updates to target: how many updates, and how much training time, each normalizer
needs to reach the best value that the baseline reached.

This is the LN paper's central claim made measurable ("LN converges about twice as
fast"): for runs that differ in the normalizer (and seed), and for one metric,

- the **target** is the baseline's best value of the metric. With several baseline
  runs (seeds) it is the mean over them of each one's best value, not the best of
  them: one lucky baseline seed should not set a target that a typical baseline run
  never reaches;
- a run **reaches** the target at the first logged point whose value is at least as
  good (``<=`` for a lower-is-better metric, ``>=`` otherwise). Every point that
  measured the metric counts, mid-epoch evaluations (``eval_every_steps``) included,
  so the resolution is the evaluation interval; a training metric is read at epoch
  ends only (see :meth:`lnorm.analysis.runs.Run.records`);
- **updates** are the ``step`` of that point; **time** is the cumulative training
  wall time there (``time/train_seconds``: compilation and evaluation excluded).
  Runs logged before that field existed have a time at epoch ends only (the sum of
  the epochs' ``time/epoch_seconds`` minus compilation): a crossing between epoch
  ends then has no known time ("n/a");
- the **ratio** divides a run's updates (time) by the baseline's own updates (time)
  to the target: the mean over the baseline runs that reached it. With one baseline
  run that is the update at which it reached its best value, and its ratio is 1.

With several seeds each quantity is given as mean ± sample standard deviation over
the runs of the setting (updates, time and ratios over the runs that reached the
target), with how many runs reached it. NaN and infinite values in a log are
skipped and counted. Runs that differ in more than the baseline's fields (say the
batch size as well as the normalizer) are compared within each value of the other
fields: one table per batch size.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import statistics
from typing import Any, Mapping, Sequence

from lnorm.analysis import runs as runs_lib
from lnorm.errors import UserError
from lnorm.analysis.runs import Run

DEFAULT_BASELINE = "norm=none"


@dataclasses.dataclass(frozen=True)
class Stat:
  """Mean and sample standard deviation (0 for a single value) of ``n`` values."""
  mean: float
  std: float
  n: int

  @classmethod
  def of(cls, values: Sequence[float]) -> "Stat | None":
    if not values:
      return None
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return cls(statistics.fmean(values), std, len(values))


@dataclasses.dataclass
class RunResult:
  """One run against the target."""
  run: Run
  best: float | None  # None: no finite value logged.
  step: int | None  # The first update at which it reached the target; None: never.
  epoch: float | None
  value: float | None  # The metric there.
  seconds: float | None  # Training time then; None: never reached, or not known.
  last_step: int  # The last update it logged the metric at.
  nonfinite: int  # NaN and infinite points skipped.
  step_ratio: float | None = None
  seconds_ratio: float | None = None

  @property
  def reached(self) -> bool:
    return self.step is not None


@dataclasses.dataclass
class Group:
  """The runs (seeds) of one setting of the baseline's fields, e.g. norm=ln."""
  setting: str
  is_baseline: bool
  runs: list[RunResult]

  @property
  def reached(self) -> list[RunResult]:
    return [r for r in self.runs if r.reached]

  @property
  def time_known(self) -> bool:
    """True when every run that reached the target knows its time there."""
    return bool(self.reached) and all(r.seconds is not None for r in self.reached)

  def stat(self, field: str) -> Stat | None:
    """Over the runs' ``best``; over the runs that reached the target otherwise."""
    if field == "best":
      return Stat.of([r.best for r in self.runs if r.best is not None])
    if field in ("seconds", "seconds_ratio") and not self.time_known:
      return None
    values = [getattr(r, field) for r in self.reached]
    return Stat.of([v for v in values if v is not None])


@dataclasses.dataclass
class Comparison:
  """Every setting against the baseline, for one metric, within one context (the
  values of the fields other than the baseline's, such as ``batch_size=4``)."""
  metric: str
  lower_is_better: bool
  baseline: str
  context: str
  target: float
  groups: list[Group]

  @property
  def baseline_group(self) -> Group:
    return next(g for g in self.groups if g.is_baseline)

  def table(self) -> str:
    return format_table(self)

  def to_dict(self) -> dict[str, Any]:
    def stat(s: Stat | None):
      return None if s is None else {"mean": s.mean, "std": s.std, "n": s.n}

    return {
        "metric": self.metric, "lower_is_better": self.lower_is_better,
        "baseline": self.baseline, "context": self.context, "target": self.target,
        "groups": [{
            "setting": g.setting, "is_baseline": g.is_baseline, "runs": len(g.runs),
            "reached": len(g.reached),
            **{k: stat(g.stat(k)) for k in ("best", "step", "step_ratio", "seconds",
                                            "seconds_ratio")},
            "per_run": [{
                "path": r.run.path, "label": r.run.label, "seed": r.run.config.get("seed"),
                "best": r.best, "reached": r.reached, "step": r.step, "epoch": r.epoch,
                "value": r.value, "seconds": r.seconds, "step_ratio": r.step_ratio,
                "seconds_ratio": r.seconds_ratio, "last_step": r.last_step,
                "nonfinite_points": r.nonfinite} for r in g.runs],
        } for g in self.groups],
    }


# --- computing ---------------------------------------------------------------------------


def parse_baseline(spec: str) -> dict[str, str]:
  """``norm=none`` or ``norm=bn,batch_size=4`` as a dict of config fields."""
  fields = {}
  for part in spec.split(","):
    key, eq, value = part.partition("=")
    if not eq or not key.strip():
      raise UserError(f"Baseline {spec!r}: expected FIELD=VALUE[,FIELD=VALUE], the config "
                      f"fields of the baseline runs, e.g. {DEFAULT_BASELINE}.")
    fields[key.strip()] = value.strip()
  return fields


def matches(config: Mapping[str, Any], fields: Mapping[str, str]) -> bool:
  return all(k in config and str(config[k]).lower() == v.lower() for k, v in fields.items())


def compare(runs: Sequence[Run], metric: str, baseline: str = DEFAULT_BASELINE,
            lower_is_better: bool | None = None) -> list[Comparison]:
  """Updates and time to the baseline's best ``metric``, one Comparison per context.

  ``lower_is_better`` defaults to what the metric's name says
  (:func:`lnorm.analysis.runs.lower_is_better`). A context without a baseline run is left out
  with a warning. Raises UserError when a run has no config or did not log
  ``metric``, when no run matches ``baseline``, or when runs of one experiment trained
  on different data (:func:`lnorm.analysis.runs.check_same_data`), or when a table
  would hold runs of different experiments (:func:`check_one_experiment`).
  """
  if not runs:
    raise UserError("No runs to compare.")
  if lower_is_better is None:
    lower_is_better = runs_lib.lower_is_better(metric)
  fields = parse_baseline(baseline)
  _check(runs, metric, fields)
  runs_lib.check_same_data(runs, "lnorm compare")

  # The baseline's fields first, so that a field they determine is what is dropped;
  # then the experiment, so that runs of two experiments are told apart by it and not
  # by a field only one of them has (the attentive reader's data.corpus).
  settings = [{**{k: r.config.get(k) for k in fields},
               "experiment": r.config.get("experiment"),
               **{k: v for k, v in r.config.items() if not runs_lib.is_seed(k)}}
              for r in runs]
  keys = runs_lib.distinguishing_keys(runs_lib.without_newer_fields(settings),
                                      ignore=runs_lib.LABEL_IGNORE)
  context_keys = [k for k in keys if k not in fields]
  contexts: dict[str, list[Run]] = {}
  for r in runs:
    contexts.setdefault(runs_lib.setting_name(r.config, context_keys), []).append(r)
  for members in contexts.values():
    check_one_experiment(members, "lnorm compare")
  without = {c: members for c, members in contexts.items()
             if not any(matches(r.config, fields) for r in members)}
  if len(without) == len(contexts):
    settings = sorted({runs_lib.setting_name(r.config, [*fields, *context_keys]) for r in runs})
    raise UserError(f"No run matches --baseline {baseline}. Settings: {', '.join(settings)}. "
                    "Name one of them with --baseline.")
  for context, members in without.items():
    logging.warning("Left out the runs with %s: none matches --baseline %s there (%s).",
                    context, baseline, ", ".join(r.label for r in members))
  return [_compare_context(members, metric, fields, baseline, context, lower_is_better)
          for context, members in contexts.items() if context not in without]


def check_one_experiment(runs: Sequence[Run], action: str) -> None:
  """Refuses to put runs of different experiments (their config's ``experiment``) in
  one table: a baseline's best value is a target for runs of its own experiment only.
  Runs of several experiments, each with its baseline, make one table each."""
  by_experiment: dict[str, list[Run]] = {}
  for r in runs:
    if "experiment" in r.config:
      by_experiment.setdefault(str(r.config["experiment"]), []).append(r)
  if len(by_experiment) > 1:
    named = " and ".join(f"{e} ({members[0].path}"
                         + (f" and {len(members) - 1} more" if len(members) > 1 else "") + ")"
                         for e, members in by_experiment.items())
    raise UserError(f"{action} would put runs of different experiments in one table: "
                    f"{named}. Pass the runs of one experiment, with its baseline.")


def _check(runs: Sequence[Run], metric: str, fields: Mapping[str, str]) -> None:
  no_config = [r.path for r in runs if not r.config]
  if no_config:
    raise UserError(f"No config.json in {', '.join(no_config)}: compare groups runs by "
                    "their config. Pass the directories `lnorm train` wrote.")
  unknown = [k for k in fields if not any(k in r.config for r in runs)]
  if unknown:
    raise UserError(f"--baseline names {', '.join(unknown)}, a field no run's config has "
                    f"(e.g. {DEFAULT_BASELINE}).")
  # A run that stopped as not finite before its first evaluation counts, as never reaching.
  missing = [r for r in runs if not r.records(metric) and not r.diverged]
  if missing:
    logged = runs_lib.metric_names(p for r in missing for p in r.points)
    named = ", ".join(r.path for r in missing[:5]) + (
        f" and {len(missing) - 5} more" if len(missing) > 5 else "")
    raise UserError(f"{len(missing)} of {len(runs)} runs logged no {metric}: {named}. "
                    f"Metrics they logged: {', '.join(logged) or 'none'}.")


def _compare_context(runs: Sequence[Run], metric: str, fields: Mapping[str, str],
                     baseline: str, context: str, lower: bool) -> Comparison:
  groups: dict[str, list[Run]] = {}
  for r in runs:
    groups.setdefault(runs_lib.setting_name(r.config, list(fields)), []).append(r)
  baseline_runs = [r for r in runs if matches(r.config, fields)]
  where = f" among the runs with {context}" if context else ""
  bests = [_best(r, metric, lower) for r in baseline_runs]
  finite = [b for b in bests if b is not None]
  if not finite:
    raise UserError(f"The baseline runs ({baseline}{where}) logged no finite {metric}, so "
                    "there is no target to reach.")
  target = statistics.fmean(finite)

  results = {r.path: _against_target(r, metric, target, lower) for r in runs}
  reference = [results[r.path] for r in baseline_runs if results[r.path].reached]
  ref_step = statistics.fmean([r.step for r in reference]) if reference else None
  ref_seconds = (statistics.fmean([r.seconds for r in reference])
                 if reference and all(r.seconds is not None for r in reference) else None)
  for res in results.values():
    if res.reached and ref_step:
      res.step_ratio = res.step / ref_step
    if res.seconds is not None and ref_seconds:
      res.seconds_ratio = res.seconds / ref_seconds

  baseline_setting = runs_lib.setting_name(baseline_runs[0].config, list(fields))
  ordered = [baseline_setting] + [s for s in groups if s != baseline_setting]
  return Comparison(
      metric, lower, baseline, context, target,
      [Group(s, s == baseline_setting, [results[r.path] for r in groups[s]]) for s in ordered])


def _finite_values(run: Run, metric: str) -> list[tuple[dict[str, Any], float]]:
  return [(r, float(r[metric])) for r in run.records(metric) if math.isfinite(r[metric])]


def _best(run: Run, metric: str, lower: bool) -> float | None:
  values = [v for _, v in _finite_values(run, metric)]
  return (min if lower else max)(values) if values else None


def _against_target(run: Run, metric: str, target: float, lower: bool) -> RunResult:
  records = run.records(metric)
  seconds = dict(zip(map(id, run.points), runs_lib.train_seconds(run.points)))
  finite = _finite_values(run, metric)
  hit = next((r for r, v in finite if (v <= target if lower else v >= target)), None)
  return RunResult(
      run=run, best=_best(run, metric, lower),
      step=None if hit is None else int(hit.get("step", 0)),
      epoch=None if hit is None else hit.get("epoch"),
      value=None if hit is None else float(hit[metric]),
      seconds=None if hit is None else seconds.get(id(hit)),
      last_step=int(records[-1].get("step", 0)) if records else 0,
      nonfinite=len(records) - len(finite))


# --- presenting ----------------------------------------------------------------------------


def _pm(stat: Stat | None, fmt: str, std_fmt: str, suffix: str = "") -> str:
  if stat is None:
    return "n/a"
  if stat.n == 1:
    return f"{stat.mean:{fmt}}{suffix}"
  return f"{stat.mean:{fmt}} ± {stat.std:{std_fmt}}{suffix}"


def _updates_run(group: Group) -> str:
  steps = sorted({r.last_step for r in group.runs})
  return str(steps[0]) if len(steps) == 1 else f"{steps[0]}–{steps[-1]}"


def rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
  """The table's header and rows, as text."""
  c = comparison
  header = ["setting", "runs", f"best {c.metric}", "reached", "updates to target",
            "× baseline", "time to target", "× baseline", "updates run"]
  body = []
  for g in c.groups:
    never = not g.reached
    body.append([
        g.setting + (" (baseline)" if g.is_baseline else ""), str(len(g.runs)),
        _pm(g.stat("best"), ".4g", ".2g"), f"{len(g.reached)}/{len(g.runs)}",
        "never" if never else _pm(g.stat("step"), ".0f", ".0f"),
        "never" if never else _pm(g.stat("step_ratio"), ".2f", ".2f"),
        "never" if never else _pm(g.stat("seconds"), ".4g", ".2g", " s"),
        "never" if never else _pm(g.stat("seconds_ratio"), ".2f", ".2f"),
        _updates_run(g)])
  return header, body


def _run_name(group: Group, result: RunResult) -> str:
  """The setting, and which of its runs when it has several."""
  return group.setting if len(group.runs) == 1 else f"{group.setting} ({result.run.name})"


def notes(comparison: Comparison) -> list[str]:
  """What the reader must know to trust the table: the target and what was skipped."""
  c = comparison
  b = c.baseline_group
  with_bests = [r for r in b.runs if r.best is not None]
  source = (f"the best of the baseline ({b.setting})" if len(with_bests) == 1 else
            f"the mean of the best values of the {len(with_bests)} baseline runs ({b.setting})")
  out = [f"Target: {c.metric} {'<=' if c.lower_is_better else '>='} {c.target:.6g}, {source}; "
         f"{'lower' if c.lower_is_better else 'higher'} is better."]
  if any(len(g.runs) > 1 for g in c.groups):
    out.append("Mean ± std over a setting's runs; updates, time and ratios over the runs "
               "that reached the target.")
  skipped = [f"{_run_name(g, r)} ({r.nonfinite})" for g in c.groups for r in g.runs
             if r.nonfinite]
  if skipped:
    out.append(f"NaN or infinite {c.metric} skipped (points): {', '.join(skipped)}.")
  stopped = [f"{_run_name(g, r)} (step {r.run.diverged_at})" for g in c.groups
             for r in g.runs if r.run.diverged]
  if stopped:
    out.append(f"Stopped on a loss or gradient that was not finite, counted as never "
               f"reaching the target: {', '.join(stopped)}.")
  unknown = [_run_name(g, r) for g in c.groups for r in g.reached if r.seconds is None]
  if unknown:
    out.append(f"Time n/a: {', '.join(unknown)} reached the target between epoch ends and "
               f"logged no {runs_lib.TRAIN_SECONDS_KEY} (a run older than that field).")
  return out


def format_table(comparison: Comparison) -> str:
  """A fixed-width text table with its notes."""
  header, body = rows(comparison)
  widths = [max(len(x) for x in col) for col in zip(header, *body)]
  lines = ["  ".join(x.ljust(w) for x, w in zip(row, widths)).rstrip()
           for row in [header] + body]
  lines.insert(1, "  ".join("-" * w for w in widths))
  title = f"Updates to target, {comparison.metric}" + (
      f", {comparison.context}" if comparison.context else "")
  return "\n".join([title, ""] + lines + [""] + notes(comparison)) + "\n"


def markdown(comparison: Comparison) -> str:
  """The same table in markdown, for ``lnorm report``."""
  header, body = rows(comparison)
  lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
  lines += ["| " + " | ".join(x.replace("|", "\\|") for x in row) + " |" for row in body]
  return "\n".join(lines + [""] + notes(comparison)) + "\n"
