"""``lnorm bln-search``: a trained BLN run under all 16 inference configurations,
selected on the validation split; prints the table and writes bln_search.csv and
bln_search.json into the workdir (see ``lnorm.evaluation.bln_search``)."""

from __future__ import annotations

import argparse

from lnorm.errors import UserError



def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("--workdir", required=True, help="A run directory `lnorm train` wrote.")
  parser.add_argument("--batch-size", type=int, default=None,
                      help="Evaluation batch size for the mini-batch statistics "
                      "(default: the run's training batch size).")
  parser.add_argument("--splits", default="validation,test",
                      help="Comma-separated splits to evaluate; selection uses validation.")
  parser.add_argument("--configurations", default=None,
                      help="Comma-separated subset of the 16 (e.g. pppp,bbbb); default all.")
  parser.add_argument("--seed", type=int, default=0,
                      help="Seeds the random order of the evaluation examples.")
  parser.add_argument("--max-examples", type=int, default=None,
                      help="Evaluate a seeded random subsample of this many examples "
                      "per split (default: the whole split).")
  parser.add_argument("--examples-per-call", type=int, default=None,
                      help="Evaluation batches fused into one call (speed only; default: "
                      "the search's own).")


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  # Imported here, not for --help: they load JAX.
  from lnorm.evaluation import bln_search  # pylint: disable=g-import-not-at-top
  from lnorm.normalization import bln_inference_configurations  # pylint: disable=g-import-not-at-top
  configurations = None
  if args.configurations:
    configurations = [c.strip() for c in args.configurations.split(",") if c.strip()]
    unknown = sorted(set(configurations) - set(bln_inference_configurations()))
    if unknown:
      raise UserError(f"Unknown configuration(s) {', '.join(unknown)}: use four letters "
                      "from p (population) and b (mini-batch), e.g. pbpb.")
  if args.batch_size is not None and args.batch_size < 1:
    raise UserError("--batch-size must be at least 1.")
  result = bln_search.search(
      args.workdir, batch_size=args.batch_size,
      splits=tuple(s.strip() for s in args.splits.split(",") if s.strip()),
      seed=args.seed, overrides=overrides, configurations=configurations,
      examples_per_call=(bln_search.DEFAULT_EXAMPLES_PER_CALL if args.examples_per_call is None
                         else args.examples_per_call),
      max_examples=args.max_examples)
  print(bln_search.format_table(result))
  csv_path, json_path = bln_search.write_results(result)
  print(f"Wrote {csv_path} and {json_path}.")
  return 0
