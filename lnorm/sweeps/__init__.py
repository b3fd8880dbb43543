"""Sweeps: the search space given on the command line (``space``), the member-by-member
runner (``runner``), the wandb sweep file (``wandb_sweep``), and the benchmark: its
suite of claim tests (``benchmark_suite``) run through the runner, with its committed
records (``benchmark``).

Imports ``lnorm.config``, ``lnorm.analysis`` (to skip finished members and to select),
``lnorm.training.defaults`` and ``workdir_lock`` (one sweep per folder), and, when it
checks the members before the first runs, ``lnorm.training.task`` (and with it the
experiment and JAX); the members train in ``lnorm train`` subprocesses.
"""
