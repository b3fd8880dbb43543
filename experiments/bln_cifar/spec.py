"""BLN-CIFAR's facts (the BLN paper's CIFAR-10 LeNet-5): the benchmark's normalizers,
settings and claims, the authors' logs, the figure, and what the batch size sets with
it."""

from __future__ import annotations

from lnorm.analysis import specs
from lnorm.analysis.rule import Claim
from lnorm.analysis.specs import BLN_PAPER, CORE_NORMS, SUCCESSORS, ExperimentSpec, Setting

#: What the batch size sets with it: the steps fused per call, about 1,000 examples.
BATCH = specs.BatchRule(examples_per_call=1000)
batch_fields = BATCH.fields  # The config's batch_size argument.
batch_variant = BATCH.variant


SPEC = ExperimentSpec(
    "bln_cifar", CORE_NORMS + ("bln", "bn") + SUCCESSORS,
    specs.bln_claims("bln_cifar", specs.BLN_BATCH_SIZES) + (
        Claim("bln_cifar_bn_at_chance_b1", "At batch size 1, BN does not learn: its "
              "error stays at chance", f"{BLN_PAPER}, sec. 4", "bn", "bn",
              kind="at_chance", where={"batch_size": "1"}),),
    # The paper's 15 epochs: at 10, most BN and LN seeds were still improving
    # (the validity gate); batch 1 costs 14 s an epoch here.
    {"cpu": Setting("configs/bln_cifar.py", {"data.source": "files"},
                    variants=(batch_variant(25), batch_variant(1))),
     # The cpu setting: its claims read each seed's last value, so what the cpu scale
     # lacks is seeds (13 to 123 needed); a member takes about a minute on a GPU.
     "gpu": Setting("configs/bln_cifar.py", {"data.source": "files"},
                    variants=(batch_variant(25), batch_variant(1))),
     "paper": Setting("configs/bln_cifar.py", {},
                      variants=(batch_variant(25), batch_variant(1)))},
    published=specs.bln_published("bln_cifar", 15, {
        25: {"bln": (1.531, 0.455), "bn": (1.575, 0.453), "ln": (1.666, 0.423)},
        1: {"bln": (1.562, 0.442), "bn": (22.1, 0.109), "ln": (1.734, 0.378)}}),
    figures={"bln-cifar": specs.bln_figure("bln_cifar", "CIFAR-10 LeNet-5")},
    variant_keys=("batch_size",))
