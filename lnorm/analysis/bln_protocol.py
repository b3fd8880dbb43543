"""The BLN claims at the end of training, under the BLN paper's own protocol: one value
per seed, which the rule's final-value claims compare (``value="bln_protocol"`` in
``lnorm.analysis.claims``).

The headline BLN claims compare each seed's best validation value over its epochs,
with BLN evaluated as trained (population statistics, ``pppp``). The BLN paper reports
instead the model after the last epoch, BLN under the inference configuration that a
search over its 16 selects (Algorithm 2; the authors selected on test). Here the
search selects on **validation** (``lnorm bln-search``, which the benchmark runs for
every BLN member, ``bln_search.json``), and the claim is judged on **test**, which the
selection never saw: the selected configuration's test value for BLN, the test value
after the last epoch for BN or LN. Judging on the validation split that selected BLN's
configuration would favour BLN, which alone gets 16 tries.
"""

from __future__ import annotations

import json
import math
import os
from typing import Mapping

from lnorm.analysis.runs import Run
from lnorm.training.run_files import BLN_SEARCH_FILE


def read_search(run: Run) -> dict | None:
  """The run's inference search, or None when it has none."""
  path = os.path.join(run.path, BLN_SEARCH_FILE)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def search_value(search: Mapping, metric: str) -> float | None:
  """``metric`` (``validation/error``, ``test/nll``, ...) of the selected configuration;
  None when the search did not evaluate that split or measure that quantity."""
  split, _, name = metric.partition("/")
  scores = search["selected"]["scores"].get(split)
  if scores is None:
    return None
  if name == "error":
    return 1.0 - scores["accuracy"]
  if name == "accuracy":
    return scores["accuracy"]
  if name in ("nll", "loss"):
    return scores["loss"]
  return None


def last_value(run: Run, metric: str) -> float | None:
  """The run's last finite ``metric``: the model after its last epoch."""
  values = [v for v in run.series(metric, "step")[1] if math.isfinite(v)]
  return values[-1] if values else None


def test_metric(metric: str) -> str:
  return "test/" + metric.partition("/")[2]


def protocol_value(run: Run, metric: str, lower_is_better: bool) -> float | None:
  """One seed's value under the protocol, on the test split of ``metric``, lower is
  better: a BLN run's selected configuration (None without a search), any other
  run's last evaluation. A diverged run has no last model: None."""
  if run.diverged:
    return None
  test = test_metric(metric)
  if run.config.get("norm") == "bln":
    search = read_search(run)
    value = None if search is None else search_value(search, test)
  else:
    value = last_value(run, test)
  if value is None:
    return None
  return value if lower_is_better else -value


def selected(run: Run) -> str | None:
  """The inference configuration a BLN run's search selected (``bbbb``, ...)."""
  search = read_search(run)
  return None if search is None else str(search["selected"]["inference"])
