"""``lnorm benchmark``: every experiment's claim test, a headline table with
uncertainty, and a verdict per claim (docs/benchmark.md).

  lnorm benchmark                                   # the whole CPU suite, resumable
  lnorm benchmark --experiments perm_mnist --seeds 0-4 --parallel 2
  lnorm benchmark --experiments perm_mnist --seeds 0-4 --seeds-per-process 5   # on a GPU
  lnorm benchmark --norms none,my_pkg.norms:CenteredRMS --experiments bln_cifar
  lnorm benchmark --scale paper --print-commands > commands.txt   # a SLURM job array
  lnorm benchmark --scale gpu --time-limit 400      # a chunk of a short allocation
  lnorm benchmark --report-only --update docs/results.md --figures docs/figures/benchmark
"""

from __future__ import annotations

import argparse
import os
import sys

from lnorm.errors import Interrupted, UserError
from lnorm.sweeps import benchmark_suite as suite

#: The exit status of a command stopped by --time-limit with members left to train
#: (EX_TEMPFAIL: "try again later"): the same command resumes.
TIME_LIMIT_EXIT_CODE = 75


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("--experiments", default=None, metavar="A,B",
                      help=f"The experiments to run (default all: {', '.join(suite.BY_NAME)}).")
  parser.add_argument("--norms", default=None, metavar="N1,N2",
                      help="Normalizers instead of each experiment's grid, passed to the "
                      "config's norm field: a built-in name (none, ln, rms, bn, ...) or an "
                      "import path module:attr. Include none: it is the baseline.")
  parser.add_argument("--seeds", default=None, metavar="0,1,2",
                      help="Seeds instead of the rule's plan (a pilot of 5 where the "
                      "experiment's seed-0 members took under 5 minutes of wall time, else "
                      "3, then seeds by power), e.g. 0,1,2 or 0-4. The report then judges "
                      "these seeds only, and says so.")
  parser.add_argument("--variants", default=None, metavar="FIELD=VALUE",
                      help="Only the variants with these values, e.g. batch_size=128 (the "
                      "paper scale of perm_mnist runs batch sizes 128 and 4).")
  parser.add_argument("--scale", default="cpu", choices=suite.SCALES,
                      help="cpu (default): settings for one CPU core a run; gpu: sized for "
                      "a GPU so that every claim can be decided, records under "
                      "results/gpu/<device>/benchmark; paper: the papers' settings.")
  parser.add_argument("--parallel", type=int, default=1, metavar="N",
                      help="Run N seeds of a normalizer at once (default 1: one member "
                      "at a time, seed by seed).")
  parser.add_argument("--seeds-per-process", type=int, default=1, metavar="K",
                      help="Train up to K seeds of a normalizer together, in one process "
                      "(lnorm train --seeds), each into its own workdir and records as "
                      "before (default 1). Meant for a GPU; slower on a CPU core "
                      "(docs/benchmark.md, 'Seeds together').")
  parser.add_argument("--workdir", default=None,
                      help="Members train into WORKDIR/<scale>/<experiment>/<norm>/seed=<s> "
                      "(default runs/benchmark).")
  parser.add_argument("--records", default=None, metavar="DIR",
                      help="Where finished members' config.json and metrics go, and what "
                      "the report reads. Default: for the suite's own members, the "
                      "results/<scale> of the lnorm checkout the command runs in; for the "
                      "others (a normalizer the suite does not run there, or a config a "
                      "--config.x=y changes), WORKDIR/records/<scale>, read beside it; "
                      "outside a checkout, everything there. A member with records there "
                      "counts as finished; a record of another config is never "
                      "overwritten.")
  parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                      help="Stop training after SECONDS, as a SIGTERM would: the members "
                      "running save a checkpoint, the finished ones' records are kept, "
                      "the report is printed, and the command exits with 75. The same "
                      "command resumes (a stopped member from its checkpoint under "
                      "--workdir, if that folder is kept; else from its start).")
  parser.add_argument("--print-commands", action="store_true",
                      help="Print one 'lnorm train' line per member not yet finished, and "
                      "exit.")
  parser.add_argument("--report-only", action="store_true",
                      help="Train nothing: save the records of members finished in the "
                      "workdir, then print the headline table and verdicts from the "
                      "records.")
  parser.add_argument("--update", default=None, metavar="DOC.md",
                      help="Also write the report into DOC.md between its benchmark "
                      "markers (added after the title when absent).")
  parser.add_argument("--figures", default=None, metavar="DIR",
                      help="Also draw each experiment's held-out curve per normalizer (mean "
                      "over seeds, 95%% band) against updates into DIR/<experiment>.png "
                      "and .svg.")
  parser.add_argument("--no-wandb", action="store_true",
                      help="Do not log the verdict table to wandb.")
  parser.add_argument("--ignore-rule-hash", action="store_true",
                      help="Judge records made under another rule or setting as if made "
                      "under this one (to see how older records fare under the rule); the "
                      "report says so, and its verdicts are not of record.")


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  # Imported here: the report's statistics load SciPy, which --help must not wait for.
  from lnorm.sweeps import benchmark as bench  # pylint: disable=g-import-not-at-top
  from lnorm.sweeps import runner  # pylint: disable=g-import-not-at-top
  args.workdir = args.workdir or bench.DEFAULT_WORKDIR
  if args.parallel < 1:
    raise UserError(f"--parallel {args.parallel}: run at least 1 member at once.")
  if args.time_limit is not None and (args.report_only or args.print_commands):
    raise UserError(f"--time-limit limits training, and --"
                    f"{'report-only' if args.report_only else 'print-commands'} trains "
                    "nothing: leave one of them out.")
  limit = bench.TimeLimit(args.time_limit)  # Checked here; its clock starts with training.
  if args.seeds_per_process < 1:
    raise UserError(f"--seeds-per-process {args.seeds_per_process}: train at least 1 "
                    "seed a process.")
  experiments = suite.select_experiments(args.experiments)
  seeds = suite.parse_seeds(args.seeds)
  norms = suite.parse_norms(args.norms, experiments, args.scale)
  records = args.records or bench.records_root(args.scale, args.workdir)
  # Without --records, members that are not the suite's own (a normalizer it does not
  # run, a config it does not give) keep their records beside their runs: a checkout's
  # results/ holds the committed benchmark, reached only by the suite's own commands.
  own = None if args.records else bench.own_records_root(args.workdir, args.scale)
  plans = bench.plans(experiments, args.scale, args.workdir, norms, seeds, records,
                      suite.parse_variants(args.variants), own, overrides)
  if args.print_commands:
    if not bench.print_commands(plans, records, seeds_per_process=args.seeds_per_process):
      print(f"Nothing to run: every selected member ({sum(len(p.members) for p in plans)}) "
            f"has records under {bench.shown(records)} or a finished run under "
            f"{args.workdir}. "
            "`lnorm benchmark --report-only` prints their report.", file=sys.stderr)
    return 0
  # Checked before the workdirs' finished runs are collected into it.
  if args.report_only and args.records and not os.path.isdir(args.records):
    raise UserError(f"--records {args.records}: no such folder. --report-only reads the "
                    "records `lnorm benchmark` saved there: give the folder it named.")
  if not args.report_only:
    for plan in plans:  # Before the first member runs, not after.
      bench.refuse_overwrites(plan, records)
    _say_where_records_go(bench, plans, records, given=bool(args.records))
  failed = []
  # SIGTERM (a preemption) stops the members running, saves what finished, and exits
  # with 130 before the next member starts; the same command resumes. The time limit
  # stops it the same way, and the report follows.
  with runner.stop_signals() as signals, limit:
    try:
      for plan in plans if args.report_only else bench.run_order(plans):
        signals.check(": the benchmark saved the records of its finished members. Rerun "
                      "the same command to resume.")
        if args.report_only:
          bench.collect(plan, records)
          continue
        failed += [f"{plan.experiment.name}/{name}"
                   for name in bench.run(plan, records, args.parallel, signals, limit,
                                         args.seeds_per_process)]
    except Interrupted:
      if not limit.expired:
        raise
  report = bench.build_report(plans, records, args.scale, args.ignore_rule_hash, seeds)
  if args.report_only and not report.records_read:
    _refuse_an_empty_report(bench, plans, records, args.records)
  text = report.markdown()
  print()
  print(text, end="")
  if args.update and report.damaged:
    count = len(report.damaged)
    print(f"\nDid not write the report into {args.update}: {count} damaged "
          f"record{'s' if count > 1 else ''} (listed above) left out of it.")
  elif args.update:
    _update(bench, args.update, text, args.scale)
  if args.figures:
    paths = bench.write_figures(report, records, args.figures)
    print(f"Drew {len(paths) // 2} figures into {args.figures}.")
  if not args.no_wandb:
    bench.log_verdicts(report)
  status = 0
  if failed:
    print(f"Failed members: {', '.join(failed)} (rerun the command to retry them).")
    status = 1
  left = sum(len(m) for m in report.missing.values())
  if (limit.expired or limit.deferred) and left:
    count = len(limit.deferred)
    why = (f"stopped at the time limit of {args.time_limit:g} s" if limit.expired else
           f"did not start {count} member{'s' if count != 1 else ''} that would not finish "
           f"within the time limit of {args.time_limit:g} s")
    print(f"lnorm benchmark: {why}, with {left} member{'s' if left != 1 else ''} of this "
          "command left to train. Rerun the same command to resume (a member stopped "
          f"mid-run resumes from its checkpoint under {args.workdir}, where that folder is "
          "kept; else it starts again).", file=sys.stderr)
    status = status or TIME_LIMIT_EXIT_CODE
  if report.damaged:
    print(f"lnorm benchmark: {len(report.damaged)} damaged record"
          f"{'s' if len(report.damaged) > 1 else ''} not judged, the first "
          f"{next(iter(report.damaged))}: {next(iter(report.damaged.values()))}.",
          file=sys.stderr)
    status = 1
  return status


def _update(bench, path: str, text: str, scale: str) -> None:
  """Writes the report into ``path`` between the markers of ``scale``."""
  if not os.path.exists(path):
    raise UserError(f"--update {path}: no such file.")
  with open(path) as f:
    doc = f.read()
  try:
    updated = bench.replace_between_markers(doc, text, scale)
  except ValueError:
    block = bench.results_block(scale)
    raise UserError(f"--update {path}: the page has no markers of the {scale} scale's "
                    f"report; add the two lines {block.begin} and {block.end} where it "
                    "goes.") from None
  with open(path, "w") as f:
    f.write(updated)
  print(f"\nWrote the report into {path}.")


def _say_where_records_go(bench, plans, records: str, given: bool) -> None:
  """One line per records folder the members write to, on stderr (stdout is the
  report's); outside a checkout, first why the default is beside the workdir."""
  if not given and not bench.checkout_root():
    print(f"No lnorm checkout at or above {os.getcwd()}: the records go beside the "
          "workdir (--records DIR puts them elsewhere).", file=sys.stderr)
  for line in bench.destinations(plans, records):
    print(line, file=sys.stderr)


def _refuse_an_empty_report(bench, plans, records: str, given: str | None) -> None:
  """--report-only read no record: a report of nothing would pass for a verdict."""
  names = ", ".join(p.experiment.name for p in plans)
  if given:
    raise UserError(f"--records {given} holds no records of {names}: nothing to report. "
                    "Give the folder `lnorm benchmark` saved them in.")
  read = " or ".join(bench.shown(f) for f in dict.fromkeys(
      [records] + [p.own_records for p in plans if p.own_records]))
  raise UserError(f"No records of {names} under {read}: nothing to report. Run `lnorm "
                  "benchmark` first, or give the folder of its records with --records DIR.")
