"""``lnorm check``: will this config's train and eval steps compile on a GPU or a TPU?

Lowers both steps for the named platforms on this machine (no accelerator needed) and
prints the parameter count, the batch shapes and the bytes each step's arguments and
outputs take; with ``cpu`` among the platforms it also compiles them here and prints
the compiled steps' temporary memory. Exit code 1 when a step does not lower.
"""

from __future__ import annotations

import argparse
import json

from lnorm.commands import train


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("--config", required=True,
                      help="A config file with an optional argument, e.g. "
                      "configs/handwriting.py:norm=ln (its sizes, the paper's by default).")
  parser.add_argument("--platforms", default="cuda,tpu",
                      help="Comma-separated platforms to lower for: cpu, cuda, rocm, tpu "
                      "(cpu also compiles the steps here, for their temporary memory).")
  parser.add_argument("--json", action="store_true",
                      help="Print the figures as one JSON object instead of text.")


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  import dataclasses  # pylint: disable=g-import-not-at-top
  from lnorm.training import lowering  # pylint: disable=g-import-not-at-top
  from lnorm.training import process  # pylint: disable=g-import-not-at-top
  config = train.load(args.config, overrides)
  process.set_up(config)
  platforms = tuple(p.strip() for p in args.platforms.split(",") if p.strip())
  report = lowering.check(config, platforms, compile_cpu="cpu" in platforms)
  if args.json:
    print(json.dumps(dataclasses.asdict(report), indent=2))
  else:
    print(lowering.format_report(report))
  return 0 if report.ok else 1
