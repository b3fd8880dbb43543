"""The recurrent cells' names for the normalizers, kept for code that imports them.

Each normalizer is defined once, in :mod:`lnorm.normalization.modules`, and the same
module runs in feed-forward layers and in the recurrent cells, which call it as
``norm(x, *, train, step, mask=None)``: the input projection W_x x for all time steps
at once (``x`` time-major ``[T, B, F]``, ``step`` of shape ``[T]``), the recurrent
projection W_h h and the cell state c one step at a time (``x`` ``[B, F]``, a scalar
``step``). Only recurrent BN looks at ``step`` and at ``mask`` (``[T, B]`` or ``[B]``,
true for real steps, keeping padding out of its batch statistics); the per-example
normalizers and the identity ignore both.

``fusable`` says whether the fused recurrences (:mod:`lnorm.rnn.fused`,
:mod:`lnorm.rnn.fused_gru`) can run a normalizer; if so, ``row_norm(features)`` gives
its parameters in their terms (None for the identity). LN, RMSNorm, ScaleNorm,
LayerNorm-simple and the identity can; recurrent BN, DyT and a user's normalizer run
step by step. How each enters a cell (RMSNorm without a bias, BN's gains) is its
definition's ``in_cells`` (:mod:`lnorm.normalization.registry`).
"""

from __future__ import annotations

from lnorm.normalization.modules import (
    DynamicTanh, Identity, LayerNorm, RMSNorm, ScaleNorm, StepBatchNorm)

StepIdentity = Identity
StepLayerNorm = LayerNorm
StepDynamicTanh = DynamicTanh
StepScaleNorm = ScaleNorm


class StepRMSNorm(RMSNorm):
  """RMSNorm as the cells take it: a gain and no bias (the RMSNorm authors' cells)."""

  use_bias: bool = False


class StepLayerNormSimple(LayerNorm):
  """LayerNorm-simple (Xu et al. 2019): LN without its gain and bias."""

  use_scale: bool = False
  use_bias: bool = False


__all__ = ["StepBatchNorm", "StepDynamicTanh", "StepIdentity", "StepLayerNorm",
           "StepLayerNormSimple", "StepRMSNorm", "StepScaleNorm"]
