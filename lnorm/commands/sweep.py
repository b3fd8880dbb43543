"""``lnorm sweep``: run a named grid from a config file, a grid or a random search given
on the command line, or both; print its commands, or write it as a wandb sweep.

  lnorm sweep --config configs/perm_mnist.py --sweep perm_mnist --workdir runs/fig6 \
      [--parallel 2] [--config.num_epochs=2]
  lnorm sweep --config configs/perm_mnist.py:norm=ln,batch_size=4 --workdir runs/lr \
      --grid optimizer.learning_rate=3e-4,1e-3,3e-3 --grid seed=0,1 \
      --select validation/error
  lnorm sweep --config configs/perm_mnist.py:norm=ln --workdir runs/lr_random \
      --random 8 --loguniform optimizer.learning_rate=1e-4:1e-2 --grid seed=0,1
  lnorm sweep ... --print-commands > commands.txt   # e.g. for a SLURM job array
  lnorm sweep ... --grid seed=0,1,2,3,4 --seeds-per-process 5   # the seeds in one process
  lnorm sweep ... --select validation/error --wandb-sweep sweep.yaml   # for wandb agent
"""

from __future__ import annotations

import argparse

from lnorm.sweeps import runner as sweep_lib
from lnorm.sweeps import space as sweep_space
from lnorm.errors import UserError
from lnorm.sweeps.space import SweepSpace


class _AddDistribution(argparse.Action):
  """Collects --uniform/--loguniform/--int/--choice in command-line order."""

  def __call__(self, parser, namespace, values, option_string=None):
    items = list(getattr(namespace, self.dest) or [])
    items.append((option_string.lstrip("-"), values))
    setattr(namespace, self.dest, items)


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("--config", required=True,
                      help="The config file (with its argument) every member starts from.")
  parser.add_argument("--sweep", default=None,
                      help="A named sweep of the config file's get_sweep(name), e.g. "
                      "perm_mnist; optional with --grid or --random.")
  parser.add_argument("--workdir", required=True,
                      help="Each member trains into <workdir>/<member name>.")
  space = parser.add_argument_group(
      "grids and random search", "Cross the named sweep (if any) with a grid and random "
      "draws. Every value is checked against the config before anything runs.")
  space.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                     help="Sweep a config field over values; repeat for a product, e.g. "
                     "--grid optimizer.learning_rate=3e-4,1e-3 --grid seed=0,1.")
  space.add_argument("--random", type=int, default=0, metavar="N",
                     help="Draw N members from the distributions below (each crossed with "
                     "the grid). The same command draws the same members, so a random "
                     "sweep resumes like a grid; a larger N keeps the first draws.")
  for kind, example, text in (
      ("uniform", "KEY=LO:HI", "uniform in [LO, HI]"),
      ("loguniform", "KEY=LO:HI", "log-uniform in [LO, HI], LO > 0 (learning rates)"),
      ("int", "KEY=LO:HI", "an integer in [LO, HI], both included"),
      ("choice", "KEY=A,B,C", "one of the values, each equally likely")):
    space.add_argument(f"--{kind}", action=_AddDistribution, dest="distributions",
                       metavar=example, help=f"With --random: {text}. Floats keep "
                       f"{sweep_space.SIGNIFICANT_DIGITS} significant digits."
                       if kind in ("uniform", "loguniform") else f"With --random: {text}.")
  space.add_argument("--random-seed", type=int, default=0,
                     help="Seeds the random draws (default 0); recorded in sweep.json.")
  parser.add_argument("--select", default=None, metavar="METRIC",
                      help="End with the best setting on a validation metric, e.g. "
                      "validation/error (the mean over its seeds of each run's best value; "
                      "lower or higher is better by the name), and its test metrics where "
                      "each run was selected.")
  parser.add_argument("--parallel", type=int, default=1, metavar="N",
                      help="Run N members at once as separate processes (default 1).")
  parser.add_argument("--seeds-per-process", type=int, default=1, metavar="K",
                      help="Train up to K members that differ in their seed only "
                      "together, in one process (lnorm train --seeds), each into its own "
                      "workdir as before (default 1: one member a process). Meant for a "
                      "GPU; slower on a CPU core (docs/benchmark.md, 'Seeds together').")
  parser.add_argument("--print-commands", action="store_true",
                      help="Print one 'lnorm train' command per member and exit, to "
                      "hand the sweep to a scheduler (a SLURM job array runs line "
                      "$SLURM_ARRAY_TASK_ID). --config.x=y overrides apply to every member.")
  parser.add_argument("--wandb-sweep", default=None, metavar="FILE.yaml",
                      help="Write the sweep as a wandb sweep configuration for "
                      "`wandb sweep FILE.yaml` and `wandb agent`, and exit (needs --select: "
                      "the metric and its goal).")
  parser.add_argument("--no-figures", action="store_true",
                      help="Do not draw the sweep's figures at the end.")
  parser.add_argument("--dry-run", action="store_true",
                      help="Print each member's config, the data it would load (source and "
                      "split sizes), its number of updates and whether its workdir would "
                      "resume; train nothing, write nothing.")


def build_space(args: argparse.Namespace) -> SweepSpace:
  """The members' space from the command line: named sweep, grids, random draws."""
  distributions = args.distributions or []
  if not (args.sweep or args.grid or args.random or distributions):
    raise UserError("Nothing to sweep: give --sweep NAME (a grid in the config file), "
                    "--grid KEY=V1,V2,... or --random N with --uniform, --loguniform, --int "
                    "or --choice KEY=...")
  return SweepSpace(
      named=sweep_lib.load_sweep(args.config, args.sweep) if args.sweep else None,
      grid=[sweep_space.parse_grid(g) for g in args.grid],
      random=args.random,
      distributions=[sweep_space.parse_distribution(k, t) for k, t in distributions],
      random_seed=args.random_seed)


def _write_wandb_sweep(args, space: SweepSpace, overrides: dict[str, str]) -> int:
  from lnorm.sweeps import wandb_sweep  # pylint: disable=g-import-not-at-top
  if not args.select:
    raise UserError("--wandb-sweep needs --select METRIC: the metric wandb's sweep "
                    "ranks its runs by, e.g. --select validation/error.")
  config = wandb_sweep.sweep_config(args.config, space, args.workdir, args.select,
                                    overrides, sweep_name=args.sweep)
  wandb_sweep.write(args.wandb_sweep, config)
  print(f"Wrote the wandb sweep configuration {args.wandb_sweep} ({config['method']}, "
        f"{len(config['parameters'])} parameters). Register it and start agents with:\n"
        f"  wandb sweep {args.wandb_sweep}\n  wandb agent ENTITY/PROJECT/SWEEP_ID")
  return 0


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  if args.seeds_per_process < 1:
    raise UserError(f"--seeds-per-process {args.seeds_per_process}: train at least 1 seed "
                    "a process.")
  space = build_space(args)
  if args.wandb_sweep:
    return _write_wandb_sweep(args, space, overrides)
  if args.dry_run:
    from lnorm.training import dry_run  # pylint: disable=g-import-not-at-top
    members, configs = sweep_lib.prepare(args.config, space, args.workdir, overrides)
    datasets: dict = {}
    plans = {m.name: dry_run.plan(configs[m.name], m.workdir, datasets) for m in members}
    print("Dry run: nothing is trained or written.")
    print(dry_run.sweep_text(plans), end="")
    return 0
  if args.print_commands:
    members, configs = sweep_lib.prepare(args.config, space, args.workdir, overrides)
    sweep_lib.print_commands(args.config, members, overrides,
                             sweep_lib.sweep_label(args.workdir, args.sweep),
                             seeds_per_process=args.seeds_per_process, configs=configs)
    return 0
  summary = sweep_lib.run_sweep(args.config, space, args.workdir, overrides,
                                parallel=args.parallel, figures=not args.no_figures,
                                name=args.sweep, select=args.select,
                                seeds_per_process=args.seeds_per_process)
  print()
  print(summary.table())
  print(f"\nSummary written to {args.workdir}/{sweep_lib.SUMMARY_FILE}"
        + (f" and {sweep_lib.GROUPED_SUMMARY_FILE}" if summary.grouped else "") + ".")
  for path in summary.figures:
    print(f"Figure: {path}")
  if summary.selection is not None:
    print()
    print(summary.selection.text(), end="")
  if summary.failed:
    print(f"Failed members: {', '.join(summary.failed)} (rerun the command to retry them).")
    return 1
  if summary.selection_problem:
    raise UserError(f"--select {args.select}: {summary.selection_problem}")
  return 0
