"""The analysis of finished runs: reading run directories, updates-to-target, the
normalizer table, the benchmark's intervals and verdicts (``claims``), model
selection, reports against published numbers, and figures.

Reads what ``lnorm train`` wrote; imports ``lnorm.training.defaults`` and
``lnorm.errors`` only, never the experiments or the commands.
"""
