r"""Seeds trained together against one seed at a time: members per hour of the
benchmark's CPU settings with K seeds in one program (``lnorm train --seeds``) and
with one seed alone (``lnorm train``), measured in one run.

Each experiment's setting is the benchmark's ``cpu`` one (its first variant; the
headline normalizer, LN), cut to ``--updates`` updates with no evaluation: the first
updates of a member, not a whole one. A side's time is the training time its records
log (``time/train_seconds``: the train calls and the assembly of their batches;
compilation, set-up, evaluation and checkpoints left out), summed over its seeds. A
member's cost is that time per update times the member's updates, so that

  members per hour = 3600 / (seconds per update of one member * updates of a member)

and the ratio K-together / alone is the gain of training K seeds together.

  taskset -c 1 python scripts/bench_seeds.py               # perm_mnist, handwriting, skip_thoughts
  taskset -c 1 python scripts/bench_seeds.py --experiments perm_mnist --updates 1000 --k 5
  python scripts/bench_seeds.py --json perf/seeds.json     # also a machine-readable record

The real data is read from $LNORM_DATA_DIR when the setting reads files; ``--smoke``
runs the experiments' smoke configs instead (embedded or synthetic data, small
models: a check of the script, not a measurement). Pin it to one core and state the
machine's load (``uptime``): other processes on the core make both sides slower, not
always alike.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

from lnorm import config as config_lib
from lnorm.sweeps import benchmark as bench
from lnorm.sweeps import benchmark_suite as suite
from lnorm.training import loop
from lnorm.training import throughput

EXPERIMENTS = ("perm_mnist", "handwriting", "skip_thoughts")
UPDATES = 300
NORM = "ln"
#: Nothing but the updates: no evaluation, no task hook, no sample, no timed checkpoint.
QUIET = {"eval_splits": "()", "final_eval_splits": "()", "eval_every_steps": "0",
         "eval_points_per_decade": "0", "periodic_eval_every_steps": "0",
         "progress_bar": "false", "sample_text": "", "checkpoint_every_secs": "1e9"}


def cpu_config(experiment: str, updates: int, smoke: bool):
  """The benchmark's cpu setting of ``experiment`` (its first variant, LN, seed 0),
  or its smoke config, cut to ``updates`` quiet updates; and the updates of one of
  the benchmark's members."""
  e = suite.BY_NAME[experiment]
  setting = e.scales["cpu"]
  variant = setting.variants[0] if setting.variants else {}
  if smoke:
    config = config_lib.load_config(f"configs/{experiment}.py:norm={NORM},smoke=true")
  else:
    member = suite.Member(experiment, variant, NORM, 0)
    plan = bench.Plan(e, setting, [member], tempfile.mkdtemp(), "cpu")
    config = plan.prepare([member])[1][member.name]
  member_updates = loop.set_up(config, tempfile.mkdtemp()).total_steps
  config_lib.apply_overrides(config, {**{k: v for k, v in QUIET.items() if k in config},
                                      "max_steps": str(updates)})
  return config, member_updates


def train_seconds(workdir: str) -> float:
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    points = [json.loads(line) for line in f if line.strip()]
  return points[-1]["time/train_seconds"]


def measure(experiment: str, k: int, updates: int, smoke: bool) -> list[dict]:
  """The two rows of ``experiment``: one seed alone, K seeds together."""
  config, member_updates = cpu_config(experiment, updates, smoke)
  root = tempfile.mkdtemp(prefix=f"bench_seeds_{experiment}_")
  # One seed alone before and after the seeds together: a load that changed between
  # them shows as two different times (both are on the record; their mean is used).
  alone = [os.path.join(root, f"alone{i}") for i in range(2)]
  loop.train_and_evaluate(config, alone[0])
  seeds = list(range(k))
  together = [os.path.join(root, f"together{s}") for s in seeds]
  loop.train_seeds(config, seeds, together)
  loop.train_and_evaluate(config, alone[1])
  alone_seconds = [train_seconds(w) for w in alone]
  rows = []
  for name, seconds, members, each in (
      ("1 seed alone", sum(alone_seconds) / 2, 1, alone_seconds),
      (f"{k} seeds together", sum(train_seconds(w) for w in together), k, None)):
    per_update = seconds / (members * updates)
    rows.append({"name": f"{experiment}: {name}", "experiment": experiment,
                 "seeds": members, "updates": updates, "train_seconds": seconds,
                 **({"train_seconds_before_and_after": each} if each else {}),
                 "ms_per_member_update": 1e3 * per_update,
                 "member_updates": member_updates,
                 "members_per_hour": 3600 / (per_update * member_updates)})
  return rows


def parse_updates(text: str) -> dict[str, int]:
  """``--updates``: ``300`` for every experiment, or ``perm_mnist=640,handwriting=40``."""
  if "=" not in text:
    return {e: int(text) for e in EXPERIMENTS}
  return {name: int(n) for name, n in (item.split("=") for item in text.split(","))}


def ratios(rows: list[dict]) -> list[dict]:
  out = []
  for alone, together in zip(rows[::2], rows[1::2]):
    out.append({"name": f"{together['name']} / {alone['name'].split(': ')[1]}",
                "numerator": together["name"], "denominator": alone["name"],
                "value": together["members_per_hour"] / alone["members_per_hour"]})
  return out


def report(rows: list[dict], ratio_rows: list[dict]) -> str:
  lines = [f"{r['name']:>40s}: {r['ms_per_member_update']:8.2f} ms per member-update, "
           f"{r['members_per_hour']:8.2f} members/h ({r['member_updates']} updates each)"
           + (" [before, after: %.1f s, %.1f s]" % tuple(r["train_seconds_before_and_after"])
              if "train_seconds_before_and_after" in r else "")
           for r in rows]
  lines += [f"{r['name']:>58s}: {r['value']:.2f}x members/h" for r in ratio_rows]
  return "\n".join(lines)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--experiments", default=",".join(EXPERIMENTS))
  parser.add_argument("--k", type=int, default=5, help="seeds trained together")
  parser.add_argument("--updates", default=str(UPDATES),
                      help="updates timed on each side (a member's first): N for every "
                      "experiment, or EXPERIMENT=N,... (the others get %d)" % UPDATES)
  parser.add_argument("--smoke", action="store_true",
                      help="the smoke configs: a check of the script, no measurement")
  throughput.add_json_flag(parser)
  args = parser.parse_args(argv)
  os.environ.setdefault("WANDB_MODE", "disabled")
  updates = parse_updates(args.updates)
  rows = []
  for experiment in args.experiments.split(","):
    rows += measure(experiment, args.k, updates.get(experiment, UPDATES), args.smoke)
    print(report(rows[-2:], ratios(rows[-2:])), flush=True)
  ratio_rows = ratios(rows)
  print("\n" + report(rows, ratio_rows))
  if args.json:
    throughput.write_json(args.json, throughput.bench_record(args, rows, ratio_rows))
  return 0


if __name__ == "__main__":
  raise SystemExit(main())
