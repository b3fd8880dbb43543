"""The skip-thoughts model and loss (experiments/skip_thoughts) against NumPy
references written from the equations (tests/references.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import skip_thoughts as config_lib
from experiments.skip_thoughts import task as task_lib
from experiments.skip_thoughts.model import SkipThoughts
from tests import references as ref

V, E, H, T = 23, 5, 7, 6


def build(norm):
  config = config_lib.get_config(f"norm={norm},smoke=true")
  config.model.embed_size, config.model.hidden_size = E, H
  return task_lib.Task(config), task_lib.Task(config).model_for_vocabulary(V)


def examples(seed=0, batch=4):
  rng = np.random.default_rng(seed)
  lengths = rng.integers(1, T + 1, size=(batch, 3)).astype(np.int32)
  lengths[0] = T  # One full-length sentence of each kind.
  tokens = rng.integers(1, V, size=(batch, 3, T)).astype(np.int32)
  tokens[np.arange(T)[None, None, :] >= lengths[..., None]] = 0
  return tokens, lengths


def init(model, tokens, lengths, seed=0):
  shapes = jax.eval_shape(model.init, jax.random.key(seed), tokens, lengths)
  return {"params": ref.random_params(shapes["params"], seed=seed)}


def reference_logits(params, tokens, lengths, norm):
  """Embedding -> GRU encoder (last real state u) -> two GRU decoders started at u
  on the shifted target embeddings -> the shared output layer."""
  p = ref.f64(params)
  embed = p["embed"]["embedding"]
  _, u = ref.gru(np, p["encoder"]["layer_0"], embed[tokens[:, 1]], lengths[:, 1], norm)
  logits = []
  for k, name in ((0, "decoder_previous"), (2, "decoder_next")):
    x = embed[tokens[:, k]]
    x = np.concatenate([np.zeros_like(x[:, :1]), x[:, :-1]], axis=1)
    outs, _ = ref.gru(np, p[name]["layer_0"], x, lengths[:, k], norm, init=u)
    logits.append(ref.dense(outs, p["output"]))
  return np.stack(logits, axis=1), u


@pytest.mark.parametrize("norm", ["none", "ln"])
def test_forward_matches_reference(norm, precise_jax):
  _, model = build(norm)
  tokens, lengths = examples()
  variables = init(model, tokens, lengths)
  logits = model.apply(variables, tokens, lengths)
  expected, u = reference_logits(variables["params"], tokens, lengths, norm)
  np.testing.assert_allclose(logits, expected, atol=2e-5, rtol=1e-5)
  np.testing.assert_allclose(model.apply(variables, tokens[:, 1], lengths[:, 1],
                                         method=SkipThoughts.encode), u, atol=2e-5)
  # Sharp enough to see a decoder that ignores the encoder state.
  p = ref.f64(variables["params"])
  x = p["embed"]["embedding"][tokens[:, 2]]
  x = np.concatenate([np.zeros_like(x[:, :1]), x[:, :-1]], axis=1)
  outs, _ = ref.gru(np, p["decoder_next"]["layer_0"], x, lengths[:, 2], norm)
  ref.assert_differs(logits[:, 1], ref.dense(outs, p["output"]), atol=2e-5,
                     what="a next-sentence decoder started from zeros")


def test_loss_is_the_summed_cross_entropy_of_real_targets(precise_jax):
  tokens, lengths = examples(seed=1)
  logits = np.random.default_rng(2).normal(size=(len(tokens), 2, T, V))
  expected = np.zeros(len(tokens))
  for b in range(len(tokens)):
    for d, k in enumerate((0, 2)):
      log_p = ref.log_softmax(logits[b, d])
      expected[b] -= sum(log_p[t, tokens[b, k, t]] for t in range(lengths[b, k]))
  nll = task_lib.decoder_nll(jnp.asarray(logits, jnp.float32), tokens, lengths)
  np.testing.assert_allclose(nll, expected, rtol=1e-5)
  task, model = build("none")
  weight = np.full(len(tokens), 0.25, np.float32)
  batch = {"tokens": tokens, "length": lengths, "token_weight": weight}
  loss, metrics = task.loss_and_metrics(jnp.asarray(logits, jnp.float32), batch, model)
  # The default: summed over the batch, as Kiros et al.'s training/model.py.
  assert task.config.loss_reduction == "sum"
  np.testing.assert_allclose(loss, expected.sum(), rtol=1e-5)
  np.testing.assert_allclose(metrics["token_nll"], expected * 0.25, rtol=1e-5)
  task.config.loss_reduction = "mean"
  loss, _ = task.loss_and_metrics(jnp.asarray(logits, jnp.float32), batch, model)
  np.testing.assert_allclose(loss, expected.mean(), rtol=1e-5)


@pytest.mark.parametrize("norm", ["none", "ln"])
def test_padding_changes_nothing(norm):
  task, model = build(norm)
  tokens, lengths = examples(seed=3)
  variables = init(model, tokens, lengths, seed=3)
  # Four more padded steps, holding garbage ids: neither the loss nor u may change.
  rng = np.random.default_rng(4)
  longer = np.concatenate([tokens, rng.integers(1, V, size=tokens.shape[:2] + (4,))], -1)
  longer = longer.astype(np.int32)
  batch = lambda t: {"tokens": t, "length": lengths,
                     "token_weight": np.ones(len(t), np.float32)}
  nll_of = lambda t: task.loss_and_metrics(model.apply(variables, t, lengths), batch(t),
                                           model)
  short_nll, long_nll = nll_of(tokens), nll_of(longer)
  np.testing.assert_allclose(long_nll[1]["nll"], short_nll[1]["nll"], rtol=1e-5)
  encode = lambda t: model.apply(variables, t[:, 1], lengths[:, 1],
                                 method=SkipThoughts.encode)
  np.testing.assert_allclose(encode(longer), encode(tokens), atol=1e-6)


@pytest.mark.parametrize("norm", ["none", "ln"])
def test_parameter_count_at_paper_size(norm):
  config = config_lib.get_config(f"norm={norm}")
  vocab, emb, hidden = config.data.vocab_size, config.model.embed_size, config.model.hidden_size
  assert (vocab, emb, hidden) == (20000, 620, 2400)
  model = task_lib.Task(config).model_for_vocabulary(vocab)
  shapes = jax.eval_shape(model.init, jax.random.key(0),
                          *task_lib.Task(config).model_inputs(
                              task_lib.placeholder_examples(2, config.data.max_words)))
  count = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(shapes["params"]))
  # W_x [E, 3H] and W_h [H, 3H]; the plain GRU has biases [3H], the LN-GRU four
  # LNs with gain and bias over 2H, H, 2H and H instead.
  gru = emb * 3 * hidden + hidden * 3 * hidden + (3 * hidden if norm == "none"
                                                   else 2 * 6 * hidden)
  expected = vocab * emb + 3 * gru + hidden * vocab + vocab
  assert count == expected
  assert count == (125_673_600 if norm == "none" else 125_738_400)


def test_encode_sentences_keeps_order_and_ignores_batch_padding(precise_jax):
  _, model = build("ln")
  tokens, lengths = examples()
  params = init(model, tokens, lengths)["params"]
  vocab = task_lib.text.Vocabulary.from_counts({f"w{i}": 1 for i in range(V)}, V - 2,
                                               specials=(task_lib.text.EOS,))
  fn = jax.jit(lambda p, t, l: model.apply({"params": p}, t, l, method=SkipThoughts.encode))
  long = [f"w{i}" for i in range(20)]  # Forces a 32-step padded batch.
  sentences = [["w3", "w4"], long, ["unseen", "w5", "w6"]]
  together = task_lib.encode_sentences(fn, params, vocab, sentences)
  for i, sentence in enumerate(sentences):
    alone = task_lib.encode_sentences(fn, params, vocab, [sentence])
    np.testing.assert_allclose(together[i], alone[0], atol=1e-5)
  # The encoder reads the ids then EOS, as in training.
  ids = np.array([vocab.encode(["w3", "w4"]) + [2]], np.int32)
  np.testing.assert_allclose(together[0], fn(params, ids, np.array([3]))[0], atol=1e-5)


def test_word_embedding_starts_symmetric_about_zero():
  """Kiros's norm_weight: U(-0.1, 0.1). flax's uniform(scale) would be [0, scale)."""
  _, model = build("ln")
  tokens, lengths = examples()
  table = np.asarray(model.init(jax.random.key(0), tokens, lengths)["params"]["embed"]["embedding"])
  assert table.min() < -0.09 and table.max() > 0.09 and np.abs(table).max() <= 0.1
  assert abs(table.mean()) < 0.02
