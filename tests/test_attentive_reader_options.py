"""The attentive reader's options as the authors ran it (experiments/attentive_reader):
the authors' initialisation and its reseeding quirk, dropout on the word embeddings,
the output softmax over the whole vocabulary with the unrestricted argmax, and the
restriction to listed candidates; each against a hand-computed case."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import attentive_reader as config_lib
from experiments.attentive_reader import model as model_lib
from experiments.attentive_reader import task as task_lib
from lnorm.data.cloze import ENTITY_OFFSET
from lnorm.errors import ConfigError
from tests.test_attentive_reader import batch, init, inputs_of

V, ENT, B = 30, 6, 4


def task_and_model(embed=6, hidden=6, attention=6, readout=7, norm="none", **fields):
  config = config_lib.get_config(f"norm={norm},smoke=true")
  for k, v in fields.items():
    setattr(config.model, k, v)
  task = task_lib.Task(config)
  model = task.model_for(V, ENT, ENTITY_OFFSET).clone(
      embed_size=embed, hidden_size=hidden, attention_size=attention, readout_size=readout)
  return task, model


def params_of(model, seed=0):
  tokens = np.zeros((2, 5), np.int32)
  lengths = np.array([5, 3], np.int32)
  return jax.tree.map(np.asarray, model.init({"params": jax.random.key(seed)}, tokens,
                                             lengths, tokens, lengths)["params"])


def singular_values(w):
  return np.linalg.svd(w, compute_uv=False)


def gate_blocks(w):
  return np.split(w, 4, axis=1)


def assert_glorot(w, fan_in, fan_out):
  bound = np.sqrt(6.0 / (fan_in + fan_out))
  assert np.abs(w).max() <= bound and np.abs(w).max() > bound / 2


def test_authors_initialisation():
  _, model = task_and_model()
  p = params_of(model)
  for lstm in ("passage_lstm", "question_lstm"):
    layer = p[lstm]["layer_0"]
    # W_h and (E = H) W_x: every gate block 0.05 x an orthogonal matrix.
    for kernel in (layer["hidden_proj"]["kernel"], layer["input_proj"]["kernel"]):
      for block in gate_blocks(kernel):
        np.testing.assert_allclose(singular_values(block), 0.05, rtol=1e-5)
      assert not np.allclose(gate_blocks(kernel)[0], gate_blocks(kernel)[1])
    np.testing.assert_array_equal(layer["bias"], 0.0)
    np.testing.assert_array_equal(p[f"{lstm}_initial_h"], 0.0)
  # Square W_d and V: 0.05 x orthogonal; W_q (ortho=False in the authors' code),
  # the readout, the logits and the embedding: Glorot-uniform; w: U(+-1/sqrt(A)).
  for name in ("att_passage", "att_bilinear"):
    np.testing.assert_allclose(singular_values(p[name]["kernel"]), 0.05, rtol=1e-5)
  assert_glorot(p["att_question"]["kernel"], 6, 6)
  for name in ("out_context", "out_question"):
    assert_glorot(p[name]["kernel"], 6, 7)
  assert "out_mean" not in p
  _, earlier = task_and_model(readout_description_skip=True)
  assert_glorot(params_of(earlier)["out_mean"]["kernel"], 6, 7)
  assert_glorot(p["logit"]["kernel"], 7, ENT)
  assert_glorot(p["embed"]["embedding"], V, 6)
  assert np.abs(p["att_score"]["kernel"]).max() <= 1 / np.sqrt(6)
  np.testing.assert_array_equal(p["att_passage"]["bias"], 0.0)


def test_authors_input_blocks_are_glorot_when_not_square():
  _, model = task_and_model(embed=4)
  kernel = params_of(model)["passage_lstm"]["layer_0"]["input_proj"]["kernel"]
  assert kernel.shape == (4, 24)
  for block in gate_blocks(kernel):  # Each [4, 6] block on its own: fans 4 and 6.
    assert_glorot(block, 4, 6)


def test_identical_blocks_reproduce_the_authors_reseeding():
  _, model = task_and_model(init_identical_blocks=True)
  p = params_of(model)
  w_h = p["passage_lstm"]["layer_0"]["hidden_proj"]["kernel"]
  for block in gate_blocks(w_h):
    np.testing.assert_array_equal(block, gate_blocks(w_h)[0])
  # One key for every draw: both LSTMs start equal, and every square matrix is the
  # same 0.05 x Q, whatever the seed.
  np.testing.assert_array_equal(p["question_lstm"]["layer_0"]["hidden_proj"]["kernel"], w_h)
  np.testing.assert_array_equal(p["att_bilinear"]["kernel"], gate_blocks(w_h)[0])
  np.testing.assert_array_equal(params_of(model, seed=5)["att_passage"]["kernel"],
                                p["att_passage"]["kernel"])
  np.testing.assert_allclose(singular_values(w_h[:, :6]), 0.05, rtol=1e-5)


def test_lnorm_initialisation_restores_the_earlier_choice():
  _, model = task_and_model(init="lnorm", embed=16)
  p = params_of(model)
  assert 0.007 < p["embed"]["embedding"].std() < 0.013  # N(0, 0.01^2), 480 draws
  for block in gate_blocks(p["passage_lstm"]["layer_0"]["hidden_proj"]["kernel"]):
    np.testing.assert_allclose(singular_values(block), 1.0, rtol=1e-5)


@pytest.mark.parametrize("fields, problem", [
    ({"init": "authors", "recurrent_init": "orthogonal"}, "applies to model.init='lnorm'"),
    ({"init": "lnorm", "init_identical_blocks": True}, "needs model.init='authors'"),
    ({"init": "glorot"}, "Valid choices: authors, lnorm"),
])
def test_conflicting_initialisation_fields_are_config_errors(fields, problem):
  config = config_lib.get_config("norm=none,smoke=true")
  fields = dict(fields)
  config.recurrent_init = fields.pop("recurrent_init", config.recurrent_init)
  for k, v in fields.items():
    setattr(config.model, k, v)
  with pytest.raises(ConfigError, match=problem):
    task_lib.Task(config)


# --- dropout on the word embeddings ---------------------------------------------------------


def test_embedding_dropout_zeroes_or_doubles_each_entry():
  _, model = task_and_model(embed=64)
  variables = {"params": params_of(model)}
  tokens = np.arange(V, dtype=np.int32).reshape(2, 15)
  table = variables["params"]["embed"]["embedding"][tokens]
  rngs = {"dropout": jax.random.key(1)}
  dropped = np.asarray(model.apply(variables, tokens, train=True, rngs=rngs,
                                   method=model_lib.AttentiveReader.embed_tokens))
  kept = dropped != 0
  np.testing.assert_allclose(dropped[kept], 2.0 * table[kept], rtol=1e-6)  # 1 / (1 - 0.5)
  assert 0.45 < kept.mean() < 0.55  # 1,920 entries, each kept with probability 0.5
  evaluated = model.apply(variables, tokens, train=False,
                          method=model_lib.AttentiveReader.embed_tokens)
  np.testing.assert_array_equal(evaluated, table)


@pytest.mark.parametrize("embed_dropout", [0.0, 0.5])
def test_embedding_dropout_reaches_the_logits(embed_dropout):
  _, model = task_and_model(dropout=0.0, embed_dropout=embed_dropout)
  model = model.clone(permute_in_training=False)
  b = batch()
  variables = init(model, inputs_of(b))
  trained = model.apply(variables, *inputs_of(b), train=True,
                        rngs={"dropout": jax.random.key(2)})
  evaluated = model.apply(variables, *inputs_of(b))
  assert np.allclose(trained, evaluated, atol=1e-6) == (embed_dropout == 0.0)


# --- the output softmax and the restriction ---------------------------------------------


def test_unpermute_and_entity_outputs_by_hand():
  logits = jnp.arange(7.0)[None]
  # Entities start at output 2; the new name of original entity k is perm[k].
  out = model_lib.unpermute(logits, jnp.array([[2, 0, 1]]), first=2)
  np.testing.assert_array_equal(out, [[0, 1, 4, 2, 3, 5, 6]])
  mask = model_lib.entity_outputs(jnp.array([[True, False, True]]), 7, first=2)
  np.testing.assert_array_equal(mask, [[False, False, True, False, True, False, False]])


def log_softmax(x):
  x = np.asarray(x, np.float64)
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_vocabulary_softmax_with_the_unrestricted_argmax():
  task, model = task_and_model(answer_vocabulary="vocabulary")
  assert params_of(model)["logit"]["kernel"].shape == (7, V)  # The whole vocabulary.
  passage = np.zeros((2, 4), np.int32)
  passage[0, :3] = [ENTITY_OFFSET + 1, 10, ENTITY_OFFSET + 4]  # entities 1 and 4
  passage[1, :2] = [ENTITY_OFFSET + 0, 11]  # entity 0 only
  logits = np.zeros((2, V), np.float32)
  logits[0, [ENTITY_OFFSET + 1, ENTITY_OFFSET + 4, 20]] = [1.0, 2.0, 9.0]  # word 20 wins
  logits[1, [ENTITY_OFFSET + 0, ENTITY_OFFSET + 3]] = [-3.0, 5.0]  # entity 3: not in passage
  b = {"passage": passage, "answer": np.array([4, 0], np.int32)}
  loss, metrics = task.loss_and_metrics(jnp.asarray(logits), b, model)
  # The answer is the word id of its marker, over all V outputs.
  nll = -log_softmax(logits)[[0, 1], ENTITY_OFFSET + b["answer"]]
  np.testing.assert_allclose(metrics["nll"], nll, rtol=1e-6)
  np.testing.assert_allclose(loss, nll.mean(), rtol=1e-6)
  np.testing.assert_array_equal(metrics["error"], [0.0, 0.0])  # restricted (default)
  task.config.model.restrict_to_candidates = False  # the authors' error
  _, metrics = task.loss_and_metrics(jnp.asarray(logits), b, model)
  np.testing.assert_array_equal(metrics["error"], [1.0, 1.0])


@pytest.mark.parametrize("answer_vocabulary", ["entities", "vocabulary"])
def test_listed_candidates_restrict_the_prediction(answer_vocabulary):
  task, model = task_and_model(answer_vocabulary=answer_vocabulary)
  first = model_lib.first_entity_output(answer_vocabulary, ENTITY_OFFSET)
  logits = np.zeros((1, ENT if first == 0 else V), np.float32)
  logits[0, first + np.array([0, 2, 5])] = [1.0, 3.0, 2.0]
  # Entity 2 scores highest, and it is in the passage, but it is no candidate.
  b = {"passage": np.array([[ENTITY_OFFSET + 2, ENTITY_OFFSET + 5]], np.int32),
       "answer": np.array([5], np.int32),
       "candidate_mask": np.array([[True, True, False, False, False, True]])}
  _, metrics = task.loss_and_metrics(jnp.asarray(logits), b, model)
  np.testing.assert_array_equal(metrics["error"], [0.0])
  del b["candidate_mask"]  # Restricted to the passage's entities, 2 wins.
  _, metrics = task.loss_and_metrics(jnp.asarray(logits), b, model)
  np.testing.assert_array_equal(metrics["error"], [1.0])


def test_an_unanswerable_question_counts_as_an_error():
  task, model = task_and_model()
  logits = np.zeros((3, ENT), np.float32)
  logits[:, 4] = 1.0  # Every row predicts entity 4, the answer of each.
  b = {"passage": np.full((3, 2), ENTITY_OFFSET + 4, np.int32),
       "answer": np.array([4, 4, 4], np.int32),
       "answerable": np.array([True, False, True])}
  _, metrics = task.loss_and_metrics(jnp.asarray(logits), b, model)
  np.testing.assert_array_equal(metrics["error"], [0.0, 1.0, 0.0])


def test_training_renames_only_the_entity_outputs_of_the_vocabulary():
  _, model = task_and_model(answer_vocabulary="vocabulary", dropout=0.0, embed_dropout=0.0)
  b = batch(2)
  variables = init(model, inputs_of(b))
  rngs = {"entities": jax.random.key(3), "dropout": jax.random.key(4)}
  trained = np.asarray(model.apply(variables, *inputs_of(b), train=True, rngs=rngs))
  perm = np.asarray(model.apply(variables, B, rngs=rngs,
                                method=model_lib.AttentiveReader.entity_permutation))
  renamed = {**b, "passage": model_lib.permute_entities(b["passage"], perm, ENTITY_OFFSET),
             "question": model_lib.permute_entities(b["question"], perm, ENTITY_OFFSET)}
  plain = np.asarray(model.apply(variables, *inputs_of(renamed)))
  entities = slice(ENTITY_OFFSET, ENTITY_OFFSET + ENT)
  np.testing.assert_allclose(trained[:, entities],
                             np.take_along_axis(plain[:, entities], perm, axis=-1),
                             atol=1e-5)
  others = np.r_[0:ENTITY_OFFSET, ENTITY_OFFSET + ENT:V]
  np.testing.assert_allclose(trained[:, others], plain[:, others], atol=1e-5)


def test_the_cpu_sweep_is_the_claim_grid_on_the_cbt_made_from_books():
  # The benchmark's members (its spec's grid), not a grid of the config's own: every
  # normalizer the task takes at the config's gain (the claims' and the table's rows),
  # and LN at gain 0.1.
  assert config_lib.get_config("scale=cpu").data.source == "cbt_books"
  members = {(m["norm"], m.get("norm_options.ln.scale_init")) for m in config_lib.get_sweep("cpu")}
  assert members == {(n, None) for n in ("none", "ln", "rms", "bn", "bn_everywhere", "prms",
                                         "dyt", "scalenorm", "ln_simple")} | {("ln", "0.1")}
  assert {m["norm"] for m in config_lib.get_sweep("figure2")} == {
      "none", "bn", "bn_everywhere", "ln"}
  cbt = config_lib.get_sweep("cbt")
  assert {m["norm"] for m in cbt} == {"none", "ln"}
  assert {m["data.source"] for m in cbt} == {"cbt"}


def test_ln_at_gain_one_under_the_authors_clip_warns_before_any_compute(caplog):
  from configs import attentive_reader as ar_config  # pylint: disable=g-import-not-at-top
  from experiments.attentive_reader import task as ar_task  # pylint: disable=g-import-not-at-top

  def warnings(arg, **fields):
    config = ar_config.get_config(arg)
    with config.unlocked():
      for dotted, value in fields.items():
        *parents, leaf = dotted.split(".")
        node = config
        for p in parents:
          node = node[p]
        node[leaf] = value
    caplog.clear()
    task = ar_task.Task(config)
    # Checking a config (a sweep checks each several times) says nothing: the run says
    # it once, when it is set up (lnorm.training.loop.set_up).
    assert not caplog.text
    return " ".join(task.run_warnings())

  assert "did not learn in docs/results.md" in warnings("norm=ln,scale=cpu")
  assert "ln_gain=0.1" in warnings("norm=ln,scale=cpu")
  assert not warnings("norm=ln,scale=cpu,ln_gain=0.1")
  assert not warnings("norm=none,scale=cpu")
  assert not warnings("norm=ln,scale=cpu", **{"optimizer.clip_global_norm_rule": "standard"})
  assert not warnings("norm=ln,scale=cpu", **{"optimizer.clip_global_norm": 0.0})
  # The documented first command is the one that learns.
  assert "norm=ln,scale=cpu,ln_gain=0.1" in ar_config.__doc__
