"""Running the benchmark suite through ``lnorm sweep``'s runner, and its records.

An experiment's members are grouped by variant and normalizer (``norm=ln``,
``batch_size=25,norm=bln``); each group is a sweep over seeds
(:func:`lnorm.sweeps.runner.run_sweep`) into
``<workdir>/<scale>/<experiment>/<group>/seed=<s>/``, so that a finished member is
skipped and an interrupted one resumes from its checkpoint, whatever part of the
suite a command selects. One member at a time, the members go seed by seed (every
normalizer at seed 0 first: a sitting that ends early leaves whole seeds); with
``--parallel N`` each group's seeds run N at once.

A finished member's ``config.json`` and ``metrics.jsonl`` are then copied to
``<records>/<experiment>/<group>,seed=<s>/``, the metrics compressed when large, and
for a BLN member the ``bln_search.json`` of its inference search (the BLN paper's
Algorithm 2, run on its last checkpoint before the copy); nothing else (no
checkpoints). Those records are what the headline table is computed from, and a member
whose records exist counts as finished: its records are copied back into its workdir
before its sweep, where the runner sees a finished run. So the suite can be completed
over several sittings, on several machines.

Where: the suite's own members (what ``--print-commands`` gives without overrides)
keep their records in ``results/<scale>/`` of the checkout the command runs in
(:func:`checkout_root`); every other member (a normalizer the suite does not run, a
config a ``--config.x=y`` changes) beside the workdir, so that only the suite's own
commands reach the committed records. A record is never replaced by a run of another
config (:func:`refuse_overwrite`), and a record read is whole or named as damaged
(:func:`read_records`).
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
from typing import Any, Iterable, Mapping, Sequence

from lnorm import config as config_lib
from lnorm.analysis import claims
from lnorm.analysis import code_versions
from lnorm.analysis import compare
from lnorm.analysis import generated_block
from lnorm.analysis import rule
from lnorm.analysis import runs as runs_lib
from lnorm.analysis import specs
from lnorm.analysis import timing
from lnorm.errors import ConfigError, UserError
from lnorm.sweeps import benchmark_suite as suite
from lnorm.sweeps import runner
from lnorm.sweeps.space import SweepSpace
from lnorm.training import defaults
from lnorm.training import environment
from lnorm.training.defaults import has_diverged
from lnorm.training.run_files import BLN_SEARCH_FILE, CONFIG_FILE, METRICS_FILE

#: Metrics logs larger than this are committed gzipped.
GZIP_ABOVE_BYTES = 1_000_000
DEFAULT_WORKDIR = os.path.join("runs", "benchmark")
#: Where datasets are looked for (lnorm.data.core.DATA_DIR_ENV; not imported, since
#: lnorm.data imports every dataset's reader).
DATA_DIR_ENV = "LNORM_DATA_DIR"
#: Where decoded data is cached (lnorm.data.cache.CACHE_DIR_ENV).
CACHE_DIR_ENV = "LNORM_CACHE_DIR"


#: The project a checkout's pyproject.toml names (``[project] name``).
PROJECT = "lnorm"


def checkout_root(start: str | None = None) -> str | None:
  """The lnorm checkout a command runs in: the nearest folder at or above ``start``
  (default the current directory) that holds lnorm's pyproject.toml and a results/
  folder; None outside any. Found from where the command runs, never from where the
  package is installed: a second clone whose environment holds an editable install of
  the first must write into its own results/, and an installed package has none."""
  folder = os.path.abspath(start or os.getcwd())
  while True:
    if _is_checkout(folder):
      return folder
    parent = os.path.dirname(folder)
    if parent == folder:
      return None
    folder = parent


def _is_checkout(folder: str) -> bool:
  if not os.path.isdir(os.path.join(folder, "results")):
    return False
  try:
    with open(os.path.join(folder, "pyproject.toml"), "rb") as f:
      return tomllib.load(f).get("project", {}).get("name") == PROJECT
  except (OSError, tomllib.TOMLDecodeError):
    return False


def records_root(scale: str, workdir: str = DEFAULT_WORKDIR) -> str:
  """Where the suite's own members keep their records by default: the checkout's
  ``results/<scale>`` (:func:`checkout_root`), at the gpu scale the GPU's own folder
  ``results/gpu/<device>/benchmark`` (:func:`gpu_records`), else, outside a checkout,
  beside the workdir (:func:`own_records_root`)."""
  checkout = checkout_root()
  if not checkout:
    return own_records_root(workdir, scale)
  if scale == "gpu":
    return gpu_records(os.path.join(checkout, "results"), accelerator())
  return os.path.join(checkout, "results", scale)


#: The gpu scale's records of a device, in its folder under results/gpu/.
GPU_RECORDS_FOLDER = "benchmark"


def gpu_records(results: str, device_kind: str) -> str:
  """``<results>/gpu/<device>/benchmark``: a GPU's benchmark records beside the GPU
  check's records of it, in the folder named as the check names it (NVIDIA H100 80GB
  HBM3: ``nvidia-h100-80gb-hbm3``). Members are not comparable across devices (their
  kernels differ), so each device keeps its own."""
  return os.path.join(results, "gpu", environment.device_slug(device_kind),
                      GPU_RECORDS_FOLDER)


def accelerator() -> str:
  """The kind of the GPU this machine's JAX runs on (``jax.devices()[0].device_kind``),
  asked in a child process, so that this one, which runs the members, holds none of
  the device's memory; a machine whose JAX sees no GPU is refused in one line."""
  code = "import jax; d = jax.devices()[0]; print(d.platform); print(d.device_kind)"
  try:
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=300, env={**os.environ,
                                             "XLA_PYTHON_CLIENT_PREALLOCATE": "false"})
  except subprocess.TimeoutExpired:
    found = None
  lines = found.stdout.strip().splitlines() if found and found.returncode == 0 else []
  if len(lines) < 2:
    why = (found.stderr.strip().splitlines() or ["no output"])[-1] if found else "timed out"
    raise UserError(f"--scale gpu: could not ask JAX which device it runs on ({why}). Give "
                    "the records' folder with --records DIR.")
  platform, kind = lines[-2:]
  if platform != "gpu":
    raise UserError(f"--scale gpu records a GPU's members under results/gpu/<device>/"
                    f"{GPU_RECORDS_FOLDER}, and JAX here runs on {platform} ({kind}): run "
                    "it on a GPU, or give the records' folder with --records DIR.")
  return kind


def own_records_root(workdir: str, scale: str) -> str:
  """Where the records of members that are not the suite's own go by default: beside
  their runs."""
  return os.path.join(workdir, "records", scale)


def shown(path: str) -> str:
  """``path`` as a user reads it: relative to the current directory when under it."""
  relative = os.path.relpath(os.path.abspath(path))
  return relative if not relative.startswith(os.pardir) else os.path.abspath(path)


@dataclasses.dataclass
class Plan:
  """One experiment's part of a benchmark command: its members, where they train, the
  command's --config.x=y overrides and where their records go."""
  experiment: suite.Experiment
  setting: suite.Setting
  members: list[suite.Member]
  workdir: str  # <workdir>/<scale>/<experiment>
  scale: str = "cpu"
  #: Where the records of members that are not the suite's own go
  #: (:meth:`is_suite_member`): the records root (a checkout's results/) holds the
  #: committed benchmark, and only what ``--print-commands`` gives without overrides
  #: may reach it. None: every member's records go under the records root (--records).
  own_records: str | None = None
  #: The command's --config.x=y, which every member runs with.
  overrides: Mapping[str, str] = dataclasses.field(default_factory=dict)
  _changed: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

  def record_dir(self, records: str, member: suite.Member) -> str:
    """Where ``member``'s records are: under the records root ``records`` for the
    suite's own members, else under :attr:`own_records` when it is given."""
    if self.own_records and not self.is_suite_member(member):
      return record_dir(self.own_records, member)
    return record_dir(records, member)

  def is_suite_member(self, member: suite.Member) -> bool:
    """Whether ``member`` is one of the suite's own: a normalizer its setting runs at
    the member's variant, with the config the suite gives it (:meth:`changes_config`)."""
    variants = list(self.setting.variants)
    return (member.variant in variants
            and member.norm in self.setting.norms_at(variants.index(member.variant),
                                                     self.experiment.norms)
            and not self.changes_config(member))

  def changes_config(self, member: suite.Member) -> bool:
    """Whether the command's overrides change ``member``'s config from the one the
    suite gives it, in a field beside where data and logs go (:data:`PER_RUN_FIELDS`):
    ``--config.data.source=embedded`` does, ``--config.wandb.mode=offline`` or the
    suite's own value does not."""
    if not self.overrides:
      return False
    key = (tuple(sorted(member.variant.items())), member.norm, member.seed)
    if key not in self._changed:
      try:
        self._changed[key] = bool(config_drift(self.member_config(member, {}),
                                               self.member_config(member)))
      except ConfigError:  # The suite's own config of it no longer runs.
        self._changed[key] = True
    return self._changed[key]

  def member_of(self, config: Mapping[str, Any]) -> suite.Member | None:
    """The member a record's flat ``config`` is of; None when no variant matches."""
    index = suite.variant_index(config, self.setting.variants,
                                self.experiment.variant_keys)
    if index is None:
      return None
    return suite.Member(self.experiment.name, self.setting.variants[index],
                        str(config.get("norm")), int(config.get("seed", 0)))

  def member_config(self, member: suite.Member,
                    extra: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The flat config ``member`` runs, as its record's config.json holds it; with the
    plan's overrides unless ``extra`` says otherwise ({}: the suite's own)."""
    _, configs = self.prepare([member], extra)
    return as_recorded(configs[member.name])

  def groups(self) -> dict[str, list[suite.Member]]:
    """The members by group (variant and normalizer), in the plan's order."""
    out: dict[str, list[suite.Member]] = {}
    for m in self.members:
      out.setdefault(m.group, []).append(m)
    return out

  def group_workdir(self, group: str) -> str:
    return os.path.join(self.workdir, group)

  def group_overrides(self, member: suite.Member,
                      extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """What every seed of ``member``'s group gets, the rule's hash included; the
    command's --config.x=y (the plan's, unless ``extra`` says otherwise) win."""
    return {**self.setting.overrides, **member.variant, "norm": member.norm,
            "wandb.group": self.experiment.name,
            "benchmark_hash": suite.member_hash(self.experiment, self.scale, member.variant),
            **(self.overrides if extra is None else extra)}

  def sweep_name(self, group: str) -> str:
    return f"{self.experiment.name}/{group}"

  def prepare(self, members: Sequence[suite.Member],
              extra: Mapping[str, str] | None = None):
    """The runner's members and configs for ``members`` of one group, by member name
    (``extra`` as in :meth:`group_overrides`); checks every value against the config
    first."""
    first = members[0]
    runner_members, configs = runner.prepare(
        self.setting.config, seed_space(members), self.group_workdir(first.group),
        self.group_overrides(first, extra))
    return ({m.name: r for m, r in zip(members, runner_members)},
            {m.name: configs[r.name] for m, r in zip(members, runner_members)})

  def prepare_all(self, extra: Mapping[str, str] | None = None):
    found, configs = {}, {}
    for members in self.groups().values():
      f, c = self.prepare(members, extra)
      found.update(f)
      configs.update(c)
    return found, configs


def seed_space(members: Sequence[suite.Member]) -> SweepSpace:
  """A sweep over the members' seeds: its members are named ``seed=<s>`` whether it
  has one seed or several."""
  return SweepSpace(grid=[("seed", [str(m.seed) for m in members])])


def plans(experiments: Sequence[suite.Experiment], scale: str, workdir: str,
          norms: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
          records: str | None = None, variants: dict[str, str] | None = None,
          own_records: str | None = None,
          overrides: Mapping[str, str] | None = None) -> list[Plan]:
  """Each experiment's members. Without ``seeds``, an experiment's seeds are the
  rule's (:func:`seeds_by_power`, from the records under ``records``); the records of
  members that are not the suite's own go to ``own_records`` when given
  (:attr:`Plan.own_records`); every member runs with ``overrides``."""
  out = []
  for e in experiments:
    chosen = seeds if seeds is not None else seeds_by_power(e, scale, records)
    members = suite.members([e], scale, norms, chosen, variants)
    plan = Plan(e, e.scales[scale], members, os.path.join(workdir, scale, e.name),
                scale, None if own_records == records else own_records,
                dict(overrides or {}))
    out.append(plan if seeds is not None else table_rows_at_their_seeds(plan))
  return out


def table_rows_at_their_seeds(plan: Plan) -> Plan:
  """``plan`` with each normalizer no claim reads (its row in the headline table, and
  no verdict) at the first ``specs.TABLE_ROW_SEEDS`` of the rule's seeds: the planned
  seeds are sized for the claims, and every normalizer lnorm has runs in every
  experiment (issue 60). A row a claim reads keeps every planned seed."""
  claims_ = plan.experiment.claims_at(plan.scale)
  first = sorted({m.seed for m in plan.members})[:specs.TABLE_ROW_SEEDS]
  read: dict[str, bool] = {}
  kept = []
  for m in plan.members:
    if m.group not in read:
      config = plan.member_config(m, {})
      read[m.group] = any(_is_side(c, config) for c in claims_)
    if read[m.group] or m.seed in first:
      kept.append(m)
  return dataclasses.replace(plan, members=kept)


def seeds_by_power(experiment: suite.Experiment, scale: str,
                   records: str | None) -> list[int]:
  """The rule's seeds for ``experiment`` (:func:`seed_plan`) from the records under
  ``records``: the pilot's until every claim's pilot members have records, then the
  pilot and the seeds by power."""
  # A damaged record counts as none here; the report names it.
  found, _ = _read_folder(records, experiment.name) if records else ([], {})
  if not found:
    return suite.pilot_seeds(None)
  kept, _ = under_rule(found, experiment, scale)
  return list(seed_plan(experiment, scale, kept).planned)


@dataclasses.dataclass
class SeedPlan:
  """The rule's seeds for one experiment, fixed before the seeds it adds are run.

  ``minutes``: the mean wall minutes of its seed-0 records (time/wall_seconds: data
  loading, compilation and evaluation included, what a member costs), which size the
  ``pilot`` (rule.pilot_size; None where some seed-0 record does not show it, or none
  is recorded yet: the smaller pilot); ``training_minutes``: their mean training
  minutes, shown where the wall time is not recorded (a lower bound of it);
  ``planned``: the pilot and the seeds its neediest claim asks (claims.planned_seeds),
  planned from the pilot's records alone; ``pilot_evidence``: each claim judged on
  the pilot, by key (absent where the pilot is not complete)."""
  minutes: float | None
  pilot: tuple[int, ...]
  planned: tuple[int, ...]
  pilot_evidence: dict[str, claims.Evidence] = dataclasses.field(default_factory=dict)
  training_minutes: float | None = None


def _last_minutes(run: runs_lib.Run, key: str) -> float | None:
  """A run's last value of the clock ``key`` (a time/... field), in minutes."""
  known = [p[key] for p in run.points if p.get(key) is not None]
  return known[-1] / 60 if known else None


def _mean(values: Sequence[float | None]) -> float | None:
  """The mean of ``values``; None when there are none or one is unknown."""
  return None if not values or None in values else sum(values) / len(values)


def seed_plan(experiment: suite.Experiment, scale: str,
              runs: Sequence[runs_lib.Run]) -> SeedPlan:
  """The rule's seeds for ``experiment`` from its records ``runs`` (those under the
  rule): the pilot, five seeds where its seed-0 members took under 5 minutes of wall
  time, else (or where a seed-0 record does not show it) three; once every claim's
  pilot is recorded, as many more as the claim that needs the most asks, to detect
  its minimum effect (at most the scale's cap, rule.seed_cap, and only where that many
  can decide it),
  every normalizer at that count. Planned from the pilot's seeds alone, so that the
  plan does not move as the added seeds finish: later seeds are exploratory."""
  first = [r for r in runs
           if r.config.get("experiment") == experiment.name and r.config.get("seed") == 0]
  minutes = _mean([_last_minutes(r, runs_lib.WALL_SECONDS_KEY) for r in first])
  training = _mean([_last_minutes(r, runs_lib.TRAIN_SECONDS_KEY) for r in first])
  pilot = tuple(suite.pilot_seeds(minutes))
  on_pilot = [r for r in runs if r.config.get("seed") in pilot]
  count, evidence = len(pilot), {}
  for claim in experiment.claims_at(scale):
    if not all(set(pilot) <= side
               for side in claims.side_seeds(on_pilot, experiment.name, claim)):
      continue  # The pilot is not complete: nothing to plan from yet.
    ev = claims.judge(on_pilot, experiment.name, claim, experiment.metric, scale=scale)
    evidence[claim.key] = ev
    count = max(count, claims.planned_seeds(ev, len(pilot)))
  return SeedPlan(minutes, pilot, tuple(range(count)), evidence, training)


# --- records -----------------------------------------------------------------------------


def record_dir(records: str, member: suite.Member) -> str:
  return os.path.join(records, member.experiment, member.name)


def is_over(workdir: str, config) -> bool:
  """The member needs no more training: it trained as long as ``config`` asks, or it
  stopped on a loss or gradient norm that was not finite. Rerunning such a member on the
  same data and seed stops at the same step, so the suite records it as it is, a seed
  that never reaches the target, instead of leaving the seed out of the table."""
  return runner.is_finished(workdir, config) or has_diverged(runs_lib.read_records(workdir))


def has_records(path: str, config) -> bool:
  """True when the records in ``path`` (``Plan.record_dir``) cover the whole run
  ``config`` asks for, under the suite's setting and rule now. A record made under
  another rule (its ``benchmark_hash`` differs) does not count: the member runs again
  and its new record replaces the old one, which the report would refuse to judge
  anyway. Neither does a record of another config (:func:`config_drift`), nor a
  damaged one; those :func:`refuse_overwrite` refuses to replace."""
  if not os.path.exists(os.path.join(path, CONFIG_FILE)):
    return False
  try:
    recorded = runs_lib.read_config(path).get("config", {})
  except runs_lib.DamagedRunError:
    return False
  if suite.current_hash(recorded.get("benchmark_hash", "")) != config.get("benchmark_hash", ""):
    return False
  return not config_drift(recorded, as_recorded(config)) and is_over(path, config)


def refuse_overwrite(plan: Plan, records: str, member: suite.Member, config,
                     workdir: str) -> None:
  """Refuses, in one line, to record ``member`` (whose config is ``config``) where its
  record or its workdir holds a run of another config: a record is replaced only by
  a run of its own config (a rerun under a new rule), and a workdir's finished run is
  recorded only as the member it is a run of. A damaged record is refused too: what
  it recorded cannot be told."""
  path = plan.record_dir(records, member)
  now = as_recorded(config)
  if os.path.isdir(path) and os.listdir(path):
    try:
      recorded = runs_lib.read_finished_run(path, member.name)
    except runs_lib.DamagedRunError as e:
      raise UserError(f"{shown(e.path)}: {e.what}. This command would overwrite that "
                      f"record of {member.name}: restore it (from git), or delete "
                      f"{shown(path)} to run the member again.") from None
    drift = config_drift(recorded.config, now)
    if drift:
      raise UserError(
          f"{shown(path)} holds a record of another config (the record's -> this "
          f"command's: {drift_text(drift)}), which this command would overwrite. Keep "
          "this config's records apart with --records DIR, or delete that record to "
          "replace it.")
  if os.path.exists(os.path.join(workdir, CONFIG_FILE)):
    drift = config_drift(runs_lib.read_config(workdir).get("config", {}), now)
    if drift:
      raise UserError(
          f"{shown(workdir)} holds a run of another config (the run's -> this "
          f"command's: {drift_text(drift)}), which is not {member.name} of this command. "
          "Give this config another --workdir, or delete that run.")


def drift_text(drift: Sequence[str]) -> str:
  """The first :data:`DRIFT_FIELDS_SHOWN` of ``drift`` (``field: old -> new``), and
  how many more."""
  first = list(drift[:DRIFT_FIELDS_SHOWN])
  more = len(drift) - len(first)
  return ", ".join(first) + (f" and {more} more field{'s' if more > 1 else ''}"
                              if more else "")


#: How many differing fields a message names.
DRIFT_FIELDS_SHOWN = 3


def command_config(experiment: suite.Experiment, scale: str, variant: Mapping[str, str],
                   norm: str, seed: int,
                   overrides: Mapping[str, str] | None = None) -> dict[str, Any]:
  """The flat config that member's command (``--print-commands``, with the command's
  ``overrides``) runs now, as its record's config.json would hold it."""
  member = suite.Member(experiment.name, variant, norm, seed)
  plan = Plan(experiment, experiment.scales[scale], [member], "", scale,
              overrides=dict(overrides or {}))
  return plan.member_config(member)


def as_recorded(config) -> dict[str, Any]:
  """``config`` flat, its values as config.json holds them (``write_run_record``)."""
  return json.loads(json.dumps(config_lib.to_flat_dict(config), default=str))


#: Fields a record may hold other values of than its member's command gives now and
#: still be a run of that command: where the data and logs went, not what ran. (Found by
#: comparing fresh records with their rebuilt configs: the training loop fills in no
#: field; only the command's wandb.name differs.)
PER_RUN_FIELDS = (
    "wandb.",  # wandb.name is the sweep's member; mode, entity and tags are the user's.
    "data.data_dir",  # Where a machine keeps the data; records say $LNORM_DATA_DIR.
    "data.cache_dir",  # Where a machine caches decoded data.
    "benchmark_hash",  # Compared first, by itself: a record under another hash is stale.
)
_ABSENT = "<absent>"


@functools.lru_cache(maxsize=1)
def _lnorm_defaults() -> dict[str, Any]:
  """Every field lnorm's base config and normalizers give a default, flat."""
  base = defaults.base_config()
  base.norm_options = defaults.norm_options()
  return as_recorded(base)


def config_drift(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
  """How the flat config a record ran (``recorded``) differs from the one its member's
  command gives ``now`` (both as config.json holds them), PER_RUN_FIELDS aside: one
  ``field: old -> new`` per field, sorted; empty when the record is of that command."""
  differences = []
  for key in sorted(set(recorded) | set(now)):
    if any(key == f or (f.endswith(".") and key.startswith(f)) for f in PER_RUN_FIELDS):
      continue
    old, new = recorded.get(key, _ABSENT), now.get(key, _ABSENT)
    # A field lnorm gained after the record was made is absent from it; a new field's
    # default keeps the old behaviour (lnorm's convention), so at that default it is
    # no drift. A field a config file gained (data.candidate_pool) is.
    if old == _ABSENT and key in _lnorm_defaults() and new == _lnorm_defaults()[key]:
      continue
    if old != new:
      differences.append(f"{key}: {old} -> {new}")
  return differences


def _portable(value: Any, data_dir: str | None, cache_dir: str | None = None) -> Any:
  """``value`` with this machine's data directory written as ``$LNORM_DATA_DIR`` and
  its cache folder (where decoded data and the CBT-style task built from the books
  live) as ``$LNORM_CACHE_DIR``: a record says where the data came from, not where
  this machine keeps it."""
  if isinstance(value, dict):
    return {k: _portable(v, data_dir, cache_dir) for k, v in value.items()}
  if isinstance(value, list):
    return [_portable(v, data_dir, cache_dir) for v in value]
  if isinstance(value, str):
    for directory, name in ((data_dir, DATA_DIR_ENV), (cache_dir, CACHE_DIR_ENV)):
      if directory:
        # The directory wherever it appears ("MNIST at <dir>/mnist"), not a longer name.
        value = re.sub(re.escape(directory.rstrip("/")) + r"(?![\w.-])", f"${name}", value)
  return value


def save_records(workdir: str, dest: str) -> list[str]:
  """Copies a finished run's config.json (made portable) and metrics (gzipped above
  GZIP_ABOVE_BYTES) to ``dest``; returns the files written."""
  os.makedirs(dest, exist_ok=True)
  with open(os.path.join(workdir, CONFIG_FILE)) as f:
    record = json.load(f)
  data_dir = os.environ.get(DATA_DIR_ENV) or (
      record.get("config", {}).get("data.data_dir"))
  from lnorm.data import cache  # pylint: disable=g-import-not-at-top  (the readers: slow)
  cache_dir = cache.cache_dir({"cache_dir": record.get("config", {}).get("data.cache_dir")})
  written = [os.path.join(dest, CONFIG_FILE)]
  with open(written[0], "w") as f:
    json.dump(_portable(record, data_dir, cache_dir), f, indent=2, sort_keys=True)
    f.write("\n")
  source = os.path.join(workdir, METRICS_FILE)
  for stale in (METRICS_FILE, runs_lib.METRICS_GZ_FILE):
    if os.path.exists(os.path.join(dest, stale)):
      os.remove(os.path.join(dest, stale))
  if os.path.getsize(source) > GZIP_ABOVE_BYTES:
    written.append(os.path.join(dest, runs_lib.METRICS_GZ_FILE))
    # mtime=0: the same log gives the same bytes, so a re-collect changes nothing.
    with open(source, "rb") as src, open(written[-1], "wb") as raw, gzip.GzipFile(
        fileobj=raw, mode="wb", mtime=0, filename="") as out:
      shutil.copyfileobj(src, out)
  else:
    written.append(os.path.join(dest, METRICS_FILE))
    shutil.copyfile(source, written[-1])
  if os.path.exists(os.path.join(workdir, BLN_SEARCH_FILE)):
    written.append(os.path.join(dest, BLN_SEARCH_FILE))
    with open(os.path.join(workdir, BLN_SEARCH_FILE)) as f:
      search = json.load(f)
    with open(written[-1], "w") as f:
      json.dump(_portable(search, data_dir, cache_dir), f, indent=2, sort_keys=True)
      f.write("\n")
  return written


def restore_records(source: str, workdir: str) -> None:
  """Puts committed records back into a member's workdir, where the runner reads a
  finished run (metrics decompressed)."""
  os.makedirs(workdir, exist_ok=True)
  shutil.copyfile(os.path.join(source, CONFIG_FILE), os.path.join(workdir, CONFIG_FILE))
  gz = os.path.join(source, runs_lib.METRICS_GZ_FILE)
  if os.path.exists(gz):
    with gzip.open(gz, "rb") as src, open(os.path.join(workdir, METRICS_FILE), "wb") as out:
      shutil.copyfileobj(src, out)
  else:
    shutil.copyfile(os.path.join(source, METRICS_FILE), os.path.join(workdir, METRICS_FILE))
  if os.path.exists(os.path.join(source, BLN_SEARCH_FILE)):
    shutil.copyfile(os.path.join(source, BLN_SEARCH_FILE),
                    os.path.join(workdir, BLN_SEARCH_FILE))


def search_bln_inference(workdir: str) -> None:
  """The BLN paper's Algorithm 2 on a finished BLN run: its 16 inference
  configurations on validation and test, one selected on validation
  (``lnorm bln-search``); writes bln_search.json into the run."""
  # Imported here: it loads JAX and the datasets, which the report alone never needs.
  from lnorm.evaluation import bln_search  # pylint: disable=g-import-not-at-top
  bln_search.write_results(bln_search.search(workdir))


def _needs_search(member: suite.Member, workdir: str) -> bool:
  return (member.norm == "bln" and not has_diverged(runs_lib.read_records(workdir))
          and not os.path.exists(os.path.join(workdir, BLN_SEARCH_FILE)))


def collect(plan: Plan, records: str, out=None, search: bool = True) -> list[str]:
  """Saves the records of the plan's finished members that have none yet; returns
  the members saved. With ``search`` False (a command stopping on SIGTERM, which has
  no minute to spare) a BLN member waiting for its inference search is left for the
  next command."""
  out = out or sys.stdout
  if not os.path.isdir(plan.workdir):
    return []
  runner_members, configs = plan.prepare_all()
  saved = []
  for m in plan.members:
    workdir = runner_members[m.name].workdir
    if (os.path.exists(os.path.join(workdir, CONFIG_FILE))
        and is_over(workdir, configs[m.name])
        and not has_records(plan.record_dir(records, m), configs[m.name])):
      refuse_overwrite(plan, records, m, configs[m.name], workdir)
      if _needs_search(m, workdir):
        if not search:
          continue
        search_bln_inference(workdir)
      save_records(workdir, plan.record_dir(records, m))
      saved.append(m)
  for root in sorted({os.path.dirname(plan.record_dir(records, m)) for m in saved}):
    names = [m.name for m in saved if os.path.dirname(plan.record_dir(records, m)) == root]
    print(f"[benchmark {plan.experiment.name}] records saved for {', '.join(names)} "
          f"under {shown(root)}", file=out, flush=True)
  return [m.name for m in saved]


# --- running --------------------------------------------------------------------------------


def refuse_overwrites(plan: Plan, records: str) -> None:
  """:func:`refuse_overwrite` for each of the plan's members that has no records yet:
  before anything runs, so that a command stops before its first member, not after."""
  runner_members, configs = plan.prepare_all()
  for m in plan.members:
    if not has_records(plan.record_dir(records, m), configs[m.name]):
      refuse_overwrite(plan, records, m, configs[m.name], runner_members[m.name].workdir)


def unfinished(plan: Plan, records: str) -> list[suite.Member]:
  """The plan's members with neither records nor a finished workdir; refuses
  (:func:`refuse_overwrites`) where one's record or workdir holds another config's run."""
  refuse_overwrites(plan, records)
  runner_members, configs = plan.prepare_all()
  return [m for m in plan.members
          if not has_records(plan.record_dir(records, m), configs[m.name])
          and not is_over(runner_members[m.name].workdir, configs[m.name])]


def run(plan: Plan, records: str, parallel: int = 1,
        signals: runner.StopSignals | None = None,
        limit: TimeLimit | None = None, seeds_per_process: int = 1) -> list[str]:
  """Runs (or resumes) one experiment's members and saves the finished ones' records;
  returns the members that failed. ``signals``: the command's (``runner.stop_signals``),
  which its sweeps share. ``limit``: the command's time limit, before which a member is
  started only if its group's records say it can finish (:func:`expected_seconds`).
  ``seeds_per_process``: up to that many seeds of a group train together, in one
  process (``runner.seed_groups``).

  Members with records are restored into their workdirs first, so the runner skips
  them; the records are saved even when the sweep is interrupted (on SIGTERM without
  the BLN searches, which the rerun does). Before anything runs, a member whose record
  or workdir holds a run of another config is refused (:func:`refuse_overwrite`).
  """
  refuse_overwrites(plan, records)
  runner_members, configs = plan.prepare_all()  # Checks every value before running.
  for m in plan.members:
    workdir = runner_members[m.name].workdir
    path = plan.record_dir(records, m)
    if has_records(path, configs[m.name]) and not is_over(workdir, configs[m.name]):
      restore_records(path, workdir)
  todo = [m for m in plan.members if not is_over(runner_members[m.name].workdir,
                                                 configs[m.name])]
  # One at a time, seed by seed (K seeds by K seeds together); in parallel, a group's
  # seeds at once.
  batches = (seed_chunks(todo, seeds_per_process) if parallel <= 1 else
             [[m for m in todo if m.group == g] for g in plan.groups()])
  failed = []
  signals = signals or runner.stop_signals()
  try:
    for members in filter(None, batches):
      group = members[0].group
      # Only under a limit: reading the group's records costs a command without one.
      if limit is not None and limit.seconds is not None:
        members = _start_what_fits(plan, records, members, limit, seeds_per_process,
                                   in_parallel=parallel > 1)
        if not members:
          continue
      summary = runner.run_sweep(plan.setting.config, seed_space(members),
                                 plan.group_workdir(group), plan.group_overrides(members[0]),
                                 parallel=parallel, figures=False,
                                 name=plan.sweep_name(group), signals=signals,
                                 seeds_per_process=seeds_per_process)
      # A member that stopped as not finite is recorded as such: not a failure to retry.
      over = {runner_members[m.name].name for m in members
              if is_over(runner_members[m.name].workdir, configs[m.name])}
      failed += [f"{group},{name}" for name in summary.failed if name not in over]
      collect(plan, records)  # As members finish, so a sitting keeps its records.
  finally:
    collect(plan, records, search=not signals.received)
  return failed


def _start_what_fits(plan: Plan, records: str, members: list[suite.Member],
                     limit: TimeLimit, seeds_per_process: int,
                     in_parallel: bool) -> list[suite.Member]:
  """Of a batch of ``members`` about to train, those the time left before ``limit``
  can hold; the others wait for the next command (``limit.deferred``, and a line
  saying why). In turn, the batch is one process (seeds of :func:`seed_chunks`
  together, or a member alone): the most of its first seeds that fit, down to one,
  since a process of fewer seeds finishes sooner. In parallel, each process (up to
  ``seeds_per_process`` seeds) starts at once: all or none."""

  def expected(count: int) -> float | None:
    return expected_seconds(plan, records, members[0], min(count, seeds_per_process))

  count = 0
  for tried in [len(members)] if in_parallel else range(len(members), 0, -1):
    if limit.fits(expected(tried)):
      count = tried
      break
  waiting = members[count:]
  if waiting:
    limit.deferred += [f"{plan.experiment.name}/{m.name}" for m in waiting]
    together = min(len(members), seeds_per_process)
    what = (f"{together} seeds of its group together would take up to" if together > 1
            else "its group's members took up to")
    print(f"[benchmark {plan.experiment.name}] {', '.join(m.name for m in waiting)} not "
          f"started: {limit.left():.0f} s left before the time limit, and {what} "
          f"{expected(len(members)):.0f} s (the next chunk runs "
          f"{'them' if len(waiting) > 1 else 'it'})", flush=True)
  return members[:count]


def expected_seconds(plan: Plan, records: str, member: suite.Member,
                     seeds_together: int = 1) -> float | None:
  """The wall time (``time/wall_seconds`` at the run's end: start, data, compilation,
  training and evaluation) a process training ``seeds_together`` seeds of
  ``member``'s group (its variant and normalizer) is expected to take, the longest its
  recorded seeds say; None before one is recorded.

  A seed trained with others records its share of its process's time (each second
  split among the seeds it was spent on), so that process took the share times the
  seeds it held (config.json's ``seeds_together``). A process of more seeds is counted
  in proportion, as on a CPU core, and one of fewer as long as the recorded process:
  an accelerator, which runs a few seeds for little more than one, takes less. The
  estimate errs long: a member the limit stops loses its minutes where its workdir
  is not kept, one that waits loses none."""
  folder = os.path.dirname(plan.record_dir(records, member))
  if not os.path.isdir(folder):
    return None
  found = []
  for name in os.listdir(folder):
    if not name.startswith(f"{member.group},seed="):
      continue
    path = os.path.join(folder, name)
    try:
      run_ = runs_lib.read_finished_run(path, name)
      held = len(runs_lib.read_config(path).get("seeds_together") or [None])
    except runs_lib.DamagedRunError:
      continue  # The report names it.
    known = [p[runs_lib.WALL_SECONDS_KEY] for p in run_.points
             if p.get(runs_lib.WALL_SECONDS_KEY) is not None]
    if known:
      found.append(known[-1] * max(held, seeds_together))
  return max(found) if found else None


def run_order(plans_: Sequence[Plan]) -> list[Plan]:
  """The plans as the command trains them: first the members of the claims each
  setting ranks in ``run_first`` (rank 1 of every experiment, then rank 2, ...), then
  every other member, experiment by experiment; each part keeps its plan's
  seed-major order. A member of several ranked claims goes with the first. The
  report reads the plans whole: this is the order of training only."""
  ranked: dict[float, list[Plan]] = {}
  for p in plans_:
    first = p.setting.run_first
    by_rank: dict[float, list[suite.Member]] = {}
    group_rank: dict[str, float] = {}  # A claim's sides are groups: seeds alike.
    for m in p.members if first else ():
      if m.group not in group_rank:
        config = p.member_config(m, {})
        group_rank[m.group] = min((first[c.key] for c in p.experiment.claims_at(p.scale)
                                   if c.key in first and _is_side(c, config)),
                                  default=math.inf)
      by_rank.setdefault(group_rank[m.group], []).append(m)
    if not first:
      by_rank[math.inf] = list(p.members)
    for rank, members in by_rank.items():
      if members:
        ranked.setdefault(rank, []).append(dataclasses.replace(p, members=members))
  return [part for rank in sorted(ranked) for part in ranked[rank]]


def _is_side(claim: suite.Claim, config: Mapping[str, Any]) -> bool:
  """Whether a member whose flat config is ``config`` is on one side of ``claim``."""
  return (compare.matches(config, claim.where)
          and str(config.get(claim.field)) in (claim.norm, claim.against))


class TimeLimit:
  """``--time-limit SECONDS``: at the limit the command stops as a preemption stops it,
  by a SIGTERM to itself, which its stop signals (``runner.stop_signals``, entered
  before this) pass on to the members running: each saves a checkpoint and exits,
  the finished members' records are saved, and no member starts after it. The same
  command resumes: a member stopped mid-run from its checkpoint in the workdir,
  where the workdir is kept (else it starts again).

  Before the limit, a member is started only when the time left can hold it, as long
  as its group's records took (:meth:`fits`); one that cannot waits for the next
  chunk (:attr:`deferred`), rather than start and be stopped: where the workdir is not
  kept, a stopped member starts again.

  ``timer``: what calls :meth:`expire` after the seconds (``threading.Timer``'s
  signature), and ``clock`` the seconds it counts in; a test passes its own."""

  def __init__(self, seconds: float | None, timer=threading.Timer, clock=time.monotonic):
    if seconds is not None and seconds <= 0:
      raise UserError(f"--time-limit {seconds:g}: give the seconds the command may train, "
                      "more than 0.")
    self.seconds, self._make_timer, self._clock = seconds, timer, clock
    self._deadline = math.inf
    self.expired = False
    #: The members not started because the time left could not hold them.
    self.deferred: list[str] = []
    self._armed = False
    self._lock = threading.Lock()
    self._timer = None

  def __enter__(self) -> "TimeLimit":
    if self.seconds is not None:
      self._deadline = self._clock() + self.seconds
      self._armed = True
      self._timer = self._make_timer(self.seconds, self.expire)
      self._timer.daemon = True
      self._timer.start()
    return self

  def __exit__(self, *exc) -> bool:
    with self._lock:  # Disarmed before the caller's signal handlers go.
      self._armed = False
    if self._timer is not None:
      self._timer.cancel()
    return False

  def left(self) -> float:
    """The seconds left before the limit (infinite without one)."""
    return self._deadline - self._clock()

  def fits(self, seconds: float | None) -> bool:
    """Whether a member expected to take ``seconds`` can finish before the limit; one
    whose time is not known yet (None) is started."""
    return seconds is None or seconds <= self.left()

  def expire(self) -> None:
    """The limit is reached: SIGTERM to this process, once, while armed."""
    with self._lock:
      if not self._armed or self.expired:
        return
      self.expired = True
      os.kill(os.getpid(), signal.SIGTERM)


def seed_chunks(members: Sequence[suite.Member], per_process: int
                ) -> list[list[suite.Member]]:
  """``members`` (in the suite's order, seed by seed) in the runs one member at a time
  makes: each member alone, or with ``per_process`` seeds a process, each group's seeds
  in chunks of that many, the first chunk of every group before any second."""
  if per_process <= 1:
    return [[m] for m in members]
  chunks: dict[str, list[list[suite.Member]]] = {}
  for m in members:
    group = chunks.setdefault(m.group, [[]])
    if len(group[-1]) == per_process:
      group.append([])
    group[-1].append(m)
  rounds = max(len(c) for c in chunks.values()) if chunks else 0
  return [c[i] for i in range(rounds) for c in chunks.values() if i < len(c)]


def print_commands(plans_: Iterable[Plan], records: str, out=None,
                   seeds_per_process: int = 1) -> int:
  """One ``lnorm train`` line per member that is not finished (per chunk of
  :func:`seed_chunks`, its seeds together); returns how many members."""
  count = 0
  for plan in plans_:
    todo = unfinished(plan, records)
    for chunk in seed_chunks(todo, seeds_per_process):
      runner_members, configs = plan.prepare(chunk)
      runner.print_commands(plan.setting.config, [runner_members[m.name] for m in chunk],
                            plan.group_overrides(chunk[0]), plan.sweep_name(chunk[0].group),
                            out=out, seeds_per_process=seeds_per_process,
                            configs={runner_members[m.name].name: configs[m.name]
                                     for m in chunk})
    count += len(todo)
  return count


def destinations(plans_: Sequence[Plan], records: str) -> list[str]:
  """Where the plans' members keep their records, one line per folder: how many of
  the suite's own members and how many others, and why the others are not."""
  by_root: dict[str, list[tuple[Plan, suite.Member]]] = {}
  for p in plans_:
    for m in p.members:
      root = os.path.dirname(os.path.dirname(p.record_dir(records, m)))
      by_root.setdefault(root, []).append((p, m))
  lines = []
  for root, members in by_root.items():
    others = [(p, m) for p, m in members if not p.is_suite_member(m)]
    parts = [f"{len(members) - len(others)} of the suite's own members"] * (
        len(others) < len(members))
    if others:
      parts.append(f"{len(others)} not of the suite ({_why_not_the_suites(*others[0])})")
    lines.append(f"Records go under {shown(root)}: {' and '.join(parts)}.")
  return lines


def _why_not_the_suites(plan: Plan, member: suite.Member) -> str:
  index = list(plan.setting.variants).index(member.variant)
  if member.norm not in plan.setting.norms_at(index, plan.experiment.norms):
    return f"the suite does not run {member.norm} there"
  drift = config_drift(plan.member_config(member, {}), plan.member_config(member))
  return f"the suite's config -> this command's: {drift_text(drift)}"


# --- the report -------------------------------------------------------------------------------

#: The cpu scale's headline in docs/results.md, between these two lines.
BEGIN_MARKER = "<!-- lnorm benchmark: begin (generated by `lnorm benchmark --report-only`) -->"
END_MARKER = "<!-- lnorm benchmark: end -->"
RESULTS_BLOCK = generated_block.GeneratedBlock(BEGIN_MARKER, END_MARKER)


def results_block(scale: str) -> generated_block.GeneratedBlock:
  """Where the report of ``scale`` goes in a page: the cpu scale's between the
  markers above, every other scale's between its own (``<!-- lnorm benchmark gpu:
  begin ...``), so that a GPU's report never replaces the CPU's."""
  if scale == "cpu":
    return RESULTS_BLOCK
  where = (f"results/gpu/<device>/{GPU_RECORDS_FOLDER}" if scale == "gpu"
           else f"results/{scale}")
  return generated_block.GeneratedBlock(
      f"<!-- lnorm benchmark {scale}: begin (generated by `lnorm benchmark --scale {scale} "
      f"--report-only --records {where}`) -->", f"<!-- lnorm benchmark {scale}: end -->")


@dataclasses.dataclass
class ClaimResult:
  claim: suite.Claim
  experiment: str
  verdict: claims.Verdict
  evidence: claims.Evidence | None = None
  plan: SeedPlan | None = None  # The experiment's seeds (None with --seeds).
  #: The claim judged on every recorded seed, where some lie beyond the plan: shown,
  #: never a verdict; and those seeds.
  exploratory: claims.Evidence | None = None
  beyond_plan: tuple[int, ...] = ()
  #: Some of the records judged were made under rule version 2 (re-judged under 3).
  rejudged: bool = False
  #: When the claim's members come from different training code: what differs.
  code: str = ""


@dataclasses.dataclass
class Report:
  scale: str
  rows: list[claims.Row]
  verdicts: list[ClaimResult]
  missing: dict[str, list[str]]  # experiment -> members without records.
  total: dict[str, int]  # experiment -> members in the suite.
  seconds: dict[str, float] = dataclasses.field(default_factory=dict)  # run -> training s.
  # Members whose records carry another rule's hash: experiment -> member names.
  refused: dict[str, list[str]] = dataclasses.field(default_factory=dict)
  ignore_rule: bool = False
  #: The seeds a --seeds selection judges on; None: every recorded seed.
  seeds: tuple[int, ...] | None = None
  #: The folders the records were read from (the records root where none held any),
  #: as the header names them.
  folders: tuple[str, ...] = ()
  #: experiment -> the run folders the table and verdicts were computed from.
  judged: dict[str, list[str]] = dataclasses.field(default_factory=dict)
  #: experiment -> the refused members whose hash is current but whose config is not
  #: their command's now -> how it differs (``config_drift``).
  drift: dict[str, dict[str, list[str]]] = dataclasses.field(default_factory=dict)
  #: The records that are not whole (:func:`lnorm.analysis.runs.read_finished_run`),
  #: judged by nobody: their file as shown -> what is wrong with it.
  damaged: dict[str, str] = dataclasses.field(default_factory=dict)
  #: experiment -> the members of the command whose record is damaged.
  damaged_members: dict[str, list[str]] = dataclasses.field(default_factory=dict)

  @property
  def records_read(self) -> int:
    """How many records the report read, whole or damaged."""
    return (sum(len(j) for j in self.judged.values()) + len(self.damaged)
            + sum(len(r) for r in self.refused.values()))

  def markdown(self) -> str:
    folders = " and ".join(f"`{f}/`" for f in self.folders)
    lines = [f"Generated from the records under {folders} (one run per member: its "
             "config.json and metrics.jsonl) by the verdict "
             f"rule version {rule.VERSION} (hash `{suite.rule_hash()}`), stated in "
             "`docs/benchmark.md`.", ""]
    if self.damaged:
      lines += ["**Damaged records, not judged** (restore them from git, or delete them "
                "and run their members again): " + "; ".join(
                    f"`{path}`: {what}" for path, what in self.damaged.items()) + ".", ""]
    if self.seeds is not None:
      lines[0:0] = [f"Judged on seed{'s' if len(self.seeds) > 1 else ''} "
                    f"{', '.join(map(str, self.seeds))} only (--seeds): the table, the "
                    "verdicts and the member counts leave the other seeds' records out.", ""]
    if self.ignore_rule:
      lines += ["**Judged with `--ignore-rule-hash`: records made under another rule or "
                "setting are judged as if made under this one. Not a verdict of record.**",
                ""]
    not_started = [e for e, m in self.missing.items() if len(m) == self.total[e]]
    if self.rows or not_started:
      table = claims.headline_markdown(self.rows).rstrip("\n").split("\n")
      # An experiment without records keeps its place in the table.
      table += [f"| {e} | — | — | 0/{self.total[e]} members run | not run yet | | | | |"
                for e in not_started]
      lines += table + [""]
    lines += self._claims_markdown() + self._seeds_markdown()
    done = [f"{e} {self.total[e] - len(m) - len(self.damaged_members.get(e, []))}/"
            f"{self.total[e]}" for e, m in self.missing.items()]
    lines += ["", f"Members with records: {', '.join(done)}."]
    if self.seconds:
      slowest = max(self.seconds, key=self.seconds.get)
      lines.append(f"Training time in the records (time/train_seconds: compilation and "
                   f"evaluation excluded): {sum(self.seconds.values()) / 60:.1f} min over "
                   f"{len(self.seconds)} members; the slowest, {slowest}, "
                   f"{self.seconds[slowest] / 60:.1f} min.")
    not_run = [e for e, m in self.missing.items() if m]
    if not_run:
      lines.append("Missing (`lnorm benchmark --print-commands` lists their commands): "
                   + "; ".join(f"{e}: {_members_text(self.missing[e])}" for e in not_run)
                   + ".")
    refused = [e for e, m in self.refused.items() if m]
    if refused:
      lines.append("Records made under another rule or setting (rerun them: delete their "
                   "records and run `lnorm benchmark` again): " + "; ".join(
                       f"{e}: {_members_text(self.refused[e])}{self._drift_text(e)}"
                       for e in refused) + ".")
    return "\n".join(lines) + "\n"

  def _claims_markdown(self) -> list[str]:
    """The verdict lines, each with its exploratory line where seeds lie beyond the plan."""
    rejudged = sum(v.rejudged for v in self.verdicts)
    lines = ["Claims, each judged on its experiment's planned seeds (the p-value of each "
             "hypothesis a verdict can rest on, raw and adjusted over every hypothesis of "
             "every claim tested):", ""]
    if rejudged:
      lines[0:0] = [f"{rejudged} claims are judged on records made under rule version 2, "
                    f"re-judged under version {rule.VERSION}, which was fixed after those "
                    "records were made and seen (docs/benchmark.md, \"Rule versions\").", ""]
    judged = [path for paths in self.judged.values() for path in paths]
    unnamed = code_versions.without_commit(judged)
    if unnamed:
      lines[0:0] = [f"{unnamed} of the {len(judged)} records judged name no commit of the "
                    "code that trained them (made before records carried one): which "
                    "training code made them is known only from git's history of "
                    "`results/`. Under a claim, a line says where its members name "
                    "different commits.", ""]
    for v in self.verdicts:
      c = v.claim
      compared = (f"{c.norm} against {c.against}" if c.field == "norm"
                  else f"{c.field}={c.norm} against {c.against}")
      again = (f" (Re-judged under version {rule.VERSION}: records made under version 2.)"
               if v.rejudged else "")
      lines.append(f"- **{v.verdict.verdict}**: {c.text} ({c.source}; {v.experiment}, "
                   f"{compared}): {v.verdict.why}.{again}")
      if v.exploratory is not None:
        lines.append(f"  - exploratory, with seed{'s' if len(v.beyond_plan) > 1 else ''} "
                     f"{', '.join(map(str, v.beyond_plan))} beyond the plan (no verdict): "
                     f"{claims.exploratory_text(v.exploratory)}.")
      if v.code:
        lines.append(f"  - {v.code}.")
    return lines

  def _seeds_markdown(self) -> list[str]:
    """The seeds table: the pilot, what it planned, and what each verdict judged."""
    lines = ["", "Seeds (the pilot: 5 seeds where the experiment's seed-0 members took under "
             f"{rule.QUICK_MINUTES:g} minutes of wall time, else 3; then seeds by power, "
             f"planned from the pilot alone: detect the claim's minimum effect at "
             f"{rule.POWER:.0%} power, two-sided level {rule.ALPHA:g}/{rule.PLANNED_CLAIMS}, "
             f"at most {rule.seed_cap(self.scale)} seeds at the {self.scale} scale; every "
             "verdict judges the planned seeds, later ones are exploratory):", "",
             "| claim | minimum effect | pilot (seed-0 minutes) | needed (pilot's spread) | "
             "planned | judged | beyond the plan (exploratory) |",
             "|---|---|---|---|---|---|---|"]
    for v in self.verdicts:
      lines.append(f"| {v.claim.key} | {_effect(v.claim)} | {_pilot_cell(v)} | "
                   f"{_needed(v)} | {_planned_cell(v)} | {_judged_cell(v)} | "
                   f"{', '.join(map(str, v.beyond_plan)) or '—'} |")
    return lines

  def _drift_text(self, experiment: str) -> str:
    """`` (config now differs: a: x -> y, ...)``: the first fields in which the
    experiment's drifted records differ from their commands' configs now."""
    fields: dict[str, str] = {}  # field -> its first record's difference.
    for differences in self.drift.get(experiment, {}).values():
      for d in differences:
        fields.setdefault(d.partition(": ")[0], d)
    if not fields:
      return ""
    return f" (config now differs: {drift_text(list(fields.values()))})"


def _effect(c: suite.Claim) -> str:
  if c.kind in claims.RATIO_KINDS:
    return (f"the claimed ratio {c.claimed_ratio:g}" if c.claimed_ratio is not None
            else f"a {1 - math.exp(-c.effect):.0%} saving")
  return f"{c.effect:g}"


def _pilot_cell(v: ClaimResult) -> str:
  if v.plan is None:
    return "— (--seeds)"
  if v.plan.minutes is not None:
    minutes = f"{v.plan.minutes:.1f} min"
  elif v.plan.training_minutes is not None:
    minutes = f"wall time not recorded; training alone {v.plan.training_minutes:.1f} min"
  else:
    minutes = "not measured"
  return f"{len(v.plan.pilot)} ({minutes})"


def _needed(v: ClaimResult) -> str:
  """What the claim's pilot says it needs (the plan reads this, never later seeds)."""
  if v.claim.kind == "step_time":
    return "— (a timing decides it)"
  ev = None if v.plan is None else v.plan.pilot_evidence.get(v.claim.key)
  if ev is None:
    running = v.plan is not None and v.evidence is not None and v.evidence.verdict not in (
        rule.NOT_RUN, rule.REFUSED)
    return "pilot not complete" if running else "—"
  if not ev.hypotheses:
    return "no test"
  if ev.needed is None:
    return "not reachable"
  over = claims.over_cap_text(ev.needed, ev.scale)
  return str(ev.needed) + (f" ({over.lstrip(', ')})" if over else "")


def _planned_cell(v: ClaimResult) -> str:
  return "—" if v.plan is None else str(len(v.plan.planned))


def _judged_cell(v: ClaimResult) -> str:
  ev = v.evidence
  if ev is None or not ev.seeds:
    return "—"
  return f"{ev.seeds} timing rounds" if v.claim.kind == "step_time" else str(ev.seeds)


def _members_text(names: Sequence[str]) -> str:
  return f"{len(names)} members" if len(names) > 6 else ", ".join(names)


def under_rule(runs: Sequence[runs_lib.Run], experiment: suite.Experiment,
               scale: str, overrides: Mapping[str, str] | None = None,
               ) -> tuple[list, dict[str, list[str]]]:
  """The runs of ``experiment`` made under the suite's rule and setting now, and the
  names of the others (stale) with how their config differs from their command's now
  (:func:`config_drift`; empty where their hash already differs). A stale record is
  one whose hash is not the one the suite gives its variant now, or whose config is not
  the one its member's command (with the command's ``overrides``) runs now: a config
  file's defaults changed since, or the record is of other overrides."""
  variants = experiment.scales[scale].variants
  kept, stale = [], {}
  for r in runs:
    if r.config.get("experiment") != experiment.name:
      continue
    index = suite.variant_index(r.config, variants, experiment.variant_keys)
    variant = None if index is None else variants[index]
    if variant is None or (suite.current_hash(str(r.config.get("benchmark_hash", "")))
                           != suite.member_hash(experiment, scale, variant)):
      stale[os.path.basename(r.path)] = []
      continue
    try:
      drift = config_drift(r.config, command_config(
          experiment, scale, variant, str(r.config.get("norm")), int(r.config.get("seed", 0)),
          overrides))
    except ConfigError as e:  # The command no longer runs: nothing reproduces the record.
      drift = [f"its command fails ({e})"]
    if drift:
      stale[os.path.basename(r.path)] = drift
    else:
      kept.append(r)
  return kept, stale


def _outside_setting(claim: suite.Claim, setting: suite.Setting) -> str | None:
  """``field=value`` of ``claim.where`` that no variant of ``setting`` runs (Figure 6's
  batch 128 at the CPU scale), else None: such a claim waits for another scale, not
  for more runs."""
  for field, value in claim.where.items():
    if any(field not in v for v in setting.variants):
      continue  # A variant runs the config's default, which may be the value.
    values = {str(v[field]) for v in setting.variants}
    if str(value) not in values:
      return f"{field}={value}"
  return None


@dataclasses.dataclass
class RecordsRead:
  """A command's records, as :func:`read_records` found them."""
  runs: list[runs_lib.Run]
  damaged: dict[str, str]  # The file that is not whole -> what is wrong with it.
  folders: list[str]  # The records roots that held any of them.


def read_records(plans_: Sequence[Plan], records: str,
                 seeds: Sequence[int] | None = None) -> RecordsRead:
  """The records of the plans' experiments, in the suite's order, each whole or
  listed as damaged, never left out without a word.

  They are read from the records root ``records`` and the plans' own records
  folders, a record from the folder its member's records go to under this command
  (:meth:`Plan.record_dir`): a user's folder may hold runs of the suite's normalizers
  made with other overrides, which are not this command's, and results/ holds the
  suite's own, which a command with overrides does not run. ``seeds``, when given,
  keeps those seeds' records (a damaged record is listed whatever its seed)."""
  roots = [records] + sorted({p.own_records for p in plans_ if p.own_records} - {records})
  found, damaged, folders = [], {}, []
  for p in plans_:
    for root in roots:
      runs, broken = _read_folder(root, p.experiment.name)
      damaged.update(broken)
      kept = [r for r in runs if _belongs(p, records, root, r)
              and (seeds is None or r.config.get("seed") in seeds)]
      found += kept
      if (kept or broken) and root not in folders:
        folders.append(root)
  runs_lib.label_runs(found)
  return RecordsRead(found, damaged, [r for r in roots if r in folders])


def _read_folder(root: str, experiment: str) -> tuple[list[runs_lib.Run], dict[str, str]]:
  """The records under ``root/experiment/<member>/``, and the damaged ones."""
  folder = os.path.join(root, experiment)
  runs, damaged = [], {}
  if not os.path.isdir(folder):
    return runs, damaged
  for name in sorted(os.listdir(folder)):
    path = os.path.join(folder, name)
    # The step-time timings (timing.load reads them) are beside the members, not one.
    if not os.path.isdir(path) or name == timing.TIMING_FOLDER:
      continue
    try:
      runs.append(runs_lib.read_finished_run(path, f"{experiment}/{name}"))
    except runs_lib.DamagedRunError as e:
      damaged[shown(e.path)] = e.what
  return runs, damaged


def _belongs(plan: Plan, records: str, root: str, run: runs_lib.Run) -> bool:
  """Whether ``run``, found under ``root``, is one this command reads there: under the
  records root, a record whose config the command's overrides leave as the suite's
  (results/ holds the suite's own, and records made there before a normalizer's
  records went beside the runs); under the own records folder, one of a member that
  is not the suite's own. A record of no variant is read wherever it is, to be named
  as stale."""
  if run.config.get("experiment") != plan.experiment.name:
    return False
  member = plan.member_of(run.config)
  if member is None or not plan.own_records:
    return True
  if root == records:
    return not plan.changes_config(member)
  return not plan.is_suite_member(member)


def build_report(plans_: Sequence[Plan], records: str, scale: str,
                 ignore_rule: bool = False, seeds: Sequence[int] | None = None) -> Report:
  """The headline table and verdicts from the records alone (not the workdirs);
  ``seeds``, when given, restricts them to those seeds' records."""
  read = read_records(plans_, records, seeds)
  found = read.runs
  rows, results, refused, drift, judged = [], [], {}, {}, {}
  for p in plans_:
    kept, stale = under_rule(found, p.experiment, p.scale, p.overrides)
    refused[p.experiment.name] = list(stale)
    drift[p.experiment.name] = {name: d for name, d in stale.items() if d}
    if ignore_rule:
      kept = [r for r in found if r.config.get("experiment") == p.experiment.name]
    # Each verdict, and the headline, reads exactly the planned seeds (the command's
    # --seeds where given); seeds beyond the plan are exploratory.
    plan = None if seeds is not None else seed_plan(p.experiment, p.scale, kept)
    planned = [r for r in kept if plan is None or r.config.get("seed") in plan.planned]
    judged[p.experiment.name] = [r.path for r in planned]
    rows += _headline(p, planned)
    for c in p.experiment.claims_at(p.scale):
      results.append(_claim_result(c, p, plan, planned, kept, found,
                                   [] if ignore_rule else refused[p.experiment.name],
                                   _timings(p, records)))
  for result, verdict in zip(results, claims.decide([r.evidence for r in results])):
    result.verdict = verdict
  missing = {p.experiment.name: [m.name for m in p.members
                                 if not os.path.isdir(p.record_dir(records, m))]
             for p in plans_}
  damaged_dirs = {os.path.dirname(path) for path in read.damaged}
  damaged_members = {p.experiment.name: [m.name for m in p.members
                                         if shown(p.record_dir(records, m)) in damaged_dirs]
                     for p in plans_}
  seconds = {}
  for r in found:
    known = [t for t in runs_lib.train_seconds(r.points) if t is not None]
    if known:
      seconds[r.name] = known[-1]
  return Report(scale, rows, results, missing,
                {p.experiment.name: len(p.members) for p in plans_}, seconds,
                refused={} if ignore_rule else refused, ignore_rule=ignore_rule,
                seeds=None if seeds is None else tuple(seeds),
                folders=tuple(shown(f) for f in read.folders or [records]), judged=judged,
                drift={} if ignore_rule else drift, damaged=read.damaged,
                damaged_members=damaged_members)


def _claim_result(c: suite.Claim, p: Plan, plan: SeedPlan | None,
                  planned: Sequence[runs_lib.Run], kept: Sequence[runs_lib.Run],
                  found: Sequence[runs_lib.Run], refused: Sequence[str],
                  timings: Sequence[Mapping[str, Any]] = ()) -> ClaimResult:
  """One claim's evidence on the planned seeds' records (``planned``, of ``kept``,
  those under the rule), and on every seed where some lie beyond the plan; a step-time
  claim's from its experiment's ``timings`` (:func:`_timings`)."""
  name, metric = p.experiment.name, p.experiment.metric
  outside = _outside_setting(c, p.setting)
  if outside:
    others = [f"`--scale {s}`" for s in suite.SCALES if s != p.scale
              and _outside_setting(c, p.experiment.scales[s]) is None]
    return ClaimResult(c, name, None, claims.Evidence(c, metric, rule.NOT_RUN, (
        f"the {p.scale} setting does not run {outside}; "
        f"{' and '.join(others) or 'no setting'} {'does' if len(others) < 2 else 'do'}")),
                       plan)
  if refused and _touches(c, found, p, refused):
    return ClaimResult(c, name, None, claims.Evidence(c, metric, rule.REFUSED, (
        "records made under another rule or setting: rerun " + _members_text(refused))),
                       plan)
  if (plan is not None and plan.planned == plan.pilot and c.key in plan.pilot_evidence
      and c.kind != "step_time"):  # A timing, not the seeds, decides a step-time claim.
    ev = plan.pilot_evidence[c.key]  # The same seeds: judged once.
  else:
    ev = claims.judge(planned, name, c, metric, timings, p.scale)
  result = ClaimResult(c, name, None, ev, plan, code=_claim_code(c, planned, name))
  beyond = set().union(*claims.side_seeds(kept, name, c)) - set(
      plan.planned if plan is not None else ())
  if plan is not None and beyond:
    result.beyond_plan = tuple(sorted(beyond))
    result.exploratory = claims.judge(kept, name, c, metric, timings, p.scale)
  sides = [r for r in claims.finished_runs(planned, name) if compare.matches(r.config, c.where)
           and str(r.config.get(c.field)) in (c.norm, c.against)]
  result.rejudged = any(suite.made_under_v2(r.config) for r in sides)
  return result


def _timings(plan: Plan, records: str) -> list[dict[str, Any]]:
  """The experiment's timing records (``timing.load``), each with its ``drift``: how
  its config differs from the command of its setting's baseline member now (as a
  stale record's does, :func:`config_drift`)."""
  variants = plan.setting.variants
  out = []
  for t in timing.load(os.path.join(records, plan.experiment.name)):
    index = suite.variant_index(t["config"], variants, plan.experiment.variant_keys)
    if index is None:
      drift = ["its config is none of the setting's variants"]
    else:
      drift = config_drift(t["config"], command_config(
          plan.experiment, plan.scale, variants[index], t["baseline"],
          int(t["config"].get("seed", 0))))
    out.append({**t, "drift": drift})
  return out


def _claim_code(c: suite.Claim, runs: Sequence[runs_lib.Run], experiment: str) -> str:
  """The report's line on the training code of the claim's members (both sides)."""
  finished = claims.finished_runs(runs, experiment)
  members = [r for value in (c.norm, c.against)
             for r in claims.side_runs(finished, c.where, c.field, value)]
  return code_versions.training_code_note(members)


def _touches(c: suite.Claim, runs: Sequence[runs_lib.Run], plan: Plan,
             refused: Sequence[str]) -> bool:
  """Whether a refused record (one of ``refused``, by name) belongs to one of the
  claim's sides."""
  return any(r.config.get("experiment") == plan.experiment.name
             and os.path.basename(r.path) in refused
             and compare.matches(r.config, c.where)
             and str(r.config.get(c.field)) in (c.norm, c.against) for r in runs)


def _headline(plan: Plan, runs: Sequence[runs_lib.Run]) -> list[claims.Row]:
  """One row per normalizer of each variant, the suite's order first."""
  finished = claims.finished_runs(runs, plan.experiment.name)
  rows = []
  variants = plan.setting.variants
  keys = plan.experiment.variant_keys
  by_variant = [[r for r in finished if suite.variant_index(r.config, variants, keys) == i]
                for i in range(len(variants))]
  reference = plan.experiment.reference
  # A variant that runs some normalizers only (the reader's LN at gain 0.1) is
  # compared with the default variant's baseline, as its claims are.
  default = next((i for i, v in enumerate(variants) if not v), None)
  for variant, here in zip(variants, by_variant):
    where = plan.experiment.variant_name(variant)
    if not here:
      continue
    order = [reference] + [n for n in plan.experiment.norms if n != reference]
    order += sorted({str(r.config.get("norm")) for r in here} - set(order))
    baseline = claims.side_runs(here, {}, "norm", reference)
    if not baseline and default is not None:
      baseline = claims.side_runs(by_variant[default], {}, "norm", reference)
    context = ",".join(f"{k}={v}" for k, v in where.items())
    for norm in order:
      members = claims.side_runs(here, {}, "norm", norm)
      if members:
        rows.append(claims.headline_row(members, baseline, plan.experiment.name, context,
                                        norm, plan.experiment.metric, reference))
  return rows


def write_figures(report: Report, records: str, out_dir: str) -> list[str]:
  """Per experiment with records, its held-out metric (the headline's) against updates:
  each normalizer's mean over seeds with a 95% band, as ``lnorm plot --over-seeds``
  draws it, into ``out_dir/<experiment>.png`` and ``.svg``; returns the paths."""
  from lnorm.analysis import plotting  # pylint: disable=g-import-not-at-top  (matplotlib is slow)
  del records  # The runs judged are the report's own (its roots, its seeds, its rule).
  metrics: dict[str, str] = {}
  for row in report.rows:
    metrics.setdefault(row.experiment, row.metric)
  paths = []
  for experiment, metric in metrics.items():
    runs = runs_lib.load_runs(report.judged[experiment])
    # The paper's axis: handwriting's Figure 5 is against updates on a log scale.
    logx = any(f.logx for f in plotting.FIGURES.values() if f.experiment == experiment)
    paths += plotting.plot_seed_bands(
        runs, [metric], os.path.join(out_dir, experiment), x="step", logx=logx,
        title=f"{experiment} ({report.scale} scale): {metric}, mean over seeds, 95% band")
  return paths


def replace_between_markers(text: str, block: str, scale: str = "cpu") -> str:
  """``text`` with the block of ``scale``'s report replaced by ``block``. The cpu
  scale's markers are added after the title when absent; a page without another
  scale's is refused (ValueError, naming the two lines), since where that section
  goes is the author's choice."""
  return results_block(scale).replace(text, block, add_after_title=scale == "cpu")


def between_markers(text: str, scale: str = "cpu") -> str | None:
  return results_block(scale).read(text)


def log_verdicts(result: Report) -> None:
  """The verdict table as a wandb run of its own, job type "report", in the group
  "benchmark", beside the experiments' groups of member runs."""
  from lnorm.training import metrics_writer  # pylint: disable=g-import-not-at-top
  mode, why = metrics_writer.wandb_mode("auto")
  if mode == "disabled":  # Also where wandb is not installed (and not asked for).
    return
  wandb = metrics_writer.import_wandb(mode, why)
  run = wandb.init(project="lnorm", group="benchmark", job_type="report", mode=mode,
                   name=f"benchmark-{result.scale}", config={"scale": result.scale},
                   dir=os.path.join(DEFAULT_WORKDIR, result.scale))
  table = wandb.Table(columns=["experiment", "claim", "normalizer", "against", "verdict",
                               "p", "p after Holm", "evidence"])
  for v in result.verdicts:
    table.add_data(v.experiment, v.claim.text, v.claim.norm, v.claim.against,
                   v.verdict.verdict, v.verdict.p, v.verdict.p_adjusted, v.verdict.why)
  headline = wandb.Table(columns=list(claims.HEADER))
  for cells in claims.headline_cells(result.rows):
    headline.add_data(*cells)
  logged = {"benchmark/verdicts": table, "benchmark/headline": headline}
  run.log(logged)
  run.finish()
