"""Handwriting synthesis's facts (LN paper sec. 6.5, Figure 5): the benchmark's
normalizers, settings and claim, the figure, and what the GPU check measures."""

from __future__ import annotations

from lnorm.analysis import specs
from lnorm.analysis.rule import Claim
from lnorm.analysis.specs import (CORE_NORMS, LN_PAPER, SUCCESSORS, ExperimentSpec, Figure,
                                  GpuCheck, Line, Panel, RecurrentLayerSize, Setting,
                                  TimedLengths)

SPEC = ExperimentSpec(
    "handwriting", CORE_NORMS + SUCCESSORS,
    (Claim("handwriting_ln_speed", "LN reaches a log-likelihood comparable to the "
           "baseline's in fewer updates", f"{LN_PAPER}, Figure 5", "ln", "none"),),
    # Figure 5's claim is about the first updates: 800 of them (0.6 epochs), with
    # validation at 1, 2, 3, 4, 6, ... 631 updates and every 200.
    {"cpu": Setting("configs/handwriting.py:scale=cpu",
                    {"max_steps": "800", "eval_every_steps": "200"}),
     # The cpu model for 1,600 updates, validation at 30 points a decade instead of 5
     # (whose brackets, 58% wide, gave a floor of 0.25).
     "gpu": Setting("configs/handwriting.py:scale=cpu",
                    {"max_steps": "1600", **specs.dense_evaluations()}),
     "paper": Setting("configs/handwriting.py", {})},
    metric="validation/nll",
    figures={"ln-fig5": Figure(
        "handwriting",
        "LN paper Figure 5: handwriting generation, negative log-likelihood (nats per line) "
        "against updates on a log scale, held-out and training, with and without LN.",
        (Panel(("test/nll", "validation/nll"), {}, "negative log-likelihood (nats per line)",
               name="held out", lines=(Line(("train/nll",), "train"),)),),
        columns=1, x="step", logx=True,
        summary="held-out and training NLL against updates, log axis")},
    gpu=GpuCheck(
        step_cost_rank=3, in_rehearsal=True,  # The rehearsal's model with LSTM layers.
        # The upper layers: 400 units reading the pen move, the window over 57 symbols
        # and the layer below (460 inputs); batch 8, 500 moves.
        recurrent_layers=(
            RecurrentLayerSize("upper", "lstm", batch=8, steps=500, input=460, hidden=400),),
        # scripts/gpu/length_quantiles.py: IAM-OnDB's lines, 70% of them cut to 500 moves.
        timed_lengths=(
            TimedLengths("strokes", "length", (30, 401, 477, 500, 500, 500, 500, 500, 500,
                                               500, 500), padded=500, source="IAM-OnDB"),
            TimedLengths("text", "text_length", (1, 20, 24, 26, 28, 29, 31, 33, 35, 38, 64),
                         padded=64, source="IAM-OnDB"))))
