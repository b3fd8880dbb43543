"""The analysis of finished runs: reading run directories, updates-to-target, the
normalizer table, the benchmark's intervals and verdicts (``claims``), model
selection, reports against published numbers, and figures.

Reads what ``lnorm train`` wrote; imports ``lnorm.training.defaults`` and
``lnorm.errors``, and an experiment's spec only by its name in the registry
(``lnorm.analysis.specs``), never an experiment's code or the commands.
"""
