"""``lnorm flops``: a config's train step in matmul FLOPs, its measured time, and the
share of this machine's matmul rate it achieves.

  lnorm flops --config configs/handwriting.py:norm=ln,scale=cpu
  lnorm flops --config configs/skip_thoughts.py:norm=none,scale=cpu --compare-scan
  taskset -c 1 lnorm flops --config configs/transformer_lm.py:scale=cpu \
      --compare-norms ln,rms --timing-record

Each experiment counts its FLOPs beside its model (``Task.forward_macs``); the step is
the harness's own, on training batches of the padded shapes the loop computes (one per
length bucket), with the data loaded as ``lnorm train`` loads it.

``--compare-norms`` times the normalizers round-robin until the ratios' intervals are
narrow (``lnorm.analysis.timing``'s stopping rule); with ``--timing-record`` its
record is what the benchmark's step-time claims are decided by.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex

from lnorm import config as config_lib
from lnorm.analysis import timing
from lnorm.errors import UserError

EPILOG = """\
The FLOPs count the matmuls (and convolutions) only, 2 per multiply-accumulate, with
the backward pass at twice the forward. The share is (FLOPs / matmul rate) / step
time: 1.0 would be a step as fast as one large float32 matmul of --matmul-size. Wall
and process-CPU times are both given; on a shared machine the CPU time is the fairer
clock. Run it pinned to the cores you train on (taskset, XLA_FLAGS) for figures that
match your runs. Without the data, pass a synthetic source where the experiment has
one (e.g. --config.data.source=synthetic).
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.formatter_class = argparse.RawDescriptionHelpFormatter
  parser.epilog = EPILOG
  parser.add_argument("--config", required=True,
                      help="A config file with an optional argument, e.g. "
                      "configs/draw.py:norm=ln_cell.")
  parser.add_argument("--steps", type=int, default=None,
                      help="Timed training steps per shape (default 5); with "
                      "--compare-norms, exactly this many rounds instead of the "
                      "stopping rule.")
  parser.add_argument("--matmul-size", type=int, default=2048,
                      help="Side of the square matmul that measures the matmul rate.")
  parser.add_argument("--matmul-reps", type=int, default=10)
  parser.add_argument("--compare-scan", action="store_true",
                      help="Instead, time the step with its recurrent layers fused "
                      "against the same step scanning its cells step by step, in "
                      "alternation.")
  parser.add_argument("--compare-norms", metavar="NAMES", default=None,
                      help="Instead, time the train step with each of these "
                      "normalizers (comma-separated, the first is the baseline) in "
                      "round-robin until every ratio's 95%% interval is within "
                      f"±{timing.TARGET_HALF_WIDTH * 100:g}%% (at least {timing.MIN_ROUNDS}, "
                      f"at most {timing.MAX_ROUNDS} rounds; --steps N: N rounds), and "
                      "print each one's median time and its ratio to the baseline's, "
                      "e.g. --compare-norms ln,rms,dyt.")
  parser.add_argument("--timing-record", action="store_true",
                      help="With --compare-norms: write the timing record that decides "
                      "the benchmark's step-time claims, to <records>/<experiment>/"
                      f"{timing.TIMING_FOLDER}/. Run it pinned to one core (taskset -c 1) "
                      "on a quiet machine.")
  parser.add_argument("--records", metavar="DIR", default=None,
                      help="Where --timing-record writes (default: the repository's "
                      "results/<scale>, as `lnorm benchmark`).")
  parser.add_argument("--json", metavar="PATH", default=None,
                      help="Also write the figures, the arguments and the machine to "
                      "this JSON file.")


def format_report(report: dict) -> str:
  """The printed summary of ``throughput.measure_config``."""
  lines = [f"{report['experiment']} (norm={report['norm']}, batch {report['batch_size']}, "
           f"{report['data']} data): {len(report['rows'])} padded batch "
           f"shape{'s' if len(report['rows']) > 1 else ''}"]
  for row in report["rows"]:
    shapes = ", ".join(f"{k} {'x'.join(map(str, v))}" for k, v in row["shapes"].items()
                       if k != "mask")
    lines += [
        f"  {shapes}",
        f"    {row['train_step_matmul_flops'] / 1e9:.4g} GFLOP a train step (matmuls); "
        f"{row['step_seconds_wall'] * 1e3:.4g} ms a step wall, "
        f"{row['step_seconds_cpu'] * 1e3:.4g} ms CPU; compiled in "
        f"{row['compile_seconds_wall']:.1f} s",
        f"    {row['examples_per_sec_wall']:.4g} examples/s; share of the matmul rate "
        f"({row['matmul_flops_per_sec_wall'] / 1e9:.3g} GFLOP/s wall): "
        f"{row['ratio_wall']:.3f} wall, {row['ratio_cpu']:.3f} CPU"]
  if len(report["rows"]) > 1:
    mean = report["mean_over_shapes"]
    lines.append(f"  mean over the shapes: {mean['step_seconds_wall'] * 1e3:.4g} ms a step, "
                 f"{mean['examples_per_sec_wall']:.4g} examples/s, share "
                 f"{mean['ratio_wall']:.3f} wall, {mean['ratio_cpu']:.3f} CPU")
  return "\n".join(lines)


def format_norm_comparison(report: dict) -> str:
  """The printed table of ``throughput.compare_norms``."""
  shapes = ", ".join(f"{k} {'x'.join(map(str, v))}" for k, v in report["shapes"].items()
                     if k != "mask")
  lines = [f"{report['experiment']}: train step by normalizer, median of "
           f"{report['rounds']} round-robin rounds ({shapes})",
           f"  {'norm':<12} {'ms wall':>9} {'ms CPU':>9} {'wall/' + report['baseline']:>10} "
           f"{'CPU/' + report['baseline']:>10}"]
  for row in report["rows"]:
    lines.append(f"  {row['norm']:<12} {row['step_seconds_wall_median'] * 1e3:9.2f} "
                 f"{row['step_seconds_cpu_median'] * 1e3:9.2f} "
                 f"{row['wall_over_baseline']:10.3f} {row['cpu_over_baseline']:10.3f}")
  return "\n".join(lines)


def format_ratios(record: dict) -> str:
  """Each normalizer's ratio to the baseline with its interval (``timing``'s)."""
  lines = []
  for clock in ("cpu", "wall"):
    for norm, r in record["ratios"][clock].items():
      if r:
        lines.append(f"  {norm}/{record['baseline']} ({clock}): {r['ratio']:.3f} "
                     f"[{r['low']:.3f}, {r['high']:.3f}], ±{r['relative_half_width']:.1%}, "
                     f"sign test p = {r['p']:.2g}")
  return "\n".join([f"  {record['rounds']} rounds, stopped at {record['stopped']}"] + lines)


def _command_line(args: argparse.Namespace, overrides: dict[str, str]) -> str:
  """The ``lnorm flops`` command that gave ``args`` and ``overrides``."""
  words = ["lnorm", "flops", "--config", args.config, "--compare-norms", args.compare_norms]
  words += ["--steps", str(args.steps)] if args.steps is not None else []
  words += [f"--config.{k}={v}" for k, v in overrides.items()]
  return shlex.join(words)


def _compare_norms(args: argparse.Namespace, overrides: dict[str, str], config) -> dict:
  from lnorm.sweeps import benchmark  # pylint: disable=g-import-not-at-top
  from lnorm.training import environment, throughput  # pylint: disable=g-import-not-at-top
  norms = [n for n in args.compare_norms.split(",") if n]
  if len(norms) < 2:
    raise UserError(f"--compare-norms {args.compare_norms!r} names fewer than two "
                    "normalizers: give a baseline and at least one other, e.g. ln,rms.")
  records = None
  if args.timing_record:
    if not config.get("scale") and not args.records:
      raise UserError(f"{args.config} has no scale field to find results/<scale>/ by: "
                      "pass --records DIR.")
    records = args.records or benchmark.records_root(config.scale)
  stopped = {}

  def stop(seconds):
    stopped["why"] = timing.stop_reason(seconds, norms[0])
    rounds = len(seconds[norms[0]])
    if rounds % 50 == 0:
      logging.info("%d rounds timed", rounds)
    return stopped["why"]

  load_before = os.getloadavg()  # How busy the machine was: the record says so.
  report = throughput.compare_norms(config, norms, steps=args.steps,
                                    stop=None if args.steps else stop)
  flat = {**benchmark.as_recorded(config), "norm": norms[0]}  # The baseline's config.
  record = timing.make_record(
      report, flat, stopped=stopped.get("why") or f"the {args.steps} rounds asked for",
      command=_command_line(args, overrides),
      environment={**throughput.machine_record(),
                   "load_average_1min": {"before": load_before[0],
                                         "after": os.getloadavg()[0]}},
      code=environment.code_revision())
  print(format_norm_comparison(report))
  print(format_ratios(record))
  if records:
    path = os.path.join(records, config.experiment, timing.TIMING_FOLDER,
                        timing.record_name(norms, flat))
    throughput.write_json(path, record)
    print(f"  timing record: {path}")
  return {**report, **record}  # --json: the printed rows beside the record.


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  from lnorm.training import process, throughput  # pylint: disable=g-import-not-at-top
  config = config_lib.load_config(args.config)
  config_lib.apply_overrides(config, overrides)
  process.set_up(config)
  if args.timing_record and not args.compare_norms:
    raise UserError("--timing-record times normalizers against each other: add "
                    "--compare-norms BASELINE,OTHER, e.g. --compare-norms ln,rms.")
  if args.steps is not None and args.steps < 1:
    raise UserError(f"--steps {args.steps}: give at least 1 step (or leave it out).")
  steps = 5 if args.steps is None else args.steps
  if args.compare_norms:
    report = _compare_norms(args, overrides, config)
  elif args.compare_scan:
    report = throughput.compare_scan(config, steps=steps)
    medians = report["step_seconds_wall_median"]
    print(f"{report['experiment']} (norm={report['norm']}): a train step takes "
          f"{medians['fused'] * 1e3:.4g} ms with its recurrences fused, "
          f"{medians['scanned'] * 1e3:.4g} ms scanned step by step: "
          f"{report['fused_over_scanned']:.3f}x")
  else:
    report = throughput.measure_config(config, steps=steps,
                                       matmul_size=args.matmul_size,
                                       matmul_reps=args.matmul_reps)
    print(format_report(report))
  if args.json:
    record = {"machine": throughput.machine_record(), "args": vars(args),
              "overrides": overrides, **report}
    throughput.write_json(args.json, record)
  return 0
