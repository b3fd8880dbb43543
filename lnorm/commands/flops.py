"""``lnorm flops``: a config's train step in matmul FLOPs, its measured time, and the
share of this machine's matmul rate it achieves.

  lnorm flops --config configs/handwriting.py:norm=ln,scale=cpu
  lnorm flops --config configs/skip_thoughts.py:norm=none,scale=cpu --compare-scan

Each experiment counts its FLOPs beside its model (``Task.forward_macs``); the step is
the harness's own, on training batches of the padded shapes the loop computes (one per
length bucket), with the data loaded as ``lnorm train`` loads it.
"""

from __future__ import annotations

import argparse

from lnorm import config as config_lib
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
  parser.add_argument("--steps", type=int, default=5, help="Timed training steps per shape.")
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
                      "round-robin, --steps rounds, and print each one's median time "
                      "and its ratio to the baseline's, e.g. "
                      "--compare-norms ln,rms,dyt --steps 30.")
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


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  from lnorm.training import throughput  # pylint: disable=g-import-not-at-top
  config = config_lib.load_config(args.config)
  config_lib.apply_overrides(config, overrides)
  if args.compare_norms:
    norms = [n for n in args.compare_norms.split(",") if n]
    if len(norms) < 2:
      raise UserError(f"--compare-norms {args.compare_norms!r} names fewer than two "
                      "normalizers: give a baseline and at least one other, e.g. ln,rms.")
    report = throughput.compare_norms(config, norms, steps=args.steps)
    print(format_norm_comparison(report))
  elif args.compare_scan:
    report = throughput.compare_scan(config, steps=args.steps)
    medians = report["step_seconds_wall_median"]
    print(f"{report['experiment']} (norm={report['norm']}): a train step takes "
          f"{medians['fused'] * 1e3:.4g} ms with its recurrences fused, "
          f"{medians['scanned'] * 1e3:.4g} ms scanned step by step: "
          f"{report['fused_over_scanned']:.3f}x")
  else:
    report = throughput.measure_config(config, steps=args.steps,
                                       matmul_size=args.matmul_size,
                                       matmul_reps=args.matmul_reps)
    print(format_report(report))
  if args.json:
    record = {"machine": throughput.machine_record(), "args": vars(args),
              "overrides": overrides, **report}
    throughput.write_json(args.json, record)
  return 0
