"""What an experiment's spec is made of, and the specs read by experiment name.

Each experiment declares its facts once, in ``experiments/<name>/spec.py``, as
``SPEC = ExperimentSpec(...)``: what the benchmark runs (its normalizers, its settings
per scale with the variant fields that name a member, its claims and the validation
metric they read), what the papers published (the numbers ``lnorm report`` sets
beside a run), how the paper drew it (the figures ``lnorm plot --figure`` lays out)
and what the GPU check measures of it. The library reads a spec by the experiment's
name in the registry (``lnorm.training.experiments``, the one list of experiments),
never by importing an experiment: :func:`spec`, and :data:`SPECS`, :data:`BY_NAME`,
:data:`FIGURES` and :data:`PUBLISHED`, which are read afresh from the specs each time
(a spec module is imported once, as any module is).

This module holds the types and the pieces several experiments share (the BLN
paper's claims, published logs and figures; a batch size as a variant), and imports
no experiment: a spec imports it.
"""

from __future__ import annotations

import bisect
import dataclasses
import importlib
import math
from typing import Any, Mapping, Sequence

from lnorm.analysis.rule import Claim
from lnorm.training import defaults
from lnorm.training import experiments as registry

#: The scales every experiment's benchmark settings are given at: ``cpu``, a member on
#: one CPU core; ``gpu``, sized from the measured H100 steps so that every claim can
#: be decided, run in chunks that fit a short allocation (``--time-limit``);
#: ``paper``, the papers' own settings.
SCALES = ("cpu", "gpu", "paper")
#: The normalizers every experiment is run with.
CORE_NORMS = ("none", "ln", "rms")
#: The per-example normalizers after LN, in every experiment's table beside the claim
#: grid (their own claims are the Transformer's): pRMSNorm, DyT, ScaleNorm,
#: LayerNorm-simple.
SUCCESSORS = ("prms", "dyt", "scalenorm", "ln_simple")
#: The seeds a normalizer runs at in an experiment where no claim reads it: its row of
#: the headline table (every normalizer lnorm has, in every experiment it runs in),
#: which no verdict rests on. The rows a claim reads run at the rule's planned seeds.
TABLE_ROW_SEEDS = 3

#: The papers as the claims cite them ...
LN_PAPER = "Ba, Kiros & Hinton 2016"
BLN_PAPER = "Ziaee & Çano, Batch Layer Normalization"
#: ... and as the published numbers do.
LN_PAPER_PUBLISHED = "Ba, Kiros & Hinton 2016 (Layer Normalization)"
BLN_REPO = "BLN authors' repository logs (docs/experiments.md, sec. 8)"


# --- what a spec is made of --------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Setting:
  """An experiment at one scale: the config spec and the overrides every member gets,
  and the variants each normalizer is run at. Its seeds are the rule's: the pilot's,
  sized by the minutes its seed-0 records measure, then the seeds by power
  (lnorm.sweeps.benchmark.seeds_by_power).

  ``variant_norms``: per variant (in ``variants``' order), the normalizers it runs,
  where not every variant runs the experiment's all (the Transformer runs its
  placement and warm-up variants with LN only); empty: every variant runs them all.
  ``claims``: this scale's claims where its settings change what a claim compares
  (the Transformer's warm-up is 100 updates at the CPU scale, 4,000 at the paper's);
  None: the experiment's.
  ``run_first``: claims (by key) whose members the suite trains before every other
  member, by rank (1 first, across experiments; then the rest in the registry's
  order): at the gpu scale, the claims the cpu scale left undecided, so that the
  first short allocations go to them. It changes the order, never what a member
  trains (no hash covers it).
  """
  config: str
  overrides: Mapping[str, str]
  variants: tuple[Mapping[str, str], ...] = ({},)
  variant_norms: tuple[tuple[str, ...], ...] = ()
  claims: tuple[Claim, ...] | None = None
  run_first: Mapping[str, int] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    if self.variant_norms and len(self.variant_norms) != len(self.variants):
      raise ValueError(f"{len(self.variant_norms)} variant_norms for "
                       f"{len(self.variants)} variants")

  def norms_at(self, index: int, every: Sequence[str]) -> tuple[str, ...]:
    """The normalizers variant ``index`` runs (``every``: the experiment's)."""
    return tuple(self.variant_norms[index]) if self.variant_norms else tuple(every)


@dataclasses.dataclass(frozen=True)
class Published:
  """A published result: ``lnorm report`` matches finished runs to it by experiment
  and config setting. A value of None marks a result the paper shows only as a curve.
  Metric names are the keys of ``metrics.jsonl``; ``test/accuracy`` is derived from
  ``test/error`` when a run logs only the error."""
  experiment: str  # configs/<experiment>.py
  setting: Mapping[str, Any]  # Flat config fields a run must match, e.g. {"norm": "ln"}.
  metric: str  # A metrics.jsonl key.
  value: float | None  # None: the paper gives a curve, not a number.
  source: str  # Paper and table or figure.
  note: str = ""
  paper_epochs: int | None = None  # How long the published run trained, if stated.


@dataclasses.dataclass(frozen=True)
class Line:
  """A second quantity drawn in a panel for each run, e.g. the training NLL beside the
  held-out one, in the run's colour with its own style and name."""
  metrics: tuple[str, ...]  # Candidates, chosen as Panel.metrics are.
  name: str
  style: str = "--"


@dataclasses.dataclass(frozen=True)
class Panel:
  # Candidates: the first that some run logged at two or more points is drawn (else
  # the first logged at all), so that a test metric logged once at the end does not
  # displace a validation metric logged along the way. ``exp(m)``: m's exponential.
  metrics: tuple[str, ...]
  where: Mapping[str, Any]  # Config fields a run must have, e.g. {"batch_size": 128}.
  title: str
  logy: bool = False
  name: str = ""  # The main line's name beside the run's label, when there are others.
  lines: tuple[Line, ...] = ()
  missing: str = ""  # What a run must do to log this panel's metric.


@dataclasses.dataclass(frozen=True)
class Figure:
  """A paper's figure, laid out by ``lnorm plot --figure NAME``."""
  experiment: str
  description: str
  panels: tuple[Panel, ...]
  columns: int = 2
  x: str = "epoch"  # The paper's horizontal axis: 'epoch' or 'step' (updates).
  logx: bool = False
  summary: str = ""  # What it draws, in a few words, for `lnorm plot --help`.


@dataclasses.dataclass(frozen=True)
class RecurrentLayerSize:
  """One recurrent layer of an experiment's model at the paper's size, which the GPU
  check's ``rnn`` phase times forward and backward: ``name`` says which (the
  reader's ``passage`` LSTM), ``cell`` is ``lstm`` or ``gru``."""
  name: str
  cell: str
  batch: int
  steps: int
  input: int
  hidden: int


@dataclasses.dataclass(frozen=True)
class TimedLengths:
  """A variable-length feature of the GPU check's timed train batches, as the real
  data's batches have it: the array ``feature`` padded to ``padded`` steps (the
  config's padding; for a config that pads to the longest example, the real data's
  longest), and each example's ``length`` drawn from the real training lengths,
  given by their ``deciles`` (0, 10%, ..., 100%), within the longest of the config's
  length buckets (the one padded to ``padded``). ``scripts/gpu/length_quantiles.py``
  computes them; ``source`` says from what."""
  feature: str
  length: str
  deciles: tuple[int, ...]
  padded: int
  source: str


@dataclasses.dataclass(frozen=True)
class GpuBenchmark:
  """A paper's figure run at the paper's scale by the GPU check's ``fig6`` phase,
  through ``lnorm benchmark``: one variant of the experiment's paper setting (as
  ``--variants`` takes it), the normalizers, the seeds run in waves (the rehearsal's,
  ``--toy``, the first two), the dotted overrides of every run (the rehearsal's on
  top), and the normalizer whose first seed's member runs twice, to compare the two
  value by value."""
  figure: str
  variant: str
  norms: tuple[str, ...]
  seeds: tuple[int, ...]
  overrides: Mapping[str, str]
  toy_overrides: Mapping[str, str] = dataclasses.field(default_factory=dict)
  rerun: str = "ln"


@dataclasses.dataclass(frozen=True)
class GpuCheck:
  """What the GPU check (``lnorm.gpucheck``, scripts/gpu/run.sh) measures of an
  experiment, besides its train step at its config's size (every experiment's)."""
  #: The rank of its train step's cost on a GPU (1: the costliest), whose steps the
  #: ``experiments`` phase starts first so that its parallel workers finish together;
  #: None: after those, in the registry's order.
  step_cost_rank: int | None = None
  #: Whether the rehearsal (``--toy``) times its step too.
  in_rehearsal: bool = False
  #: Its recurrent layers at the papers' sizes (the ``rnn`` phase).
  recurrent_layers: tuple[RecurrentLayerSize, ...] = ()
  #: Its variable-length features, as the ``experiments`` phase's batches draw them
  #: (none: every example at the padded length of the data it is given).
  timed_lengths: tuple[TimedLengths, ...] = ()
  #: Its figure at the paper's scale (the ``fig6`` phase).
  benchmark: GpuBenchmark | None = None


@dataclasses.dataclass(frozen=True)
class ExperimentSpec:
  """One experiment's facts. ``norms``, ``claims``, ``scales`` and ``metric`` are the
  benchmark's (``claims``: those of every scale whose setting gives none of its own);
  ``published``: the papers' numbers; ``figures``: the paper's figures by name."""
  name: str
  norms: tuple[str, ...]
  claims: tuple[Claim, ...]
  scales: Mapping[str, Setting]
  # The validation metric every claim and the headline read: decisions are taken on
  # validation only (tests/test_benchmark_suite.py checks that it is one).
  metric: str = "validation/error"
  published: tuple[Published, ...] = ()
  figures: Mapping[str, Figure] = dataclasses.field(default_factory=dict)
  # The normalizer the headline table divides by in each variant: the normalizer-free
  # baseline, or LN where a variant has none (the Transformer's normalizer-free net
  # is a placement of its own, so its pre-LN rows are read against LN).
  reference: str = "none"
  # The variant fields that name a member (``batch_size=25,norm=ln,seed=0``); the
  # others go with them (the steps per call a batch size sets).
  variant_keys: tuple[str, ...] = ()
  gpu: GpuCheck = GpuCheck()

  def __post_init__(self):
    # The published entries and figures name their experiment for their readers;
    # one declared under another experiment's spec is a slip of the pen.
    named = ({p.experiment for p in self.published} |
             {f.experiment for f in self.figures.values()})
    strays = sorted(named - {self.name})
    if strays:
      raise ValueError(f"spec {self.name!r} holds published values or figures of {strays}")
    unknown = sorted(set(self.scales) - set(SCALES))
    if unknown:
      raise ValueError(f"spec {self.name!r} gives unknown scales {unknown}; the "
                       f"scales: {', '.join(SCALES)}")
    for scale, setting in self.scales.items():
      keys = {c.key for c in (self.claims if setting.claims is None else setting.claims)}
      stray = sorted(set(setting.run_first) - keys)
      if stray:
        raise ValueError(f"spec {self.name!r}: run_first at scale {scale} names "
                         f"{', '.join(stray)}, not claims of that scale")
      names = [tuple(self.variant_name(v).items()) for v in setting.variants]
      if len(set(names)) < len(names):
        raise ValueError(f"spec {self.name!r}: two variants at scale {scale} have the "
                         f"same name; its variant_keys {self.variant_keys} must tell "
                         "them apart")

  def variant_name(self, variant: Mapping[str, str]) -> dict[str, str]:
    """The fields of ``variant`` that name a member, in the variant's order."""
    return {k: str(v) for k, v in variant.items() if k in self.variant_keys}

  def claims_at(self, scale: str) -> tuple[Claim, ...]:
    own = self.scales[scale].claims
    return self.claims if own is None else own


def in_registry_order(declared: Mapping[str, ExperimentSpec],
                      experiments: Sequence[str]) -> tuple[ExperimentSpec, ...]:
  """The spec of each of ``experiments`` (the registry), in its order; an experiment
  without one is refused, naming where to declare it."""
  missing = [name for name in experiments if name not in declared]
  if missing:
    raise ValueError(f"experiments without a spec: {', '.join(missing)}; declare each "
                     "as SPEC = ExperimentSpec(...) in experiments/<name>/spec.py")
  return tuple(declared[name] for name in experiments)



# --- pieces several experiments share ----------------------------------------------------


#: The gpu scale's validations: geometric points, this many per decade of updates
#: (``eval_points_per_decade``: successive points 10^(1/30) = 1.080 apart, a log-width
#: of 0.077), so that the speed statistic's grid floor, the mean log-width of the
#: evaluation brackets its crossings lie in, stays below the rule's margin of
#: log(1/0.9) = 0.105 (the cpu scale's grids gave floors of 0.14 to 0.45).
GPU_POINTS_PER_DECADE = 30
#: From this share of a run on, every evaluation bracket of a gpu setting is narrower
#: than its speed claims' margin (tests/test_gpu_scale.py checks it from each
#: setting's schedule). A crossing earlier than that is of a normalizer that reaches
#: the baseline's first level (its best by a quarter of its run) over ten times as
#: fast, an effect many margins wide.
DENSE_FROM = 0.02


def dense_evaluations(points_per_decade: int = GPU_POINTS_PER_DECADE) -> dict[str, str]:
  """The overrides of a gpu setting's evaluation schedule: the geometric points
  alone, none every N updates (which would add nothing where the points are denser
  and cost evaluations where they are not)."""
  return {"eval_points_per_decade": str(points_per_decade), "eval_every_steps": "0"}


def evaluation_points(last: int, every: int = 0, points_per_decade: int = 0) -> list[int]:
  """The updates a run of ``last`` updates evaluates at or just after: every ``every``
  updates, the geometric points (``defaults.geometric_steps``) and its last update."""
  points = set(defaults.geometric_steps(points_per_decade, last))
  if every:
    points.update(range(every, last + 1, every))
  return sorted(points | {last})


def widest_bracket(points: Sequence[int], steps_per_call: int, start: int) -> float:
  """The widest log-width, log(b / a), that a bracket of two successive evaluations
  a < b with a >= ``start`` can have, where a run evaluates at the first call
  boundary at or after each of ``points`` (calls of ``steps_per_call`` updates; an
  epoch's end ends a call too) and at the run's end, the last of ``points``.

  Whatever the epochs' length: the evaluation of a point p lies in
  [p, p + steps_per_call - 1], so for the first point p_k after a, b is at most
  p_k + steps_per_call - 1, and a is at least the point before it (or ``start``)."""
  points = sorted(set(points))
  later = bisect.bisect_right(points, start)
  widest, previous = 0.0, start
  for k in range(later, len(points)):
    slack = 0 if k == len(points) - 1 else steps_per_call - 1  # The run's end is exact.
    widest = max(widest, math.log((points[k] + slack) / previous))
    previous = points[k]
  return widest


def steps_per_call(batch_size: int, examples_per_call: int) -> int:
  """The train steps a config fuses into one jitted call at ``batch_size``: about
  ``examples_per_call`` examples a call, so that dispatch does not dominate small
  batches; at least one."""
  return max(1, examples_per_call // batch_size)


def as_overrides(fields: Mapping[str, Any]) -> dict[str, str]:
  """Config fields as the dotted overrides a command line gives (``true``, ``4``)."""
  return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in fields.items()}


@dataclasses.dataclass(frozen=True)
class BatchRule:
  """What an experiment's batch size sets with it, wherever it is set (the config's
  ``batch_size`` argument, the suite's variants, the config's own sweeps): the steps
  fused per jitted call, about ``examples_per_call`` examples a call."""
  examples_per_call: int

  def fields(self, batch_size: int) -> dict[str, Any]:
    return {"batch_size": batch_size,
            "steps_per_call": steps_per_call(batch_size, self.examples_per_call)}

  def variant(self, batch_size: int) -> dict[str, str]:
    """:meth:`fields` as a variant of the suite (dotted overrides)."""
    return as_overrides(self.fields(batch_size))


#: The BLN paper's comparison: its three normalizers at batch sizes 25 and 1.
BLN_COMPARED = ("bln", "bn", "ln")
BLN_BATCH_SIZES = (25, 1)


def bln_comparison(batch: BatchRule) -> list[dict[str, Any]]:
  """The BLN paper's comparison as a sweep's grid (a config's ``comparison`` sweep):
  each normalizer it compares at each of its batch sizes, with what ``batch`` sets
  with the batch size."""
  return [{"norm": n, **batch.fields(b)} for b in BLN_BATCH_SIZES for n in BLN_COMPARED]


def bln_claims(experiment: str, batch_sizes: Sequence[int]) -> tuple[Claim, ...]:
  """BLN against BN and LN at each batch size, twice: on each seed's best validation
  error as BLN trains (population statistics), and under the BLN paper's protocol
  (the last epoch, BLN's inference configuration selected on validation, judged on
  test: lnorm.analysis.bln_protocol)."""
  out = []
  for b in batch_sizes:
    for other in ("bn", "ln"):
      text = f"BLN ends with a lower error than {other.upper()} at batch size {b}"
      out.append(Claim(f"{experiment}_bln_vs_{other}_b{b}", text, f"{BLN_PAPER}, sec. 4",
                       "bln", other, kind="final", where={"batch_size": str(b)}))
      out.append(Claim(f"{experiment}_bln_vs_{other}_b{b}_protocol",
                       f"{text}, under the BLN paper's protocol", f"{BLN_PAPER}, sec. 4 and "
                       "Algorithm 2", "bln", other, kind="final",
                       where={"batch_size": str(b)}, value="bln_protocol"))
  return tuple(out)


def bln_published(experiment: str, epochs: int,
                  table: Mapping[int, Mapping[str, tuple[float, float]]]
                  ) -> tuple[Published, ...]:
  """The BLN authors' logs: batch size -> norm -> (test loss, test accuracy)."""
  out = []
  for b, rows in table.items():
    for norm, (loss, acc) in rows.items():
      setting = {"norm": norm, "batch_size": b}
      out.append(Published(experiment, setting, "test/nll", loss, BLN_REPO,
                           "test loss, 20% training subset", epochs))
      out.append(Published(experiment, setting, "test/accuracy", acc, BLN_REPO,
                           "test accuracy, 20% training subset", epochs))
  return tuple(out)


def bln_figure(experiment: str, what: str) -> Figure:
  """The BLN paper's figure of ``experiment``: test error per epoch at batch 25 and 1."""
  return Figure(
      experiment,
      f"BLN paper sec. 4: {what}, test error per epoch for BLN, BN and LN at batch "
      "sizes 25 and 1.",
      (Panel(("test/error",), {"batch_size": 25}, "test error, batch 25"),
       Panel(("test/error",), {"batch_size": 1}, "test error, batch 1")),
      summary="test error at batch 25 and 1")


# --- the specs, read by experiment name ----------------------------------------------------


def spec(name: str) -> ExperimentSpec:
  """The spec of the registered experiment ``name``: ``SPEC`` of its package's
  ``spec`` module, imported through the registry."""
  if name not in registry.EXPERIMENTS:
    raise ValueError(f"{name!r} is no experiment of lnorm/training/experiments.py: add "
                     "its line there first")
  found = getattr(importlib.import_module(registry.module(name, "spec")), "SPEC", None)
  if not isinstance(found, ExperimentSpec) or found.name != name:
    raise ValueError(f"{registry.module(name, 'spec')} declares no SPEC = "
                     f"ExperimentSpec({name!r}, ...)")
  return found


def _declared() -> dict[str, ExperimentSpec]:
  """The spec of every registered experiment that has a spec module."""
  out = {}
  for name in registry.EXPERIMENTS:
    module = registry.module(name, "spec")
    try:
      out[name] = spec(name)
    except ModuleNotFoundError as e:
      # The spec module (or its package) is absent; anything else is an import inside
      # the spec that failed, which is its own error.
      if not (e.name and module.startswith(e.name)):
        raise
  return out


def all_specs() -> tuple[ExperimentSpec, ...]:
  """Every experiment's spec, in the registry's order, the benchmark's (its report
  lists them so); a registered experiment without one is refused, by name."""
  return in_registry_order(_declared(), tuple(registry.EXPERIMENTS))


def figures_of(specs: Sequence[ExperimentSpec]) -> dict[str, Figure]:
  """Every figure of ``specs`` by name; a name two experiments declare is refused."""
  out: dict[str, Figure] = {}
  for one in specs:
    for name, figure in one.figures.items():
      if name in out:
        raise ValueError(f"figure {name!r} is declared by {out[name].experiment} and "
                         f"{one.name}")
      out[name] = figure
  return out


def figures() -> dict[str, Figure]:
  """Every paper figure by name (``lnorm plot --figure NAME``)."""
  return figures_of(all_specs())


def published() -> tuple[Published, ...]:
  """Every published result, experiment by experiment."""
  return tuple(p for one in all_specs() for p in one.published)


def with_gpu_benchmark() -> ExperimentSpec:
  """The experiment whose figure the GPU check's ``fig6`` phase runs: the one spec
  that declares a :class:`GpuBenchmark`."""
  found = [one for one in all_specs() if one.gpu.benchmark is not None]
  if len(found) != 1:
    raise ValueError(f"{len(found)} specs declare a GpuBenchmark "
                     f"({', '.join(one.name for one in found) or 'none'}); the GPU "
                     "check's fig6 phase runs one")
  return found[0]
