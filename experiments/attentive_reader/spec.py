"""The attentive reader's facts (LN paper sec. 6.2, Figure 2): the benchmark's
normalizers, settings (the LN gain as a variant) and claims, the figure, and what the
GPU check measures."""

from __future__ import annotations

from lnorm.analysis import specs
from lnorm.analysis.rule import Claim
from lnorm.analysis.specs import (CORE_NORMS, LN_PAPER, ExperimentSpec, Figure, GpuCheck,
                                  Panel, RecurrentLayerSize, Setting)

#: The LN paper's gain for the reader's LN-LSTM, and the one it compared it with
#: (Cooijmans et al.'s): Figure 2 shows gain 1.0 well ahead.
_GAIN = "norm_options.ln.scale_init"
_VARIANTS = ({}, {_GAIN: "0.1"})  # {}: the config's gain, 1.0.
_VARIANT_NORMS = (CORE_NORMS + ("bn",), ("ln",))

SPEC = ExperimentSpec(
    "attentive_reader", CORE_NORMS + ("bn",),
    (Claim("attentive_reader_ln_speed", "LN trains faster than the LSTM baseline",
           f"{LN_PAPER}, Figure 2", "ln", "none", where={_GAIN: "1.0"}),
     Claim("attentive_reader_ln_vs_bn", "LN trains faster than recurrent BN",
           f"{LN_PAPER}, Figure 2", "ln", "bn", where={_GAIN: "1.0"}),
     Claim("attentive_reader_ln_gain", "LN with gain initialised to 1.0 trains faster "
           "than with 0.1", f"{LN_PAPER}, sec. 6.2 and Figure 2", "1.0", "0.1",
           field=_GAIN, where={"norm": "ln"})),
    {"cpu": Setting("configs/attentive_reader.py:scale=cpu", {},
                    variants=_VARIANTS, variant_norms=_VARIANT_NORMS),
     # The cpu task and model for 20,000 updates instead of 3,000: LN at gain 1.0 stalls
     # on Adam's second moment for about 10^4 updates (docs/reader_ln_gain.md), and
     # validation at 30 points a decade (the cpu scale's every 250 gave 0.14).
     "gpu": Setting("configs/attentive_reader.py:scale=cpu",
                    {"max_steps": "20000", **specs.dense_evaluations()},
                    variants=_VARIANTS, variant_norms=_VARIANT_NORMS,
                    run_first={"attentive_reader_ln_speed": 2,
                               "attentive_reader_ln_vs_bn": 2,
                               "attentive_reader_ln_gain": 2}),
     "paper": Setting("configs/attentive_reader.py", {},
                      variants=_VARIANTS, variant_norms=_VARIANT_NORMS)},
    figures={"ln-fig2": Figure(
        "attentive_reader",
        "LN paper Figure 2: the attentive reader, validation error against updates for "
        "the LSTM, BN-LSTM, BN-everywhere and LN-LSTM.",
        (Panel(("validation/error",), {}, "validation error rate"),),
        columns=1, x="step", summary="validation error against updates")},
    variant_keys=(_GAIN,),
    gpu=GpuCheck(
        step_cost_rank=4,
        # Its LSTMs: 240 units over 240-wide word embeddings, batch 64, a question of
        # 100 tokens.
        recurrent_layers=(RecurrentLayerSize(batch=64, steps=100, input=240, hidden=240),)))
