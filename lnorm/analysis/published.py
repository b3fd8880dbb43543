"""Published results the experiments reproduce, each with its source: declared in
each experiment's spec (``lnorm.analysis.specs``), read here.

``lnorm report`` matches finished runs to these entries by experiment and config
setting. A value of None marks a result the paper shows only as a curve. Metric
names are the keys of ``metrics.jsonl``; ``test/accuracy`` is derived from
``test/error`` when a run logs only the error.
"""

from __future__ import annotations

from typing import Any, Mapping

from lnorm.analysis import specs

Published = specs.Published
PUBLISHED: tuple[Published, ...] = specs.published()

#: The training examples (train + validation) of each full dataset: fewer means a run
#: saw partial data.
FULL_TRAIN_EXAMPLES = {
    "mnist": 60000,
    "binarized_mnist": 60000,
    "cifar10": 50000,
    "imdb": 25000,
}


def published_for(experiment: str, config: Mapping[str, Any]) -> list[Published]:
  """The entries whose experiment and setting a run's flat config matches."""
  return [p for p in PUBLISHED if p.experiment == experiment
          and all(str(config.get(k)) == str(v) for k, v in p.setting.items())]


def metric_value(record: Mapping[str, Any], metric: str) -> float | None:
  """``record[metric]``, deriving accuracy from error (and back) when needed."""
  value = record.get(metric)
  if isinstance(value, (int, float)):
    return float(value)
  split, _, name = metric.partition("/")
  twins = {"accuracy": "error", "error": "accuracy"}
  twin = record.get(f"{split}/{twins.get(name, '')}")
  if name in twins and isinstance(twin, (int, float)):
    return 1.0 - float(twin)
  if name == "nll" and isinstance(record.get(f"{split}/loss"), (int, float)):
    return float(record[f"{split}/loss"])
  return None
