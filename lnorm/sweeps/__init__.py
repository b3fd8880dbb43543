"""Sweeps: the search space given on the command line (``space``), the member-by-member
runner (``runner``), the wandb sweep file (``wandb_sweep``), and the benchmark: its
suite of claim tests (``benchmark_suite``) run through the runner, with its committed
records (``benchmark``).

Imports ``lnorm.config``, ``lnorm.analysis`` (to skip finished members and to select)
and ``lnorm.training.defaults``; the runner calls a train function it is handed.
"""
