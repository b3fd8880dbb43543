"""The best-model store: keeps the highest score, survives a restart, and forgets a
best from steps a resumed run has not reached yet."""

from __future__ import annotations

import numpy as np

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
