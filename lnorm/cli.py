"""The ``lnorm`` command line. Kept to argument parsing: each command calls a library
function that tests can call too.

  lnorm train --config configs/perm_mnist.py:norm=ln,batch_size=4 --workdir runs/x \
      --config.num_epochs=3
"""

from __future__ import annotations

import argparse
import errno
import importlib
import importlib.util
import logging
import sys

from lnorm.training import process
from lnorm.errors import Interrupted, UserError

#: The exit code of a command stopped by SIGINT (Ctrl-C) or SIGTERM, as shells report
#: a process killed by SIGINT (128 + 2). ``lnorm sweep`` reads it from its members.
INTERRUPTED_EXIT_CODE = 130

#: command -> (module, help). Each module has ``add_arguments(parser)`` and
#: ``run(args, overrides) -> int``. Only the chosen command's module is imported, so
#: `lnorm train` does not pay for matplotlib and `lnorm --help` is fast.
COMMANDS = {
    "train": ("lnorm.commands.train", "Train and evaluate one config into a workdir."),
    "sweep": ("lnorm.commands.sweep",
              "Run a grid or random search of configs, one workdir each."),
    "plot": ("lnorm.commands.plot", "Draw metric curves from run directories."),
    "report": ("lnorm.commands.report", "Collect finished runs into a markdown table."),
    "compare": ("lnorm.commands.compare", "Updates and time to reach the baseline's best metric."),
    "benchmark": ("lnorm.commands.benchmark",
                  "Run the claim suite (every experiment by normalizer and seed) and "
                  "report a verdict per claim."),
    "invariance": ("lnorm.commands.invariance",
                   "Measure LN paper Table 1, with RMSNorm's rows (invariance under "
                   "re-scaling and re-centering)."),
    "sample": ("lnorm.commands.sample",
               "Generate from a trained run (handwriting: write a given text)."),
    "evaluate": ("lnorm.commands.evaluate",
                 "Score a run's sentence encoder on SICK, MR, CR, SUBJ, MPQA, TREC."),
    "check": ("lnorm.commands.check",
              "Lower a config's train and eval steps for GPU/TPU; print sizes and memory."),
    "bln-search": ("lnorm.commands.bln_search",
                   "Evaluate a trained BLN model under all 16 inference configurations."),
    "flops": ("lnorm.commands.flops",
              "A config's train step in matmul FLOPs, timed, and its share of the "
              "matmul rate."),
    "gpu-report": ("lnorm.commands.gpu_report",
                   "docs/gpu.md's measured tables from the GPU check's records "
                   "(scripts/gpu/run.sh)."),
}


def _available() -> dict[str, tuple[str, str]]:
  return {name: spec for name, spec in COMMANDS.items()
          if importlib.util.find_spec(spec[0]) is not None}


def build_parser(command: str | None) -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog="lnorm", description="Layer Normalization and Batch Layer Normalization "
      "experiments. Any '--config.a.b=value' overrides a config field.",
      # A static string: --help must not import lnorm.data.
      epilog="Decoded datasets are cached in $LNORM_CACHE_DIR, else "
      "$XDG_CACHE_HOME/lnorm, else ~/.cache/lnorm, never in the data directory; "
      "'lnorm train --help' says how big the cache gets and how to clear it.")
  parser.add_argument("-v", "--verbose", action="store_true", help="Debug logging.")
  sub = parser.add_subparsers(dest="command", metavar="COMMAND")
  sub.required = True
  for name, (module, help_text) in _available().items():
    p = sub.add_parser(name, help=help_text, description=help_text)
    if name == command:
      importlib.import_module(module).add_arguments(p)
  return parser


def _chosen_command(argv: list[str]) -> str | None:
  return next((a for a in argv if not a.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
  from lnorm import config as config_lib  # pylint: disable=g-import-not-at-top
  # Before any JAX computation starts the CPU client's threads.
  process.set_up()
  argv = list(sys.argv[1:] if argv is None else argv)
  try:
    rest, overrides = config_lib.split_config_overrides(argv)
    parser = build_parser(_chosen_command(rest))
    args = parser.parse_args(rest)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s", datefmt="%H:%M:%S")
    for noisy in ("absl", "jax._src", "orbax", "etils", "tensorflow_datasets"):
      logging.getLogger(noisy).setLevel(logging.WARNING)
    module = importlib.import_module(COMMANDS[args.command][0])
    return module.run(args, overrides)
  except Interrupted as e:  # Stopped on purpose, after saving: not an error.
    print(f"lnorm: {e}", file=sys.stderr)
    return INTERRUPTED_EXIT_CODE
  except KeyboardInterrupt:  # Ctrl-C where a command was not ready to save.
    print("lnorm: stopped by Ctrl-C (SIGINT). Rerun the same command to continue: a run "
          "resumes from its latest checkpoint, if it saved one.", file=sys.stderr)
    return INTERRUPTED_EXIT_CODE
  except UserError as e:
    print(f"lnorm: error: {e}", file=sys.stderr)
    return 2
  except OSError as e:
    if e.errno not in (errno.ENOSPC, errno.EDQUOT):
      raise
    # A record or log written while the disk filled; checkpoints say so themselves.
    print(f"lnorm: error: the disk is full: could not write {e.filename or 'a file'}. "
          "Free space on that disk and rerun the same command: a run resumes from its "
          "last complete checkpoint.", file=sys.stderr)
    return 2


if __name__ == "__main__":
  sys.exit(main())
