"""The model a validation metric selects, and the splits evaluated on it at the end.

A config that evaluates test only after the last update (``final_eval_splits``: a test
set that costs more than an epoch's training to evaluate) would otherwise report test
of the last model, not of the evaluation validation selects. With ``select_on`` set
(``validation/error``), the loop offers every evaluation's variables here; the best are
kept in ``<workdir>/selected/`` (``BestModel``: kept across resumes, replaced when a
resume abandons the trajectory they came from), and after the last update the run's
other splits are evaluated on them: ``selected/step`` and ``selected/test/error``, ...
in the last record, beside the last model's ``test/error``. The first of equal values
is kept, as the analysis reads the best evaluation (``lnorm.analysis.runs.Run.test_at``).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

from lnorm.training.best_model import BestModel
from lnorm.training.defaults import SELECTED_PREFIX, SELECTED_STEP, lower_is_better
from lnorm.training.train_state import TrainStateInitializer

#: Where the selected variables are kept, beside the checkpoints.
DIRECTORY = "selected"


class SelectedModel:
  """Keeps the variables where ``metric`` is best and evaluates splits on them."""

  def __init__(self, metric: str, workdir: str):
    self.metric = metric
    self._sign = -1.0 if lower_is_better(metric) else 1.0  # BestModel keeps the highest.
    self._store = BestModel(workdir, DIRECTORY)

  def offer(self, step: int, scores: Mapping[str, Any], state) -> None:
    """Keeps ``state``'s variables if ``scores`` has the best finite ``metric`` yet."""
    value = scores.get(self.metric)
    if value is None or not math.isfinite(value):
      return
    self._store.offer(step, self._sign * float(value), _variables(state))

  def evaluate(self, state, evaluate_splits: Callable[[Any, Sequence[str]], dict],
               splits: Sequence[str]) -> dict[str, Any]:
    """``selected/step`` and ``selected/<split>/<metric>`` of ``splits`` evaluated on the
    kept variables (``state`` gives their structure); {} when none were kept."""
    record = self._store.record()
    if record is None or not splits:
      return {}
    selected = TrainStateInitializer.from_kept(state, self._store)
    scores = evaluate_splits(selected, tuple(splits))
    return {SELECTED_STEP: int(record["step"]),
            **{SELECTED_PREFIX + k: v for k, v in scores.items()}}


def _variables(state) -> dict[str, Any]:
  return {"params": state.params, "batch_stats": state.batch_stats}
