"""BLN-IMDb's facts (the BLN paper's IMDB LSTM): the benchmark's normalizers, settings
and claims, the authors' logs, the figure, and what the batch size sets with it."""

from __future__ import annotations

from lnorm.analysis import specs
from lnorm.analysis.specs import CORE_NORMS, SUCCESSORS, ExperimentSpec, Setting

#: What the batch size sets with it: the steps fused per call, about 500 examples.
BATCH = specs.BatchRule(examples_per_call=500)
batch_fields = BATCH.fields  # The config's batch_size argument.
batch_variant = BATCH.variant


SPEC = ExperimentSpec(
    "bln_imdb", CORE_NORMS + ("bln", "bn") + SUCCESSORS,
    specs.bln_claims("bln_imdb", (25,)),
    {"cpu": Setting("configs/bln_imdb.py", {"data.source": "files"},
                    variants=(batch_variant(25),)),
     # The cpu setting: its claims read each seed's last value, so what the cpu scale
     # lacks is seeds (14 to 29 needed); a member takes about a minute on a GPU.
     "gpu": Setting("configs/bln_imdb.py", {"data.source": "files"},
                    variants=(batch_variant(25),)),
     "paper": Setting("configs/bln_imdb.py", {},
                      variants=(batch_variant(25), batch_variant(1)))},
    published=specs.bln_published("bln_imdb", 10, {
        25: {"bln": (0.496, 0.771), "bn": (0.620, 0.698), "ln": (0.639, 0.711)},
        1: {"bln": (0.583, 0.731), "bn": (0.979, 0.495), "ln": (0.688, 0.684)}}),
    figures={"bln-imdb": specs.bln_figure("bln_imdb", "IMDB LSTM")},
    variant_keys=("batch_size",),
    # scripts/gpu/length_quantiles.py: IMDB's reviews, 90% of them cut to their last 80.
    gpu=specs.GpuCheck(timed_lengths=(specs.TimedLengths(
        "tokens", "length", (25, 80, 80, 80, 80, 80, 80, 80, 80, 80, 80), padded=80,
        source="IMDB"),)))
