"""Skip-thoughts' facts (LN paper sec. 6.3, Figure 3 and Table 3): the benchmark's
normalizers, settings and claim, the published Table 3 and the figure."""

from __future__ import annotations

from lnorm.analysis import specs
from lnorm.analysis.rule import Claim
from lnorm.analysis.specs import (CORE_NORMS, LN_PAPER, LN_PAPER_PUBLISHED, SUCCESSORS,
                                  ExperimentSpec, Figure, GpuCheck, Panel, Published,
                                  RecurrentLayerSize, Setting, TimedLengths)


def _published() -> tuple[Published, ...]:
  src = f"{LN_PAPER_PUBLISHED}, Table 3"
  names = ("sick_pearson", "sick_spearman", "sick_mse", "mr_accuracy", "cr_accuracy",
           "subj_accuracy", "mpqa_accuracy")
  values = {"none": (0.842, 0.767, 0.298, 77.3, 81.8, 92.6, 87.9),
            "ln": (0.854, 0.785, 0.277, 79.5, 82.6, 93.4, 89.0)}
  return tuple(Published("skip_thoughts", {"norm": n}, f"eval/{m}", v, src,
                         "BookCorpus; 'Ours' and 'Ours + LN'")
               for n, vs in values.items() for m, v in zip(names, vs))


_SENTENCE_EVAL = ("not evaluated: set --config.periodic_eval_every_steps=N (and {task} in "
                  "--config.sentence_eval.tasks), or run `lnorm evaluate`")

SPEC = ExperimentSpec(
    "skip_thoughts", CORE_NORMS + SUCCESSORS,
    (Claim("skip_thoughts_ln_speed", "The LN-GRU trains faster than the GRU",
           f"{LN_PAPER}, Figure 3", "ln", "none"),),
    {"cpu": Setting("configs/skip_thoughts.py:scale=cpu",
                    {"data.source": "files", "max_steps": "150", "eval_every_steps": "25",
                     "periodic_eval_every_steps": "0"}),
     # The cpu model for four passes over the books (1,784 updates; the cpu scale's 150
     # ended while the baseline fell steeply), one update a call and validation at 30
     # points a decade (the cpu scale's every 25 of 150 gave a floor of 0.45).
     "gpu": Setting("configs/skip_thoughts.py:scale=cpu",
                    {"data.source": "files", "max_steps": "1784", "steps_per_call": "1",
                     "periodic_eval_every_steps": "0", **specs.dense_evaluations()}),
     "paper": Setting("configs/skip_thoughts.py", {})},
    metric="validation/nll",
    published=_published(),
    figures={"ln-fig3": Figure(
        "skip_thoughts",
        "LN paper Figure 3: skip-thought vectors, downstream scores of the encoder against "
        "updates (the paper evaluated every 50k), and the validation perplexity.",
        (Panel(("eval/sick_pearson",), {}, "SICK (r)",
               missing=_SENTENCE_EVAL.format(task="sick")),
         Panel(("eval/sick_mse",), {}, "SICK (MSE)", missing=_SENTENCE_EVAL.format(task="sick")),
         *(Panel((f"eval/{task}_accuracy",), {}, name,
                 missing=_SENTENCE_EVAL.format(task=task))
           for task, name in (("mr", "MR"), ("cr", "CR"), ("subj", "SUBJ"), ("mpqa", "MPQA"))),
         Panel(("validation/perplexity", "exp(validation/token_nll)"), {},
               "validation perplexity",
               missing="logged when validation is in --config.eval_splits, as by "
               "default")),
        columns=3, x="step",
        summary="SICK r and MSE, MR, CR, SUBJ, MPQA from periodic evaluations, and "
        "validation perplexity, against updates")},
    gpu=GpuCheck(
        step_cost_rank=2,
        # The encoder GRU (each of the two decoders is the same size): 2400 units over
        # 620-wide word embeddings, batch 64, sentences padded to 30 words.
        recurrent_layers=(
            RecurrentLayerSize("encoder", "gru", batch=64, steps=30, input=620, hidden=2400),),
        # scripts/gpu/length_quantiles.py; BookCorpus is not at hand, so the lengths are
        # the stand-in's, the Gutenberg books' sentences.
        timed_lengths=(
            TimedLengths("tokens", "length", (2, 4, 6, 8, 10, 12, 15, 17, 21, 25, 30),
                         padded=30, source="the Gutenberg books (BookCorpus is not at hand)"),)))
