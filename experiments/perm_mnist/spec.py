"""Permutation-invariant MNIST's facts (LN paper sec. 6.6, Figure 6): the benchmark's
normalizers, settings and claims, the published curves, the figure, the GPU check's
run of the figure, and what the batch size sets with it."""

from __future__ import annotations

from typing import Any, Sequence

from lnorm.analysis import specs
from lnorm.analysis.rule import Claim
from lnorm.analysis.specs import (CORE_NORMS, LN_PAPER, LN_PAPER_PUBLISHED, SUCCESSORS,
                                  ExperimentSpec, Figure, GpuBenchmark, GpuCheck, Panel,
                                  Published, Setting)

#: Examples a jitted call trains on: tiny batches fuse steps so that dispatch does not
#: dominate.
EXAMPLES_PER_CALL = 256


def batch_fields(batch_size: int) -> dict[str, Any]:
  """What the batch size sets with it, wherever it is set (the config's batch_size
  argument, the suite's variants, the config's own sweeps): BN's unbiased variance at
  a batch of 4 or fewer, as the LN paper at batch 4, and the steps fused per call."""
  return {"batch_size": batch_size,
          "steps_per_call": specs.steps_per_call(batch_size, EXAMPLES_PER_CALL),
          "norm_options.bn.unbiased": batch_size <= 4}


def batch_variant(batch_size: int) -> dict[str, str]:
  """:func:`batch_fields` as a variant's dotted overrides (a dotted override of
  batch_size alone would keep the default's other fields)."""
  return specs.as_overrides(batch_fields(batch_size))


def gpu_variant(batch_size: int, steps_per_call: int, updates: int) -> dict[str, str]:
  """A gpu-scale variant: :func:`batch_variant` with fewer steps fused per call (the
  loop evaluates between calls, so a call of 64 updates at batch 4 would coarsen the
  evaluation grid; on a GPU a call of 8 is still a fraction of a millisecond's
  dispatch) and the run's length in updates."""
  return {**batch_variant(batch_size), "steps_per_call": str(steps_per_call),
          "max_steps": str(updates)}


def _figure6_claims(batch_sizes: Sequence[int]) -> tuple[Claim, ...]:
  return tuple(
      Claim(f"perm_mnist_ln_vs_{other}_b{b}", f"At batch size {b}, LN trains faster than "
            f"{'BN' if other == 'bn' else 'no normalization'}", f"{LN_PAPER}, Figure 6", "ln",
            other, where={"batch_size": str(b)})
      for b in batch_sizes for other in ("bn", "none"))


SPEC = ExperimentSpec(
    "perm_mnist", CORE_NORMS + ("bn",) + SUCCESSORS + ("wn", "bln"),
    _figure6_claims((4, 128)),
    # Figure 6's claim at the small batch is where BN's statistics are noisy; the CPU
    # runs it alone, a GPU both of the figure's batch sizes. configs/perm_mnist.py's
    # `cpu` sweep is this setting's grid.
    {"cpu": Setting("configs/perm_mnist.py",
                    {"num_epochs": "1", "eval_every_steps": "500",
                     "data.source": "files"},
                    variants=(batch_variant(4),)),
     # Figure 6's both batch sizes: at 128 the paper's 20 epochs (8,580 updates, 429 an
     # epoch), at 4 one epoch (13,750 updates), as at the cpu scale; validation at 30
     # points a decade, so that the grid is finer than the claims' margin from 2% of
     # the run on (the cpu scale's every 500 updates gave LN against BN a floor of 0.15).
     "gpu": Setting("configs/perm_mnist.py",
                    {"data.source": "files", **specs.dense_evaluations()},
                    variants=(gpu_variant(128, 2, 8580), gpu_variant(4, 8, 13750)),
                    run_first={"perm_mnist_ln_vs_bn_b128": 1,
                               "perm_mnist_ln_vs_none_b128": 1,
                               "perm_mnist_ln_vs_none_b4": 4}),
     "paper": Setting("configs/perm_mnist.py", {"eval_every_steps": "2000"},
                      variants=(batch_variant(128), batch_variant(4)))},
    published=tuple(
        Published("perm_mnist", {"norm": n, "batch_size": b}, metric, None,
                  f"{LN_PAPER_PUBLISHED}, Figure 6", "curves only")
        for b in (128, 4) for n in ("none", "bn", "ln") for metric in ("train/nll", "test/error")),
    figures={"ln-fig6": Figure(
        "perm_mnist",
        "LN paper Figure 6: permutation-invariant MNIST, train NLL and test error per "
        "epoch for the baseline, BN and LN at batch sizes 128 and 4.",
        (Panel(("train/nll", "train/loss"), {"batch_size": 128}, "train NLL, batch 128", True),
         Panel(("test/error",), {"batch_size": 128}, "test error, batch 128"),
         Panel(("train/nll", "train/loss"), {"batch_size": 4}, "train NLL, batch 4", True),
         Panel(("test/error",), {"batch_size": 4}, "test error, batch 4")),
        summary="train NLL and test error at batch 128 and 4")},
    variant_keys=("batch_size",),
    gpu=GpuCheck(
        in_rehearsal=True,  # The MLP on MNIST's files.
        # Figure 6's left panel: batch 128 for the config's 20 epochs, on MNIST's files;
        # the rehearsal's toy runs, a few updates of a small MLP and one evaluation.
        benchmark=GpuBenchmark(
            "ln-fig6", "batch_size=128", ("none", "bn", "ln"), (0, 1, 2),
            {"data.source": "files"},
            toy_overrides={"max_steps": "6", "hidden_sizes": "(16,16)",
                           "eval_every_steps": "0", "checkpoint_every_secs": "3600"})))
