"""``lnorm report``: finished runs under a directory against the published numbers,
and the updates each normalizer needs to reach the baseline's best (``lnorm compare``).

  lnorm report runs/ --out runs/REPORT.md
  lnorm report runs/perm_mnist_b4 runs/hw runs/draw --by-norm --out runs/NORMS.md
"""

from __future__ import annotations

import argparse

from lnorm.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("paths", nargs="+", help="Run directories or directories above them.")
  parser.add_argument("--out", default=None, help="Also write the markdown table here.")
  parser.add_argument("--by-norm", action="store_true",
                      help="Instead, one row per normalizer and one column per experiment "
                      "(in the order of the paths): the updates to the baseline's best "
                      "(norm=none) as a ratio to the baseline's, with each cell's seeds "
                      "and links to its runs.")


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  from lnorm import report  # pylint: disable=g-import-not-at-top
  if overrides:
    raise UserError("lnorm report takes no --config.* overrides.")
  if args.by_norm:
    from lnorm import norm_table  # pylint: disable=g-import-not-at-top
    text = norm_table.collect(args.paths).markdown(out=args.out)
  else:
    text = report.collect(args.paths).markdown()
  print(text, end="")
  if args.out:
    with open(args.out, "w") as f:
      f.write(text)
  return 0
