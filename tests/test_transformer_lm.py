"""The Transformer language model (experiments/transformer_lm) against NumPy versions
of its equations (tests/references.py), its causal mask, its size at the paper's
setting, its config checks, and its data (lnorm.data.book_chars)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.transformer_lm import model as model_lib
from experiments.transformer_lm.task import Task, block_norms
from lnorm import config as config_lib
from lnorm.data import book_chars, books
from lnorm.data.core import DataError
from lnorm.errors import ConfigError
from lnorm.normalization import PER_EXAMPLE_NORMS, make_norm
from tests import references as ref
from tests.test_forward_models import TOL, _init

pytestmark = pytest.mark.usefixtures("precise_jax")

# Sizes that divide nothing evenly but the heads: width 12 = 3 heads of 4.
WIDTH, HEADS, MLP, VOCAB, LENGTH, CONTEXT, LAYERS = 12, 3, 10, 11, 7, 9, 2


def smoke_config(**args):
  spec = ",".join(["smoke=true"] + [f"{k}={v}" for k, v in args.items()])
  return config_lib.load_config(f"configs/transformer_lm.py:{spec}")


def small_model(norm="ln", placement="pre", **fields) -> model_lib.TransformerLM:
  """The model as the task builds it from the config, at the test's sizes."""
  config = smoke_config(norm=norm, placement=placement)
  config.model.update(num_layers=LAYERS, width=WIDTH, num_heads=HEADS, mlp_size=MLP,
                      **fields)
  return Task(config).model_for(VOCAB, CONTEXT)


def tokens(seed=0, batch=2, length=LENGTH):
  return np.random.default_rng(seed).integers(0, VOCAB, (batch, length)).astype(np.int32)


def x_input(seed=0):
  return np.random.default_rng(seed).normal(size=(2, LENGTH, WIDTH)).astype(np.float32)


# --- the blocks -------------------------------------------------------------------------


def test_attention_is_the_equation():
  attention = model_lib.CausalSelfAttention(HEADS)
  x = x_input()
  variables = _init(attention, x)
  out = np.asarray(attention.apply(variables, x), np.float64)
  p = ref.f64(variables["params"])
  np.testing.assert_allclose(out, ref.causal_attention_ref(x, p, HEADS), **TOL)
  ref.assert_differs(out, ref.causal_attention_ref(x, p, HEADS, causal=False),
                     atol=TOL["atol"], what="attention without the causal mask")
  ref.assert_differs(out, ref.causal_attention_ref(x, p, HEADS, scaled=False),
                     atol=TOL["atol"], what="attention without 1/sqrt(d_h)")
  ref.assert_differs(out, ref.causal_attention_ref(x, p, 1), atol=TOL["atol"],
                     what="one head instead of three")


def test_mlp_block_is_the_equation():
  mlp = model_lib.MlpBlock(MLP)
  x = x_input(1)
  variables = _init(mlp, x)
  out = np.asarray(mlp.apply(variables, x), np.float64)
  p = ref.f64(variables["params"])
  np.testing.assert_allclose(out, ref.mlp_block_ref(x, p), **TOL)
  relu = ref.dense(ref.relu(ref.dense(x, p["hidden"])), p["output"])
  ref.assert_differs(out, relu, atol=TOL["atol"], what="ReLU instead of GELU")


@pytest.mark.parametrize("placement", ["post", "pre", "none"])
def test_block_places_the_normalizer(placement):
  ln = make_norm("ln")
  block = model_lib.Block(HEADS, MLP, placement, ln, ln)
  x = x_input(2)
  variables = _init(block, x)
  out = np.asarray(block.apply(variables, x), np.float64)
  p = ref.f64(variables["params"])
  np.testing.assert_allclose(out, ref.transformer_block_ref(x, p, HEADS, placement, "ln"),
                             **TOL)
  for other in {"post", "pre", "none"} - {placement}:
    ref.assert_differs(out, ref.transformer_block_ref(x, p, HEADS, other, "ln"),
                       atol=TOL["atol"], what=f"{other} in place of {placement}")


# --- the whole model --------------------------------------------------------------------


@pytest.mark.parametrize("placement", ["post", "pre"])
@pytest.mark.parametrize("norm", PER_EXAMPLE_NORMS)
def test_forward_pass_is_the_equations(norm, placement):
  model = small_model(norm, placement)
  t = tokens()
  variables = _init(model, t)
  out = np.asarray(model.apply(variables, t), np.float64)
  p = ref.f64(variables["params"])
  expected = ref.transformer_lm_ref(t, p, num_layers=LAYERS, num_heads=HEADS,
                                    placement=placement, norm=norm)
  np.testing.assert_allclose(out, expected, **TOL)
  other = {"pre": "post", "post": "pre"}[placement]
  # Post-LN has no final normalizer: pre-LN's reference borrows the last layer's.
  p.setdefault("final_norm", p[f"block_{LAYERS - 1}"].get("mlp_norm", {}))
  wrong = ref.transformer_lm_ref(t, p, num_layers=LAYERS, num_heads=HEADS,
                                 placement=other, norm=norm)
  ref.assert_differs(out, wrong, atol=TOL["atol"], what=f"{other}-{norm}")


def test_normalizer_free_network_with_sinusoids_and_its_own_output_layer():
  model = small_model("none", "none", positions="sinusoidal", tie_embeddings=False)
  t = tokens(3)
  variables = _init(model, t)
  assert "positions" not in variables["params"] and "output" in variables["params"]
  out = np.asarray(model.apply(variables, t), np.float64)
  p = ref.f64(variables["params"])
  expected = ref.transformer_lm_ref(t, p, num_layers=LAYERS, num_heads=HEADS,
                                    placement="none", norm="none",
                                    positions=ref.sinusoidal_ref(CONTEXT, WIDTH), tied=False)
  np.testing.assert_allclose(out, expected, **TOL)
  np.testing.assert_allclose(model_lib.sinusoidal_positions(CONTEXT, 7),
                             ref.sinusoidal_ref(CONTEXT, 7), atol=1e-6)


def test_a_later_token_never_changes_an_earlier_output():
  model = small_model("ln", "post")
  t = tokens(4)
  variables = _init(model, t)
  apply = jax.jit(lambda t: model.apply(variables, t))
  before = np.asarray(apply(t))
  for j in (0, 3, LENGTH - 1):
    changed = t.copy()
    changed[:, j] = (changed[:, j] + 1) % VOCAB
    after = np.asarray(apply(changed))
    np.testing.assert_array_equal(after[:, :j], before[:, :j])
    assert np.all(np.abs(after[:, j] - before[:, j]).max(-1) > 1e-4), j


@pytest.mark.parametrize("norm", ["ln", "scalenorm"])
def test_the_padding_rows_of_an_evaluation_batch_change_nothing(norm):
  """The task pads no token (every window is full); the loop fills the last evaluation
  batch with padding rows (mask 0). Per-example normalizers never look across rows, so
  a row's logits are the same beside padding as beside real windows."""
  model = small_model(norm, "post")
  t = tokens(6, batch=3)
  variables = _init(model, t)
  padded = t.copy()
  padded[1:] = 0
  np.testing.assert_array_equal(np.asarray(model.apply(variables, padded))[0],
                                np.asarray(model.apply(variables, t))[0])


def test_dyt_starts_higher_before_attention_than_elsewhere():
  model = small_model("dyt", "pre")
  values = model.init(jax.random.key(0), tokens())["params"]
  block = values["block_0"]
  assert float(block["attention_norm"]["alpha"]) == pytest.approx(0.8)
  assert float(block["mlp_norm"]["alpha"]) == pytest.approx(0.2)
  assert float(values["final_norm"]["alpha"]) == pytest.approx(0.2)
  # A user's values win.
  config = smoke_config(norm="dyt")
  config.norm_options.dyt.update(alpha_init=0.5, alpha_init_attention=0.7)
  attention_norm, norm = block_norms(config)
  assert attention_norm.layer.keywords["alpha_init"] == 0.7
  assert norm.layer.keywords["alpha_init"] == 0.5


def test_parameter_count_at_the_paper_size():
  config = config_lib.load_config("configs/transformer_lm.py:norm=ln,placement=pre")
  vocab = 91  # The Gutenberg books' characters.
  model = Task(config).model_for(vocab, config.data.context)
  shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), np.zeros((1, 8), np.int32)))
  count = sum(math.prod(s.shape) for s in jax.tree.leaves(shapes["params"]))
  d, m, layers, context = 512, 2048, 6, 512
  attention = (d * 3 * d + 3 * d) + (d * d + d)  # qkv and output maps with biases
  mlp = (d * m + m) + (m * d + d)
  norms = 2 * (2 * d)  # two LNs a layer, gain and bias each
  expected = vocab * d + context * d + layers * (attention + mlp + norms) + 2 * d
  assert count == expected == 19_224_064


# --- the task ---------------------------------------------------------------------------


def test_loss_is_the_mean_next_character_cross_entropy():
  task = Task(smoke_config())
  rng = np.random.default_rng(5)
  batch = {"tokens": rng.integers(0, VOCAB, (3, LENGTH + 1)).astype(np.int32)}
  (inputs,) = task.model_inputs(batch)
  np.testing.assert_array_equal(inputs, batch["tokens"][:, :-1])
  logits = rng.normal(size=(3, LENGTH, VOCAB)).astype(np.float32)
  loss, metrics = task.loss_and_metrics(jnp.asarray(logits), batch, model=None)
  log_p = ref.log_softmax(logits)
  nll = -np.take_along_axis(log_p, batch["tokens"][:, 1:, None], -1)[..., 0].mean(-1)
  np.testing.assert_allclose(metrics["nll"], nll, rtol=1e-5)
  np.testing.assert_allclose(metrics["bits_per_char"], nll / math.log(2), rtol=1e-5)
  assert float(loss) == pytest.approx(nll.mean(), rel=1e-5)


def test_config_checks_name_the_fix():
  with pytest.raises(ConfigError, match="placement=none builds no normalizer"):
    Task(smoke_config(norm="ln", placement="none"))
  config = smoke_config()
  config.model.num_heads = 5
  with pytest.raises(ConfigError, match="not a multiple of model.num_heads=5"):
    Task(config)
  config = smoke_config()
  config.model.positions = "rotary"
  with pytest.raises(ConfigError, match="learned, sinusoidal"):
    Task(config)
  with pytest.raises(ConfigError, match="bn"):
    Task(smoke_config(norm="bn"))
  with pytest.raises(Exception, match="placement"):
    smoke_config(placement="middle")


# --- the data ---------------------------------------------------------------------------


def write_books(folder, lengths):
  folder.mkdir(parents=True)
  rng = np.random.default_rng(0)
  for i, n in enumerate(lengths):
    letters = rng.choice(list("abcdefgh"), size=n)
    lines = ["".join(letters[k:k + 9]) for k in range(0, n, 9)]
    (folder / f"book_{i:02d}.txt").write_text("\n".join(lines) + "\n")
  (folder / "book_99.txt").write_text("Zz\u00e9" * 30 + "\n")  # Only in one book.


def test_book_windows_split_by_book_with_the_training_characters(tmp_path):
  write_books(tmp_path / "books", [100, 61, 75, 90, 40, 52])
  config = {"source": "files", "data_dir": str(tmp_path), "context": 6,
            "validation_books": 2, "test_books": 1, "vocab_size": 9, "seed": 3}
  ds = book_chars.load_files(config, auto=False)
  info = ds.info
  names = info["train_books"] + info["validation_books"] + info["test_books"]
  assert sorted(names) == [f"book_{i:02d}" for i in (0, 1, 2, 3, 4, 5, 99)]
  assert len(info["validation_books"]) == 2 and len(info["test_books"]) == 1
  # The same draw as the cloze tasks' split of these books.
  from lnorm.data.cloze import books as cloze_books  # pylint: disable=g-import-not-at-top
  corpus = books.read_books(str(tmp_path / "books"))
  train, validation, test = cloze_books.split_held_out(corpus, 2, 1, 3)
  assert info["train_books"] == tuple(b.name for b in train)
  assert info["test_books"] == tuple(b.name for b in test)
  # Seven ids at most: pad, OOV, then the 7 most frequent training characters.
  assert info["vocab_size"] == 9 and info["vocabulary"][:2] == ("<pad>", "<oov>")
  texts = {b.name: "\n".join(b.lines) for b in corpus}
  vocab = {c: i for i, c in enumerate(info["vocabulary"])}
  for split in ("train", "validation", "test"):
    expected = []
    for name in info[f"{split}_books"]:
      ids = [vocab.get(c, 1) for c in texts[name]]
      expected += [ids[k:k + 7] for k in range(0, len(ids) - 6, 7)]
    np.testing.assert_array_equal(ds.splits[split]["tokens"], np.array(expected).reshape(-1, 7))
  assert ds.splits["train"]["tokens"].dtype == np.int32


def test_held_out_windows_keeps_evenly_spaced_held_out_windows_only(tmp_path):
  write_books(tmp_path / "books", [100, 61, 75, 90, 40, 52])
  config = {"source": "files", "data_dir": str(tmp_path), "context": 6,
            "validation_books": 2, "test_books": 1, "vocab_size": 9, "seed": 3}
  whole = book_chars.load_files(config, auto=False)
  kept = book_chars.load_files({**config, "held_out_windows": 5}, auto=False)
  np.testing.assert_array_equal(kept.splits["train"]["tokens"], whole.splits["train"]["tokens"])
  for split in ("validation", "test"):
    rows = whole.splits[split]["tokens"]
    assert len(rows) > 5 and (len(rows) - 1) % 4  # The spacing does not divide evenly.
    index = np.round(np.linspace(0, len(rows) - 1, 5)).astype(int)
    np.testing.assert_array_equal(kept.splits[split]["tokens"], rows[index])
  assert kept.info["held_out_windows"] == 5 and "at most 5 evenly spaced" in kept.notes
  more = book_chars.load_files({**config, "held_out_windows": 10_000}, auto=False)
  np.testing.assert_array_equal(more.splits["test"]["tokens"], whole.splits["test"]["tokens"])
  with pytest.raises(DataError, match="held_out_windows must be >= 0"):
    book_chars.load_files({**config, "held_out_windows": -1}, auto=False)


def test_book_chars_refuses_a_context_longer_than_every_book(tmp_path):
  write_books(tmp_path / "books", [20, 20, 20])
  with pytest.raises(DataError, match="lower --config.data.context"):
    book_chars.load_files({"data_dir": str(tmp_path), "context": 500, "validation_books": 1,
                           "test_books": 1}, auto=False)


def test_trivial_baseline_is_the_training_unigram():
  task = Task(smoke_config())
  ds = task.load_data()
  record = task.trivial_baseline(ds)
  train = ds.splits["train"]["tokens"][:, 1:]
  counts = np.bincount(train.reshape(-1), minlength=ds.info["vocab_size"]) + 1.0
  log_p = np.log(counts / counts.sum())
  val = ds.splits["validation"]["tokens"][:, 1:]
  assert record["values"]["validation/nll"] == pytest.approx(-log_p[val].mean(), rel=1e-6)
