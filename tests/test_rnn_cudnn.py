"""The plain LSTM's cuDNN path (lnorm.rnn.cudnn), checked on a CPU.

cuDNN itself needs an NVIDIA GPU, but ``jax.experimental.rnn`` holds a reference
implementation of its LSTM over the same packed weights (``lstm_ref``), which runs
anywhere. With it standing in for cuDNN and the backend reported as a GPU, the whole
cuDNN path (the weight mapping, the carries, the lengths, the reversal) runs here, and
must give lnorm's own LSTM's values and gradients; the mapping is also checked gate by
gate against ``unpack_lstm_weights``. Then the choice: ``auto`` is cuDNN exactly where
it can run, and ``cudnn`` says in one line why it cannot.
"""

from __future__ import annotations

import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import rnn

from lnorm.errors import ConfigError
from lnorm.rnn import (
    RecurrentLayer, cell_options, cudnn, make_gru_cell, make_lstm_cell, normalizer_record,
    recurrence_path)
from lnorm.training import defaults

# Sizes that divide nothing evenly; one sequence of each kind: full, padded, a single
# step, empty.
BATCH, STEPS, INPUTS, HIDDEN = 4, 6, 7, 5
LENGTHS = np.array([6, 3, 1, 0], np.int32)


def reference_lstm(calls, x, h_0, c_0, weights, seq_lengths, *, input_size, hidden_size,
                   num_layers, dropout, bidirectional):
  """``jax.experimental.rnn.lstm``'s signature, computed by its reference implementation."""
  calls.append({"x": x.shape, "seq_lengths": seq_lengths, "weights": weights.shape})
  w_ih, w_hh, b_ih, b_hh = rnn.unpack_lstm_weights(weights, input_size, hidden_size,
                                                   num_layers, bidirectional)
  return rnn.lstm_ref(x, h_0, c_0, w_ih, w_hh, b_ih, b_hh, seq_lengths, input_size,
                      hidden_size, num_layers, dropout, bidirectional)


@pytest.fixture
def on_gpu(monkeypatch):
  """The backend reported as a GPU, cuDNN's LSTM replaced by the reference; yields the
  list of the calls cuDNN got."""
  calls = []
  monkeypatch.setattr(cudnn, "_on_gpu", lambda: True)
  monkeypatch.setattr(cudnn, "_lstm", functools.partial(reference_lstm, calls))
  return calls


def _inputs():
  x = jax.random.normal(jax.random.key(1), (BATCH, STEPS, INPUTS))
  return x, jnp.asarray(LENGTHS)


def _perturbed(variables):
  """Parameters away from their initial values (a zero bias would hide a misplaced one)."""
  leaves, treedef = jax.tree.flatten(variables)
  keys = jax.random.split(jax.random.key(7), len(leaves))
  return jax.tree.unflatten(treedef, [leaf + 0.3 * jax.random.normal(k, leaf.shape)
                                      for leaf, k in zip(leaves, keys)])


def test_pack_weights_puts_each_gate_where_cudnn_reads_it():
  keys = jax.random.split(jax.random.key(0), 3)
  w_x = jax.random.normal(keys[0], (INPUTS, 4 * HIDDEN))
  w_h = jax.random.normal(keys[1], (HIDDEN, 4 * HIDDEN))
  b = jax.random.normal(keys[2], (4 * HIDDEN,))
  flat = cudnn.pack_weights(w_x, w_h, b)
  assert flat.shape == (rnn.get_num_params_in_lstm(INPUTS, HIDDEN, 1, False),)
  w_ih, w_hh, b_ih, b_hh = (p[0] for p in rnn.unpack_lstm_weights(flat, INPUTS, HIDDEN, 1,
                                                                  False))
  block = lambda a, k: a[..., k * HIDDEN:(k + 1) * HIDDEN]
  # cuDNN's gates (i, f, g, o) are lnorm's blocks 1, 0, 3, 2 (f, i, o, g).
  for cudnn_gate, lnorm_gate in enumerate((1, 0, 3, 2)):
    rows = slice(cudnn_gate * HIDDEN, (cudnn_gate + 1) * HIDDEN)
    np.testing.assert_array_equal(w_ih[rows], block(w_x, lnorm_gate).T)
    np.testing.assert_array_equal(w_hh[rows], block(w_h, lnorm_gate).T)
    np.testing.assert_array_equal(b_ih[rows], block(b, lnorm_gate))
  np.testing.assert_array_equal(b_hh, np.zeros(4 * HIDDEN))


LAYERS = {
    "padded": dict(),
    "reverse": dict(reverse=True),
    "bidirectional, two layers": dict(bidirectional=True, num_layers=2),
    "learned initial state": dict(learned_init=True),
    "weight-normalized": dict(variant="wn"),
    "input dropout": dict(dropout=0.3),
    "unpadded": dict(padded=False),
    "given initial state": dict(initial=True),
}


@pytest.mark.parametrize("case", list(LAYERS))
def test_the_cudnn_path_gives_lnorm_lstm_values_and_gradients(case, on_gpu, precise_jax):
  options = dict(LAYERS[case])
  variant = options.pop("variant", "none")
  padded = options.pop("padded", True)
  initial = options.pop("initial", False)
  dropout = options.pop("dropout", 0.0)
  x, lengths = _inputs()
  lengths = lengths if padded else None
  carry = None
  if initial:
    k1, k2 = jax.random.split(jax.random.key(5))
    carry = (jax.random.normal(k1, (BATCH, HIDDEN)), jax.random.normal(k2, (BATCH, HIDDEN)))

  def layer(impl):
    cell = make_lstm_cell(variant, forget_bias=1.0, dropout=dropout, impl=impl)
    return RecurrentLayer(cell, HIDDEN, **options)

  rngs = {"dropout": jax.random.key(3)}
  variables = _perturbed(layer("scan").init(jax.random.key(0), x, lengths,
                                            initial_carry=carry))

  def loss(variables, x, impl):
    out = layer(impl).apply(variables, x, lengths, train=dropout > 0, initial_carry=carry,
                            rngs=rngs)
    # Every output the layer gives, weighted so that no gradient is symmetric.
    total = jnp.sum(out.outputs ** 2) + jnp.sum(jnp.tanh(out.final_hidden) * 1.7)
    total += sum(jnp.sum(leaf * (i + 1.0)) for i, leaf in
                 enumerate(jax.tree.leaves(out.final_carries)))
    return total, out

  (value, out), grads = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(
      variables, x, "scan")
  assert not on_gpu  # impl='scan' never calls cuDNN.
  (value_c, out_c), grads_c = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(
      variables, x, "cudnn")
  layers = options.get("num_layers", 1) * (2 if options.get("bidirectional") else 1)
  assert len(on_gpu) == layers  # One cuDNN call per layer and direction.
  if padded:  # cuDNN never gets an empty sequence; lnorm keeps its initial state.
    np.testing.assert_array_equal(on_gpu[0]["seq_lengths"], [6, 3, 1, 1])
  close = functools.partial(np.testing.assert_allclose, rtol=1e-5, atol=1e-6)
  close(value_c, value)
  close(out_c.outputs, out.outputs)
  close(out_c.final_hidden, out.final_hidden)
  jax.tree.map(close, out_c.final_carries, out.final_carries)
  jax.tree.map(close, grads_c, grads)


def test_auto_runs_cudnn_on_a_gpu_exactly_where_it_can():
  assert recurrence_path(make_lstm_cell("none")) == "fused"  # This CPU: nothing changes.


@pytest.mark.parametrize("variant,options,path", [
    ("none", {}, "cudnn"), ("wn", {}, "cudnn"), ("none", {"dropout": 0.2}, "cudnn"),
    ("none", {"impl": "scan"}, "fused"), ("none", {"recurrent_dropout": 0.2}, "fused"),
    ("ln", {}, "fused"), ("ln_cell", {}, "fused"), ("rms", {}, "fused"),
    ("bn", {}, "step-by-step"), ("dyt", {}, "step-by-step")])
def test_auto_on_a_gpu(variant, options, path, on_gpu):
  assert recurrence_path(make_lstm_cell(variant, **options)) == path
  assert recurrence_path(make_gru_cell("none")) == "fused"  # cuDNN runs no GRU here.


@pytest.fixture
def bfloat16_matmuls():
  saved = jax.config.jax_default_matmul_precision
  jax.config.update("jax_default_matmul_precision", "bfloat16")
  yield
  jax.config.update("jax_default_matmul_precision", saved)


def test_auto_keeps_the_scan_under_bfloat16_matmuls(on_gpu, bfloat16_matmuls):
  assert recurrence_path(make_lstm_cell("none")) == "fused"


def test_the_layer_runs_cudnn_only_where_auto_chooses_it(on_gpu):
  x, lengths = _inputs()
  for variant, calls in (("ln", 0), ("none", 1)):
    layer = RecurrentLayer(make_lstm_cell(variant), HIDDEN)
    variables = layer.init(jax.random.key(0), x, lengths)  # init always scans.
    assert not on_gpu
    layer.apply(variables, x, lengths)
    assert len(on_gpu) == calls
  # fused=False scans the cell step by step, whatever impl says.
  layer = RecurrentLayer(make_lstm_cell("none", impl="cudnn"), HIDDEN, fused=False)
  layer.apply(layer.init(jax.random.key(0), x, lengths), x, lengths)
  assert len(on_gpu) == 1


def test_a_cpu_run_never_calls_cudnn(monkeypatch):
  calls = []
  monkeypatch.setattr(cudnn, "_lstm", functools.partial(reference_lstm, calls))
  x, lengths = _inputs()
  layer = RecurrentLayer(make_lstm_cell("none"), HIDDEN)
  layer.apply(layer.init(jax.random.key(0), x, lengths), x, lengths)
  assert calls == []


# --- one change per refusal, its message asserted -----------------------------------------


def test_cudnn_on_a_cpu_is_refused_naming_the_fix():
  with pytest.raises(ConfigError) as e:
    make_lstm_cell("none", impl="cudnn")
  assert str(e.value) == (
      "lstm_impl='cudnn' cannot run this LSTM: cuDNN needs an NVIDIA GPU, and JAX runs on "
      "cpu. Use --config.lstm_impl=auto (cuDNN where it can, lnorm's scan elsewhere) or "
      "scan.")


@pytest.mark.parametrize("variant,options,why", [
    ("ln", {}, "its normalizer ('ln', on input_norm, hidden_norm, cell_norm) sits inside "
               "the recurrence"),
    ("ln_cell", {}, "its normalizer ('ln_cell', on cell_norm) sits inside"),
    ("none", {"recurrent_dropout": 0.1}, "it drops the state (recurrent_dropout=0.1)"),
])
def test_cudnn_for_an_lstm_it_cannot_run_is_refused(variant, options, why, on_gpu):
  with pytest.raises(ConfigError, match="lstm_impl='cudnn' cannot run this LSTM") as e:
    make_lstm_cell(variant, impl="cudnn", **options)
  assert why in str(e.value) and "--config.lstm_impl=auto" in str(e.value)
  assert "\n" not in str(e.value)


def test_cudnn_under_bfloat16_matmuls_is_refused(on_gpu, bfloat16_matmuls):
  with pytest.raises(ConfigError, match=r"no bfloat16 matmuls \(jax_default_matmul_"
                                        r"precision=bfloat16\)"):
    make_lstm_cell("none", impl="cudnn")


def test_an_unknown_implementation_is_refused():
  with pytest.raises(ConfigError, match=r"lstm_impl='cuDNN': use one of auto, scan, cudnn"):
    make_lstm_cell("none", impl="cuDNN")
  with pytest.raises(ConfigError, match=r"lstm_impl='fast': use one of auto, scan, cudnn"):
    make_gru_cell("none", impl="fast")


def test_a_gru_refuses_cudnn_and_takes_the_others(on_gpu):
  with pytest.raises(ConfigError, match="cuDNN runs the plain LSTM only .* are GRUs"):
    make_gru_cell("none", impl="cudnn")
  for impl in ("auto", "scan"):
    assert recurrence_path(make_gru_cell("ln", impl=impl)) == "fused"


# --- the config and the run's record ---------------------------------------------------------


def test_the_config_field_reaches_the_cells_and_may_change_on_resume():
  config = defaults.base_config()
  config.norm_options = defaults.norm_options()
  assert config.lstm_impl == "auto" and "lstm_impl" in defaults.RESUMABLE_FIELDS
  config.lstm_impl = "scan"
  assert cell_options(config)["impl"] == "scan"
  assert make_lstm_cell("none", **cell_options(config)).keywords["impl"] == "scan"


class _Holder(nn.Module):
  cell: object

  def __call__(self, x):
    return x


def test_config_json_records_which_implementation_ran(on_gpu):
  assert normalizer_record(_Holder(make_lstm_cell("none")), "none") == {"recurrence": "cudnn"}
  assert normalizer_record(_Holder(make_lstm_cell("none", impl="scan")), "none") == {
      "recurrence": "fused"}


def test_lengths_of_zero_keep_the_initial_state(on_gpu):
  # cuDNN runs an empty sequence for one step; lstm_layer then restores the carry.
  x = jnp.ones((STEPS, 2, INPUTS))
  carry = (jnp.full((2, HIDDEN), 0.5), jnp.full((2, HIDDEN), -0.25))
  weights = cudnn.pack_weights(jnp.ones((INPUTS, 4 * HIDDEN)), jnp.ones((HIDDEN, 4 * HIDDEN)),
                               jnp.zeros((4 * HIDDEN,)))
  (c, h), hs = cudnn.lstm_layer(weights, x, carry, jnp.array([0, 2]))
  np.testing.assert_array_equal(c[0], carry[0][0])
  np.testing.assert_array_equal(h[0], carry[1][0])
  assert not np.allclose(h[1], carry[1][1])
  assert hs.shape == (STEPS, 2, HIDDEN)
