"""The attentive reader (experiments/attentive_reader) against the NumPy reference of
tests/attentive_reader_reference.py, its masking, entity renaming and restricted
prediction, parameter counts at paper size, and CLI smoke runs of every variant."""


import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import attentive_reader as config_lib
from experiments.attentive_reader import model as model_lib
from experiments.attentive_reader import task as task_lib
from lnorm import cli
from lnorm.data.cloze import ENTITY_OFFSET
from tests import attentive_reader_reference as ar_ref
from tests import references as ref
from tests.helpers import epoch_records, run_record

V, ENT, H, TP, TQ, B = 30, 6, 5, 9, 4, 4


def build(norm, **fields):
  config = config_lib.get_config(f"norm={norm},smoke=true")
  for k, v in fields.items():
    setattr(config.model, k, v)
  task = task_lib.Task(config)
  model = task.model_for(V, ENT, ENTITY_OFFSET).clone(
      embed_size=H, hidden_size=H, attention_size=H + 1, readout_size=H + 2)
  return task, model


def batch(seed=0):
  """Passages with entity markers and padding; one of full length."""
  rng = np.random.default_rng(seed)
  plen = rng.integers(3, TP + 1, B).astype(np.int32)
  plen[0] = TP
  qlen = rng.integers(2, TQ + 1, B).astype(np.int32)
  passage = rng.integers(ENTITY_OFFSET, V, (B, TP)).astype(np.int32)
  question = rng.integers(ENTITY_OFFSET + ENT, V, (B, TQ)).astype(np.int32)
  question[:, 0] = 2  # @placeholder
  passage[np.arange(TP)[None] >= plen[:, None]] = 0
  question[np.arange(TQ)[None] >= qlen[:, None]] = 0
  answer = np.array([p[0] - ENTITY_OFFSET if p[0] < ENTITY_OFFSET + ENT else 0
                     for p in passage], np.int32)
  passage[:, 0] = ENTITY_OFFSET + answer  # The answer is in every passage.
  return {"passage": passage, "passage_length": plen, "question": question,
          "question_length": qlen, "answer": answer}


def init(model, inputs, seed=0):
  shapes = jax.eval_shape(lambda: model.init(
      {"params": jax.random.key(seed)}, *inputs, train=False))
  return {"params": ref.random_params(shapes["params"], seed=seed)}


def inputs_of(b):
  return (b["passage"], b["passage_length"], b["question"], b["question_length"])


@pytest.mark.parametrize("norm, earlier_model", [("none", False), ("ln", False),
                                                  ("ln", True)])
def test_forward_and_loss_match_reference(norm, earlier_model, precise_jax):
  task, model = build(norm, readout_description_skip=earlier_model,
                      learn_initial_cell=earlier_model)
  b = batch()
  variables = init(model, inputs_of(b))
  # Initial states and readout terms away from zero, so that each counts.
  rng = np.random.default_rng(5)
  p = variables["params"]
  for name in [k for k in p if k.endswith("_initial_h")]:
    p[name] = rng.normal(size=H).astype(np.float32)
  for lstm in ("passage_lstm", "question_lstm"):
    for leaf in [k for k in p[lstm] if "_init_" in k]:
      p[lstm][leaf] = rng.normal(size=H).astype(np.float32)
  # A bilinear term large enough that leaving it out shows in the logits.
  bilinear = variables["params"]["att_bilinear"]
  bilinear["kernel"] = bilinear["kernel"] * 6.0
  logits = model.apply(variables, *inputs_of(b))
  alpha, expected = ar_ref.forward(variables["params"], *inputs_of(b), variant=norm)
  np.testing.assert_allclose(logits, expected, atol=2e-5, rtol=1e-5)
  alpha_model = model.apply(variables, *inputs_of(b), method=_alpha)
  np.testing.assert_allclose(alpha_model, alpha, atol=1e-6)
  loss, metrics = task.loss_and_metrics(logits, {**b, "mask": np.ones(B)}, model)
  nll = ar_ref.cross_entropy(expected, b["answer"])
  np.testing.assert_allclose(metrics["nll"], nll, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(loss, nll.mean(), rtol=1e-5)
  # Sharp enough to see a missing bilinear term or a missing mean-pooled readout.
  _, no_bilinear = ar_ref.forward(variables["params"], *inputs_of(b), variant=norm,
                                  bilinear=False)
  ref.assert_differs(logits, no_bilinear, atol=2e-5, what="attention without (Vd).(Vq)")
  if earlier_model:  # W_m mean_t d_t and the learned c0 each show in the logits.
    params = variables["params"]
    no_skip = {k: v for k, v in params.items() if k != "out_mean"}
    zero_c0 = {**params, **{n: {**params[n], "layer_0_init_0": np.zeros(H, np.float32)}
                            for n in ("passage_lstm", "question_lstm")}}
    for changed, what in ((no_skip, "readout without W_m"), (zero_c0, "c0 = 0")):
      _, other = ar_ref.forward(changed, *inputs_of(b), variant=norm)
      ref.assert_differs(logits, other, atol=2e-5, what=what)


def _alpha(module, passage, passage_length, question, question_length):
  return module.encode(passage, passage_length, question, question_length, train=False)[0]


@pytest.mark.parametrize("norm", ["none", "bn", "bn_everywhere", "ln"])
def test_attention_is_zero_on_padding_and_padding_changes_nothing(norm):
  _, model = build(norm)
  b = batch(1)
  variables = model.init({"params": jax.random.key(0)}, *inputs_of(b), train=False)
  logits, alpha = (model.apply(variables, *inputs_of(b)),
                   model.apply(variables, *inputs_of(b), method=_alpha))
  pad = np.arange(TP)[None] >= b["passage_length"][:, None]
  assert np.all(np.asarray(alpha)[pad] == 0.0)
  np.testing.assert_allclose(np.asarray(alpha).sum(-1), 1.0, rtol=1e-5)
  # Ten more padded steps on both sequences, padded with junk ids: same outputs.
  wider = {**b, "passage": np.pad(b["passage"], ((0, 0), (0, 10)), constant_values=7),
           "question": np.pad(b["question"], ((0, 0), (0, 10)), constant_values=9)}
  np.testing.assert_allclose(model.apply(variables, *inputs_of(wider)), logits,
                             atol=1e-5, rtol=1e-5)


def test_training_renames_entities_consistently():
  """With dropout off, a renamed passage and question give the renamed logits: the
  model maps them back, so the loss sees the original answer numbers."""
  _, model = build("none", dropout=0.0, embed_dropout=0.0)
  b = batch(2)
  variables = init(model, inputs_of(b))
  rngs = {"entities": jax.random.key(3), "dropout": jax.random.key(4)}
  trained = model.apply(variables, *inputs_of(b), train=True, rngs=rngs)
  # Recompute by hand: rename with the same permutation, evaluate, map back.
  perm = np.asarray(model.apply(variables, B, rngs=rngs,
                                method=model_lib.AttentiveReader.entity_permutation))
  assert all(sorted(row) == list(range(ENT)) for row in perm)
  renamed = {**b, "passage": model_lib.permute_entities(b["passage"], perm, ENTITY_OFFSET),
             "question": model_lib.permute_entities(b["question"], perm, ENTITY_OFFSET)}
  by_hand = np.take_along_axis(np.asarray(model.apply(variables, *inputs_of(renamed))),
                               perm, axis=-1)
  np.testing.assert_allclose(trained, by_hand, atol=1e-5)
  # The renaming is a real one: the unrenamed logits differ.
  assert not np.allclose(trained, model.apply(variables, *inputs_of(b)), atol=1e-4)
  # And only entity ids move.
  moved = np.asarray(renamed["passage"]) != b["passage"]
  assert np.all((b["passage"][moved] >= ENTITY_OFFSET)
                & (b["passage"][moved] < ENTITY_OFFSET + ENT))


def test_prediction_is_restricted_to_the_passage_entities():
  task, model = build("none")
  passage = np.zeros((2, 5), np.int32)
  passage[0, :3] = [ENTITY_OFFSET + 1, 10, ENTITY_OFFSET + 4]  # entities 1 and 4
  passage[1, :2] = [ENTITY_OFFSET + 0, 11]  # entity 0 only
  logits = np.zeros((2, ENT), np.float32)
  logits[0, [1, 4, 5]] = [1.0, 2.0, 9.0]  # 5 scores highest but is not in the passage
  logits[1, [0, 3]] = [-3.0, 5.0]
  b = {"passage": passage, "answer": np.array([4, 0], np.int32)}
  _, metrics = task.loss_and_metrics(jnp.asarray(logits), b, model)
  np.testing.assert_array_equal(metrics["error"], [0.0, 0.0])
  task.config.model.restrict_to_candidates = False
  _, metrics = task.loss_and_metrics(jnp.asarray(logits), b, model)
  np.testing.assert_array_equal(metrics["error"], [1.0, 1.0])


def _lstm(e, h, norm):
  extra = {"none": 0, "ln": 2 * 8 * h + 2 * h, "bn": 2 * 4 * h + 2 * h}[norm]
  return e * 4 * h + h * 4 * h + 4 * h + h + extra  # W_x, W_h, b, learned h0


@pytest.mark.parametrize("norm", ["none", "bn", "bn_everywhere", "ln"])
def test_parameter_count_at_paper_size(norm):
  config = config_lib.get_config(f"norm={norm}")
  c, d = config.model, config.data
  v, e, h, a, r, n = (d.vocab_size, c.embed_size, c.hidden_size, c.attention_size,
                      c.readout_size, d.num_entities)
  assert (v, e, h, a, r, n) == (50000, 240, 240, 240, 240, 600)
  model = task_lib.Task(config).model_for(v, n, ENTITY_OFFSET)
  tokens = jnp.zeros((2, 5), jnp.int32)
  lengths = jnp.array([5, 3], jnp.int32)
  shapes = jax.eval_shape(lambda: model.init(
      {"params": jax.random.key(0)}, tokens, lengths, tokens, lengths))
  count = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(shapes["params"]))
  cell = "bn" if norm.startswith("bn") else norm
  expected = (v * e + 2 * _lstm(e, h, cell)
              + (h * a + a) + h * a + h * h + a  # attention: W_d, b, W_q, V, w
              + h * r + (h * r + r)  # readout: W_c, W_r and b
              + r * n + n)  # answer logits
  if norm == "bn_everywhere":
    expected += 2 * (2 * a) + 2 * (2 * r)  # gain and bias of four BNs
  assert count == expected
  # lnorm's earlier model: W_m (and its BN) in the readout, c0 learned in both LSTMs.
  config.model.readout_description_skip = config.model.learn_initial_cell = True
  model = task_lib.Task(config).model_for(v, n, ENTITY_OFFSET)
  shapes = jax.eval_shape(lambda: model.init(
      {"params": jax.random.key(0)}, tokens, lengths, tokens, lengths))
  earlier = sum(int(np.prod(x.shape)) for x in jax.tree.leaves(shapes["params"]))
  assert earlier == expected + h * r + 2 * h + (2 * r if norm == "bn_everywhere" else 0)


def test_unknown_norm_is_a_config_error():
  config = config_lib.get_config("norm=wn,smoke=true")
  with pytest.raises(Exception, match="Valid choices"):
    task_lib.Task(config)


#: The CLI run of each kind of normalized variant: a batch statistic (BN on the
#: recurrence, the odd one) and a per-example one. Every variant's first updates, the
#: plain LSTM's too, are pinned by tests/test_golden_losses.py, and a CLI run each took
#: six minutes of the suite.
CLI_VARIANTS = ("bn_everywhere", "ln")
#: The variant that resumes, through the smoke config's two length buckets; the others
#: run in one bucket, which compiles half the programs (most of a smoke run's time).
RESUMED = "ln"


@pytest.mark.slow
def test_cli_smoke_runs_every_kind_of_variant_and_resumes(tmp_path):
  assert set(CLI_VARIANTS) <= set(task_lib.VARIANTS) and RESUMED in CLI_VARIANTS
  for norm in CLI_VARIANTS:
    workdir = str(tmp_path / norm)
    config = f"configs/attentive_reader.py:norm={norm},smoke=true"
    one_bucket = [] if norm == RESUMED else ["--config.length_buckets.num=1"]
    assert cli.main(["train", "--config", config, "--workdir", workdir, *one_bucket]) == 0
    (first,) = epoch_records(workdir)
    assert np.isfinite(first["validation/nll"]) and 0 <= first["validation/error"] <= 1
    run = run_record(workdir)
    assert run["data"]["synthetic"] and run["data"]["name"] == "cloze"
  # Resume: a second epoch continues from the first's checkpoint.
  workdir = str(tmp_path / RESUMED)
  assert cli.main(["train", "--config", f"configs/attentive_reader.py:norm={RESUMED},"
                   "smoke=true", "--workdir", workdir, "--config.num_epochs=2"]) == 0
  records = epoch_records(workdir)
  assert [r["epoch"] for r in records] == [1, 2]
  assert records[1]["step"] == 2 * records[0]["step"]


def test_bucketed_evaluation_equals_evaluation_at_full_width():
  from lnorm.data import batching  # pylint: disable=g-import-not-at-top
  from lnorm.training import parallel, steps  # pylint: disable=g-import-not-at-top
  from lnorm.training import train_state  # pylint: disable=g-import-not-at-top
  config = config_lib.get_config("norm=bn_everywhere,smoke=true")
  task = task_lib.Task(config)
  dataset = task.load_data()
  model = task.build_model(dataset)
  mesh = parallel.make_mesh()
  state = train_state.TrainStateInitializer(config, task, model, mesh).from_scratch(
      train_state.first_training_batch(config, dataset.splits["train"]))
  eval_step = jax.jit(steps.make_eval_step(task, model))
  arrays = dataset.splits["validation"]
  buckets = batching.LengthBuckets.from_quantiles(
      dataset.splits["train"], "passage", "passage_length", 3)
  assert len(buckets.edges) > 1
  full = steps.evaluate(eval_step, state, arrays, 7, mesh)
  bucketed = steps.evaluate(eval_step, state, buckets.sorted_by_length(arrays), 7, mesh,
                           buckets)
  assert full.keys() == bucketed.keys()
  for k in full:
    np.testing.assert_allclose(bucketed[k], full[k], rtol=1e-5, err_msg=k)
