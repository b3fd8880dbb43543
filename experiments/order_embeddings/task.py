"""Order-embeddings of images and captions, GRU vs LN-GRU (LN paper sec. 6.1, Table 2,
Figure 1; docs/experiments.md, sec. 7).

Each row of a split is one image with its K (5) captions (``lnorm.data.image_captions``).
Training draws one of them at random per image (the 'caption' rng stream) and takes the
contrastive hinge over every pair of the batch. Retrieval needs a whole split at once,
which the loop's per-batch evaluation does not offer, so it runs in the task's hooks:

* every ``periodic_eval_every_steps`` updates (the paper's 300) and at each epoch end:
  R@K and median and mean ranks on the validation split, in folds of
  ``retrieval.fold_size`` (1,000) images; the parameters with the best selection score
  so far are kept in ``<workdir>/best/``. The score is ``retrieval.select_on`` over the
  first ``retrieval.select_images`` validation images: by default image-retrieval
  R@1 + R@5 + R@10 over the first 1,000, as Vendrov et al.'s ``train.py`` selected;
  ``select_on=rsum, select_images=0`` is the sum of both directions' recalls over every
  fold, this project's earlier rule;
* after the last update, the best parameters are evaluated on the test split, fold by
  fold (Table 2: the mean over 5 folds of 1,000 images).

The loop's own evaluation (``eval_splits``, ``eval_every_steps``) also works when
``eval_batch_size`` equals the fold size: an evaluation batch is one fold, and ``loss_and_metrics`` returns per-image ranks and
recalls whose means over the split are the fold-averaged scores; it selects no model.

Logged as ``validation/caption_r1`` ... ``validation/image_mean_rank``,
``validation/image_rsum``, ``validation/rsum`` (means over all folds),
``validation/selection_rsum`` (the selection score), ``best/step``,
``best/selection_rsum`` and (at the end) ``test/...`` of the selected model.

The training loss is the contrastive hinge summed over the batch's pairs
(``loss_reduction='sum'``, the authors' ``model.py``) or its mean per image
(``'mean'``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from experiments.order_embeddings import model as model_lib
from experiments.order_embeddings import retrieval
from experiments.order_embeddings.model import OrderEmbedding, contrastive_loss
from lnorm.evaluation import trivial
from lnorm.data import batching
from lnorm.errors import ConfigError
from lnorm.normalization import PER_EXAMPLE_NORMS
from lnorm.rnn import cell_options, make_gru_cell
from lnorm.training import parallel
from lnorm.training.best_model import BestModel
from lnorm.training.defaults import KEPT_STEP
from lnorm.training.task import LOSS_REDUCTIONS, Task as BaseTask
from lnorm.training.train_state import TrainStateInitializer


class Task(BaseTask):

  norms = ("none",) + PER_EXAMPLE_NORMS
  rng_streams = ("caption",)
  loss_reductions = LOSS_REDUCTIONS

  def __init__(self, config):
    super().__init__(config)
    if config.model.score not in retrieval.SCORES:
      raise ConfigError(f"model.score is {config.model.score!r}; valid choices: "
                        f"{', '.join(retrieval.SCORES)}.")
    if config.retrieval.fold_size <= 0:
      raise ConfigError("retrieval.fold_size is the number of images per retrieval fold "
                        "(1000 in the paper) and must be positive.")
    if config.retrieval.select_on not in retrieval.SELECTION_METRICS:
      raise ConfigError(f"retrieval.select_on is {config.retrieval.select_on!r}; valid "
                        f"choices: {', '.join(retrieval.SELECTION_METRICS)}.")
    try:
      self._selection_folds = retrieval.selection_folds(config.retrieval.select_images,
                                                        config.retrieval.fold_size)
    except ValueError as e:
      raise ConfigError(f"retrieval.select_images: {e}") from e
    loop_evaluates = bool(config.eval_splits or config.final_eval_splits
                          or config.eval_every_steps)
    if loop_evaluates and config.eval_batch_size != config.retrieval.fold_size:
      raise ConfigError(
          "The loop's evaluation (eval_splits, final_eval_splits, eval_every_steps) scores "
          "each evaluation batch as one retrieval fold, so eval_batch_size "
          f"({config.eval_batch_size}) must equal retrieval.fold_size "
          f"({config.retrieval.fold_size}); or leave validation to "
          "periodic_eval_every_steps.")

  def build_model(self, dataset):
    c = self.config
    return OrderEmbedding(
        vocab_size=dataset.info["vocab_size"], cell=make_gru_cell(c.norm, **cell_options(c)),
        word_size=c.model.word_size, embed_size=c.model.embed_size,
        use_abs=c.model.use_abs)

  def forward_macs(self, dataset, batch):
    del dataset
    return model_lib.forward_macs(self.config, batch["captions"].shape[0],
                                  batch["captions"].shape[-1], batch["image"].shape[-1])

  def model_inputs(self, batch):
    return batch["captions"], batch["caption_length"], batch["image"]

  def trivial_baseline(self, dataset):
    """A random ranking: the expected recalls (in %), their sums and the mean ranks
    of scores that ignore the images and captions, fold by fold as the validation and
    test retrieval compute them; ``selection_rsum`` over the folds selection reads."""
    r = self.config.retrieval
    values = {}
    for split in trivial.held_out_splits(dataset, self.train_split()):
      images, per_image = dataset.splits[split]["captions"].shape[:2]
      scores = trivial.random_ranking_scores(images, per_image, r.fold_size)
      values.update({f"{split}/{k}": v for k, v in scores.items()})
      if split == "validation":
        selected = min(images, self._selection_folds * r.fold_size
                       ) if self._selection_folds else images
        values["validation/selection_rsum"] = trivial.random_ranking_scores(
            selected, per_image, r.fold_size)[r.select_on]
    return trivial.record("random ranking (expected)", values)

  def _ranking_options(self) -> dict[str, Any]:
    r = self.config.retrieval
    return {"query_block": r.query_block, "candidate_block": r.candidate_block}

  def loss_and_metrics(self, outputs, batch, model):
    del model  # Unused.
    captions, images = outputs["captions"], outputs["images"]
    if captions.ndim == 2:  # Training: one caption per image.
      _, per_example = contrastive_loss(captions, images, self.config.model.score,
                                        self.config.model.margin)
      return self.reduce_loss(per_example), {"pair_loss": per_example}
    # Evaluation: this batch is one fold; padded rows are neither queries nor candidates.
    ranks = retrieval.retrieval_ranks(
        images, captions.reshape(-1, captions.shape[-1]), self.config.model.score,
        image_valid=batch["mask"] > 0, **self._ranking_options())
    return jnp.zeros((), jnp.float32), retrieval.per_image_metrics(*ranks)

  # --- whole-split retrieval at epoch ends ----------------------------------------------

  def embed_split(self, run, variables, split: str) -> tuple[np.ndarray, np.ndarray]:
    """``(images [N, E], captions [N * K, E])`` of ``run``'s split, on the host."""
    arrays = run.dataset.splits[split]
    embed = run.compiled("embedder", lambda: embedder(run.model, run.mesh))
    images, captions = [], []
    for batch in batching.eval_batches(arrays, self.config.eval_batch_size,
                                       run.mesh.size):
      keep = int(batch.pop("mask").sum())
      out = jax.device_get(embed(variables, *self.model_inputs(
          parallel.shard_batch(batch, run.mesh))))
      images.append(out["images"][:keep])
      captions.append(out["captions"][:keep].reshape(-1, out["captions"].shape[-1]))
    return np.concatenate(images), np.concatenate(captions)

  def retrieval_folds(self, run, variables, split: str) -> list[dict[str, float]]:
    """The retrieval scores of each fold of ``run``'s split."""
    images, captions = self.embed_split(run, variables, split)
    return retrieval.evaluate_folds(images, captions, self.config.model.score,
                                    fold_size=self.config.retrieval.fold_size,
                                    **self._ranking_options())

  def retrieval_scores(self, run, variables, split: str) -> dict[str, float]:
    return retrieval.mean_over_folds(self.retrieval_folds(run, variables, split))

  def _validate_and_select(self, run, state, workdir: str, step: int):
    """Validation retrieval scores, offered to the best-model store."""
    variables = {"params": state.params}
    folds = self.retrieval_folds(run, variables, "validation")
    selection = retrieval.selection_score(folds, self.config.retrieval.select_on,
                                          self._selection_folds)
    best = BestModel(workdir)
    best.offer(step, selection, variables)
    record = best.record()
    out = {f"validation/{k}": v for k, v in retrieval.mean_over_folds(folds).items()}
    out.update({"validation/selection_rsum": selection, KEPT_STEP: record["step"],
                "best/selection_rsum": record["score"]})
    return out, best

  def periodic_evaluation(self, run, state, workdir, step):
    if run.ends_epoch(step) or step >= run.total_steps:
      return {}  # end_of_epoch validates this step (an epoch's or the run's last).
    return self._validate_and_select(run, state, workdir, step)[0]

  def end_of_epoch(self, run, state, workdir, step, writer):
    del writer
    out, best = self._validate_and_select(run, state, workdir, step)
    if step >= run.total_steps and "test" in run.dataset.splits:
      # The store keeps the parameters alone (the model has no batch statistics).
      selected = TrainStateInitializer.from_kept(state, best, ("params",))
      out.update({f"test/{k}": v for k, v in self.retrieval_scores(
          run, {"params": selected.params}, "test").items()})
    return out


def embedder(model: OrderEmbedding, mesh):
  """``model``'s evaluation-mode embedding, jitted with its outputs replicated over
  ``mesh``: compiled once per run (``run.compiled``), whose validations come every
  few hundred updates."""

  def embed(variables, captions, lengths, images):
    return model.apply(variables, captions, lengths, images, train=False)

  return jax.jit(embed, out_shardings=parallel.replicated(mesh))
