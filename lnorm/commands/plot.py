"""``lnorm plot``: curves from run or sweep directories, as PNG and SVG.

  lnorm plot runs/fig6 --metric train/loss --metric test/error --out runs/fig6/curves
  lnorm plot runs/fig6 --figure ln-fig6 --out figures/ln-fig6
  lnorm plot runs/hw_cpu --figure ln-fig5          # NLL against updates, log axis
  lnorm plot runs/a runs/b --metric train/loss --x step --log
  lnorm plot runs/draw --metric test/nll_bound --x step --target norm=none
  lnorm plot results/cpu/perm_mnist --metric test/error --x step --over-seeds
"""

from __future__ import annotations

import argparse

from lnorm.analysis import specs
from lnorm.errors import UserError


#: The papers' figures as their specs declare them (lnorm.analysis.specs, which imports
#: no plotting: --help stays quick).
FIGURE_HELP = ", ".join(f"{name} ({figure.experiment}: {figure.summary})"
                        for name, figure in sorted(specs.figures().items()))


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("paths", nargs="+",
                      help="Run directories, or directories above them (e.g. a sweep's).")
  parser.add_argument("--metric", action="append", default=[],
                      help="A metric key of metrics.jsonl, e.g. test/error; repeat for "
                      "more panels. Default: the training loss and the test metrics.")
  parser.add_argument("--figure", metavar="NAME",
                      help="Lay out a paper's figure instead, from runs of its experiment: "
                      f"{FIGURE_HELP}. A panel that no run logged says what it needs.")
  parser.add_argument("--x", default=None, choices=("epoch", "step"),
                      help="The horizontal axis: epoch, or step (updates). Default: "
                      "epoch, and for --figure the paper's axis.")
  parser.add_argument("--log", action="store_true", help="Log-scaled vertical axis.")
  parser.add_argument("--title", default="", help="A title above the panels.")
  parser.add_argument("--target", nargs="?", const="norm=none", default=None,
                      metavar="FIELD=VALUE[,...]",
                      help="Draw the baseline's best value (default baseline norm=none) as "
                      "a dashed line and mark with a star where each run first reaches "
                      "it, as `lnorm compare` counts it.")
  parser.add_argument("--over-seeds", action="store_true",
                      help="One line per setting instead of per run: the mean over its "
                      "seeds, with the 95%% t-interval as a band.")
  parser.add_argument("--out", default=None,
                      help="Output path without extension (.png and .svg are written). "
                      "Default: <first path>/figures/<figure>, or for --metric a name made "
                      "of the metrics and options, e.g. train-loss+test-error_by_step.")


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  import os  # pylint: disable=g-import-not-at-top
  from lnorm.analysis import plotting  # pylint: disable=g-import-not-at-top  (matplotlib is slow)
  from lnorm.analysis import runs as runs_lib  # pylint: disable=g-import-not-at-top
  if overrides:
    raise UserError("lnorm plot takes no --config.* overrides.")
  if args.figure and args.metric:
    raise UserError("Give either --figure or --metric, not both.")
  if args.over_seeds and (args.figure or args.target):
    raise UserError("--over-seeds draws --metric panels without --target; give it "
                    "without --figure and --target.")
  runs = runs_lib.load_runs(args.paths)
  figures = os.path.join(args.paths[0], "figures")
  if args.figure:
    out = args.out or os.path.join(figures, args.figure)
    paths = plotting.plot_figure(args.figure, runs, out, x=args.x, target=args.target)
  else:
    metrics = args.metric or plotting.default_metrics(runs)
    x = args.x or "epoch"
    # Named by what is drawn: a plot of other metrics does not overwrite this one.
    name = plotting.default_name(metrics, x, args.log, args.target)
    out = args.out or os.path.join(figures, name + ("_over-seeds" if args.over_seeds else ""))
    if args.over_seeds:
      paths = plotting.plot_seed_bands(runs, metrics, out, x=x, logy=args.log,
                                       title=args.title)
    else:
      paths = plotting.plot_metrics(runs, metrics, out, x=x, logy=args.log,
                                    title=args.title, target=args.target)
  print(f"{len(runs)} runs: {', '.join(r.label for r in runs)}")
  for p in paths:
    print(p)
  return 0
