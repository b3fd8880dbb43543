"""The fused LSTM recurrence (lnorm.rnn.fused) against the nn.scan of the same cell
(the GRU's: tests/test_rnn_fused_gru.py).

tests/test_rnn_cells.py checks every variant against NumPy loops, which for the LSTM
without recurrent BN now runs the fused path. Here the two paths of RecurrentLayer
are compared with each other where the NumPy tests do not reach: initial carries
that receive gradients, dropout masks, several layers and directions, unrolling.
"""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lnorm.rnn import RecurrentLayer, make_gru_cell, make_lstm_cell
from tests.test_rnn_cells import B, H, LENGTHS, T, inputs
from tests.helpers import extended_beyond, xla_flags_with_devices

pytestmark = pytest.mark.usefixtures("precise_jax")

FUSABLE = ("none", "ln", "ln_cell", "wn", "rms", "prms", "rms_cell", "prms_cell",
           "scalenorm", "scalenorm_cell", "ln_simple", "ln_simple_cell")


def _perturbed(params, seed):
  """Every parameter moved off its (symmetric) initial value."""
  leaves, treedef = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.key(seed), len(leaves))
  return jax.tree.unflatten(
      treedef, [p + 0.3 * jax.random.normal(k, p.shape) for p, k in zip(leaves, keys)])


def _both_paths(variant, **layer_options):
  # pRMSNorm reads a quarter of each row here (6.25% of 6 or 24 entries would be one).
  options = {"prms_p": 0.25} if variant.startswith("prms") else {}
  cell = make_lstm_cell(variant, dropout=0.2, recurrent_dropout=0.3, forget_bias=1.0,
                        **options)
  return (RecurrentLayer(cell, H, fused=True, **layer_options),
          RecurrentLayer(cell, H, fused=False, **layer_options))


def _outputs_and_grads(layer, params, x, lengths, carry):
  w = jnp.asarray(np.random.default_rng(5).standard_normal((B, T, H)), jnp.float32)

  def loss(params, x, carry):
    out = layer.apply({"params": params}, x, lengths, train=True, initial_carry=carry,
                      rngs={"dropout": jax.random.key(7)})
    final_c, final_h = out.final_carries[0][0]
    return (jnp.sum(out.outputs * w) + jnp.sum(jnp.sin(final_c)) + jnp.sum(final_h ** 2),
            out)

  (_, out), grads = jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True)(
      params, x, carry)
  return out, grads


@pytest.mark.parametrize("variant", extended_beyond(FUSABLE))
@pytest.mark.parametrize("padded", [False, True])
def test_fused_equals_scan_in_values_and_gradients(variant, padded):
  fused, scanned = _both_paths(variant)
  x = jnp.asarray(inputs(21))
  lengths = LENGTHS if padded else None
  params = _perturbed(fused.init(jax.random.key(0), x, lengths)["params"], 1)
  rng = np.random.default_rng(22)
  carry = tuple(jnp.asarray(rng.standard_normal((B, H)), jnp.float32) for _ in range(2))
  out_f, grads_f = _outputs_and_grads(fused, params, x, lengths, carry)
  out_s, grads_s = _outputs_and_grads(scanned, params, x, lengths, carry)
  for got, want in zip(jax.tree.leaves(out_f), jax.tree.leaves(out_s)):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  assert jax.tree.structure(grads_f) == jax.tree.structure(grads_s)
  for got, want in zip(jax.tree.leaves(grads_f), jax.tree.leaves(grads_s)):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.extended
def test_fused_equals_scan_stacked_bidirectional_unrolled():
  options = dict(num_layers=2, bidirectional=True, learned_init=True, unroll=3)
  fused, scanned = _both_paths("ln", **options)
  x = jnp.asarray(inputs(23))
  params = _perturbed(fused.init(jax.random.key(0), x, LENGTHS)["params"], 2)

  def loss(layer, params):
    out = layer.apply({"params": params}, x, LENGTHS, train=True,
                      rngs={"dropout": jax.random.key(3)})
    return jnp.sum(out.outputs ** 2) + jnp.sum(out.final_hidden), out.outputs

  # Jitted: op by op, the two layers' unrolled steps in both directions took longer.
  (_, y_f), g_f = jax.jit(jax.value_and_grad(lambda p: loss(fused, p), has_aux=True))(params)
  (_, y_s), g_s = jax.jit(jax.value_and_grad(lambda p: loss(scanned, p), has_aux=True))(
      params)
  np.testing.assert_allclose(y_f, y_s, rtol=1e-5, atol=1e-6)
  for got, want in zip(jax.tree.leaves(g_f), jax.tree.leaves(g_s)):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
  # The learned initial states are among the parameters that received gradients.
  assert float(jnp.max(jnp.abs(g_f["layer_1_bwd_init_0"]))) > 0


def test_only_the_lstm_without_recurrent_bn_is_fused():
  x = jnp.asarray(inputs(24))

  def fusable(cell_factory):
    layer = RecurrentLayer(cell_factory, H)
    variables = layer.init(jax.random.key(0), x)
    cell = cell_factory(H, name="layer_0").bind(
        {"params": variables["params"]["layer_0"]})
    return cell.fusable

  assert all(fusable(make_lstm_cell(v)) for v in FUSABLE)
  assert not fusable(make_lstm_cell("bn"))
  assert not fusable(make_lstm_cell("dyt")) and not fusable(make_lstm_cell("dyt_cell"))
  # The GRU has its own fused recurrence (tests/test_rnn_fused_gru.py).
  assert fusable(make_gru_cell("ln"))


_SHARDED_PROBE = """
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from lnorm.rnn import RecurrentLayer, make_lstm_cell
layer = RecurrentLayer(make_lstm_cell("ln"), 6)
x = jnp.asarray(np.random.default_rng(0).standard_normal((8, 5, 4)), jnp.float32)
lengths = jnp.asarray([5, 3, 1, 5, 2, 4, 5, 1])
params = layer.init(jax.random.key(0), x, lengths)["params"]
loss = lambda p, x: jnp.sum(layer.apply({"params": p}, x, lengths).outputs ** 2)
step = jax.jit(jax.value_and_grad(loss))
want = step(params, x)
mesh = Mesh(np.array(jax.devices()), ("data",))
got = step(params, jax.device_put(x, NamedSharding(mesh, P("data"))))
for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
  np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
print(len(jax.devices()))
"""


def run_on_four_devices(probe: str) -> None:
  """Runs ``probe`` in a process with 4 emulated CPU devices; it must print 4 last."""
  env = {**os.environ, "XLA_FLAGS": xla_flags_with_devices(4)}
  out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       env=env)
  assert out.returncode == 0, out.stderr[-2000:]
  assert out.stdout.split()[-1] == "4"


@pytest.mark.extended
def test_fused_layer_with_the_batch_sharded_over_devices():
  # A batch split over 4 (emulated) devices gives the values and gradients of one.
  run_on_four_devices(_SHARDED_PROBE)
