"""The benchmark's suite: per experiment its settings, its claim grid and its claims.

``lnorm benchmark`` runs every experiment's grid (normalizers by seeds, and for the
BLN experiments by batch size) through ``lnorm sweep``'s runner and judges each claim
of the two papers on the finished runs (``lnorm.analysis.claims``). Why each CPU
setting is what it is, with its measured or estimated time per run, is in
``docs/benchmark.md``; the verdict rule is there too.

A member is one run: experiment, variant (e.g. ``batch_size=25``), normalizer, seed.
Its name (``batch_size=25,norm=ln,seed=0``) is the same whatever subset of the suite a
command selects, so records made in different sittings line up.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Mapping, Sequence

from lnorm.analysis import rule
from lnorm.analysis.rule import Claim
from lnorm.errors import UserError

SCALES = ("cpu", "paper")
#: The normalizers every experiment is run with.
CORE_NORMS = ("none", "ln", "rms")


@dataclasses.dataclass(frozen=True)
class Setting:
  """An experiment at one scale: the config spec and the overrides every member gets,
  the variants each normalizer is run at, and the pilot's seeds (the rule's seeds by
  power may add more: lnorm.sweeps.benchmark.seeds_by_power).

  ``variant_norms``: per variant (in ``variants``' order), the normalizers it runs,
  where not every variant runs the experiment's all (the Transformer runs its
  placement and warm-up variants with LN only); empty: every variant runs them all.
  ``claims``: this scale's claims where its settings change what a claim compares
  (the Transformer's warm-up is 100 updates at the CPU scale, 4,000 at the paper's);
  None: the experiment's.
  """
  config: str
  overrides: Mapping[str, str]
  seeds: tuple[int, ...]
  variants: tuple[Mapping[str, str], ...] = ({},)
  minutes: float | None = None  # One member on one core, as docs/benchmark.md gives it.
  variant_norms: tuple[tuple[str, ...], ...] = ()
  claims: tuple[Claim, ...] | None = None

  def __post_init__(self):
    if self.variant_norms and len(self.variant_norms) != len(self.variants):
      raise ValueError(f"{len(self.variant_norms)} variant_norms for "
                       f"{len(self.variants)} variants")

  def norms_at(self, index: int, every: Sequence[str]) -> tuple[str, ...]:
    """The normalizers variant ``index`` runs (``every``: the experiment's)."""
    return tuple(self.variant_norms[index]) if self.variant_norms else tuple(every)


@dataclasses.dataclass(frozen=True)
class Experiment:
  name: str
  norms: tuple[str, ...]
  claims: tuple[Claim, ...]
  scales: Mapping[str, Setting]
  # The validation metric every claim and the headline read: decisions are taken on
  # validation only (tests/test_benchmark_suite.py checks that it is one).
  metric: str = "validation/error"

  def claims_at(self, scale: str) -> tuple[Claim, ...]:
    own = self.scales[scale].claims
    return self.claims if own is None else own


def setting_record(experiment: Experiment, scale: str,
                   variant: Mapping[str, str]) -> dict:
  """What the suite asks of a member of ``experiment`` at ``scale`` in ``variant``,
  seed and normalizer aside: what its records' hash (``rule.member_hash``) covers."""
  setting = experiment.scales[scale]
  return {"experiment": experiment.name, "scale": scale, "config": setting.config,
          "overrides": dict(setting.overrides), "variant": dict(variant),
          "metric": experiment.metric, "pilot_seeds": list(setting.seeds),
          # What each claim compares and how; its wording and source do not count.
          "claims": [{k: v for k, v in dataclasses.asdict(c).items()
                      if k not in ("text", "source")} for c in experiment.claims_at(scale)]}


def member_hash(experiment: Experiment, scale: str, variant: Mapping[str, str]) -> str:
  return rule.member_hash(setting_record(experiment, scale, variant))


LN_PAPER = "Ba, Kiros & Hinton 2016"
BLN_PAPER = "Ziaee & Çano, Batch Layer Normalization"


def _bln_claims(experiment: str, batch_sizes: Sequence[int]) -> tuple[Claim, ...]:
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


def _batch(b: int, fused: int) -> dict[str, str]:
  """A batch size as a dotted override, with the steps fused per jitted call that the
  config sets with it (a dotted override of batch_size alone would keep the default's)."""
  return {"batch_size": str(b), "steps_per_call": str(max(1, fused // b))}


#: The successors of LN reported beside the claim grid where a run is cheap (their own
#: claims are the Transformer's): DyT, ScaleNorm, LayerNorm-simple.
SUCCESSORS = ("dyt", "scalenorm", "ln_simple")

def _mnist_batch(b: int) -> dict[str, str]:
  """perm-MNIST at batch ``b``: what the config argument batch_size=b sets, as dotted
  overrides (BN's unbiased variance at the small batch, 256 examples per call)."""
  return {**_batch(b, 256), "norm_options.bn.unbiased": str(b <= 4).lower()}


def _figure6_claims(batch_sizes: Sequence[int]) -> tuple[Claim, ...]:
  return tuple(
      Claim(f"perm_mnist_ln_vs_{other}_b{b}", f"At batch size {b}, LN trains faster than "
            f"{'BN' if other == 'bn' else 'no normalization'}", f"{LN_PAPER}, Figure 6", "ln",
            other, where={"batch_size": str(b)})
      for b in batch_sizes for other in ("bn", "none"))


#: Normalizers that normalize each example alone: the Transformer's (BN and BLN are not).
TRANSFORMER_NORMS = ("ln", "rms", "prms", "dyt", "scalenorm", "ln_simple")
#: The Transformer's quality claims compare validation NLL (nats per character); a
#: difference under 0.02 nats (0.03 bits) is below what character-level language
#: models report as a change.
TRANSFORMER_MIN_NATS = 0.02


def _transformer(placement: str, warmup: int) -> dict[str, str]:
  return {"placement": placement, "optimizer.warmup_steps": str(warmup)}


def _transformer_claims(warmup: int) -> tuple[Claim, ...]:
  """The placement claim of Xiong et al. (2020) at a scale's warm-up, and the
  successors' claims where they were made: on a pre-LN Transformer trained with it."""
  xiong = "Xiong et al. 2020, On Layer Normalization in the Transformer Architecture"
  pre = _transformer("pre", warmup)
  m = TRANSFORMER_MIN_NATS

  def matches(norm, kind, text, source):
    return Claim(f"transformer_lm_{norm}_vs_ln", text, source, norm, "ln", kind=kind,
                 where=pre, min_effect=m)

  return (
      # As a speed claim: Xiong et al.'s Figure 3 shows post-LN without warm-up
      # behind from the first updates, and a speed claim needs no converged run.
      Claim("transformer_lm_post_ln_needs_warmup", "Post-LN trains more slowly "
            f"without learning-rate warm-up than with it ({warmup} updates)",
            f"{xiong}, sec. 3.2 and Figure 3", str(warmup), "0",
            field="optimizer.warmup_steps", where={"placement": "post", "norm": "ln"}),
      Claim("transformer_lm_pre_ln_without_warmup", "Pre-LN trains as well without "
            f"warm-up as with it ({warmup} updates)", f"{xiong}, sec. 3.3 and 4", "0",
            str(warmup), kind="matches", field="optimizer.warmup_steps",
            where={"placement": "pre", "norm": "ln"}, min_effect=m),
      matches("rms", "matches", "RMSNorm reaches LN's quality",
              "Zhang & Sennrich 2019, Root Mean Square Layer Normalization, sec. 6"),
      Claim("transformer_lm_rms_step_time", "RMSNorm takes less time per update than LN",
            "Zhang & Sennrich 2019, Root Mean Square Layer Normalization, sec. 6", "rms",
            "ln", kind="step_time", where=pre),
      matches("dyt", "matches", "DyT matches LN's quality",
              "Zhu et al. 2025, Transformers without Normalization, sec. 5"),
      matches("scalenorm", "matches_or_beats", "ScaleNorm matches or beats LN",
              "Nguyen & Salazar 2019, Transformers without Tears, sec. 4"),
      matches("ln_simple", "matches", "LayerNorm-simple (no gain or bias) matches LN",
              "Xu et al. 2019, Understanding and Improving Layer Normalization, sec. 4"))


def _transformer_setting(config: str, warmup: int, seeds: tuple[int, ...],
                         minutes: float | None = None) -> Setting:
  """Pre-LN at the scale's warm-up with every per-example normalizer; LN in the three
  other placement and warm-up cells of Xiong et al.'s claim; the normalizer-free net."""
  cells = ((_transformer("pre", warmup), TRANSFORMER_NORMS),
           (_transformer("pre", 0), ("ln",)),
           (_transformer("post", warmup), ("ln",)),
           (_transformer("post", 0), ("ln",)),
           (_transformer("none", warmup), ("none",)))
  return Setting(config, {}, seeds, variants=tuple(v for v, _ in cells),
                 variant_norms=tuple(n for _, n in cells), minutes=minutes,
                 claims=_transformer_claims(warmup))


SUITE: tuple[Experiment, ...] = (
    Experiment(
        "perm_mnist", CORE_NORMS + ("bn",) + SUCCESSORS, _figure6_claims((4, 128)),
        # Figure 6's claim at the small batch is where BN's statistics are noisy; the CPU
        # runs it alone, a GPU both of the figure's batch sizes.
        {"cpu": Setting("configs/perm_mnist.py",
                        {"num_epochs": "1", "eval_every_steps": "500",
                         "data.source": "files"}, seeds=(0, 1, 2, 3, 4),
                        variants=(_mnist_batch(4),), minutes=2.7),
         "paper": Setting("configs/perm_mnist.py", {"eval_every_steps": "2000"},
                          seeds=(0, 1, 2), variants=(_mnist_batch(128), _mnist_batch(4)))}),
    Experiment(
        "order_embeddings", CORE_NORMS,
        (Claim("order_embeddings_ln_speed", "LN reaches the baseline's best validation "
               "score in less time (about 60%)", f"{LN_PAPER}, Figure 1", "ln", "none",
               claimed_ratio=0.6, about_convergence=True),),
        # 60 epochs: the baseline's validation R-sum still climbs at 20 (the last
        # quarter adds 9% of the run's gain) and is flat from about 40 (0.2% at 60);
        # validation every 40 updates instead of 20 halves its cost.
        {"cpu": Setting("configs/order_embeddings.py:scale=cpu",
                        {"num_epochs": "60", "periodic_eval_every_steps": "40"},
                        seeds=(0, 1, 2), minutes=6.0),
         "paper": Setting("configs/order_embeddings.py", {}, seeds=(0, 1, 2))},
        # Figure 1's validation score: R@1, R@5 and R@10 of both retrieval directions.
        metric="validation/rsum"),
    Experiment(
        "bln_imdb", CORE_NORMS + ("bln", "bn"), _bln_claims("bln_imdb", (25,)),
        {"cpu": Setting("configs/bln_imdb.py", {"data.source": "files"}, seeds=(0, 1, 2, 3, 4),
                        variants=(_batch(25, 500),), minutes=2.3),
         "paper": Setting("configs/bln_imdb.py", {}, seeds=(0, 1, 2),
                          variants=(_batch(25, 500), _batch(1, 500)))}),
    Experiment(
        "bln_cifar", CORE_NORMS + ("bln", "bn"),
        _bln_claims("bln_cifar", (25, 1)) + (
            Claim("bln_cifar_bn_at_chance_b1", "At batch size 1, BN does not learn: its "
                  "error stays at chance", f"{BLN_PAPER}, sec. 4", "bn", "bn",
                  kind="at_chance", where={"batch_size": "1"}),),
        # The paper's 15 epochs: at 10, most BN and LN seeds were still improving
        # (the validity gate); batch 1 costs 14 s an epoch here.
        {"cpu": Setting("configs/bln_cifar.py", {"data.source": "files"},
                        seeds=(0, 1, 2), variants=(_batch(25, 1000), _batch(1, 1000)),
                        minutes=5.5),
         "paper": Setting("configs/bln_cifar.py", {}, seeds=(0, 1, 2),
                          variants=(_batch(25, 1000), _batch(1, 1000)))}),
    Experiment(
        "skip_thoughts", CORE_NORMS + SUCCESSORS,
        (Claim("skip_thoughts_ln_speed", "The LN-GRU trains faster than the GRU",
               f"{LN_PAPER}, Figure 3", "ln", "none"),),
        {"cpu": Setting("configs/skip_thoughts.py:scale=cpu",
                        {"data.source": "files", "max_steps": "150", "eval_every_steps": "25",
                         "periodic_eval_every_steps": "0"}, seeds=(0, 1, 2, 3, 4),
                        minutes=3.9),
         "paper": Setting("configs/skip_thoughts.py", {}, seeds=(0, 1, 2))},
        metric="validation/nll"),
    Experiment(
        "handwriting", CORE_NORMS + SUCCESSORS,
        (Claim("handwriting_ln_speed", "LN reaches a log-likelihood comparable to the "
               "baseline's in fewer updates", f"{LN_PAPER}, Figure 5", "ln", "none"),),
        # Figure 5's claim is about the first updates: 800 of them (0.6 epochs), with
        # validation at 1, 2, 3, 4, 6, ... 631 updates and every 200.
        {"cpu": Setting("configs/handwriting.py:scale=cpu",
                        {"max_steps": "800", "eval_every_steps": "200"},
                        seeds=(0, 1, 2, 3, 4), minutes=2.6),
         "paper": Setting("configs/handwriting.py", {}, seeds=(0, 1, 2))},
        metric="validation/nll"),
    Experiment(
        "draw", CORE_NORMS + ("wn", "ln_cell"),
        (Claim("draw_ln_cell_speed", "LN (on the cell) converges about twice as fast as "
               "the baseline", f"{LN_PAPER}, Figure 4", "ln_cell", "none",
               claimed_ratio=0.5, about_convergence=True),
         Claim("draw_ln_cell_vs_wn", "LN (on the cell) converges faster than weight "
               "normalization", f"{LN_PAPER}, Figure 4", "ln_cell", "wn",
               about_convergence=True)),
        # The cpu setting's whole schedule, 18,000 updates: at 4,000 the baseline was
        # still gaining 8 nats a quarter; over the last quarter of 18,000, 2.6% of its
        # run's gain.
        {"cpu": Setting("configs/draw.py:scale=cpu", {"data.source": "derived"},
                        seeds=(0, 1, 2), minutes=15.0),
         "paper": Setting("configs/draw.py", {}, seeds=(0, 1, 2))},
        metric="validation/nll_bound"),
    Experiment(
        "attentive_reader", CORE_NORMS + ("bn",),
        (Claim("attentive_reader_ln_speed", "LN trains faster than the LSTM baseline",
               f"{LN_PAPER}, Figure 2", "ln", "none"),
         Claim("attentive_reader_ln_vs_bn", "LN trains faster than recurrent BN",
               f"{LN_PAPER}, Figure 2", "ln", "bn")),
        {"cpu": Setting("configs/attentive_reader.py:scale=cpu", {}, seeds=(0, 1, 2),
                        minutes=7.0),
         "paper": Setting("configs/attentive_reader.py", {}, seeds=(0, 1, 2))}),
    Experiment(
        "transformer_lm", ("none",) + TRANSFORMER_NORMS, _transformer_claims(100),
        # 1,000 updates of batch 16 and validation on 1,024 windows every 100 updates
        # (configs/transformer_lm.py says why); the warm-up is the config's.
        {"cpu": _transformer_setting("configs/transformer_lm.py:scale=cpu", 100,
                                     seeds=(0, 1, 2, 3, 4), minutes=4.1),
         "paper": _transformer_setting("configs/transformer_lm.py", 4000, seeds=(0, 1, 2))},
        metric="validation/nll"),
)

BY_NAME = {e.name: e for e in SUITE}


#: The variant fields that name a member; the others go with them (steps_per_call).
VARIANT_NAME_KEYS = ("batch_size", "placement", "optimizer.warmup_steps")


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
    return ",".join([*(f"{k}={v}" for k, v in self.variant.items()
                       if k in VARIANT_NAME_KEYS), f"norm={norm_dirname(self.norm)}"])

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
  """``--seeds 0,1,2`` or ``--seeds 0-4``."""
  items = _parse_list(text, "--seeds")
  if items is None:
    return None
  seeds: list[int] = []
  try:
    for item in items:
      low, dash, high = item.partition("-")
      seeds += list(range(int(low), int(high) + 1)) if dash else [int(item)]
  except ValueError:
    raise UserError(f"--seeds {text!r}: expected integers, e.g. 0,1,2 or 0-4.") from None
  if len(set(seeds)) != len(seeds) or any(s < 0 for s in seeds):
    raise UserError(f"--seeds {text!r}: the seeds must be distinct and non-negative.")
  return seeds


def parse_norms(text: str | None) -> list[str] | None:
  """``--norms none,ln,my_pkg.norms:CenteredRMS``: passed to the config's ``norm``."""
  return _parse_list(text, "--norms")


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


def members(experiments: Sequence[Experiment], scale: str, norms: Sequence[str] | None = None,
            seeds: Sequence[int] | None = None,
            variants: Mapping[str, str] | None = None) -> list[Member]:
  """Every member, seed-major within an experiment: when a sitting ends early, the
  finished members cover every normalizer at the first seeds. ``variants`` keeps the
  variants whose fields have those values (an experiment with none is refused)."""
  if scale not in SCALES:
    raise UserError(f"--scale {scale!r}: expected one of {', '.join(SCALES)}.")
  out = []
  for e in experiments:
    setting = e.scales[scale]
    kept = [(i, v) for i, v in enumerate(setting.variants)
            if all(str(v.get(k)) == val for k, val in (variants or {}).items())]
    if not kept:
      offered = "; ".join(",".join(f"{k}={v[k]}" for k in VARIANT_NAME_KEYS if k in v) or
                          "none" for v in setting.variants)
      raise UserError(f"--variants: {e.name} at scale {scale} has no variant with "
                      f"{variants}; its variants: {offered}.")
    for seed in (setting.seeds if seeds is None else seeds):
      for index, variant in kept:
        listed = setting.norms_at(index, e.norms)
        # A normalizer the experiment runs, but not at this variant, is left out; one
        # it does not list (a user's own) runs wherever it is asked for.
        chosen = listed if norms is None else [n for n in norms
                                               if n in listed or n not in e.norms]
        for norm in chosen:
          out.append(Member(e.name, variant, norm, seed))
  return out
