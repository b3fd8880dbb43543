"""``lnorm compare``: updates and training time each normalizer needs to reach the
baseline's best value of a metric.

  lnorm compare runs/draw --metric test/nll_bound                   # baseline norm=none
  lnorm compare runs/pmnist_b4 --metric test/error --baseline norm=bn --json table.json
"""

from __future__ import annotations

import argparse
import json

from lnorm.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("paths", nargs="+",
                      help="Run directories, or directories above them (e.g. a sweep's).")
  parser.add_argument("--metric", required=True,
                      help="A metric key of metrics.jsonl, e.g. test/error. Every point "
                      "that logged it counts, mid-epoch evaluations included.")
  parser.add_argument("--baseline", default="norm=none", metavar="FIELD=VALUE[,...]",
                      help="The config fields of the baseline runs (default norm=none). "
                      "The target is the baseline's best value of the metric; with "
                      "several baseline seeds, the mean of their best values. Runs that "
                      "also differ in other fields are compared within each value of them.")
  direction = parser.add_mutually_exclusive_group()
  direction.add_argument("--lower-is-better", dest="lower_is_better", action="store_true",
                         default=None, help="Override the direction the metric's name "
                         "implies (error, loss, nll, bound: lower; accuracy, recall, r1: "
                         "higher).")
  direction.add_argument("--higher-is-better", dest="lower_is_better", action="store_false",
                         help="The same override, the other way.")
  parser.add_argument("--json", metavar="PATH", default=None,
                      help="Also write the tables, with every run's numbers, as JSON.")


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  from lnorm.analysis import compare  # pylint: disable=g-import-not-at-top
  from lnorm.analysis import runs as runs_lib  # pylint: disable=g-import-not-at-top
  if overrides:
    raise UserError("lnorm compare takes no --config.* overrides.")
  comparisons = compare.compare(runs_lib.load_runs(args.paths), args.metric,
                                baseline=args.baseline, lower_is_better=args.lower_is_better)
  print("\n".join(c.table() for c in comparisons), end="")
  if args.json:
    with open(args.json, "w") as f:
      json.dump([c.to_dict() for c in comparisons], f, indent=2)
      f.write("\n")
    print(f"\nWritten to {args.json}.")
  return 0
