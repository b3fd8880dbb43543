"""The benchmark's suite: the experiments' specs as members to run and judge.

``lnorm benchmark`` runs every experiment's grid (normalizers by seeds, and for the
BLN experiments by batch size) through ``lnorm sweep``'s runner and judges each claim
of the two papers on the finished runs (``lnorm.analysis.claims``). Why each CPU
setting is what it is, with its measured or estimated time per run, is in
``docs/benchmark.md``; the verdict rule is there too.

A member is one run: experiment, variant (e.g. ``batch_size=25``), normalizer, seed.
Its name (``batch_size=25,norm=ln,seed=0``) is the same whatever subset of the suite a
command selects, so records made in different sittings line up.

Each experiment's settings per scale (with the variant fields that name a member),
claim grid and claims are declared in its spec (``experiments/<name>/spec.py``, read
through ``lnorm.analysis.specs``); this module turns them into members, their hashes
and the configs' named sweeps.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Mapping, Sequence

from lnorm import config as config_lib
from lnorm.analysis import compare
from lnorm.analysis import rule
from lnorm.analysis import specs
from lnorm.analysis import timing
# Claim and Setting are re-exported: the benchmark reads them as suite.Claim, suite.Setting.
from lnorm.analysis.rule import Claim  # pylint: disable=unused-import
from lnorm.analysis.specs import SCALES, Setting  # pylint: disable=unused-import
from lnorm.errors import ConfigError, UserError
from lnorm.sweeps import space as sweep_space

#: An experiment as the suite reads it: its spec (``lnorm.analysis.specs``), where
#: each experiment's settings, claims and normalizers are declared.
Experiment = specs.ExperimentSpec

#: Every experiment's spec, in the registry's order.
SUITE: tuple[Experiment, ...] = specs.all_specs()
BY_NAME: dict[str, Experiment] = {e.name: e for e in SUITE}


def setting_record(experiment: Experiment, scale: str,
                   variant: Mapping[str, str]) -> dict:
  """What a member of ``experiment`` at ``scale`` in ``variant`` trains, seed and
  normalizer aside: what its records' hash (``rule.setting_hash``) covers. What the
  rule asks of it (its claims, metric, pilot) is the rule's: :func:`claims_record`."""
  setting = experiment.scales[scale]
  return {"experiment": experiment.name, "scale": scale, "config": setting.config,
          "overrides": dict(setting.overrides), "variant": dict(variant)}


def member_hash(experiment: Experiment, scale: str, variant: Mapping[str, str]) -> str:
  """The hash a member's records carry (``benchmark_hash``): its setting's."""
  return rule.setting_hash(setting_record(experiment, scale, variant))


def claims_record(experiments: Sequence[Experiment] = SUITE) -> dict:
  """Every claim the suite judges, by experiment and scale, with the metric it
  reads: what each compares and how; its wording and source do not count."""
  return {e.name: {scale: {"metric": e.metric, "claims": [
      {k: v for k, v in dataclasses.asdict(c).items() if k not in ("text", "source")}
      for c in e.claims_at(scale)]} for scale in e.scales} for e in experiments}


def rule_hash() -> str:
  """The hash of the verdict rule that judges the suite: its parameters and claims,
  with the stopping rule of the timings that decide the step-time claims."""
  return rule.rule_hash({**claims_record(), "step_time_timing": timing.stopping_rule()})


#: The records made under rule version 2, which hashed the rule, the claims and the
#: pilot's seeds into every member's ``benchmark_hash``: each version-2 hash, with the
#: version-3 hash of the same setting (experiment, scale, variant index), computed at
#: the commit that introduced version 3. A record carrying a version-2 hash is a run
#: of its member's command while the setting still hashes to the second (and its
#: config is its command's: benchmark.config_drift); the report says it is re-judged
#: under version 3, which was fixed after it was made. tests/test_specs.py pins both.
RULE_V2_HASHES: dict[str, str] = {
    "390a9a25289bda4a": "9896775497bb3c96",  # perm_mnist, cpu, variant 0
    "b7185ac85fbaa1ae": "b0e80d706f52d1ed",  # perm_mnist, paper, variant 0
    "88d600781f3ffdfc": "1424bbe367d3b2f2",  # perm_mnist, paper, variant 1
    "4d621c75bf628470": "d5de36bba33e94ce",  # order_embeddings, cpu, variant 0
    "4492b6d71f4bd974": "ebabf101df7118a0",  # order_embeddings, paper, variant 0
    "63997a8c5a7733f2": "02a906e420339972",  # bln_imdb, cpu, variant 0
    "3c24afbfc0b7a4dc": "a7210f16888995f9",  # bln_imdb, paper, variant 0
    "9fbd33b0718aa258": "01455bc673651359",  # bln_imdb, paper, variant 1
    "000125f3d224805a": "daec3d3a33a769c4",  # bln_cifar, cpu, variant 0
    "f9c34d86924bc14f": "274cb3ea7eb47fe9",  # bln_cifar, cpu, variant 1
    "11e4b0cf86f1cdc4": "0e3d23db37a04adc",  # bln_cifar, paper, variant 0
    "0453d466d726e53c": "9548ec190de2a59d",  # bln_cifar, paper, variant 1
    "c4a02d8ea75e44c5": "408830e660972e80",  # skip_thoughts, cpu, variant 0
    "c35af484a4685dc4": "62527b77b11684ef",  # skip_thoughts, paper, variant 0
    "b8f933e8d773776c": "2ed0bd28212069f7",  # handwriting, cpu, variant 0
    "e8b844fa249aa6ac": "cbe9cae345102f70",  # handwriting, paper, variant 0
    "a314c7560ade2cc4": "f29745585d7490e8",  # draw, cpu, variant 0
    "e54a3bfbd203321a": "a7a7c9b2583bfa58",  # draw, paper, variant 0
    "afd47d51daf263c0": "809e1b7ce53637ca",  # attentive_reader, cpu, variant 0
    "3a9d194a1d4635e3": "c6b10e0be47dc969",  # attentive_reader, cpu, variant 1
    "5ee83440ec052dc7": "c48ef51280feea37",  # attentive_reader, paper, variant 0
    "e1f854e0c5c889b9": "8c0e5d8ac42ee444",  # attentive_reader, paper, variant 1
    "bf1f7c2ae69abaa8": "6235be1731c7b559",  # transformer_lm, cpu, variant 0
    "a6e6776fa62b35c8": "3b93774091db8d40",  # transformer_lm, cpu, variant 1
    "3e520b46324677bb": "30d01d07fa052595",  # transformer_lm, cpu, variant 2
    "c721dcea97198449": "6beeb6d5f9aedda9",  # transformer_lm, cpu, variant 3
    "1f805e4bc68935b8": "bc2e60cdf7827147",  # transformer_lm, cpu, variant 4
    "cafc75b8d536f5b4": "d7348ac7f95ab5d0",  # transformer_lm, paper, variant 0
    "65ee9663d4bd08ad": "7d4d5fbb8d76c196",  # transformer_lm, paper, variant 1
    "ae316859177cc773": "3eb6dffcf7ecd4cd",  # transformer_lm, paper, variant 2
    "f99598c92ec34dee": "fd50c9f119ba1b1e",  # transformer_lm, paper, variant 3
    "1588cdab8a6666d4": "9c51435e07f361b0",  # transformer_lm, paper, variant 4
}


def current_hash(recorded: str) -> str:
  """The setting hash a record's ``benchmark_hash`` stands for: itself, or for a
  record made under rule version 2, its setting's version-3 hash."""
  return RULE_V2_HASHES.get(recorded, recorded)


def made_under_v2(config: Mapping[str, object]) -> bool:
  """Whether a record (its flat config) was made under rule version 2."""
  return str(config.get("benchmark_hash", "")) in RULE_V2_HASHES


#: The variant fields that name a member in any experiment (each spec's
#: ``variant_keys``): what ``--variants`` may select on.
VARIANT_NAME_KEYS: tuple[str, ...] = tuple(dict.fromkeys(
    k for e in SUITE for k in e.variant_keys))


def variant_index(config: Mapping[str, object], variants: Sequence[Mapping[str, str]],
                  keys: Sequence[str] = VARIANT_NAME_KEYS) -> int | None:
  """The variant a record's (flat) config was run in: of the variants whose naming
  fields (``keys``: its experiment's ``variant_keys``) all equal the config's, the one
  that sets the most (a variant that leaves a field unset runs the config's default,
  so the attentive reader's ``{}`` and its ``norm_options.ln.scale_init=0.1`` both
  match a gain-0.1 run, and the second is its variant); None when none matches."""
  best, best_keys = None, -1
  for index, variant in enumerate(variants):
    named = {k: str(v) for k, v in variant.items() if k in keys}
    if compare.matches(config, named) and len(named) > best_keys:
      best, best_keys = index, len(named)
  return best


@dataclasses.dataclass(frozen=True)
class Member:
  """One run of the suite."""
  experiment: str
  variant: Mapping[str, str]
  norm: str
  seed: int

  @property
  def group(self) -> str:
    """The variant and normalizer: one ``lnorm sweep`` over the seeds."""
    spec = BY_NAME.get(self.experiment)
    named = (spec.variant_name(self.variant) if spec else
             {k: v for k, v in self.variant.items() if k in VARIANT_NAME_KEYS})
    return ",".join([*(f"{k}={v}" for k, v in named.items()),
                     f"norm={norm_dirname(self.norm)}"])

  @property
  def name(self) -> str:
    """``batch_size=25,norm=ln,seed=0``: its records' directory under the experiment."""
    return f"{self.group},seed={self.seed}"



def norm_dirname(norm: str) -> str:
  """A normalizer as a directory name: an import path ``pkg.mod:attr`` keeps its dots."""
  return re.sub(r"[^A-Za-z0-9._+-]", "_", norm)


def _parse_list(text: str | None, flag: str) -> list[str] | None:
  if text is None:
    return None
  items = [t.strip() for t in text.split(",") if t.strip()]
  if not items:
    raise UserError(f"{flag} {text!r} names nothing; give a comma-separated list.")
  return items


def select_experiments(text: str | None) -> list[Experiment]:
  """``--experiments perm_mnist,draw``: the experiments in the suite's order."""
  names = _parse_list(text, "--experiments")
  if names is None:
    return list(SUITE)
  unknown = [n for n in names if n not in BY_NAME]
  if unknown:
    raise UserError(f"--experiments: unknown experiment(s) {', '.join(unknown)}. The "
                    f"suite's experiments: {', '.join(BY_NAME)}.")
  return [e for e in SUITE if e.name in names]


def parse_seeds(text: str | None) -> list[int] | None:
  """``--seeds 0,1,2`` or ``--seeds 0-4``: distinct non-negative integers, a range
  written low to high, as ``lnorm train`` takes ``seed``."""
  items = _parse_list(text, "--seeds")
  if items is None:
    return None
  seeds: list[int] = []
  for item in items:
    match = re.fullmatch(r"(-?\d+)(?:-(-?\d+))?", item)
    if not match:
      raise UserError(f"--seeds {text!r}: {item!r} is not a seed; expected integers, e.g. "
                      "0,1,2 or 0-4.")
    low, high = int(match[1]), int(match[2] if match[2] is not None else match[1])
    if low < 0 or high < 0:
      raise UserError(f"--seeds {text!r}: a seed is a non-negative integer, e.g. 0,1,2.")
    if high < low:
      raise UserError(f"--seeds {text!r}: the range {item} is empty; write it low to "
                      f"high ({high}-{low}).")
    seeds += range(low, high + 1)
  if len(set(seeds)) != len(seeds):
    raise UserError(f"--seeds {text!r}: the seeds must be distinct.")
  return seeds


def parse_norms(text: str | None, experiments: Sequence[Experiment] = (),
                scale: str = "cpu") -> list[str] | None:
  """``--norms none,ln,my_pkg.norms:CenteredRMS``: passed to the config's ``norm``.
  Each is checked for every experiment of ``experiments`` as ``lnorm train`` checks a
  config's ``norm`` (a name the experiment's task takes, or an import path that
  imports), before anything runs or is read: an unknown one would otherwise judge
  nothing and say nothing."""
  norms = _parse_list(text, "--norms")
  for e in experiments:
    for norm in norms or ():
      if norm in e.norms:
        continue  # The suite runs it: the experiment takes it.
      config = config_lib.load_config(e.scales[scale].config)
      config_lib.apply_overrides(config, {"norm": norm})
      try:
        sweep_space.check_config(config)
      except ConfigError as err:
        raise UserError(f"--norms {norm}: {err}") from None
  return norms


def parse_variants(text: str | None) -> dict[str, str] | None:
  """``--variants batch_size=128``: the variant fields a command keeps to."""
  items = _parse_list(text, "--variants")
  if items is None:
    return None
  out = {}
  for item in items:
    key, eq, value = item.partition("=")
    if not eq or key not in VARIANT_NAME_KEYS:
      raise UserError(f"--variants {text!r}: expected FIELD=VALUE with FIELD one of "
                      f"{', '.join(VARIANT_NAME_KEYS)}, e.g. batch_size=128.")
    out[key] = value
  return out


def pilot_seeds(minutes: float | None) -> list[int]:
  """The pilot's seeds, 0 to k - 1, for members that take ``minutes`` of training
  (``rule.pilot_size``; None before any is measured)."""
  return list(range(rule.pilot_size(minutes)))


def members(experiments: Sequence[Experiment], scale: str, norms: Sequence[str] | None = None,
            seeds: Sequence[int] | None = None,
            variants: Mapping[str, str] | None = None) -> list[Member]:
  """Every member, seed-major within an experiment: when a sitting ends early, the
  finished members cover every normalizer at the first seeds. ``seeds``: the rule's
  (``benchmark.seeds_by_power``); by default the pilot's before anything is measured.
  ``variants`` keeps the variants whose fields have those values (an experiment with
  none is refused)."""
  if scale not in SCALES:
    raise UserError(f"--scale {scale!r}: expected one of {', '.join(SCALES)}.")
  out = []
  for e in experiments:
    setting = e.scales[scale]
    kept = [(i, v) for i, v in enumerate(setting.variants)
            if all(str(v.get(k)) == val for k, val in (variants or {}).items())]
    if not kept:
      offered = "; ".join(",".join(f"{k}={v}" for k, v in e.variant_name(v).items()) or
                          "none" for v in setting.variants)
      raise UserError(f"--variants: {e.name} at scale {scale} has no variant with "
                      f"{variants}; its variants: {offered}.")
    for seed in (pilot_seeds(None) if seeds is None else seeds):
      for index, variant in kept:
        listed = setting.norms_at(index, e.norms)
        # A normalizer the experiment runs, but not at this variant, is left out; one
        # it does not list (a user's own) runs wherever it is asked for.
        chosen = listed if norms is None else [n for n in norms
                                               if n in listed or n not in e.norms]
        for norm in chosen:
          out.append(Member(e.name, variant, norm, seed))
  return out


def sweep_grid(experiment: str, scale: str) -> list[dict[str, str]]:
  """The suite's members of ``experiment`` at ``scale`` as a config's named sweep
  (``get_sweep``): one dict of overrides per member, its hash included, so that
  ``lnorm sweep --sweep NAME`` runs the benchmark's own grid, not a copy of it."""
  e = BY_NAME[experiment]
  setting = e.scales[scale]
  return [{**setting.overrides, **m.variant, "norm": m.norm, "seed": m.seed,
           "benchmark_hash": member_hash(e, scale, m.variant)}
          for m in members([e], scale)]


def named_sweeps(experiment: str) -> dict[str, list[dict[str, str]]]:
  """The suite's grids of ``experiment`` as its config's named sweeps, one per scale
  (``cpu``, ``gpu``, ``paper``): ``lnorm sweep --sweep cpu`` runs the benchmark's own members,
  as ``lnorm benchmark`` does, not a copy of them that could drift."""
  return {scale: sweep_grid(experiment, scale) for scale in SCALES}
