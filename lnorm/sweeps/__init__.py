"""Sweeps: the search space given on the command line (``space``), the member-by-member
runner (``runner``) and the wandb sweep file (``wandb_sweep``).

Imports ``lnorm.config``, ``lnorm.analysis`` (to skip finished members and to select)
and ``lnorm.training.defaults``; the runner calls a train function it is handed.
"""
