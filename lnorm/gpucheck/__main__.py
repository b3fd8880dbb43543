"""``python -m lnorm.gpucheck COMMAND``: the GPU check's phases and their records.

  python -m lnorm.gpucheck device --out OUT [--toy]
  python -m lnorm.gpucheck experiments --out OUT --work WORK --limit 190 [--workers 4] [--toy]
  python -m lnorm.gpucheck rnn --out OUT --work WORK --limit 100 [--workers 4] [--toy]
  python -m lnorm.gpucheck fig6 --out OUT --work WORK --limit 120 [--toy]
  python -m lnorm.gpucheck summary OUT           # the short table run.sh prints last
  python -m lnorm.gpucheck stopped PHASE OUT WHY # mark a phase killed at its limit
  python -m lnorm.gpucheck collect OUT           # file OUT's records under results/gpu/

scripts/gpu/run.sh runs the phases in order, each under its own time limit. The
experiments and rnn phases' workers (``step``, ``layers``) compile first and time in
turn (lnorm.gpucheck.turns).
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from typing import Sequence

from lnorm.errors import UserError
from lnorm.gpucheck import records as records_lib
from lnorm.training import process

#: Seconds a phase keeps for writing its record before run.sh's limit (``--limit``).
MARGIN_S = 10.0


def _phase_parser(phase: str) -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog=f"python -m lnorm.gpucheck {phase}")
  parser.add_argument("--out", required=True, help="Where <phase>.json goes.")
  parser.add_argument("--work", default=None, help="Scratch folder (logs, runs).")
  parser.add_argument("--limit", type=float, default=600.0,
                      help="Seconds the phase may take; it stops starting work "
                      f"{MARGIN_S:.0f} s before.")
  parser.add_argument("--toy", action="store_true",
                      help="Toy sizes: the rehearsal on a CPU.")
  if phase in ("experiments", "rnn"):
    parser.add_argument("--workers", type=int, default=1,
                        help="Workers compiling at once (all compile, then each times "
                        "with the device to itself).")
  if phase == "experiments":
    from lnorm.gpucheck import steps  # pylint: disable=g-import-not-at-top
    parser.add_argument("--experiments", default=None,
                        help=f"Default: all ({','.join(steps.EXPERIMENTS)}); with --toy "
                        f"{','.join(steps.TOY_EXPERIMENTS)}.")
    parser.add_argument("--norms", default=None,
                        help=f"Default: {','.join(steps.NORMS)}; with --toy "
                        f"{','.join(steps.TOY_NORMS)}.")
  if phase == "rnn":
    parser.add_argument("--rows", default=None, help="Only these rows (comma-separated).")
  return parser


def _run_phase(phase: str, argv: Sequence[str]) -> int:
  args = _phase_parser(phase).parse_args(argv)
  deadline = time.monotonic() + args.limit - MARGIN_S
  work = args.work or args.out
  # pylint: disable=g-import-not-at-top  (each phase imports what it needs)
  from lnorm.gpucheck import ceilings
  record = records_lib.PhaseRecord(args.out, phase, toy=args.toy, settings=vars(args),
                                   machine=ceilings.machine())
  record.set("xla", ceilings.xla_environment())  # lnorm train's, set up by main().
  try:
    if phase == "device":
      ceilings.run(record, args.toy)
    elif phase == "experiments":
      from lnorm.gpucheck import steps
      experiments = (args.experiments.split(",") if args.experiments else
                     steps.TOY_EXPERIMENTS if args.toy else steps.EXPERIMENTS)
      norms = (args.norms.split(",") if args.norms else
               steps.TOY_NORMS if args.toy else steps.NORMS)
      steps.run(record, toy=args.toy, work=work, deadline=deadline,
                experiments=experiments, norms=norms, workers=args.workers)
    elif phase == "rnn":
      from lnorm.gpucheck import rnn_layers
      rnn_layers.run(record, args.toy, work=work, deadline=deadline, workers=args.workers,
                     rows=args.rows.split(",") if args.rows else None)
    elif phase == "fig6":
      from lnorm.gpucheck import fig6
      fig6.run(record, toy=args.toy, work=work, deadline=deadline)
  except Exception as e:  # pylint: disable=broad-except  (the record says what failed)
    record.note(f"failed: {type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}")
    record.finish("failed")
    print(f"lnorm.gpucheck {phase}: failed: {type(e).__name__}: {e}", file=sys.stderr)
    return 1
  record.finish("done")
  return 0


def main(argv: Sequence[str] | None = None) -> int:
  process.set_up()  # As `lnorm train` runs, before any phase starts JAX.
  argv = list(sys.argv[1:] if argv is None else argv)
  if not argv or argv[0] in ("-h", "--help"):
    print(__doc__)
    return 0 if argv else 2
  command, rest = argv[0], argv[1:]
  try:
    if command in records_lib.PHASES:
      return _run_phase(command, rest)
    if command == "stopped":  # run.sh, after killing a phase at its limit.
      phase, out, why = rest
      records_lib.mark_stopped(out, phase, why)
      return 0
    if command == "step":  # An experiments phase's worker.
      from lnorm.gpucheck import steps  # pylint: disable=g-import-not-at-top
      return steps.worker_main(rest)
    if command == "layers":  # An rnn phase's worker.
      from lnorm.gpucheck import rnn_layers  # pylint: disable=g-import-not-at-top
      return rnn_layers.worker_main(rest)
    from lnorm.analysis import gpu_report  # pylint: disable=g-import-not-at-top
    if command == "summary":
      print(gpu_report.summary(rest[0] if rest else "."))
      return 0
    if command == "collect":
      parser = argparse.ArgumentParser(prog="python -m lnorm.gpucheck collect")
      parser.add_argument("out", help="The folder run.sh wrote the records into.")
      parser.add_argument("--to", default=None, help="Default: the repository's results/gpu.")
      args = parser.parse_args(rest)
      print(f"Records filed under {records_lib.collect(args.out, args.to)}.")
      return 0
  except UserError as e:
    print(f"lnorm.gpucheck: error: {e}", file=sys.stderr)
    return 2
  print(f"lnorm.gpucheck: unknown command {command!r}; see --help.", file=sys.stderr)
  return 2


if __name__ == "__main__":
  sys.exit(main())
