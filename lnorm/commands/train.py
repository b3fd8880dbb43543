"""``lnorm train``: one config, one workdir; rerunning the same command resumes.
``--seeds 0,1,2`` trains several seeds of the config together, each into its workdir
(``--workdir runs/ln/seed={seed}``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os

from lnorm import config as config_lib
from lnorm.errors import UserError

#: After the arguments in ``lnorm train --help``. (The module must stay light: no
#: JAX, no wandb, so that --help is fast.)
EPILOG = """\
Rerunning the same command with the same --workdir resumes from the latest checkpoint
(saved at epoch ends, after the first minute, every checkpoint_every_secs and on
Ctrl-C/SIGTERM). A workdir holds one run: a different config, or data that resolves
differently (e.g. $LNORM_DATA_DIR set under data.source=auto), is refused. One
process at a time: a second command on a workdir in use stops at once and names the
process that holds it (a killed process holds nothing).

Ctrl-C or SIGTERM saves a checkpoint and exits with code 130 (before training
begins, it stops at once); a second Ctrl-C stops at once, without saving.

A damaged workdir is repaired on the rerun: a checkpoint that does not restore is
moved aside (<step>.damaged) and the run resumes from the newest intact one; a line
of metrics.jsonl that a kill cut short is dropped and its step trained and logged
again. Each repair is one warning line.

Seeds together: --seeds 0,1,2 (or 0-4) trains the config at each seed in one
compiled program (jax.vmap over the seeds' states, batches and keys), each into the
workdir --workdir names with {seed} replaced by its seed (--workdir runs/ln/seed={seed};
{seed} in --config.wandb.name is replaced too). Each seed's workdir is exactly the run
`lnorm train --config.seed=S` makes (its records, checkpoints and numbers, bit for
bit): either command resumes it. A seed whose loss is not finite stops alone; the
others go on. Meant for a GPU, which one seed at a small batch leaves mostly idle;
on a CPU core K seeds together cost more than K runs in turn (docs/benchmark.md,
"Seeds together").

The log is also appended to <workdir>/train.log ($LNORM_TRAIN_LOG=0: not).

Compiled programs are kept in the cache folder's jax/ (below), so that a rerun of a
config compiles nothing; $LNORM_COMPILATION_CACHE=0 turns that off.

Progress: a bar on a terminal; when stderr is a file or a pipe, a plain line every
--config.progress_every_secs seconds (30).

wandb: --config.wandb.mode=online|offline|disabled wins over $WANDB_MODE. The
default, auto, follows $WANDB_MODE when it is set, else runs online with an API key
and offline without (upload later with `wandb sync`). The log says which applied.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.formatter_class = argparse.RawDescriptionHelpFormatter
  parser.add_argument("--config", required=True,
                      help="A config file with an optional argument, e.g. "
                      "configs/perm_mnist.py:norm=ln,batch_size=4.")
  parser.add_argument("--workdir", required=True,
                      help="Where checkpoints, config.json and metrics.jsonl go.")
  parser.add_argument("--seeds", default=None, metavar="0,1,2",
                      help="Train these seeds of the config together, in one compiled "
                      "program, each into --workdir with {seed} replaced by it (e.g. "
                      "--workdir runs/ln/seed={seed}); see below.")
  parser.add_argument("--dry-run", action="store_true",
                      help="Print the resolved config, the data it would load (source and "
                      "split sizes) and the number of updates, and whether the workdir "
                      "would resume; train nothing, write nothing.")
  from lnorm.data import cache  # pylint: disable=g-import-not-at-top
  parser.epilog = EPILOG + "\n" + cache.HELP


def load(config_spec: str, overrides: dict[str, str]):
  config = config_lib.load_config(config_spec)
  config_lib.apply_overrides(config, overrides)
  return config


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  # Before JAX is imported: from then on a Ctrl-C that Python raised as a
  # KeyboardInterrupt could land in JAX's garbage-collection callback and be lost.
  from lnorm.training.stop_signals import StopSignals  # pylint: disable=g-import-not-at-top
  with StopSignals() as signals:
    return _run(args, overrides, signals)


def _run(args: argparse.Namespace, overrides: dict[str, str], signals) -> int:
  # Nothing is written before the workdir is made: a signal stops the imports (seconds,
  # for JAX), the config's check and a dry run at once.
  with signals.interruptible("before training began; nothing was written. Rerun the "
                             "same command to continue."):
    from lnorm.training import run_files  # pylint: disable=g-import-not-at-top
    from lnorm.training import workdir_lock  # pylint: disable=g-import-not-at-top
    from lnorm.training import loop  # pylint: disable=g-import-not-at-top
    from lnorm.training import process  # pylint: disable=g-import-not-at-top
    from lnorm.training import assembly  # pylint: disable=g-import-not-at-top
    config = load(args.config, overrides)
    seeds = _seeds(args, overrides)
    if seeds is not None:
      loop.check_seeds_together(config)
    if args.dry_run:
      from lnorm.training import dry_run  # pylint: disable=g-import-not-at-top
      print("Dry run: nothing is trained or written.")
      if seeds is None:
        print(dry_run.plan(config, args.workdir).text(), end="")
      else:
        datasets: dict = {}
        print(dry_run.sweep_text({
            f"seed={seed}": dry_run.plan(seeded, run_files.with_seed(args.workdir, seed),
                                         datasets)
            for seed, seeded in zip(seeds, loop.seed_configs(config, seeds))}), end="")
      return 0
    # Before any other JAX call; the processes of one multi-host job share the
    # workdir, and the first of them holds it for the job.
    process.set_up(config)
    # The run's one check, before the workdir is made or any data loads.
    task = assembly.check(config)
  workdirs = ([args.workdir] if seeds is None else
              [run_files.with_seed(args.workdir, seed) for seed in seeds])
  workdirs = [workdir_lock.make_workdir(w) for w in workdirs]
  import jax  # pylint: disable=g-import-not-at-top
  from lnorm.training import distributed  # pylint: disable=g-import-not-at-top
  with contextlib.ExitStack() as held:
    for workdir in workdirs:
      # Held before anything in the workdir is read or written: a second job stops here.
      if jax.process_index() == 0:
        held.enter_context(workdir_lock.hold(workdir, "lnorm train"))
      # The run's log stays in its workdir, as a sweep member's does.
      held.enter_context(run_files.log_file(workdir))
    held.enter_context(distributed.errors_end_the_job())
    if seeds is None:
      metrics = loop.train_and_evaluate(config, args.workdir, task, signals)
    else:
      finals = loop.train_seeds(config, seeds, workdirs, task, signals)
  if seeds is None:
    print(json.dumps({"workdir": args.workdir, "final": metrics}, indent=2, default=str))
  else:
    print(json.dumps({"seeds": {str(seed): {"workdir": w, "final": final}
                                for seed, w, final in zip(seeds, workdirs, finals)}},
                     indent=2, default=str))
  return 0


def _seeds(args: argparse.Namespace, overrides: dict[str, str]) -> list[int] | None:
  """The seeds of ``--seeds``, checked against ``--workdir`` and the overrides; None
  without it."""
  from lnorm.training import run_files  # pylint: disable=g-import-not-at-top
  field = run_files.SEED_FIELD
  if args.seeds is None:
    if field in args.workdir:
      raise UserError(f"--workdir {args.workdir} holds {field}, which --seeds fills in: "
                      "give the seeds (--seeds 0,1,2), or a --workdir without "
                      f"{field}.")
    return None
  from lnorm.sweeps.benchmark_suite import parse_seeds  # pylint: disable=g-import-not-at-top
  seeds = parse_seeds(args.seeds)
  if "seed" in overrides:
    raise UserError(f"--seeds {args.seeds} and --config.seed={overrides['seed']} both "
                    "give the seed: drop --config.seed.")
  if field not in args.workdir:
    raise UserError(f"--seeds {args.seeds} trains each seed into a workdir of its own: "
                    f"put {field} in --workdir, e.g. --workdir "
                    f"{os.path.join(args.workdir, 'seed=' + field)}.")
  return seeds
