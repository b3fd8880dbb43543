"""``lnorm sample``: generate from a trained run, for experiments that can.

  lnorm sample --workdir runs/handwriting/ln --text "layer normalization" --bias 0.5

The run's experiment does the work through its task's ``sample(workdir, text=...,
bias=..., seed=..., out_base=...)`` method, which returns the files it wrote.
"""

from __future__ import annotations

import argparse
import json


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("--workdir", required=True, help="A run directory of `lnorm train`.")
  parser.add_argument("--text", required=True,
                      help="What to write. Characters outside the model's alphabet "
                      "(handwriting: a-z, A-Z, space, period, comma, double quote) are "
                      "written as its 'other' symbol, with a warning that names them.")
  parser.add_argument("--bias", type=float, default=0.0,
                      help="Sampling bias (Graves 2013 eq. 61-62): 0 samples the model's "
                      "own distribution, larger values write more neatly.")
  parser.add_argument("--seed", type=int, default=0, help="Seeds the sampled pen moves.")
  parser.add_argument("--out", default=None,
                      help="Output path without extension (default: <workdir>/samples/...).")


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  # pylint: disable=g-import-not-at-top
  from lnorm.training import assembly
  config = assembly.load_run_config(args.workdir, overrides)
  # The check `lnorm train` makes, so that an override no run could take is refused
  # here as there, before the checkpoint is read.
  task = assembly.check(config)
  # An experiment without a sampler says so (Task.sample).
  paths = task.sample(args.workdir, text=args.text, bias=args.bias, seed=args.seed,
                      out_base=args.out)
  print(json.dumps(paths, indent=2))
  return 0
