"""``lnorm report``: finished runs under a directory against the published numbers,
and the updates each normalizer needs to reach the baseline's best (``lnorm compare``);
or, with ``--select``, the best setting on a validation metric (``lnorm.analysis.selection``).

  lnorm report runs/ --out runs/REPORT.md
  lnorm report runs/perm_mnist_b4 runs/hw runs/draw --by-norm --out runs/NORMS.md
  lnorm report runs/lr_sweep --select validation/error
"""

from __future__ import annotations

import argparse

from lnorm.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("paths", nargs="+", help="Run directories or directories above them.")
  parser.add_argument("--out", default=None, help="Also write the markdown table here "
                      "(its folder is made if missing).")
  parser.add_argument("--by-norm", action="store_true",
                      help="Instead, one row per normalizer and one column per experiment "
                      "(in the order of the paths): the updates to the baseline's best "
                      "(norm=none) as a ratio to the baseline's, with each cell's seeds "
                      "and links to its runs.")
  parser.add_argument("--select", default=None, metavar="METRIC",
                      help="Instead, the best setting on a validation metric, e.g. "
                      "validation/error: the mean over its seeds of each run's best value, "
                      "and its test metrics where each run was selected (as `lnorm sweep "
                      "--select` ends).")


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  from lnorm.analysis import report  # pylint: disable=g-import-not-at-top
  from lnorm.training import workdir_lock  # pylint: disable=g-import-not-at-top
  if overrides:
    raise UserError("lnorm report takes no --config.* overrides.")
  if args.by_norm and args.select:
    raise UserError("--by-norm and --select are two different reports: pass one.")
  # Before the work: a path that cannot be written fails now, a missing folder is made.
  out = workdir_lock.make_output_file(args.out) if args.out else None
  if args.by_norm:
    from lnorm.analysis import norm_table  # pylint: disable=g-import-not-at-top
    text = norm_table.collect(args.paths).markdown(out=args.out)
  elif args.select:
    from lnorm.analysis import runs as runs_lib  # pylint: disable=g-import-not-at-top
    from lnorm.analysis import selection  # pylint: disable=g-import-not-at-top
    text = selection.select(runs_lib.load_runs(args.paths), args.select).markdown()
  else:
    text = report.collect(args.paths).markdown()
  print(text, end="")
  if out:
    with open(out, "w") as f:
      f.write(text)
  return 0
