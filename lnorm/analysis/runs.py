"""Run directories as ``lnorm train`` leaves them, read in one place.

A run directory holds ``config.json`` (the flat config and the data record) and
``metrics.jsonl`` (one JSON record per logged point, each with its ``step``).
``lnorm plot``, ``lnorm report``, ``lnorm compare`` and sweep summaries all read runs
through this module; nothing here imports JAX or matplotlib.

The records of a run are of three kinds, told apart by their keys:

- epoch records carry ``time/epoch_seconds`` and the epoch's means of the training
  metrics, and the evaluations at the epoch's end;
- mid-epoch evaluations (``eval_every_steps``) carry held-out metrics at a fractional
  ``epoch``;
- running training values (``log_every_steps``) carry the mean loss of the last few
  mini-batches: a noisier quantity than the epoch mean, so :meth:`Run.records` leaves
  them out of training metrics.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import zlib
from typing import Any, Iterable, Mapping, Sequence

from lnorm.errors import UserError
from lnorm.training import defaults
from lnorm.training.defaults import (DIVERGED_AT, KEPT_STEP, RESUMABLE_FIELDS,
                                     SELECTED_PREFIX, SELECTED_STEP, has_diverged)
from lnorm.training.run_files import CONFIG_FILE, METRICS_FILE, read_jsonl

#: A run's metrics compressed, as committed records keep a large log
#: (``lnorm benchmark``): read wherever the plain file is absent.
METRICS_GZ_FILE = METRICS_FILE + ".gz"

#: Written by ``lnorm sweep``: its members' order and overrides.
SWEEP_FILE = "sweep.json"
#: The epoch records in metrics.jsonl are the points that carry this key.
EPOCH_KEY = "time/epoch_seconds"
#: Cumulative training wall time (compilation and evaluation excluded) at a record.
TRAIN_SECONDS_KEY = "time/train_seconds"
#: All of a run's wall time from its set-up on (lnorm.training.loop), across resumes.
WALL_SECONDS_KEY = "time/wall_seconds"
COMPILE_KEY = "time/compile_seconds"

#: Config fields that never explain a difference between runs.
LABEL_IGNORE = RESUMABLE_FIELDS + ("data.data_dir", "wandb.", "benchmark_hash")
#: Directories under a run that never hold other runs.
_NOT_RUNS = ("checkpoints", "wandb", "figures", "images")


# --- records ---------------------------------------------------------------------------


def as_number(value: Any) -> Any:
  """The metrics writer stores non-finite floats as strings: make them floats again."""
  if isinstance(value, str) and value.lower() in ("nan", "inf", "-inf", "infinity",
                                                  "-infinity"):
    return float(value)
  return value


class DamagedRunError(UserError):
  """A file of a finished run that is not whole: it does not parse, or the run it
  records ends before its config's end. Names the file and what is wrong with it."""

  def __init__(self, path: str, what: str):
    super().__init__(f"{path}: {what}")
    self.path, self.what = path, what


def read_records(workdir: str, strict: bool = False) -> list[dict[str, Any]]:
  """Every point of ``workdir/metrics.jsonl`` (or its .gz), NaN strings made floats.

  A run being written may end in a line cut short by a kill, which is left out. With
  ``strict`` (the log of a finished run, which no process writes any more) every line
  must be a JSON object: one that is not is a DamagedRunError, not a point left out.
  """
  path = os.path.join(workdir, METRICS_FILE)
  gz_path = os.path.join(workdir, METRICS_GZ_FILE)
  if not os.path.exists(path) and os.path.exists(gz_path):
    try:
      with gzip.open(gz_path, "rt") as f:
        lines = f.readlines()
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as e:
      raise DamagedRunError(gz_path, f"not a whole gzip file ({e})") from None
    records = _parse_lines(gz_path, lines)
  elif strict:
    try:
      with open(path) as f:
        records = _parse_lines(path, f.readlines())
    except FileNotFoundError:
      raise DamagedRunError(path, "missing") from None
  else:
    records = read_jsonl(path)
  return [{k: as_number(v) for k, v in r.items()} for r in records]


def _parse_lines(path: str, lines: Sequence[str]) -> list[dict[str, Any]]:
  out = []
  for number, line in enumerate(lines, 1):
    if not line.strip():
      continue
    try:
      point = json.loads(line)
    except json.JSONDecodeError as e:
      cut = "cut short: " if number == len(lines) else ""
      raise DamagedRunError(path, f"line {number} of {len(lines)} is not JSON "
                            f"({cut}{e.msg})") from None
    if not isinstance(point, dict):
      raise DamagedRunError(path, f"line {number} of {len(lines)} is not a JSON object")
    out.append(point)
  return out


def is_epoch_record(record: Mapping[str, Any]) -> bool:
  return EPOCH_KEY in record


def epoch_records(workdir: str) -> list[dict[str, Any]]:
  """The per-epoch points of ``workdir/metrics.jsonl``, NaN strings made floats."""
  return [r for r in read_records(workdir) if is_epoch_record(r)]


def epochs_done(records: Sequence[Mapping[str, Any]]) -> int | float:
  """How many epochs the epoch records cover: fractional when ``max_steps`` ended the
  run inside an epoch, to two decimals."""
  if not records:
    return 0
  epoch = float(records[-1].get("epoch", 0))
  return int(epoch) if epoch.is_integer() else round(epoch, 2)


def read_config(workdir: str) -> dict[str, Any]:
  """``workdir/config.json`` as written by ``lnorm train``; {} when there is none."""
  path = os.path.join(workdir, CONFIG_FILE)
  if not os.path.exists(path):
    return {}
  try:
    with open(path) as f:
      record = json.load(f)
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise DamagedRunError(path, f"not valid JSON ({e}); rerun `lnorm train` into "
                          f"{workdir} to rewrite it, or remove the directory") from None
  if not isinstance(record, dict) or not isinstance(record.get("config", {}), dict):
    raise DamagedRunError(path, "not a run's record (no \"config\" object)")
  return record


def train_seconds(records: Sequence[Mapping[str, Any]]) -> list[float | None]:
  """The cumulative training wall time at each record, None where it is unknown.

  Records written since ``time/train_seconds`` exists carry it. For older runs the
  time is known at epoch records only: the running sum of the epochs'
  ``time/epoch_seconds`` minus their ``time/compile_seconds`` (both exclude
  evaluation), so that the two sources measure the same thing.
  """
  out: list[float | None] = []
  summed = 0.0
  for r in records:
    if is_epoch_record(r):
      summed += _float(r.get(EPOCH_KEY)) - _float(r.get(COMPILE_KEY))
    if isinstance(r.get(TRAIN_SECONDS_KEY), (int, float)):
      out.append(float(r[TRAIN_SECONDS_KEY]))
    else:
      out.append(summed if is_epoch_record(r) else None)
  return out


def _float(value: Any) -> float:
  return float(value) if isinstance(value, (int, float)) else 0.0


# --- metrics -----------------------------------------------------------------------------

#: Whether a smaller value of a metric is better, by its name: defined beside the
#: records' other conventions, where the training loop reads it too (``select_on``).
lower_is_better = defaults.lower_is_better


#: The split whose values are reported where validation selects, never selected on.
TEST_PREFIX = "test/"


def test_values(points: Iterable[Mapping[str, Any]]) -> dict[str, float]:
  """The test metrics the points logged (later points win), as floats."""
  out: dict[str, float] = {}
  for p in points:
    for k, v in p.items():
      if k.startswith(TEST_PREFIX) and isinstance(v, (int, float)) and not isinstance(v, bool):
        out[k] = float(v)
  return out


def is_training_metric(metric: str) -> bool:
  return metric.startswith("train/")


def metric_names(records: Iterable[Mapping[str, Any]]) -> list[str]:
  """Every metric the records carry (not ``step`` or ``epoch``), in first-seen order."""
  keys: list[str] = []
  for r in records:
    keys += [k for k in r if k not in keys and k not in ("step", "epoch")]
  return keys


def summary_metrics(records: Sequence[Mapping[str, Any]]) -> list[str]:
  """The metrics worth a column: the training loss and every evaluated metric."""
  keys = metric_names(records)
  evaluated = [k for k in keys if "/" in k and k.split("/")[0] not in ("train", "time")]
  train = [k for k in ("train/loss", "train/nll", "train/error") if k in keys]
  return train + evaluated


# --- settings and their names --------------------------------------------------------------


def is_ignored(key: str, ignore: Iterable[str]) -> bool:
  """Whether ``key`` is one of ``ignore``, or under one that ends with a dot ("wandb.")."""
  return any(key == f or (f.endswith(".") and key.startswith(f)) for f in ignore)


def is_seed(key: str) -> bool:
  return key == "seed" or key.endswith(".seed")


def distinguishing_keys(settings: Sequence[Mapping[str, Any]],
                        ignore: Iterable[str] = RESUMABLE_FIELDS) -> list[str]:
  """The fewest keys whose values tell the settings apart, in first-seen order.

  Keys that are equal everywhere, or that do not change results (``ignore``), are
  left out; so is a key determined by the others, such as the
  ``norm_options.bn.unbiased=True`` that always accompanies ``batch_size=4``.
  """
  ignore = tuple(ignore)
  keys: list[str] = []
  for s in settings:
    keys += [k for k in s if k not in keys and not is_ignored(k, ignore)]
  varying = [k for k in keys if len({_hashable(s.get(k)) for s in settings}) > 1]

  def distinct(ks):
    return len({tuple(_hashable(s.get(k)) for k in ks) for s in settings})

  needed = distinct(varying)
  for k in reversed(list(varying)):  # Drop later-mentioned keys first.
    rest = [x for x in varying if x != k]
    if distinct(rest) == needed:
      varying = rest
  return varying


def without_newer_fields(settings: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
  """Each setting without the fields that some settings lack and all others share one
  value of: fields lnorm gained between the runs (a new normalizer's options), at their
  defaults. They tell no runs apart, so records made before and after such a change
  pool as the same setting; a field whose recorded values differ still separates."""
  keys = {k for s in settings for k in s}
  newer = {k for k in keys if any(k not in s for s in settings)
           and len({_hashable(s[k]) for s in settings if k in s}) == 1}
  return [{k: v for k, v in s.items() if k not in newer} for s in settings]


def _hashable(value: Any) -> Any:
  return tuple(value) if isinstance(value, list) else value


def setting_name(setting: Mapping[str, Any], keys: Sequence[str]) -> str:
  """``norm=ln,batch_size=4``: the values of ``keys`` in ``setting``; a key the setting
  does not set is left out (a sweep member that keeps the config's value)."""
  return ",".join(f"{k}={format_value(setting[k])}" for k in keys if k in setting)


def format_value(value: Any) -> str:
  if isinstance(value, (list, tuple)):
    return "-".join(format_value(v) for v in value)
  return str(value)


# --- the data a run trained on -----------------------------------------------------------

#: Data fields that only say where the data is read from. Runs that differ in other
#: ``data.*`` fields (the held-out split's seed, a subset, a pixel permutation) differ
#: in their data on purpose, and the analyses see that field; runs equal in all of them
#: should have trained on the same data, but need not have: under ``data.source=auto``
#: the README's quick start trains on 5,000 embedded digits, the same command with
#: $LNORM_DATA_DIR set on the full 60,000.
_WHERE_FROM = ("data.source", "data.data_dir")


def data_identity(run: "Run", by_fingerprint: bool = True) -> tuple | None:
  """What makes a run's data the data it is: its fingerprint, else (runs from before
  fingerprints, or ``by_fingerprint`` False) the dataset's name, source and split
  sizes; None without a record."""
  data = run.data or {}
  if not data:
    return None
  if by_fingerprint and data.get("fingerprint"):
    return ("fingerprint", data["fingerprint"])
  sizes = tuple(sorted((data.get("num_examples") or {}).items()))
  return ("described", data.get("name"), data.get("source"), sizes)


def describe_data(run: "Run") -> str:
  """``mnist from embedded: 4000 train, 500 validation, 500 test (fingerprint 1a2b3c4d)``"""
  data = run.data or {}
  sizes = ", ".join(f"{n} {split}" for split, n in (data.get("num_examples") or {}).items())
  text = f"{data.get('name', '?')} from {data.get('source', '?')}" + (f": {sizes}" if sizes else "")
  return text + (f" (fingerprint {data['fingerprint'][:8]})" if data.get("fingerprint") else "")


def check_same_data(runs: Sequence["Run"], action: str) -> None:
  """Refuses to pool runs trained on different data: within an experiment, runs whose
  ``data.*`` config fields (but where the data is read from) are equal must have the
  same ``data_identity``. ``action`` names what was asked ("lnorm compare")."""
  groups: dict[tuple, list[Run]] = {}
  for r in runs:
    if data_identity(r) is None:
      continue  # A run without a data record: nothing to compare.
    fields = tuple(sorted((k, repr(v)) for k, v in r.config.items()
                          if k.startswith("data.") and k not in _WHERE_FROM))
    groups.setdefault((str(r.config.get("experiment", "")), fields), []).append(r)
  for (experiment, _), members in groups.items():
    # Fingerprints decide when every run has one; a run from before them is compared
    # with the others by description.
    by_fingerprint = all((r.data or {}).get("fingerprint") for r in members)
    by_data: dict[tuple, list[Run]] = {}
    for r in members:
      by_data.setdefault(data_identity(r, by_fingerprint), []).append(r)
    if len(by_data) < 2:
      continue
    lines = "".join(f"  {describe_data(rs[0])}: {', '.join(r.path for r in rs)}\n"
                    for rs in by_data.values())
    records = [rs[0].data for rs in by_data.values()]
    differing = [k for k in ("name", "source", "num_examples", "fingerprint")
                 if len({json.dumps(d.get(k), sort_keys=True) for d in records}) > 1]
    raise UserError(
        f"{action} would pool {experiment or 'runs'} runs trained on different data "
        f"(they differ in {', '.join(differing) or 'their data'}):\n{lines}"
        "Results on different data are not seeds of one setting. Pass the runs of one "
        "dataset only, or retrain the others on it (data.source=auto takes the first "
        "source it finds: pin one with --config.data.source=...).")


# --- runs ----------------------------------------------------------------------------------


@dataclasses.dataclass
class Run:
  """One run directory: its flat config (may be empty), epoch records and all points."""
  path: str
  name: str
  config: dict[str, Any]
  data: dict[str, Any]
  epochs: list[dict[str, Any]]
  points: list[dict[str, Any]]
  label: str = ""
  key_order: tuple[str, ...] = ()  # A sweep's override keys, to order labels by.
  # A sweep member's overrides as typed (``"3e-4"``) and the keys the sweep names its
  # members by (sweep.json's ``setting_keys``): a setting's name, the same wherever it
  # is printed. Empty outside a sweep.
  overrides: dict[str, str] = dataclasses.field(default_factory=dict)
  setting_keys: tuple[str, ...] = ()
  # config.json's "trivial" record: the scores of the experiment's trivial baseline
  # (``Task.trivial_baseline``), ``{"model": ..., "values": {"validation/error": ...}}``;
  # None for records written before it existed, or by an experiment that declares none.
  trivial: dict[str, Any] | None = None

  @property
  def diverged(self) -> bool:
    """Stopped on a loss or gradient norm that was not finite (its last record)."""
    return has_diverged(self.points)

  @property
  def finished(self) -> bool:
    """Trained as long as its config asks, or stopped for good on a value that was not
    finite: a run whose record is whole."""
    return defaults.is_complete(self.config, self.epochs) or self.diverged

  @property
  def diverged_at(self) -> int | None:
    return int(self.points[-1][DIVERGED_AT]) if self.diverged else None

  def records(self, metric: str) -> list[dict[str, Any]]:
    """The records that measure ``metric``: for an evaluation metric every point that
    carries it (mid-epoch evaluations included); for a training metric the epoch
    records only, since a mid-epoch training value is a running mini-batch mean, a
    different and noisier quantity than the epoch's."""
    source = self.epochs if is_training_metric(metric) else self.points
    return [r for r in source if isinstance(r.get(metric), (int, float))
            and not isinstance(r.get(metric), bool)]

  def test_at(self, step: int) -> dict[str, float]:
    """The test metrics of the model at evaluation ``step``: those logged there, else
    those the run measured after its last update on the model it kept from that step
    (``select_on``: ``selected/step`` and ``selected/test/...``); {} when neither."""
    # A record's test values are of the model at its step, except where it names the
    # model a task kept (KEPT_STEP): order-embeddings' last record tests that one.
    logged = test_values(p for p in self.points if p.get(KEPT_STEP, p.get("step")) == step)
    if logged:
      return logged
    kept = [p for p in self.points if p.get(SELECTED_STEP) == step]
    if not kept:
      return {}
    return test_values([{k[len(SELECTED_PREFIX):]: v for k, v in kept[-1].items()
                         if k.startswith(SELECTED_PREFIX)}])

  def series(self, metric: str, x: str = "epoch") -> tuple[list[float], list[float]]:
    """(x, y) of ``metric``. Against 'epoch': :meth:`records`, mid-epoch evaluations
    at their fractional epoch. Against 'step': every point, running training values
    included."""
    source = self.records(metric) if x == "epoch" else self.points
    xs, ys = [], []
    for r in source:
      y = r.get(metric)
      if isinstance(y, (int, float)) and x in r:
        xs.append(float(r[x]))
        ys.append(float(y))
    return xs, ys


def find_run_dirs(paths: Sequence[str]) -> list[str]:
  """Every directory at or under ``paths`` that holds a metrics.jsonl (or .gz), sorted."""
  found: list[str] = []
  for path in paths:
    if not os.path.isdir(path):
      raise UserError(f"{path} is not a directory.")
    if _has_metrics(os.listdir(path)):
      found.append(path)
      continue
    for root, dirs, files in os.walk(path):
      dirs[:] = sorted(d for d in dirs if d not in _NOT_RUNS)
      if _has_metrics(files):
        found.append(root)
  if not found:
    raise UserError(f"No {METRICS_FILE} found under {', '.join(paths)}.")
  return found


def _has_metrics(files: Iterable[str]) -> bool:
  return METRICS_FILE in files or METRICS_GZ_FILE in files


def read_sweep_file(sweep_dir: str) -> dict[str, Any] | None:
  """``sweep_dir/sweep.json`` (written by ``lnorm sweep``), or None if there is none."""
  path = os.path.join(sweep_dir, SWEEP_FILE)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def _sweep_members(path: str) -> list[dict[str, Any]]:
  """A sweep directory's members in the sweep's order, which means more than sorting."""
  try:
    record = read_sweep_file(path)
    return list(record["members"]) if record else []
  except (OSError, KeyError, TypeError, json.JSONDecodeError):
    return []


def read_run(workdir: str, name: str, strict: bool = False, **labels: Any) -> Run:
  """The run in ``workdir`` (empty when it has not started): its config.json's
  records and its metrics (``strict`` as in :func:`read_records`). ``labels``: the
  :class:`Run` fields that come from elsewhere (a sweep's overrides)."""
  record = read_config(workdir)
  points = read_records(workdir, strict)
  return Run(workdir, name, record.get("config", {}), record.get("data", {}),
             [p for p in points if is_epoch_record(p)], points,
             trivial=record.get("trivial"), **labels)


def read_finished_run(path: str, name: str) -> Run:
  """The run recorded in ``path`` (a benchmark record), whole or refused: its
  config.json and every line of its metrics must parse, and the run must be over
  (:attr:`Run.finished`). Anything else is a DamagedRunError naming the file: left
  out without a word, a record cut short would drop its seed from a verdict."""
  if not os.path.exists(os.path.join(path, CONFIG_FILE)):
    raise DamagedRunError(os.path.join(path, CONFIG_FILE), "missing")
  run = read_run(path, name, strict=True)
  # The log read_records read: the plain one wherever it exists.
  metrics = os.path.join(path, METRICS_FILE)
  if not os.path.exists(metrics):
    metrics = os.path.join(path, METRICS_GZ_FILE)
  if not run.finished:
    last = run.epochs[-1] if run.epochs else {}
    asked = (f"max_steps={run.config['max_steps']}" if run.config.get("max_steps")
             else f"num_epochs={run.config.get('num_epochs')}")
    raise DamagedRunError(metrics, (
        f"ends at step {last.get('step', 0)} (epoch {last.get('epoch', 0)}), before the "
        f"end its config asks for ({asked}): lines are missing"))
  return run


def load_runs(paths: Sequence[str]) -> list[Run]:
  """The runs at or under ``paths``, in sweep order where there is one, labelled."""
  dirs = find_run_dirs(paths)
  order, key_order = [], []
  for p in paths:
    for m in _sweep_members(p):
      order.append(os.path.join(p, m.get("workdir", "")))
      key_order += [k for k in m.get("overrides", {}) if k not in key_order]
  # A sweep member's overrides, whether the sweep folder or a folder above it was given.
  members: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {}
  for sweep_dir in dict.fromkeys(os.path.dirname(os.path.abspath(d)) for d in dirs):
    setting_keys = tuple((read_sweep_file(sweep_dir) or {}).get("setting_keys") or ())
    for m in _sweep_members(sweep_dir):
      members[os.path.abspath(os.path.join(sweep_dir, m.get("workdir", "")))] = (
          dict(m.get("overrides", {})), setting_keys)
  rank = {os.path.abspath(d): i for i, d in enumerate(order)}
  dirs.sort(key=lambda d: (rank.get(os.path.abspath(d), len(rank)), d))
  common = os.path.commonpath([os.path.abspath(d) for d in dirs])
  runs = []
  for d in dirs:
    name = os.path.relpath(os.path.abspath(d), common) if len(dirs) > 1 else os.path.basename(
        os.path.abspath(d))
    overrides, setting_keys = members.get(os.path.abspath(d), ({}, ()))
    runs.append(read_run(d, name, key_order=tuple(key_order), overrides=overrides,
                         setting_keys=setting_keys))
  label_runs(runs)
  return runs


def used_settings(run: Run) -> dict[str, Any]:
  """The config fields that say what ``run`` did: its flat config, with ``data.source``
  the source the data record says it resolved to (a config's 'auto' does not say
  whether a run trained on the full files or the embedded 4k digits)."""
  settings = dict(run.config)
  source = (run.data or {}).get("source")
  if source:
    settings["data.source"] = source
  return settings


def label_runs(runs: Sequence[Run]) -> None:
  """Labels each run by what tells it apart from the others: its experiment, when the
  runs span several, and the config fields that differ among the runs of that
  experiment ("skip_thoughts: norm=ln,seed=1"); with one experiment the fields alone
  ("norm=ln,batch_size=4"). Fields are compared within an experiment, never across
  experiments, where a field one experiment has and another lacks (the attentive
  reader's ``data.corpus``) says nothing the experiment does not. Runs that no field
  tells apart are labelled by their directory."""
  groups: dict[str, list[Run]] = {}
  for r in runs:
    groups.setdefault(str(r.config.get("experiment", "")), []).append(r)
  several = len(groups) > 1
  for experiment, group in groups.items():
    labels = _setting_labels(group)
    if labels is None or (not several and not all(labels)):
      labels = [r.name for r in group]
    for r, label in zip(group, labels):
      prefix = experiment if several and experiment else ""
      r.label = f"{prefix}: {label}" if prefix and label else (prefix or label or r.name)


def fields_every_run_has(settings: Sequence[dict]) -> list[dict]:
  """Each setting without the fields some runs lack: a newer config's field must not
  split runs that differ only in the commit they were made at."""
  return [{k: v for k, v in s.items() if all(k in t for t in settings)} for s in settings]


def _setting_labels(runs: Sequence[Run]) -> list[str] | None:
  """``setting_name`` of each run over the fewest distinguishing fields, or None when
  no fields tell the runs apart. Fields every run has come first; fields only some
  runs have (an older config without a newer field) only when needed."""
  settings = [used_settings(r) for r in runs]
  shared = fields_every_run_has(settings)
  rank = {k: i for i, k in enumerate(runs[0].key_order)}
  for candidate in (shared, settings):
    keys = distinguishing_keys(candidate, ignore=LABEL_IGNORE)
    # A sweep's order, else the config's, with the seed last: "norm=ln,seed=1".
    keys.sort(key=lambda k: (rank.get(k, len(rank)), is_seed(k)))
    labels = [setting_name(s, keys) if keys else "" for s in candidate]
    if len(set(labels)) == len(runs):
      return labels
  return None
