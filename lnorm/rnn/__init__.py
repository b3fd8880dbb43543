"""Normalized recurrent cells (LSTM, GRU) and a sequence layer for padded batches.

    from lnorm.rnn import RecurrentLayer, make_lstm_cell
    rnn = RecurrentLayer(make_lstm_cell("ln", forget_bias=1.0), hidden_size=400)
    out = rnn.apply(variables, x, lengths, train=True)   # out.outputs, out.final_hidden

Variant names: LSTM ``none``, ``bn``, ``wn``, and each per-example normalizer
(``ln``, ``rms``, ``prms``, ``dyt``, ``scalenorm``, ``ln_simple``) in LN's places or,
as ``<name>_cell`` (``ln_cell``, ...), on c only; GRU ``none``, ``wn`` and each
per-example normalizer. A normalizer from the user's file, named
``module:attribute``, goes in LN's places in either cell and runs step by step
(``recurrence_path``). Recurrent BN keeps its per-step population statistics in the
``batch_stats`` collection (pass ``mutable=['batch_stats']`` in training). Keras's
per-sequence dropout of x and h works with every variant:
``make_lstm_cell('ln', dropout=0.2, recurrent_dropout=0.2)`` (needs a 'dropout' rng).
How a layer runs its cells, the option ``impl`` (the config's ``lstm_impl``): lnorm's
scan, cuDNN for the plain LSTM, or the Pallas step kernels for a GPU
(:mod:`lnorm.rnn.implementation`).
"""

from lnorm.rnn.cells import CellNorms, DropoutMasks, GRUCell, LSTMCell, recurrence_path
from lnorm.rnn.norms import (
    StepBatchNorm, StepDynamicTanh, StepIdentity, StepLayerNorm, StepLayerNormSimple,
    StepRMSNorm, StepScaleNorm)
from lnorm.rnn.record import normalizer_record
from lnorm.rnn.sequence import (
    RNNOutput, RecurrentLayer, flip_sequences, masked_mean, sequence_mask)
from lnorm.rnn.variants import (
    DEFAULT_OPTIONS, GRU_VARIANTS, LSTM_VARIANTS, cell_options, make_gru_cell,
    make_lstm_cell)

__all__ = [
    "CellNorms", "DEFAULT_OPTIONS", "DropoutMasks", "GRUCell", "GRU_VARIANTS",
    "LSTMCell", "LSTM_VARIANTS", "RNNOutput", "RecurrentLayer", "StepBatchNorm",
    "StepDynamicTanh", "StepIdentity", "StepLayerNorm", "StepLayerNormSimple", "StepRMSNorm",
    "StepScaleNorm", "cell_options", "flip_sequences", "make_gru_cell", "make_lstm_cell",
    "masked_mean", "normalizer_record", "recurrence_path", "sequence_mask",
]
