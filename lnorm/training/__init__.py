"""The training harness shared by every experiment: the loop (``loop``) and its pieces
(``steps``, ``eval_schedule``, ``checkpoint_policy``, ``records``), optimizers,
checkpoints, workdirs, device parallelism, the compilation cache and throughput.

Imports ``lnorm.data``, ``lnorm.rnn``, ``lnorm.normalization``, ``lnorm.config``,
``lnorm.progress`` and ``lnorm.errors``; never the analysis, the sweeps, the commands
or the experiments (``experiments`` names them, and ``task`` imports one by
name when a run asks for it).
"""
