"""The training harness shared by every experiment: the loop and its pieces (schedule,
checkpoints, records), optimizers, workdirs, device parallelism and throughput.

Imports ``lnorm.models``, ``lnorm.data``, ``lnorm.progress`` and ``lnorm.errors``; never
the analysis, the sweeps or the commands.
"""
