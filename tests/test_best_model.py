"""The best-model store: keeps the highest score, survives a restart, and forgets a
best from steps a resumed run has not reached yet; and the retrieval selection rules
(experiments.order_embeddings.retrieval.selection_score) on a constructed validation log."""

from __future__ import annotations

import numpy as np
import pytest

from experiments.order_embeddings import retrieval
from lnorm.training.best_model import BestModel


def _variables(value):
  return {"params": {"w": np.full((2,), value, np.float32)}}


def _kept(best):
  return float(best.restore(_variables(0.0))["params"]["w"][0])


def test_keeps_the_highest_score_and_its_variables(tmp_path):
  best = BestModel(str(tmp_path))
  assert best.record() is None
  assert best.offer(10, 1.0, _variables(1.0))
  assert not best.offer(20, 0.5, _variables(2.0))
  assert not best.offer(30, 1.0, _variables(3.0))  # A tie keeps the earlier model.
  assert best.offer(40, 2.0, _variables(4.0))
  assert BestModel(str(tmp_path)).record() == {"step": 40, "score": 2.0}
  assert _kept(BestModel(str(tmp_path))) == 4.0


def test_a_best_from_an_abandoned_future_is_replaced(tmp_path):
  """A run that reached step 40 resumes from a checkpoint at step 20: its next offer
  replaces the step-40 record even with a lower score, and the replay ends where the
  uninterrupted run did."""
  best = BestModel(str(tmp_path))
  best.offer(10, 1.0, _variables(1.0))
  best.offer(40, 2.0, _variables(4.0))
  assert best.offer(30, 0.5, _variables(3.0))  # Replayed after resuming at step 20.
  assert best.record() == {"step": 30, "score": 0.5}
  assert best.offer(40, 2.0, _variables(4.0))
  assert best.record() == {"step": 40, "score": 2.0} and _kept(best) == 4.0


# --- the selection rule on a constructed validation log ---------------------------------


def _fold(caption_recalls, image_recalls):
  """A fold's summary with the recall sums of experiments.order_embeddings.retrieval.summarize."""
  out = {f"caption_r{k}": v for k, v in zip((1, 5, 10), caption_recalls)}
  out.update({f"image_r{k}": v for k, v in zip((1, 5, 10), image_recalls)})
  out["image_rsum"] = sum(image_recalls)
  out["rsum"] = sum(caption_recalls) + sum(image_recalls)
  return out


#: Validation every 300 updates, two folds of 1,000 images each. First fold's image
#: R@1+5+10: 140, 146, 128; rsum averaged over both folds: 245, 233, 294.
VALIDATION_LOG = [
    (300, [_fold((30, 60, 80), (20, 50, 70)), _fold((10, 30, 50), (10, 30, 50))]),
    (600, [_fold((20, 50, 70), (22, 52, 72)), _fold((10, 30, 50), (10, 30, 50))]),
    (900, [_fold((35, 65, 85), (18, 45, 65)), _fold((25, 55, 75), (20, 40, 60))]),
]


def _select(tmp_path, metric, select_images, fold_size=1000):
  best = BestModel(str(tmp_path))
  num_folds = retrieval.selection_folds(select_images, fold_size)
  for step, folds in VALIDATION_LOG:
    best.offer(step, retrieval.selection_score(folds, metric, num_folds), _variables(step))
  return best.record(), _kept(best)


def test_the_authors_rule_and_the_recall_sum_pick_different_checkpoints(tmp_path):
  # Vendrov et al.'s train.py: image retrieval R@1+5+10 on the first 1,000 images.
  assert _select(tmp_path / "authors", "image_rsum", 1000) == ({"step": 600, "score": 146.0},
                                                                 600.0)
  # Both directions' recalls over every fold: (310 + 180) / 2 < (313 + 275) / 2.
  assert _select(tmp_path / "rsum", "rsum", 0) == ({"step": 900, "score": 294.0}, 900.0)
  # Two folds of the image recalls: (140 + 90) / 2, (146 + 90) / 2, (128 + 120) / 2.
  assert _select(tmp_path / "two", "image_rsum", 2000)[0] == {"step": 900, "score": 124.0}


def test_selection_reads_whole_folds_only():
  assert retrieval.selection_folds(0, 1000) is None
  assert retrieval.selection_folds(3000, 1000) == 3
  with pytest.raises(ValueError, match="select_images=1500 is not a whole number of folds"):
    retrieval.selection_folds(1500, 1000)
  with pytest.raises(ValueError, match="Unknown selection metric 'caption_rsum'"):
    retrieval.selection_score(VALIDATION_LOG[0][1], "caption_rsum")
