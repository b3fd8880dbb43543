r"""Why LN at gain 1.0 does not learn in the attentive reader: its first updates, measured.

Trains the benchmark's attentive-reader members (`lnorm benchmark --experiments
attentive_reader --print-commands` gives their commands: `configs/attentive_reader.py:
scale=cpu` with the seed and the normalizer) for their first ``--updates`` updates,
exactly as `lnorm train` takes them, and records after each update the loss, the
gradient norm before the clip and as the clip hands it to Adam, Adam's update norm,
Adam's second moment and normalised step per parameter group, the LN gain of the
passage LSTM and the passage LSTM's saturation on a fixed batch; and, at
initialisation and every ``--probe-every`` updates, how a small perturbation of the
passage LSTM's initial state grows along that batch's passages (a finite-time
Lyapunov estimate). Arms (``--arms``): the LSTM, LN at gain 1.0 and at 0.1 (the
benchmark's members) and LN at gain 1.0 under the standard clip at 10 (not a member).
Writes ``reader_ln_dynamics.json`` and ``reader_ln_dynamics.png``/``.svg`` into
``--out``; docs/reader_ln_gain.md reads them.

  taskset -c 1 env XLA_FLAGS=--xla_cpu_multi_thread_eigen=false \
      python scripts/reader_ln_dynamics.py --out docs/figures/reader_ln_gain \
      [--updates 300] [--seed 0] [--arms lstm,ln_gain_1.0] [--config.x=y]

Where a member's committed record of the same config exists
(results/cpu/attentive_reader/), the JSON sets the replay's first epoch beside the
record's. The replay is `lnorm train` at this code; equal gradient norms say the record
was made by the same code, unequal ones that it was not (docs/reader_ln_gain.md).
"""

from __future__ import annotations

from lnorm.training import environment

environment.fix_cpu_threads()  # Before JAX starts: one XLA:CPU thread, as `lnorm train`.

# pylint: disable=g-import-not-at-top,wrong-import-position
import argparse
import json
import logging
import math
import os
import re
import sys
import time

import jax

from experiments.attentive_reader.model import passage_lstm_reads
from lnorm import config as config_lib
from lnorm.analysis import dynamics_figure
from lnorm.analysis import runs as runs_lib
from lnorm.errors import UserError
from lnorm.sweeps import benchmark
from lnorm.sweeps import benchmark_suite as suite
from lnorm.training import assembly
from lnorm.training import dynamics
from lnorm.training import process
from lnorm.training import throughput

EXPERIMENT = "attentive_reader"
#: name -> (the benchmark variant, the normalizer, overrides beyond the member's).
ARMS = {
    "lstm": ({}, "none", {}),
    "ln_gain_1.0": ({}, "ln", {}),
    "ln_gain_0.1": ({"norm_options.ln.scale_init": "0.1"}, "ln", {}),
    "ln_gain_1.0_standard_clip": ({}, "ln", {"optimizer.clip_global_norm_rule": "standard"}),
}
#: The parameter groups whose Adam moments are recorded.
GROUPS = {
    "lstm": ["passage_lstm*", "question_lstm*"],
    "recurrent_kernels": ["*_lstm/layer_0/hidden_proj/kernel"],
    "embedding": ["embed/*"],
    "attention_readout": ["att_*", "out_*", "logit/*"],
}
#: Parameters whose mean is recorded where the model has them.
TRACKED = {"passage_ln_gain": ["passage_lstm/layer_0/hidden_norm/scale"]}
#: The arm whose Adam steps the others' are measured against (updates_to_recover).
REFERENCE = "lstm"
FIGURE_GROUP = "lstm"


def arm_config(arm: str, seed: int, scale: str, overrides: dict[str, str]):
  """``(config, member, the member's flat config)`` of ``arm`` at ``seed``: the
  benchmark member's config (``benchmark.command_config``) with the arm's overrides
  and the command line's."""
  variant, norm, extra = ARMS[arm]
  experiment = suite.BY_NAME[EXPERIMENT]
  flat = benchmark.command_config(experiment, scale, variant, norm, seed)
  config = assembly.config_from_flat(flat)
  config_lib.apply_overrides(config, {**extra, **overrides})
  return config, suite.Member(EXPERIMENT, variant, norm, seed), flat


def recorded_first_epoch(member: suite.Member, flat: dict, scale: str) -> dict | None:
  """The committed record's first epoch (gradient norm mean, clipped share), when the
  record is of this member's command; None otherwise."""
  workdir = benchmark.record_dir(benchmark.records_root(scale), member)
  recorded = runs_lib.read_config(workdir).get("config")
  if recorded is None or benchmark.config_drift(recorded, flat):
    return None
  first = runs_lib.epoch_records(workdir)[0]
  return {"record": os.path.relpath(workdir, os.path.dirname(benchmark.records_root(scale))),
          "grad_norm_mean": first["train/grad_norm"],
          "clipped_fraction": first["train/clipped_fraction"]}


def rounded(value, digits: int = 4):
  """``value`` with every float to ``digits`` significant digits (a smaller JSON), and
  None for an infinity or NaN, which JSON lacks (a gradient below float32's range)."""
  if isinstance(value, float):
    return float(f"{value:.{digits}g}") if math.isfinite(value) else None
  if isinstance(value, dict):
    return {k: rounded(v, digits) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [rounded(v, digits) for v in value]
  return value


def write_json(path: str, record: dict) -> None:
  """Indented JSON with each list of numbers on one line."""
  text = json.dumps(record, indent=1)
  text = re.sub(r"\[\s*([^\[\]{}\"]*?)\s*\]",
                lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]",
                text)
  with open(path, "w") as f:
    f.write(text + "\n")


def main():
  process.set_up()  # As `lnorm train` runs: one XLA:CPU thread ($PJRT_NPROC), freed memory kept.
  argv, overrides = config_lib.split_config_overrides(sys.argv[1:])
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", required=True, help="Folder for the JSON and the figure.")
  parser.add_argument("--arms", default=",".join(ARMS),
                      help=f"Comma-separated, of: {', '.join(ARMS)}.")
  parser.add_argument("--updates", type=int, default=300)
  parser.add_argument("--probe-every", type=int, default=25,
                      help="Updates between two perturbation-growth probes.")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--scale", default="cpu", choices=("cpu", "paper"))
  args = parser.parse_args(argv)
  arms = [a.strip() for a in args.arms.split(",") if a.strip()]
  unknown = [a for a in arms if a not in ARMS]
  if unknown or not arms:
    raise SystemExit(f"error: --arms {args.arms!r}: unknown {', '.join(unknown) or 'none'}; "
                     f"choose from {', '.join(ARMS)}.")
  if args.updates < 1 or args.probe_every < 1:
    raise SystemExit("error: --updates and --probe-every must be at least 1.")
  # force: an import has configured the root logger at WARNING already.
  logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                      datefmt="%H:%M:%S", force=True)
  traces, arms_out = {}, {}
  for arm in arms:
    config, member, flat = arm_config(arm, args.seed, args.scale, overrides)
    run = assembly.assemble(config)
    # The longest length bucket's first batch: the longest passages the run reads.
    probe = throughput.training_batches(config, run.train_arrays, run.buckets)[-1]
    recurrence = dynamics.Recurrence(
        run.model.cell, run.model.hidden_size,
        lambda params, run=run, probe=probe: passage_lstm_reads(
            run.model, params, probe["passage"], probe["passage_length"]))
    start = time.process_time()
    report = lambda step, row, arm=arm: step % 50 == 0 and logging.info(
        "%s: update %d, loss %.4f, gradient norm %.3g", arm, step, row["loss"],
        row["grad_norm"])
    trace = dynamics.trace(run, args.updates, recurrence, GROUPS, TRACKED,
                           args.probe_every, jax.random.key(args.seed), report=report)
    traces[arm] = trace
    arms_out[arm] = {
        "overrides": {**member.variant, "norm": member.norm, **ARMS[arm][2], **overrides},
        # Only a member's own command, over its whole first epoch, is its record's.
        "recorded_first_epoch": (
            recorded_first_epoch(member, flat, args.scale)
            if not ARMS[arm][2] and not overrides and args.updates >= run.steps_per_epoch
            else None),
        "summary": dynamics.summarise(trace, run.steps_per_epoch),
        "cpu_seconds": time.process_time() - start,
        **trace}
  if REFERENCE in arms_out:
    reference = arms_out[REFERENCE]["summary"]["step_median_at_end"]
    for out in arms_out.values():
      out["summary"]["updates_to_recover_reference_step"] = {
          group: dynamics.updates_to_recover(step, reference[group], args.updates,
                                             config.optimizer.get("b2", 0.999))
          for group, step in out["summary"]["step_median_at_end"].items()}
  record = {"experiment": EXPERIMENT, "scale": args.scale, "seed": args.seed,
            "updates": args.updates, "probe_every": args.probe_every,
            "command": " ".join(["python", "scripts/reader_ln_dynamics.py", *sys.argv[1:]]),
            "groups": GROUPS, "reference_arm": REFERENCE,
            "environment": environment.describe(), "arms": arms_out}
  os.makedirs(args.out, exist_ok=True)
  write_json(os.path.join(args.out, "reader_ln_dynamics.json"), rounded(record))
  paths = dynamics_figure.draw(traces, os.path.join(args.out, "reader_ln_dynamics"),
                               FIGURE_GROUP)
  print(json.dumps({arm: rounded(out["summary"], 3) for arm, out in arms_out.items()},
                   indent=1))
  print("wrote", os.path.join(args.out, "reader_ln_dynamics.json"), *paths)


if __name__ == "__main__":
  try:
    main()
  except UserError as e:
    raise SystemExit(f"error: {e}") from None
