"""Normalized recurrent cells (LSTM, GRU) and a sequence layer for padded batches.

    from lnorm.rnn import RecurrentLayer, make_lstm_cell
    rnn = RecurrentLayer(make_lstm_cell("ln", forget_bias=1.0), hidden_size=400)
    out = rnn.apply(variables, x, lengths, train=True)   # out.outputs, out.final_hidden

Variant names: LSTM ``none``, ``ln``, ``ln_cell``, ``bn``, ``wn``, ``rms``, ``prms``,
``rms_cell``, ``prms_cell``; GRU ``none``, ``ln``, ``wn``, ``rms``, ``prms``. Recurrent BN keeps its per-step population statistics in the
``batch_stats`` collection (pass ``mutable=['batch_stats']`` in training). Keras's
per-sequence dropout of x and h works with every variant:
``make_lstm_cell('ln', dropout=0.2, recurrent_dropout=0.2)`` (needs a 'dropout' rng).
"""

from lnorm.rnn.cells import CellNorms, DropoutMasks, GRUCell, LSTMCell
from lnorm.rnn.norms import StepBatchNorm, StepIdentity, StepLayerNorm, StepRMSNorm
from lnorm.rnn.sequence import (
    RNNOutput, RecurrentLayer, flip_sequences, masked_mean, sequence_mask)
from lnorm.rnn.variants import (
    DEFAULT_OPTIONS, GRU_VARIANTS, LSTM_VARIANTS, cell_options, make_gru_cell,
    make_lstm_cell)

__all__ = [
    "CellNorms", "DEFAULT_OPTIONS", "DropoutMasks", "GRUCell", "GRU_VARIANTS",
    "LSTMCell", "LSTM_VARIANTS", "RNNOutput", "RecurrentLayer", "StepBatchNorm",
    "StepIdentity", "StepLayerNorm", "StepRMSNorm", "cell_options", "flip_sequences", "make_gru_cell",
    "make_lstm_cell", "masked_mean", "sequence_mask",
]
