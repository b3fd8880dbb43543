"""The skip-thoughts sentence encoder with and without the EOS token: Kiros et al.'s
evaluation appends it for SICK only (experiments/skip_thoughts/task.py, append_eos)."""

import jax
import numpy as np

from experiments.skip_thoughts import task as task_lib
from experiments.skip_thoughts.model import SkipThoughts
from lnorm.data import books
from tests.test_skip_thoughts import V, build, examples, init


def _setup():
  _, model = build("ln")
  tokens, lengths = examples()
  params = init(model, tokens, lengths)["params"]
  vocab = task_lib.text.Vocabulary.from_counts({f"w{i}": 1 for i in range(V)}, V - 2,
                                               specials=(task_lib.text.EOS,))
  return model, params, vocab


def test_the_encoder_reads_eos_only_when_asked(precise_jax):
  model, params, vocab = _setup()
  fn = jax.jit(lambda p, t, l: model.apply({"params": p}, t, l, method=SkipThoughts.encode))
  sentences = [["w3", "w4"], ["w5", "unseen", "w6", "w7"]]
  with_eos = task_lib.encode_sentences(fn, params, vocab, sentences)
  without = task_lib.encode_sentences(fn, params, vocab, sentences, append_eos=False)
  for i, sentence in enumerate(sentences):
    ids = vocab.encode(sentence)
    np.testing.assert_allclose(
        with_eos[i], fn(params, np.array([ids + [books.EOS_ID]]), np.array([len(ids) + 1]))[0],
        atol=1e-5)
    np.testing.assert_allclose(
        without[i], fn(params, np.array([ids]), np.array([len(ids)]))[0], atol=1e-5)
  assert not np.allclose(with_eos, without)


def test_bag_of_words_is_the_mean_word_embedding_either_way(precise_jax):
  model, params, vocab = _setup()
  encode = task_lib.params_encoder(model, params, vocab, "bow")
  sentences = [["w3", "w4"], ["w5", "w6", "w7"]]
  table = np.asarray(params["embed"]["embedding"])
  expected = [table[vocab.encode(s)].mean(axis=0) for s in sentences]
  np.testing.assert_allclose(encode(sentences), expected, atol=1e-6)
  np.testing.assert_allclose(encode(sentences, append_eos=False), expected, atol=1e-6)
