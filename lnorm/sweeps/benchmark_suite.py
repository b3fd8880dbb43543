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

from lnorm.errors import UserError

SCALES = ("cpu", "paper")
#: The normalizers every experiment is run with.
CORE_NORMS = ("none", "ln", "rms")


@dataclasses.dataclass(frozen=True)
class Claim:
  """One claim of a paper, tested on one experiment's runs.

  ``kind`` says what is compared: ``"speed"``, the updates ``norm`` needs to reach the
  best held-out value of ``against`` as a ratio to ``against``'s own; ``"final"``, the
  best held-out value of ``norm`` against that of ``against``. ``where`` restricts the
  runs (``{"batch_size": "25"}``).
  """
  key: str
  text: str
  source: str
  norm: str
  against: str
  kind: str = "speed"
  where: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Setting:
  """An experiment at one scale: the config spec and the overrides every member gets,
  the variants each normalizer is run at, and the seeds."""
  config: str
  overrides: Mapping[str, str]
  seeds: tuple[int, ...]
  variants: tuple[Mapping[str, str], ...] = ({},)
  minutes: float | None = None  # One member on one core, as docs/benchmark.md gives it.


@dataclasses.dataclass(frozen=True)
class Experiment:
  name: str
  norms: tuple[str, ...]
  claims: tuple[Claim, ...]
  scales: Mapping[str, Setting]
  # The held-out metric of the claims and the headline; None: the one `lnorm report`
  # takes (the paper's metric, else the first logged, with the most evaluations).
  metric: str | None = None


LN_PAPER = "Ba, Kiros & Hinton 2016"
BLN_PAPER = "Ziaee & Çano, Batch Layer Normalization"


def _bln_claims(experiment: str, batch_sizes: Sequence[int]) -> tuple[Claim, ...]:
  return tuple(
      Claim(f"{experiment}_bln_vs_{other}_b{b}",
            f"BLN ends with a better held-out value than {other.upper()} at batch size {b}",
            f"{BLN_PAPER}, sec. 4", "bln", other, kind="final",
            where={"batch_size": str(b)})
      for b in batch_sizes for other in ("bn", "ln"))


# The BLN claims compare each seed's best value over its epochs. Taking that best on the
# test split (the published table's metric, which CIFAR-10 logs every epoch) would
# select on test; the validation split's error is the held-out value to select on.
BLN_SELECTION_METRIC = "validation/error"


def _batch(b: int, fused: int) -> dict[str, str]:
  """A batch size as a dotted override, with the steps fused per jitted call that the
  config sets with it (a dotted override of batch_size alone would keep the default's)."""
  return {"batch_size": str(b), "steps_per_call": str(max(1, fused // b))}


SUITE: tuple[Experiment, ...] = (
    Experiment(
        "perm_mnist", CORE_NORMS + ("bn",),
        (Claim("perm_mnist_ln_vs_bn_b4", "At batch size 4, LN trains faster than BN",
               f"{LN_PAPER}, Figure 6", "ln", "bn"),
         Claim("perm_mnist_ln_vs_none_b4", "At batch size 4, LN trains faster than no "
               "normalization", f"{LN_PAPER}, Figure 6", "ln", "none")),
        {"cpu": Setting("configs/perm_mnist.py:batch_size=4",
                        {"num_epochs": "1", "eval_every_steps": "500",
                         "data.source": "files"}, seeds=(0, 1, 2, 3, 4), minutes=1.9),
         "paper": Setting("configs/perm_mnist.py:batch_size=4",
                          {"eval_every_steps": "2000"}, seeds=(0, 1, 2))}),
    Experiment(
        "order_embeddings", CORE_NORMS,
        (Claim("order_embeddings_ln_speed", "LN reaches the baseline's best validation "
               "score in less time (about 60%)", f"{LN_PAPER}, Figure 1", "ln", "none"),),
        {"cpu": Setting("configs/order_embeddings.py:scale=cpu", {}, seeds=(0, 1, 2, 3, 4),
                        minutes=3.0),
         "paper": Setting("configs/order_embeddings.py", {}, seeds=(0, 1, 2))},
        # Figure 1's validation score: R@1, R@5 and R@10 of both retrieval directions.
        metric="validation/rsum"),
    Experiment(
        "bln_imdb", CORE_NORMS + ("bln", "bn"), _bln_claims("bln_imdb", (25,)),
        {"cpu": Setting("configs/bln_imdb.py", {"data.source": "files"}, seeds=(0, 1, 2, 3, 4),
                        variants=(_batch(25, 500),), minutes=2.3),
         "paper": Setting("configs/bln_imdb.py", {}, seeds=(0, 1, 2),
                          variants=(_batch(25, 500), _batch(1, 500)))},
        metric=BLN_SELECTION_METRIC),
    Experiment(
        "bln_cifar", CORE_NORMS + ("bln", "bn"), _bln_claims("bln_cifar", (25,)),
        {"cpu": Setting("configs/bln_cifar.py", {"data.source": "files", "num_epochs": "10"},
                        seeds=(0, 1, 2, 3, 4), variants=(_batch(25, 1000),), minutes=2.2),
         "paper": Setting("configs/bln_cifar.py", {}, seeds=(0, 1, 2),
                          variants=(_batch(25, 1000), _batch(1, 1000)))},
        metric=BLN_SELECTION_METRIC),
    Experiment(
        "skip_thoughts", CORE_NORMS,
        (Claim("skip_thoughts_ln_speed", "The LN-GRU trains faster than the GRU",
               f"{LN_PAPER}, Figure 3", "ln", "none"),),
        {"cpu": Setting("configs/skip_thoughts.py:scale=cpu",
                        {"data.source": "files", "max_steps": "150", "eval_every_steps": "25",
                         "periodic_eval_every_steps": "0"}, seeds=(0, 1, 2, 3, 4),
                        minutes=3.9),
         "paper": Setting("configs/skip_thoughts.py", {}, seeds=(0, 1, 2))}),
    Experiment(
        "handwriting", CORE_NORMS,
        (Claim("handwriting_ln_speed", "LN reaches a log-likelihood comparable to the "
               "baseline's in fewer updates", f"{LN_PAPER}, Figure 5", "ln", "none"),),
        # Figure 5's claim is about the first updates: 800 of them (0.6 epochs), with
        # validation at 1, 2, 3, 4, 6, ... 631 updates and every 200.
        {"cpu": Setting("configs/handwriting.py:scale=cpu",
                        {"max_steps": "800", "eval_every_steps": "200"},
                        seeds=(0, 1, 2, 3, 4), minutes=2.6),
         "paper": Setting("configs/handwriting.py", {}, seeds=(0, 1, 2))}),
    Experiment(
        "draw", CORE_NORMS + ("wn", "ln_cell"),
        (Claim("draw_ln_cell_speed", "LN (on the cell) converges about twice as fast as "
               "the baseline", f"{LN_PAPER}, Figure 4", "ln_cell", "none"),
         Claim("draw_ln_cell_vs_wn", "LN (on the cell) converges faster than weight "
               "normalization", f"{LN_PAPER}, Figure 4", "ln_cell", "wn")),
        {"cpu": Setting("configs/draw.py:scale=cpu",
                        {"data.source": "derived", "max_steps": "4000"},
                        seeds=(0, 1, 2, 3, 4), minutes=2.5),
         "paper": Setting("configs/draw.py", {}, seeds=(0, 1, 2))}),
    Experiment(
        "attentive_reader", CORE_NORMS + ("bn",),
        (Claim("attentive_reader_ln_speed", "LN trains faster than the LSTM baseline",
               f"{LN_PAPER}, Figure 2", "ln", "none"),
         Claim("attentive_reader_ln_vs_bn", "LN trains faster than recurrent BN",
               f"{LN_PAPER}, Figure 2", "ln", "bn")),
        # LN's gain at 0.1, as Cooijmans et al. ran it: at gain 1.0 the authors' clip
        # rule lets the gradient explode with passage length (docs/results.md), and on
        # the task built the CBT's way the first batch already stops as not finite.
        # RMSNorm's gain starts at 0.1 too (BN's does in the config): at 1.0 its first
        # step on the task built the CBT's way is not finite, as LN's is.
        {"cpu": Setting("configs/attentive_reader.py:scale=cpu,ln_gain=0.1",
                        {"max_steps": "1500", "norm_options.rms.scale_init": "0.1"},
                        seeds=(0, 1, 2), minutes=5.4),
         "paper": Setting("configs/attentive_reader.py", {}, seeds=(0, 1, 2))}),
)

BY_NAME = {e.name: e for e in SUITE}


#: The variant fields that name a member; the others go with them (steps_per_call).
VARIANT_NAME_KEYS = ("batch_size",)


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


def members(experiments: Sequence[Experiment], scale: str, norms: Sequence[str] | None = None,
            seeds: Sequence[int] | None = None) -> list[Member]:
  """Every member, seed-major within an experiment: when a sitting ends early, the
  finished members cover every normalizer at the first seeds."""
  if scale not in SCALES:
    raise UserError(f"--scale {scale!r}: expected one of {', '.join(SCALES)}.")
  out = []
  for e in experiments:
    setting = e.scales[scale]
    for seed in (setting.seeds if seeds is None else seeds):
      for variant in setting.variants:
        for norm in (e.norms if norms is None else norms):
          out.append(Member(e.name, variant, norm, seed))
  return out
