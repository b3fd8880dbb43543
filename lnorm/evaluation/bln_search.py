"""BLN's inference-statistics search (BLN paper Algorithm 2, step 12; docs/experiments.md,
sec. 0): a trained BLN model evaluated under all 16 choices of population ('p') or
mini-batch ('b') statistics for (E_B, Std_B, E_F, Std_F).

Differences from the authors' search, on purpose:
* The configuration is *selected on the validation split* (lowest loss, ties broken
  by accuracy); test results are reported beside it, never used to choose. The
  authors' code ranked the configurations on the test set.
* Mini-batch statistics are taken over evaluation batches of the *training* batch
  size by default (``batch_size``), since they depend on it; at batch size 1 they
  are the single example's. Population statistics are the checkpoint's, one value
  per position (see ``lnorm.normalization.BatchLayerNorm``), finite at batch size 1.
* The evaluation splits are put in a seeded random order first: mini-batch
  statistics of a batch drawn from a class-sorted split (image folders, aclImdb
  directories) would carry label information.

Many evaluation batches go through one call: a batch of G * b examples is reshaped
to [G, b, ...] and the model is vmapped over G, which gives exactly the statistics
of G separate batches of b, without G tiny dispatches.

A run of another norm (BN, LN, none) gets one row, the model as trained, so that the
comparison tables are computed by the same code for every norm.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import json
import logging
import os
from typing import Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from jax.sharding import Mesh

from lnorm.errors import UserError
from lnorm.normalization import (BLN_STATISTICS, bln_inference_configurations,
                                 finalize_epoch_statistics)
from lnorm.training import assembly, run_files, steps

CSV_FILE = "bln_search.csv"
JSON_FILE = run_files.BLN_SEARCH_FILE
#: Evaluation batches of b examples fused into one call (a vmap over the groups).
DEFAULT_EXAMPLES_PER_CALL = 1000


# Where they used to live; a run's config is read in ``lnorm.training.assembly``.
config_from_flat = assembly.config_from_flat
load_run_config = assembly.load_run_config


@dataclasses.dataclass
class Row:
  #: 'pbpb' etc. in (E_B, Std_B, E_F, Std_F) order; '-' for a model that is not BLN.
  inference: str
  #: split -> {'loss', 'accuracy'}.
  scores: dict[str, dict[str, float]]
  selected: bool = False


@dataclasses.dataclass
class SearchResult:
  workdir: str
  norm: str
  batch_size: int
  rows: list[Row]
  selection_split: str = "validation"
  #: split -> number of examples evaluated (smaller than the split with max_examples).
  num_examples: dict[str, int] = dataclasses.field(default_factory=dict)

  @property
  def selected(self) -> Row:
    return next(r for r in self.rows if r.selected)


def one_device_mesh() -> Mesh:
  # One device: groups of b examples must not be split or padded across devices.
  return Mesh(np.asarray(jax.devices()[:1]), ("data",))


def make_grouped_eval_step(task, model, group_size: int):
  """Like ``steps.make_eval_step``, but the batch is G groups of ``group_size``
  examples, each normalized with its own mini-batch statistics."""

  def eval_step(state, batch):
    variables = {"params": state.params, "batch_stats": state.batch_stats}
    mask = batch["mask"]
    batch = {k: v for k, v in batch.items() if k != "mask"}
    grouped = jax.tree.map(lambda v: v.reshape((-1, group_size) + v.shape[1:]), batch)

    def one_group(group):
      outputs = model.apply(variables, *task.model_inputs(group), train=False)
      return task.loss_and_metrics(outputs, group, model)[1]

    metrics = jax.vmap(one_group)(grouped)
    return {k: jnp.sum(v.reshape(-1) * mask) for k, v in metrics.items()}, jnp.sum(mask)

  return eval_step


class GroupedEvaluator:
  """Jitted grouped eval steps of one model, one per group size, shared by splits
  (so that validation and test compile once)."""

  def __init__(self, task, model):
    self.task, self.model, self._steps = task, model, {}

  def step(self, group_size: int):
    if group_size not in self._steps:
      self._steps[group_size] = jax.jit(
          make_grouped_eval_step(self.task, self.model, group_size))
    return self._steps[group_size]


def evaluate_split(evaluator: GroupedEvaluator, state, arrays, batch_size: int, mesh,
                   examples_per_call: int = DEFAULT_EXAMPLES_PER_CALL) -> dict[str, float]:
  """Loss and accuracy over a split evaluated in batches of ``batch_size`` (the
  last batch keeps its true size, as in ``lnorm.data.batching.eval_batches``)."""
  n = len(next(iter(arrays.values())))
  full = (n // batch_size) * batch_size
  parts = []
  if full:
    per_call = max(1, examples_per_call // batch_size) * batch_size
    head = {k: v[:full] for k, v in arrays.items()}
    parts.append((steps.evaluate(evaluator.step(batch_size), state, head, per_call, mesh),
                  full))
  if n > full:
    tail = {k: v[full:] for k, v in arrays.items()}
    parts.append((steps.evaluate(evaluator.step(n - full), state, tail, n - full, mesh),
                  n - full))
  means = {k: sum(p[k] * c for p, c in parts) / n for k in parts[0][0]}
  return {"loss": means["nll"], "accuracy": 1.0 - means["error"]}


def shuffled(arrays, seed: int, max_examples: int | None = None):
  """The split in a seeded random order; its first ``max_examples`` if given (a
  seeded random subsample, for machines where the full search does not fit)."""
  n = len(next(iter(arrays.values())))
  order = np.random.default_rng([seed, 1]).permutation(n)[:max_examples or n]
  return {k: v[order] for k, v in arrays.items()}


def restore_state(run: assembly.AssembledRun, workdir: str):
  """The latest checkpoint of ``workdir``, restored into the structure training
  built for the run's config, with the population statistics its own evaluation used.

  A checkpoint saved inside an epoch (``max_steps``, an interruption, a time-based
  save) holds that epoch's accumulating sums, not yet averaged into the population
  statistics: at the first epoch those are still their initial values, and 'p'
  configurations would score at chance where the run's own evaluation did not. The
  run's evaluations inside an epoch average the sums so far
  (``finalize_epoch_statistics``), and so does the search; at an epoch end the sums
  are empty and this changes nothing.
  """
  state = run.restore(workdir)[0]
  if _mid_epoch(state.batch_stats):
    logging.info("The checkpoint at step %d is inside an epoch: population statistics "
                 "are the averages over its batches so far, as the run's own evaluation "
                 "there took them.", int(state.step))
  return state.replace(batch_stats=finalize_epoch_statistics(state.batch_stats))


def _mid_epoch(batch_stats) -> bool:
  """Whether any epoch-averaged statistic holds a partial epoch's sums."""
  counts = [leaf for path, leaf in jax.tree_util.tree_leaves_with_path(batch_stats)
            if getattr(path[-1], "key", None) == "epoch_count"]
  return any(int(np.max(np.asarray(c))) > 0 for c in counts)


def with_inference(config: ml_collections.ConfigDict,
                   inference: str) -> ml_collections.ConfigDict:
  """A copy of a BLN run's ``config`` whose model normalizes with the ``inference``
  configuration ('pbpb' etc.); ``config`` itself is left as it was."""
  config = copy.deepcopy(config)
  config.norm_options.bln.inference = inference
  return config


def model_for_inference(run: assembly.AssembledRun, inference: str):
  """``(task, model)``: the run's model under the ``inference`` configuration, built
  from a copy of its config by that copy's own task; '-' (not BLN): the run's own.
  The parameters are the same for every configuration: only what the model does with
  its statistics at inference changes."""
  if inference == "-":
    return run.task, run.model
  task = assembly.check(with_inference(run.config, inference))
  return task, task.build_model(run.dataset)


def select(rows: Sequence[Row], split: str = "validation") -> int:
  """Index of the lowest ``split`` loss, ties broken by the higher accuracy. Rows
  with a non-finite loss are never selected."""
  def key(i):
    s = rows[i].scores[split]
    finite = np.isfinite(s["loss"])
    return (not finite, s["loss"] if finite else 0.0, -s["accuracy"])
  return min(range(len(rows)), key=key)


def search(workdir: str, *, batch_size: int | None = None,
           splits: Sequence[str] = ("validation", "test"), seed: int = 0,
           overrides: dict[str, str] | None = None,
           configurations: Sequence[str] | None = None,
           examples_per_call: int = DEFAULT_EXAMPLES_PER_CALL,
           max_examples: int | None = None) -> SearchResult:
  """Evaluates the run in ``workdir`` under each BLN inference configuration and
  selects one on the validation split. Returns every row, the selection marked."""
  workdir = os.path.abspath(workdir)
  config = load_run_config(workdir, overrides)
  if "validation" not in splits:
    raise UserError("The search selects on the validation split: include it in --splits.")
  batch_size = batch_size or config.batch_size
  mesh = one_device_mesh()
  run = assembly.assemble(config, mesh=mesh)
  dataset = run.dataset
  missing = [s for s in splits if s not in dataset.splits]
  if missing:
    raise UserError(f"The dataset has no split {missing[0]!r} (it has "
                    f"{', '.join(dataset.splits)}).")
  is_bln = config.norm == "bln"
  if not is_bln:
    configurations = ["-"]
  elif configurations is None:
    configurations = bln_inference_configurations()
  eval_arrays = {s: shuffled(dataset.splits[s], seed, max_examples) for s in splits}
  sizes = {s: len(next(iter(a.values()))) for s, a in eval_arrays.items()}

  state = restore_state(run, workdir)
  rows = []
  for inference in configurations:
    evaluator = GroupedEvaluator(*model_for_inference(run, inference))
    scores = {s: evaluate_split(evaluator, state, eval_arrays[s], batch_size, mesh,
                                examples_per_call) for s in splits}
    logging.info("%s: %s", inference, json.dumps(scores))
    rows.append(Row(inference, scores))
  rows[select(rows)].selected = True
  return SearchResult(workdir, config.norm, batch_size, rows, num_examples=sizes)


def _flags(inference: str) -> list[str]:
  return ["-"] * 4 if inference == "-" else [
      "pop" if c == "p" else "batch" for c in inference]


def format_table(result: SearchResult) -> str:
  splits = list(result.rows[0].scores)
  header = ["", "config", *BLN_STATISTICS]
  for s in splits:
    header += [f"{s} loss", f"{s} acc"]
  lines = [header]
  for r in result.rows:
    line = ["*" if r.selected else "", r.inference, *_flags(r.inference)]
    for s in splits:
      line += [f"{r.scores[s]['loss']:.4f}", f"{r.scores[s]['accuracy']:.4f}"]
    lines.append(line)
  widths = [max(len(l[i]) for l in lines) for i in range(len(header))]
  text = ["  ".join(c.rjust(w) for c, w in zip(l, widths)) for l in lines]
  sel = result.selected
  text.append(f"* selected on {result.selection_split} (lowest loss): {sel.inference}; "
              f"norm {result.norm}, mini-batch statistics over batches of "
              f"{result.batch_size}. 'pop' = population statistic, 'batch' = the "
              "evaluation mini-batch's. Examples evaluated: "
              + ", ".join(f"{s} {n}" for s, n in result.num_examples.items()) + ".")
  return "\n".join(text)


def write_results(result: SearchResult) -> tuple[str, str]:
  splits = list(result.rows[0].scores)
  csv_path = os.path.join(result.workdir, CSV_FILE)
  with open(csv_path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["inference", *BLN_STATISTICS,
                *[f"{s}_{m}" for s in splits for m in ("loss", "accuracy")], "selected"])
    for r in result.rows:
      w.writerow([r.inference, *_flags(r.inference),
                  *[repr(r.scores[s][m]) for s in splits for m in ("loss", "accuracy")],
                  int(r.selected)])
  json_path = os.path.join(result.workdir, JSON_FILE)
  with open(json_path, "w") as f:
    json.dump({"norm": result.norm, "batch_size": result.batch_size,
               "num_examples": result.num_examples,
               "selection_split": result.selection_split,
               "selected": dataclasses.asdict(result.selected),
               "rows": [dataclasses.asdict(r) for r in result.rows]}, f, indent=2)
  return csv_path, json_path
