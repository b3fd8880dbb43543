"""Published results the experiments reproduce, each with its source.

``lnorm report`` matches finished runs to these entries by experiment and config
setting. A value of None marks a result the paper shows only as a curve. Metric
names are the keys of ``metrics.jsonl``; ``test/accuracy`` is derived from
``test/error`` when a run logs only the error.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

LN_PAPER = "Ba, Kiros & Hinton 2016 (Layer Normalization)"
BLN_REPO = "BLN authors' repository logs (docs/experiments.md, sec. 8)"


@dataclasses.dataclass(frozen=True)
class Published:
  experiment: str  # configs/<experiment>.py
  setting: Mapping[str, Any]  # Flat config fields a run must match, e.g. {"norm": "ln"}.
  metric: str  # A metrics.jsonl key.
  value: float | None  # None: the paper gives a curve, not a number.
  source: str  # Paper and table or figure.
  note: str = ""
  paper_epochs: int | None = None  # How long the published run trained, if stated.


def _fig6() -> list[Published]:
  out = []
  for b in (128, 4):
    for n in ("none", "bn", "ln"):
      for metric in ("train/nll", "test/error"):
        out.append(Published(
            "perm_mnist", {"norm": n, "batch_size": b}, metric, None,
            f"{LN_PAPER}, Figure 6", "curves only"))
  return out


def _draw() -> list[Published]:
  src = f"{LN_PAPER}, Figure 4 (sec. 6.4)"
  return [
      Published("draw", {"norm": "none"}, "test/nll_bound", 82.36, src,
                "test variational bound after 200 epochs (nats)", 200),
      # The paper's DRAW LN is on the cell only: configs/draw.py norm=ln_cell.
      Published("draw", {"norm": "ln_cell"}, "test/nll_bound", 82.09, src,
                "test variational bound after 200 epochs (nats)", 200),
      Published("draw", {"norm": "wn"}, "test/nll_bound", None, src, "curve only"),
  ]


def _order_embeddings() -> list[Published]:
  src = f"{LN_PAPER}, Table 2"
  names = ("caption_r1", "caption_r5", "caption_r10", "caption_mean_rank",
           "image_r1", "image_r5", "image_r10", "image_mean_rank")
  values = {"none": (46.6, 79.3, 89.1, 5.2, 37.8, 73.6, 85.7, 7.9),
            "ln": (48.5, 80.6, 89.8, 5.1, 38.9, 74.3, 86.3, 7.6)}
  return [Published("order_embeddings", {"norm": n}, f"test/{m}", v, src,
                    "MSCOCO, mean over 5 folds of 1k test images")
          for n, vs in values.items() for m, v in zip(names, vs)]


def _skip_thoughts() -> list[Published]:
  src = f"{LN_PAPER}, Table 3"
  names = ("sick_pearson", "sick_spearman", "sick_mse", "mr_accuracy", "cr_accuracy",
           "subj_accuracy", "mpqa_accuracy")
  values = {"none": (0.842, 0.767, 0.298, 77.3, 81.8, 92.6, 87.9),
            "ln": (0.854, 0.785, 0.277, 79.5, 82.6, 93.4, 89.0)}
  return [Published("skip_thoughts", {"norm": n}, f"eval/{m}", v, src,
                    "BookCorpus; 'Ours' and 'Ours + LN'")
          for n, vs in values.items() for m, v in zip(names, vs)]


def _bln() -> list[Published]:
  # (experiment, batch size) -> norm -> (test loss, test accuracy).
  table = {
      ("bln_cifar", 25): {"bln": (1.531, 0.455), "bn": (1.575, 0.453), "ln": (1.666, 0.423)},
      ("bln_cifar", 1): {"bln": (1.562, 0.442), "bn": (22.1, 0.109), "ln": (1.734, 0.378)},
      ("bln_imdb", 25): {"bln": (0.496, 0.771), "bn": (0.620, 0.698), "ln": (0.639, 0.711)},
      ("bln_imdb", 1): {"bln": (0.583, 0.731), "bn": (0.979, 0.495), "ln": (0.688, 0.684)},
  }
  epochs = {"bln_cifar": 15, "bln_imdb": 10}
  out = []
  for (experiment, b), rows in table.items():
    for norm, (loss, acc) in rows.items():
      setting = {"norm": norm, "batch_size": b}
      out.append(Published(experiment, setting, "test/nll", loss, BLN_REPO,
                           "test loss, 20% training subset", epochs[experiment]))
      out.append(Published(experiment, setting, "test/accuracy", acc, BLN_REPO,
                           "test accuracy, 20% training subset", epochs[experiment]))
  return out


PUBLISHED: tuple[Published, ...] = tuple(
    _fig6() + _draw() + _order_embeddings() + _skip_thoughts() + _bln())

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
