"""Skip-thought vectors on a corpus of books (LN paper sec. 6.3, docs/experiments.md,
sec. 6).

Examples are (previous, current, next) sentences of one book (``lnorm.data.books``).
The loss of an example is the summed token cross-entropy of both decoders over the
real target tokens (words and EOS, never padding); the training loss is its sum over
the batch (``loss_reduction='sum'``, the default: Kiros et al.'s ``training/model.py``
sums the costs over words and sentences, then clips the global norm at 5) or its mean
(``'mean'``, the clip then 64 times looser). Per-example metrics:

* ``nll``: that sum (nats per sentence triple);
* ``token_nll``: ``nll`` times the split's ``token_weight``, whose mean over a split
  is the per-token cross-entropy of both decoders: validation perplexity is
  ``exp(validation/token_nll)``.

The vocabulary is written to ``<workdir>/vocabulary.txt`` at every epoch end (and so
at the end of every run): ``lnorm evaluate`` encodes the benchmark sentences with it
through :meth:`Task.sentence_encoder`, which also gives the two reference encoders
of the issue: ``random`` (the same architecture, untrained) and ``bow`` (the mean of
the trained word embeddings). The training loop runs the same evaluation on the live
encoder every ``periodic_eval_every_steps`` updates (:meth:`Task.periodic_evaluation`).
"""

from __future__ import annotations

import functools
import logging
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments.skip_thoughts import model as model_lib
from experiments.skip_thoughts.model import NEXT, PREVIOUS, SkipThoughts
from lnorm.data import books
from lnorm.data import text
from lnorm.errors import UserError
from lnorm.evaluation import trivial
from lnorm.normalization import PER_EXAMPLE_NORMS
from lnorm.rnn import cell_options, make_gru_cell, masked_mean, sequence_mask
from lnorm.training.task import LOSS_REDUCTIONS, Task as BaseTask
from lnorm.training.train_state import TrainStateInitializer

VOCABULARY_FILE = "vocabulary.txt"
ENCODERS = ("trained", "random", "bow")
#: Sentences encoded per call; lengths are padded up to a multiple of LENGTH_BUCKET,
#: so that a benchmark compiles the encoder a handful of times.
ENCODE_BATCH = 256
LENGTH_BUCKET = 16


class Task(BaseTask):

  norms = ("none",) + PER_EXAMPLE_NORMS
  loss_reductions = LOSS_REDUCTIONS

  def build_model(self, dataset):
    return self.model_for_vocabulary(dataset.info["vocab_size"])

  def model_for_vocabulary(self, vocab_size: int) -> SkipThoughts:
    c = self.config
    cell = make_gru_cell(c.norm, **cell_options(c))
    return SkipThoughts(vocab_size=vocab_size, cell=cell, embed_size=c.model.embed_size,
                        hidden_size=c.model.hidden_size)

  def forward_macs(self, dataset, batch):
    batch_size, _, words = batch["tokens"].shape
    return model_lib.forward_macs(self.config, batch_size, words, dataset.info["vocab_size"])

  def model_inputs(self, batch):
    return batch["tokens"], batch["length"]

  def loss_and_metrics(self, logits, batch, model):
    del model  # Unused.
    nll = decoder_nll(logits, batch["tokens"], batch["length"])
    return self.reduce_loss(nll), {"nll": nll, "token_nll": nll * batch["token_weight"]}

  def trivial_baseline(self, dataset):
    """A unigram model of the decoders' targets (the previous and next sentences'
    words, OOV and EOS, as the decoders predict them) counted on the training triples,
    add-one smoothed over the model's output ids: ``nll`` summed over both decoders'
    targets per triple and ``token_nll`` per target token, as the run logs them."""
    train = dataset.splits[self.train_split()]
    targets, real = decoder_targets(train)
    log_p = trivial.unigram(targets[real], dataset.info["vocab_size"])
    values = {}
    for split in trivial.held_out_splits(dataset, self.train_split()):
      arrays = dataset.splits[split]
      targets, real = decoder_targets(arrays)
      nll = -np.sum(np.where(real, log_p[targets], 0.0), axis=(1, 2))
      values[f"{split}/nll"] = float(np.mean(nll))
      values[f"{split}/token_nll"] = float(np.mean(nll * arrays["token_weight"]))
    return trivial.record("unigram (training targets, add-one)", values)

  def sentence_encoder(self, workdir: str, kind: str = "trained"):
    """``(encode, step)``: ``encode(token lists) -> [N, D]`` float32 features of the
    run in ``workdir`` (its latest checkpoint and vocabulary), and the checkpoint's
    step. ``kind``: ``trained`` (the skip-thought vectors), ``random`` (the
    initialisation, no checkpoint read) or ``bow`` (mean trained word embedding)."""
    if kind not in ENCODERS:
      raise UserError(f"Unknown encoder {kind!r}; valid: {', '.join(ENCODERS)}.")
    vocab = load_vocabulary(workdir)
    model = self.model_for_vocabulary(len(vocab))
    examples = placeholder_examples(self.config.batch_size, self.config.data.max_words)
    initializer = TrainStateInitializer(self.config, self, model)
    if kind == "random":
      state, step = initializer.from_scratch(examples), 0
    else:
      state, step = initializer.from_checkpoint(
          workdir, examples,
          "train it first with `lnorm train`, or evaluate --encoder random")
    return params_encoder(model, jax.device_get(state.params), vocab, kind), step

  def periodic_evaluation(self, run, state, workdir: str, step: int) -> dict[str, float]:
    """The loop calls this every ``periodic_eval_every_steps`` updates (the paper
    evaluated every 50k): the training encoder on ``config.sentence_eval.tasks``, as
    ``eval/<task>_<metric>``, the keys ``lnorm evaluate`` writes."""
    del workdir, step
    sentence_eval = self.sentence_evaluation()
    c = self.config
    vocab = text.Vocabulary(list(run.dataset.info["vocabulary"]))
    encode = params_encoder(run.model, jax.device_get(state.params), vocab, "trained")
    scores = sentence_eval.evaluate_encoder(
        encode, tuple(c.sentence_eval.tasks),
        c.sentence_eval.data_dir or c.data.get("data_dir"),
        folds=c.sentence_eval.folds, inner_folds=c.sentence_eval.inner_folds,
        log=logging.info)
    return {f"eval/{k}": v for k, v in scores.items()}

  def sentence_evaluation(self):
    # Imported when asked for: it needs scikit-learn, which training does not.
    from experiments.skip_thoughts import sentence_eval  # pylint: disable=g-import-not-at-top
    return sentence_eval

  def end_of_epoch(self, run, state, workdir, step, writer):
    del state, step, writer
    if jax.process_index() == 0:
      save_vocabulary(run.dataset.info["vocabulary"], workdir)
    return None


def params_encoder(model: SkipThoughts, params, vocab: text.Vocabulary, kind: str):
  """``encode(token lists) -> [N, D]`` with ``params``: the encoder's final state
  (``trained`` or ``random``, the same computation) or, for ``bow``, the mean
  embedding of the words."""
  if kind == "bow":
    # The words only, without the EOS the encoder reads last (if appended).
    fn = jax.jit(lambda p, tokens, lengths: masked_mean(
        p["embed"]["embedding"][tokens],
        sequence_mask(lengths, tokens.shape[1]) & (tokens != books.EOS_ID)))
  else:
    fn = jax.jit(lambda p, tokens, lengths: model.apply(
        {"params": p}, tokens, lengths, method=SkipThoughts.encode))
  return functools.partial(encode_sentences, fn, params, vocab)


def decoder_nll(logits, tokens, lengths):
  """Summed cross-entropy of both decoders over the real targets: [B].

  ``logits [B, 2, T, V]`` for the previous and next sentence of ``tokens [B, 3, T]``
  (word ids then EOS, zero-padded) with ``lengths [B, 3]``.
  """
  targets = jnp.stack([tokens[:, PREVIOUS], tokens[:, NEXT]], axis=1)
  real = jnp.stack([sequence_mask(lengths[:, PREVIOUS], tokens.shape[-1]),
                    sequence_mask(lengths[:, NEXT], tokens.shape[-1])], axis=1)
  ce = optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), targets)
  return jnp.sum(jnp.where(real, ce, 0.0), axis=(1, 2))


def decoder_targets(arrays) -> tuple[np.ndarray, np.ndarray]:
  """``(ids [N, 2, T], real [N, 2, T])``: the previous and next sentences of a split's
  triples, which the two decoders predict, and which of their positions are real
  targets (words and EOS, not padding): :func:`decoder_nll`'s targets, in NumPy."""
  tokens, lengths = arrays["tokens"], arrays["length"]
  targets = tokens[:, (PREVIOUS, NEXT)]
  real = np.arange(tokens.shape[-1]) < lengths[:, (PREVIOUS, NEXT), None]
  return targets, real


def save_vocabulary(words, workdir: str) -> str:
  path = os.path.join(workdir, VOCABULARY_FILE)
  tmp = path + ".tmp"
  text.Vocabulary(list(words)).save(tmp)
  os.replace(tmp, path)
  return path


def load_vocabulary(workdir: str) -> text.Vocabulary:
  path = os.path.join(workdir, VOCABULARY_FILE)
  if not os.path.exists(path):
    raise UserError(f"{path} does not exist: it is written at every epoch end of "
                    "`lnorm train`; let the run reach one (or its max_steps).")
  try:
    return text.Vocabulary.load(path)
  except ValueError as e:
    raise UserError(str(e)) from e


def encode_sentences(fn, params, vocab: text.Vocabulary, sentences,
                     append_eos: bool = True) -> np.ndarray:
  """Token lists -> ``fn(params, ids, lengths)`` features, in the input order.

  Each sentence is its word ids then EOS, as the encoder read them in training;
  ``append_eos=False`` leaves the EOS out (Kiros et al.'s evaluation appends it for
  SICK only).
  Sentences are encoded in order of length, in batches of ENCODE_BATCH padded to a
  multiple of LENGTH_BUCKET steps; the padding never reaches the features.
  """
  ids = [vocab.encode(s) + [books.EOS_ID] * append_eos for s in sentences]
  order = np.argsort([len(s) for s in ids], kind="stable")
  out = None
  for start in range(0, len(ids), ENCODE_BATCH):
    chosen = order[start:start + ENCODE_BATCH]
    width = -(-max(len(ids[i]) for i in chosen) // LENGTH_BUCKET) * LENGTH_BUCKET
    tokens = np.zeros((ENCODE_BATCH, width), np.int32)
    lengths = np.ones(ENCODE_BATCH, np.int32)  # Rows past the data: a lone pad.
    for row, i in enumerate(chosen):
      tokens[row, :len(ids[i])] = ids[i]
      lengths[row] = len(ids[i])
    features = np.asarray(fn(params, tokens, lengths))[:len(chosen)]
    if out is None:
      out = np.zeros((len(ids), features.shape[-1]), np.float32)
    out[chosen] = features
  return out if out is not None else np.zeros((0, 0), np.float32)


def placeholder_examples(num_examples: int, max_words: int) -> dict[str, np.ndarray]:
  """Examples of the data's shapes (every sentence a lone EOS): what initialises a
  model, or a checkpoint's restore target, without reading the corpus."""
  tokens = np.zeros((num_examples, 3, max_words), np.int32)
  tokens[:, :, 0] = books.EOS_ID
  return {"tokens": tokens, "length": np.ones((num_examples, 3), np.int32),
          "token_weight": np.ones(num_examples, np.float32)}
