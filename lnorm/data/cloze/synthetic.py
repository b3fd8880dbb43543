"""Synthetic cloze questions (``data.source=synthetic``), for smoke runs only: passages
where the answer is the entity that follows a cue word the question names."""

from __future__ import annotations

from typing import Any

import numpy as np

from lnorm.data import core
from lnorm.data.cloze import dataset
from lnorm.data.cloze import example as ex


def synthetic_examples(num_examples: int, seed: int) -> list[ex.ClozeExample]:
  """Passages of filler words and 3-6 entities, each entity after its own cue word
  ``cueK``; the question names one cue, and its entity is the answer. Attention to
  the cue word solves it."""
  rng = np.random.default_rng([seed, 12])
  filler = [f"w{i}" for i in range(20)]
  out = []
  for _ in range(num_examples):
    n = int(rng.integers(3, 7))
    entities = [ex.entity_marker(k) for k in rng.permutation(10)[:n]]
    cues = [f"cue{k}" for k in rng.permutation(8)[:n]]
    passage = []
    for cue, ent in zip(cues, entities):
      passage += [filler[i] for i in rng.integers(0, 20, rng.integers(1, 5))]
      passage += [cue, ent]
    passage += [filler[i] for i in rng.integers(0, 20, rng.integers(0, 4))]
    k = int(rng.integers(n))
    question = [filler[int(rng.integers(20))], cues[k], ex.PLACEHOLDER, "."]
    out.append(ex.ClozeExample(tuple(passage), tuple(question), entities[k]))
  return out


def load(config: Any, auto: bool) -> core.Dataset:
  del auto
  n = core.option(config, "synthetic_examples", 512)
  seed = core.option(config, "seed", 0)
  splits = {s: synthetic_examples(n if s == "train" else n // 4, seed + i)
            for i, s in enumerate(("train", "validation", "test"))}
  return dataset.build(splits, config, "synthetic",
                       "lnorm.data.cloze.synthetic.synthetic_examples",
                       "SYNTHETIC cue-word cloze questions, for smoke runs only")
