"""``lnorm invariance``: LN paper Table 1, measured (``lnorm.evaluation.invariance``),
with RMSNorm's rows, LN's successors, and any normalizer named with ``--norms``, your
own included. Light on purpose: JAX is imported when the command runs, not for
``--help``."""

from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("--seed", type=int, default=0, help="random layer and data")
  parser.add_argument("--norms", default=None, metavar="A,B",
                      help="Also measure these normalizers: built-in names (none, ln, ...) "
                      "or your own as module:attribute (docs/extending.md), each with a "
                      "row of its own.")
  parser.add_argument("--json", action="store_true", help="print the raw table as JSON")


def run(args: argparse.Namespace, overrides: dict[str, str] | None = None) -> int:
  """Prints the measured table; exit code 1 if it differs from the papers'."""
  del overrides  # No config.
  from lnorm.evaluation import invariance  # pylint: disable=g-import-not-at-top  (JAX)
  more = [n.strip() for n in (args.norms or "").split(",") if n.strip()]
  table = invariance.measure_invariance_table(seed=args.seed, more=more)
  print(json.dumps(table, indent=2) if args.json else invariance.format_table(table))
  return 1 if invariance.mismatches(table) else 0
