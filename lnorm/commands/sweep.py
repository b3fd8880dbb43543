"""``lnorm sweep``: run a named grid from a config file, or print its commands.

  lnorm sweep --config configs/perm_mnist.py --sweep perm_mnist --workdir runs/fig6 \
      [--parallel 2] [--config.num_epochs=2]
  lnorm sweep ... --print-commands > commands.txt   # e.g. for a SLURM job array
"""

from __future__ import annotations

import argparse

from lnorm import sweep as sweep_lib


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("--config", required=True,
                      help="The config file whose get_sweep(name) defines the sweep.")
  parser.add_argument("--sweep", required=True, help="The sweep's name, e.g. perm_mnist.")
  parser.add_argument("--workdir", required=True,
                      help="Each member trains into <workdir>/<member name>.")
  parser.add_argument("--parallel", type=int, default=1, metavar="N",
                      help="Run N members at once as separate processes (default 1).")
  parser.add_argument("--print-commands", action="store_true",
                      help="Print one 'lnorm train' command per member and exit, to "
                      "hand the sweep to a scheduler (a SLURM job array runs line "
                      "$SLURM_ARRAY_TASK_ID). --config.x=y overrides apply to every member.")
  parser.add_argument("--no-figures", action="store_true",
                      help="Do not draw the sweep's figures at the end.")


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  if args.print_commands:
    members = sweep_lib.make_members(sweep_lib.load_sweep(args.config, args.sweep),
                                     args.workdir)
    for m in members:  # Check every member's config before handing it out.
      sweep_lib.member_config(args.config, m, overrides)
    sweep_lib.print_commands(args.config, members, overrides, args.sweep)
    return 0
  summary = sweep_lib.run_sweep(args.config, args.sweep, args.workdir, overrides,
                                parallel=args.parallel, figures=not args.no_figures)
  print()
  print(summary.table())
  print(f"\nSummary written to {args.workdir}/{sweep_lib.SUMMARY_FILE}"
        + (f" and {sweep_lib.GROUPED_SUMMARY_FILE}" if summary.grouped else "") + ".")
  for path in summary.figures:
    print(f"Figure: {path}")
  if summary.failed:
    print(f"Failed members: {', '.join(summary.failed)} (rerun the command to retry them).")
    return 1
  return 0
