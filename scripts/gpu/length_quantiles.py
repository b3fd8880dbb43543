"""The real data's sequence lengths, as the GPU check's timed batches draw them.

    LNORM_DATA_DIR=/path/to/data python scripts/gpu/length_quantiles.py

For each recurrent experiment and each of its variable-length features, the deciles
(0, 10%, ..., 100%) of the training split's lengths after the config's padding and
cutting, printed as the ``TimedLengths`` lines its spec (experiments/<name>/spec.py,
``GpuCheck.timed_lengths``) holds. Where a corpus is not at hand it reads the
stand-in lnorm has for it, and says so: the attentive reader's CNN corpus by the
Gutenberg books' cloze questions (``cbt_books``, passages of 4 sentences),
skip-thoughts' BookCorpus by the same books, order-embeddings' COCO training captions
by the Karpathy split's ``testall`` captions (the image features are not needed).
"""

from __future__ import annotations

import os
import sys

import numpy as np

from lnorm import config as config_lib
from lnorm.data import text
from lnorm.training import process

#: experiment -> (config argument string, dotted overrides, the length features: padded
#: feature -> its lengths' feature, what the data are).
SOURCES = {
    "attentive_reader": (
        "scale=cpu", {"data.max_passage_tokens": "400", "data.max_question_tokens": "100",
                      "data.vocab_size": "50000"},
        {"passage": "passage_length", "question": "question_length"},
        "the Gutenberg books' cloze questions (cbt_books, 4-sentence passages): the CNN "
        "corpus is not here"),
    "handwriting": ("", {}, {"strokes": "length", "text": "text_length"}, "IAM-OnDB"),
    "skip_thoughts": ("", {}, {"tokens": "length"},
                      "the 17 Gutenberg books: BookCorpus is not here"),
    "bln_imdb": ("", {"data.source": "files"}, {"tokens": "length"}, "IMDB"),
}
DECILES = np.linspace(0.0, 1.0, 11)


def deciles(lengths: np.ndarray) -> tuple[int, ...]:
  return tuple(int(round(q)) for q in np.quantile(lengths.ravel(), DECILES))


def from_task(experiment: str) -> dict[str, tuple[int, tuple[int, ...]]]:
  """padded feature -> (its padded length, the deciles of its lengths) of the training
  split as the experiment's task loads it."""
  # pylint: disable=g-import-not-at-top
  from lnorm.training import assembly
  args, overrides, features, _ = SOURCES[experiment]
  config = config_lib.load_config(f"{config_lib.CONFIGS_DIR / experiment}.py:{args}")
  config_lib.apply_overrides(config, overrides)
  task = assembly.check(config)
  split = task.load_data().splits[task.train_split()]
  return {feature: (int(split[feature].shape[-1] if split[feature].ndim == split[length].ndim + 1
                        else split[feature].shape[split[length].ndim]),
                    deciles(split[length]))
          for feature, length in features.items()}


def coco_captions(data_dir: str) -> dict[str, tuple[int, tuple[int, ...]]]:
  """The captions of the Karpathy split's 5,000 test images, tokenised as the loader
  does (``lnorm.data.text.tokenize``), padded to the longest as ``max_length=0`` pads."""
  path = os.path.join(data_dir, "coco_captions", "testall_caps.txt")
  with open(path) as f:
    lengths = np.array([len(text.tokenize(line)) for line in f if line.strip()])
  return {"captions": (int(lengths.max()), deciles(lengths))}


def main() -> int:
  process.set_up()
  data_dir = os.environ.get("LNORM_DATA_DIR")
  if not data_dir:
    print("length_quantiles.py: set LNORM_DATA_DIR to the folder holding the corpora.",
          file=sys.stderr)
    return 2
  found = {name: from_task(name) for name in SOURCES}
  found["order_embeddings"] = coco_captions(data_dir)
  notes = {**{k: v[3] for k, v in SOURCES.items()},
           "order_embeddings": "COCO's testall captions: the training captions are not here"}
  lengths_of = {"order_embeddings": {"captions": "caption_length"},
                **{k: v[2] for k, v in SOURCES.items()}}
  for experiment, features in found.items():
    print(f"# {experiment}: {notes[experiment]}")
    for feature, (padded, q) in features.items():
      print(f'TimedLengths("{feature}", "{lengths_of[experiment][feature]}", {q}, '
            f"padded={padded}),")
  return 0


if __name__ == "__main__":
  sys.exit(main())
