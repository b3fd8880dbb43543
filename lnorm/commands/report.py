"""``lnorm report``: finished runs under a directory against the published numbers,
and the updates each normalizer needs to reach the baseline's best (``lnorm compare``).

  lnorm report runs/ --out runs/REPORT.md
"""

from __future__ import annotations

import argparse

from lnorm.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("paths", nargs="+", help="Run directories or directories above them.")
  parser.add_argument("--out", default=None, help="Also write the markdown table here.")


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  from lnorm import report  # pylint: disable=g-import-not-at-top
  if overrides:
    raise UserError("lnorm report takes no --config.* overrides.")
  text = report.collect(args.paths).markdown()
  print(text, end="")
  if args.out:
    with open(args.out, "w") as f:
      f.write(text)
  return 0
