"""``lnorm gpu-report``: docs/gpu.md's measured tables from the GPU check's records.

  lnorm gpu-report                              # print the tables of results/gpu/
  lnorm gpu-report --update docs/gpu.md         # write them between the page's markers
"""

from __future__ import annotations

import argparse
import os

from lnorm.analysis import gpu_report
from lnorm.errors import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("--records", default=gpu_report.DEFAULT_ROOT, metavar="DIR",
                      help="The devices' records, DIR/<device>/<phase>.json (default: the "
                      "repository's results/gpu).")
  parser.add_argument("--update", default=None, metavar="DOC.md",
                      help="Also write the tables into DOC.md between its gpu-report "
                      "markers.")


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  if overrides:
    raise UserError("lnorm gpu-report takes no --config overrides.")
  text = gpu_report.markdown(args.records)
  print(text, end="")
  if args.update:
    if not os.path.exists(args.update):
      raise UserError(f"--update {args.update}: no such file.")
    with open(args.update) as f:
      doc = f.read()
    try:
      updated = gpu_report.replace_between_markers(doc, text)
    except ValueError as e:
      raise UserError(f"--update {args.update}: {e}") from e
    with open(args.update, "w") as f:
      f.write(updated)
    print(f"\nWrote the tables into {args.update}.")
  return 0
