"""The BLN claims at the end of training, under the BLN paper's own protocol.

The headline verdicts compare each seed's best held-out value over its epochs, with
BLN evaluated as trained (population statistics, ``pppp``). The BLN paper reports
instead the model after the last epoch, BLN under the inference configuration that a
search over its 16 selects (Algorithm 2; the authors selected on test, lnorm on
validation). With a run's ``bln_search.json`` (``lnorm bln-search``, which the
benchmark runs for every BLN member) this module gives the verdict that protocol
leads to: BLN's selected configuration against BN's or LN's last evaluation.
"""

from __future__ import annotations

import collections
import json
import math
import os
from typing import Mapping, Sequence

from lnorm.analysis import claims
from lnorm.analysis import compare
from lnorm.analysis.runs import Run, lower_is_better
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


def _test_metric(metric: str) -> str:
  return "test/" + metric.partition("/")[2]


def verdict_line(runs: Sequence[Run], experiment: str, claim_text: str, against: str,
                 where: Mapping[str, str], metric: str) -> str:
  """One line: the verdict on "BLN beats ``against``" at the end of training, BLN
  under its selected inference configuration."""
  # A diverged run has no last model to search or to compare.
  finished = [r for r in claims.finished_runs(runs, experiment)
              if not r.diverged and compare.matches(r.config, where)]
  bln = [r for r in finished if r.config.get("norm") == "bln"]
  theirs = [r for r in finished if r.config.get("norm") == against]
  searches = [s for s in map(read_search, bln) if s is not None]
  head = (f"- {claim_text}, at the end of training under BLN's inference search "
          f"({experiment}, bln against {against})")
  if not searches or not theirs:
    return f"{head}: **not run yet** (no BLN run with {BLN_SEARCH_FILE}, or no {against} run)."
  ours = [search_value(s, metric) for s in searches]
  others = [last_value(r, metric) for r in theirs]
  verdict = claims.values_verdict([v for v in ours if v is not None],
                                  [v for v in others if v is not None],
                                  lower_is_better(metric), "last values")
  chosen = collections.Counter(s["selected"]["inference"] for s in searches)
  chosen_text = ", ".join(f"{c} {n}/{len(searches)}" for c, n in chosen.most_common())
  line = (f"{head}: **{verdict.verdict}**: {metric}, BLN's configuration selected on "
          f"validation ({chosen_text}) against {against}'s last epoch: {verdict.why}")
  test = _test_metric(metric)
  ours_test = [v for v in (search_value(s, test) for s in searches) if v is not None]
  others_test = [v for v in (last_value(r, test) for r in theirs) if v is not None]
  if ours_test and others_test:
    line += (f"; {test}: BLN {claims.mean_interval(ours_test).text('.4g')}, "
             f"{against} {claims.mean_interval(others_test).text('.4g')}")
  unsearched = len(bln) - len(searches)
  if unsearched:
    line += (f" ({unsearched} BLN seed(s) without a search: `lnorm bln-search "
             "--workdir RUN`)")
  return line + "."
