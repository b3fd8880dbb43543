"""The sentence-embedding benchmarks of skip-thoughts and SentEval, in their public
files: MR, CR, SUBJ, MPQA (two files of sentences, one per class), TREC (question
classification) and SICK (semantic relatedness).

Layout under the data directory (``<data_dir>/senteval/`` or ``<data_dir>/``):

  MR    rt-polarity.pos, rt-polarity.neg      one sentence per line
  CR    custrev.pos, custrev.neg
  SUBJ  subj.subjective, subj.objective
  MPQA  mpqa.pos, mpqa.neg
  TREC  TREC.train, TREC.test                 '<COARSE>:<fine> <question>'
  SICK  SICK_train.txt, SICK_trial.txt,       tab-separated with a header: pair_ID,
        SICK_test_annotated.txt               sentence_A, sentence_B, relatedness_score,
                                              entailment_judgment (also under sick/)

Sentences come back as token lists, lower-cased, split by ``tokenize``: on
whitespace by default, as SentEval (the benchmark files are tokenised), or as Kiros
et al.'s encoder tokenises (:func:`kiros_tokenizer`: NLTK's punkt and
``word_tokenize``).

Two ways of reading the binary tasks' lines, one per protocol
(experiments.skip_thoughts.sentence_eval):

* ``senteval_rows=True``, SentEval's ``loadFile``: Latin-1 always, split by
  ``str.splitlines()`` (which also breaks at \x85, \x0c, \x1c-\x1e of Latin-1 text),
  empty rows kept. The rows are SentEval's: MR 10,685, CR 3,775, SUBJ 10,021, MPQA
  10,606 on the public files.
* ``senteval_rows=False``: UTF-8 (Latin-1 when not), split at ``\n`` only, empty
  lines skipped: the sentences as the files hold them (MR 10,662, CR 3,771, SUBJ
  10,000, MPQA 10,603), as Kiros et al.'s loaders read them.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Callable, Sequence

import numpy as np

from lnorm.data import core
from lnorm.data import locate

#: task -> (file of label 1, file of label 0).
BINARY_FILES = {
    "mr": ("rt-polarity.pos", "rt-polarity.neg"),
    "cr": ("custrev.pos", "custrev.neg"),
    "subj": ("subj.subjective", "subj.objective"),
    "mpqa": ("mpqa.pos", "mpqa.neg"),
}
TREC_FILES = {"train": "TREC.train", "test": "TREC.test"}
TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
SICK_FILES = {"train": "SICK_train.txt", "trial": "SICK_trial.txt",
              "test": "SICK_test_annotated.txt"}
SICK_HEADER = ("pair_ID", "sentence_A", "sentence_B", "relatedness_score")
TASKS = (*BINARY_FILES, "trec", "sick")

Sentence = list[str]


@dataclasses.dataclass
class Classification:
  sentences: list[Sentence]
  labels: np.ndarray  # int32 [N]


@dataclasses.dataclass
class Relatedness:
  first: list[Sentence]
  second: list[Sentence]
  scores: np.ndarray  # float64 [N], 1 to 5


def tokens(line: str, lowercase: bool = True) -> Sentence:
  return (line.lower() if lowercase else line).split()


#: Where NLTK keeps the trained English punkt model (``nltk.download('punkt_tab')``).
PUNKT_MODEL = "tokenizers/punkt_tab/english/"
_log = logging.getLogger(__name__)


def kiros_tokenizer(split_sentences: Callable[[str], list[str]] | None = None
                    ) -> Callable[[str], Sentence]:
  """Kiros et al.'s tokenisation (``skipthoughts.preprocess``): NLTK's punkt sentence
  splitter, then ``word_tokenize`` on each sentence, then lower-cased (lnorm's
  vocabularies are). ``split_sentences`` (default: punkt) is for tests.

  Punkt's trained English model is a data download (``python -m nltk.downloader
  punkt_tab``), not part of the nltk package. Without it, the untrained
  ``PunktSentenceTokenizer()`` splits the sentences and a warning says so: it knows
  no abbreviations, so "Mr. Smith" becomes the tokens "mr . smith" instead of
  "mr. smith"; every other token is the same. NLTK's word tokenizer is today's
  ``NLTKWordTokenizer``, the Treebank tokenizer of 2015 with a few more rules
  (Unicode quotes, ellipses)."""
  import nltk  # pylint: disable=g-import-not-at-top  (slow to import; Kiros protocol only)
  from nltk.tokenize import punkt  # pylint: disable=g-import-not-at-top
  if split_sentences is None:
    try:
      nltk.data.find(PUNKT_MODEL)
      split_sentences = lambda line: nltk.tokenize.sent_tokenize(line, "english")
    except LookupError:
      _log.warning("NLTK's punkt model (%s) is not installed: sentences are split by the "
                   "untrained punkt splitter, which knows no abbreviations ('mr.' ends a "
                   "sentence). For Kiros et al.'s exact tokens: python -m nltk.downloader "
                   "punkt_tab", PUNKT_MODEL)
      split_sentences = punkt.PunktSentenceTokenizer().tokenize

  def tokenize(line: str) -> Sentence:
    return [w.lower() for s in split_sentences(line)
            for w in nltk.tokenize.word_tokenize(s, preserve_line=True)]

  return tokenize


def _read_lines(path: str) -> list[str]:
  with open(path, "rb") as f:
    data = f.read()
  try:
    content = data.decode("utf-8")
  except UnicodeDecodeError:
    content = data.decode("latin-1")
  # Not splitlines(): Latin-1 text holds \x85 and \x0c, which it also splits on.
  return [line.rstrip("\r") for line in content.split("\n")]


def _senteval_rows(path: str) -> list[str]:
  """SentEval's rows: ``io.open(path, encoding='latin-1').read().splitlines()``."""
  with open(path, "rb") as f:
    return f.read().decode("latin-1").splitlines()


def find(data_dir: str | None, task: str, files: Sequence[str]) -> str:
  """The folder holding all of ``files`` for ``task``, or DatasetNotFoundError."""
  data_dir = core.data_dir(data_dir)
  subdirs = ("sick", "senteval") if task == "sick" else ("senteval",)
  dirs = [d for sub in subdirs for d in locate.search_dirs(data_dir, sub)]
  dirs = list(dict.fromkeys(dirs))
  for d in dirs:
    if all(os.path.isfile(os.path.join(d, f)) for f in files):
      return d
  # Read by `lnorm evaluate`, which takes the folder as --data-dir.
  raise locate.not_found(
      task.upper(), [os.path.join(d, "{" + ",".join(files) + "}") for d in dirs],
      ", ".join(files), data_dir=data_dir, flag="--data-dir <dir>", subdir=subdirs[0])


def read_binary(data_dir: str | None, task: str, *, senteval_rows: bool = True,
                tokenize: Callable[[str], Sentence] = tokens) -> Classification:
  """MR, CR, SUBJ or MPQA: every sentence of both files, label 1 first, in file
  order (see the module docstring for ``senteval_rows``)."""
  if task not in BINARY_FILES:
    raise ValueError(f"Unknown binary task {task!r}; valid: {', '.join(BINARY_FILES)}")
  folder = find(data_dir, task, BINARY_FILES[task])
  sentences, labels = [], []
  for label, name in zip((1, 0), BINARY_FILES[task]):
    path = os.path.join(folder, name)
    if senteval_rows:
      lines = [tokenize(l) for l in _senteval_rows(path)]
    else:
      lines = [tokenize(l) for l in _read_lines(path) if l.strip()]
    if not lines:
      raise core.MalformedDataError(path, "no sentences", "Expected one sentence per line.")
    sentences += lines
    labels += [label] * len(lines)
  return Classification(sentences, np.asarray(labels, np.int32))


def parse_trec_line(line: str, path: str, number: int,
                    tokenize: Callable[[str], Sentence] = tokens) -> tuple[int, Sentence]:
  label, sep, rest = line.partition(":")
  words = rest.split()
  if not sep or label not in TREC_CLASSES or len(words) < 2:
    raise core.MalformedDataError(
        path, f"line {number} is {line[:60]!r}",
        f"Expected '<CLASS>:<fine> <question>' with CLASS one of {', '.join(TREC_CLASSES)}.")
  return TREC_CLASSES.index(label), tokenize(" ".join(words[1:]))


def read_trec(data_dir: str | None, *,
              tokenize: Callable[[str], Sentence] = tokens) -> dict[str, Classification]:
  """TREC's train and test files with the 6 coarse classes (as SentEval)."""
  folder = find(data_dir, "trec", tuple(TREC_FILES.values()))
  out = {}
  for split, name in TREC_FILES.items():
    path = os.path.join(folder, name)
    parsed = [parse_trec_line(l, path, i + 1, tokenize)
              for i, l in enumerate(_read_lines(path)) if l.strip()]
    if not parsed:
      raise core.MalformedDataError(path, "no questions")
    out[split] = Classification([s for _, s in parsed],
                                np.asarray([c for c, _ in parsed], np.int32))
  return out


def read_sick_file(path: str, tokenize: Callable[[str], Sentence] = tokens) -> Relatedness:
  lines = [l for l in _read_lines(path) if l.strip()]
  header = lines[0].split("\t") if lines else []
  if tuple(header[:4]) != SICK_HEADER:
    raise core.MalformedDataError(
        path, f"the header is {lines[0][:80]!r}" if lines else "it is empty",
        "Expected the SICK header: " + "\\t".join(SICK_HEADER) + "\\t...")
  first, second, scores = [], [], []
  for number, line in enumerate(lines[1:], start=2):
    fields = line.split("\t")
    try:
      score = float(fields[3])
    except (IndexError, ValueError):
      raise core.MalformedDataError(path, f"line {number} has no relatedness score "
                                    f"in its 4th tab-separated field: {line[:80]!r}") from None
    if not 1.0 <= score <= 5.0:
      raise core.MalformedDataError(path, f"line {number}: relatedness {score} is not in [1, 5]")
    first.append(tokenize(fields[1]))
    second.append(tokenize(fields[2]))
    scores.append(score)
  if not scores:
    raise core.MalformedDataError(path, "no sentence pairs")
  return Relatedness(first, second, np.asarray(scores, np.float64))


def read_sick(data_dir: str | None, *,
              tokenize: Callable[[str], Sentence] = tokens) -> dict[str, Relatedness]:
  """SICK's train, trial and test pairs."""
  folder = find(data_dir, "sick", tuple(SICK_FILES.values()))
  return {split: read_sick_file(os.path.join(folder, name), tokenize)
          for split, name in SICK_FILES.items()}
