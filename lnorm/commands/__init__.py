"""One module per ``lnorm`` command: ``add_arguments(parser)`` and ``run(args, overrides)``."""
