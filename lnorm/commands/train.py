"""``lnorm train``: one config, one workdir; rerunning the same command resumes."""

from __future__ import annotations

import argparse
import json

from lnorm import config as config_lib


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("--config", required=True,
                      help="A config file with an optional argument, e.g. "
                      "configs/perm_mnist.py:norm=ln,batch_size=4.")
  parser.add_argument("--workdir", required=True,
                      help="Where checkpoints, config.json and metrics.jsonl go.")
  from lnorm.data import cache  # pylint: disable=g-import-not-at-top
  parser.epilog = cache.HELP


def load(config_spec: str, overrides: dict[str, str]):
  config = config_lib.load_config(config_spec)
  config_lib.apply_overrides(config, overrides)
  return config


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  from lnorm.training.loop import train_and_evaluate  # pylint: disable=g-import-not-at-top
  config = load(args.config, overrides)
  metrics = train_and_evaluate(config, args.workdir)
  print(json.dumps({"workdir": args.workdir, "final": metrics}, indent=2, default=str))
  return 0
