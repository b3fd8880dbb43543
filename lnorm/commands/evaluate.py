"""``lnorm evaluate``: a trained sentence encoder on the SentEval / skip-thoughts
benchmarks (SICK relatedness; MR, CR, SUBJ, MPQA, TREC classification) in their
published protocols (the experiment's own: ``Task.sentence_evaluation``, skip-thoughts').

  lnorm evaluate --workdir runs/skip_thoughts/cpu_ln --tasks sick,mr,cr,subj,mpqa,trec
  lnorm evaluate --workdir runs/skip_thoughts/cpu_ln --protocol kiros

The run's latest checkpoint and vocabulary encode the benchmark sentences. Results go
to ``<workdir>/evaluation.json`` and, as ``eval/<task>_<metric>`` at the checkpoint's
step, to ``metrics.jsonl`` and the run's wandb run; ``--encoder random|bow`` scores the
untrained encoder or the mean word embedding instead, into
``evaluation_<encoder>.json`` and as ``eval_<encoder>/...`` beside them.
``--protocol kiros`` (the skip-thoughts authors' own scripts) writes
``evaluation[_<encoder>]_kiros.json`` and ``eval[_<encoder>]/kiros_<task>_<metric>``.
Each task logs its stages and outer folds with the elapsed time; all six tasks take
about 2 minutes on one CPU core with 512-d vectors, sentence encoding included.
"""

from __future__ import annotations

import argparse
import json
import logging
import os

from lnorm.data import senteval
from lnorm.errors import UserError

RESULTS_FILE = "evaluation.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
  parser.add_argument("--workdir", required=True, help="A run directory `lnorm train` wrote.")
  parser.add_argument("--tasks", default=",".join(senteval.TASKS),
                      help=f"Comma-separated, any case, from {', '.join(senteval.TASKS)} "
                      "(default all).")
  parser.add_argument("--protocol", default="senteval",
                      help="senteval (default): SentEval's stratified nested 10-fold "
                      "cross-validation over C in 2^-2..2^3 (TREC: 2^-1..2^5 on its "
                      "train/test split), rows read and sorted as SentEval reads them, "
                      "SICK by its squared-error softmax; kiros: the skip-thoughts authors' eval_*.py scripts, with "
                      "L2-normalised vectors, C in 2^0..2^8 by their folds, liblinear's "
                      "penalised intercept, EOS appended for SICK only and SICK's "
                      "regression trained by Adam and stopped early on the trial set. "
                      "Their vocabulary expansion (a linear map from the GoogleNews "
                      "word2vec vectors into the encoder's word space) is not reproduced: "
                      "it needs those vectors; words outside the encoder's vocabulary are "
                      "its OOV token.")
  parser.add_argument("--encoder", default="trained",
                      help="trained (default), random (same architecture, untrained) or "
                      "bow (mean of the trained word embeddings).")
  parser.add_argument("--data-dir", default=None,
                      help="Folder holding senteval/ and sick/ (default $LNORM_DATA_DIR).")
  parser.add_argument("--folds", type=int, default=10,
                      help="Cross-validation folds for MR, CR, SUBJ, MPQA (SentEval: 10).")
  parser.add_argument("--inner-folds", type=int, default=10,
                      help="Inner folds that choose the L2 strength (SentEval: 10).")


def run(args: argparse.Namespace, overrides: dict[str, str]) -> int:
  if overrides:
    raise UserError("lnorm evaluate takes no --config.* overrides.")
  if args.folds < 2 or args.inner_folds < 2:
    raise UserError("--folds and --inner-folds must be at least 2.")
  results = evaluate(args.workdir, args.tasks.split(","), encoder=args.encoder,
                     data_dir=args.data_dir, folds=args.folds, inner_folds=args.inner_folds,
                     protocol=args.protocol)
  print(json.dumps(results, indent=2))
  return 0


def evaluate(workdir: str, tasks, *, encoder: str = "trained", data_dir: str | None = None,
             folds: int = 10, inner_folds: int = 10, protocol: str = "senteval") -> dict:
  """Scores the run in ``workdir`` on ``tasks`` (names in any case) and records the
  results there."""
  from lnorm import config as config_lib  # pylint: disable=g-import-not-at-top
  from lnorm.training.metrics_writer import MetricWriter  # pylint: disable=g-import-not-at-top
  from lnorm.training import assembly  # pylint: disable=g-import-not-at-top

  workdir = os.path.abspath(workdir)
  config = assembly.load_run_config(workdir)
  # The check `lnorm train` makes: a config.json no run could have trained with is
  # refused with the same line, before the checkpoint is read.
  task = assembly.check(config)
  # An experiment without a sentence encoder says so (Task.sentence_evaluation); bad
  # names are refused before the checkpoint is read.
  sentence_eval = task.sentence_evaluation()
  tasks = sentence_eval.task_names(tasks)
  protocol = sentence_eval.protocol(protocol).name
  encode, step = task.sentence_encoder(workdir, encoder)
  scores = sentence_eval.evaluate_encoder(encode, tasks, data_dir or config.data.get("data_dir"),
                                          protocol_name=protocol, folds=folds,
                                          inner_folds=inner_folds, log=logging.info)
  prefix = "eval" if encoder == "trained" else f"eval_{encoder}"
  # Another protocol measures something else: its own metric names, its own file.
  qualifier = "" if protocol == "senteval" else f"{protocol}_"
  metrics = {f"{prefix}/{qualifier}{k}": v for k, v in scores.items()}
  record = {"step": step, "encoder": encoder, "protocol": protocol, "tasks": list(tasks),
            "folds": folds, "inner_folds": inner_folds, "metrics": metrics}
  suffix = "".join(f"_{part}" for part in (encoder, protocol)
                   if part not in ("trained", "senteval"))
  name = RESULTS_FILE.replace(".json", f"{suffix}.json")
  with open(os.path.join(workdir, name), "w") as f:
    json.dump(record, f, indent=2)
  # Into metrics.jsonl (and the run's wandb run) at the run's last step, baselines
  # too: `lnorm report` puts them beside the trained encoder's row.
  # The vocabulary exists only after a training step, so last > 0 whenever points do:
  # resuming the writer at it keeps them all.
  records = _drop_earlier(workdir, set(metrics))
  last = max((r.get("step", 0) for r in records), default=0)
  epochs = [r["epoch"] for r in records if r.get("step") == last and "epoch" in r]
  writer = MetricWriter(workdir, config_lib.to_flat_dict(config), config.wandb,
                        resume_step=last)
  try:
    writer.write(last, {**({"epoch": epochs[-1]} if epochs else {}), **metrics})
  finally:
    writer.close()
  return record


def _drop_earlier(workdir: str, keys: set[str]) -> list[dict]:
  """Removes from metrics.jsonl the points of an earlier evaluation of the same
  metrics (a point that carries nothing but ``keys``, ``step`` and ``epoch``): a rerun
  replaces its result instead of adding a second point that plots and reports would
  count twice. Returns the points kept."""
  from lnorm.training.run_files import METRICS_FILE, read_jsonl  # pylint: disable=g-import-not-at-top
  path = os.path.join(workdir, METRICS_FILE)
  records = read_jsonl(path)
  kept = [r for r in records if not (set(r) - {"step", "epoch"} <= keys)]
  if len(kept) < len(records):
    logging.info("Replacing %d earlier record(s) of these metrics in %s.",
                 len(records) - len(kept), path)
    with open(path, "w") as f:
      f.writelines(json.dumps(r) + "\n" for r in kept)
  return kept
