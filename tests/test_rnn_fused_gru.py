"""The fused GRU recurrence (lnorm.rnn.fused_gru) against the nn.scan of the same cell.

tests/test_rnn_cells.py checks every GRU variant against NumPy loops of the equations,
which now run the fused path. Here the fused and the step-by-step paths of
RecurrentLayer are compared where those tests do not reach: dropout masks, initial
states that receive gradients, several layers and directions, unrolling, and a batch
sharded over several devices.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lnorm.rnn import RecurrentLayer, make_gru_cell
from tests.test_rnn_cells import B, H, LENGTHS, T, inputs
from tests.helpers import extended_beyond
from tests.test_rnn_fused import _perturbed, run_on_four_devices

pytestmark = pytest.mark.usefixtures("precise_jax")

FUSABLE = ("none", "ln", "rms", "prms", "wn", "scalenorm", "ln_simple")


def _cell(variant):
  # pRMSNorm reads half of each row here (6.25% of 6 or 12 entries would be one).
  options = {"prms_p": 0.5} if variant == "prms" else {}
  return make_gru_cell(variant, dropout=0.2, recurrent_dropout=0.3, **options)


def _both_paths(variant, **layer_options):
  cell = _cell(variant)
  return (RecurrentLayer(cell, H, fused=True, **layer_options),
          RecurrentLayer(cell, H, fused=False, **layer_options))


def _outputs_and_grads(layer, params, x, lengths, carry):
  w = jnp.asarray(np.random.default_rng(5).standard_normal((B, T, H)), jnp.float32)

  def loss(params, x, carry):
    out = layer.apply({"params": params}, x, lengths, train=True, initial_carry=carry,
                      rngs={"dropout": jax.random.key(7)})
    final_h = out.final_carries[0][0]
    return jnp.sum(out.outputs * w) + jnp.sum(jnp.sin(final_h)), out

  (_, out), grads = jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True)(
      params, x, carry)
  return out, grads


def _assert_trees_close(got, want, rtol, atol):
  assert jax.tree.structure(got) == jax.tree.structure(want)
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


@pytest.mark.parametrize("variant", extended_beyond(FUSABLE))
@pytest.mark.parametrize("padded", [False, True])
def test_fused_gru_equals_scan_in_values_and_gradients(variant, padded):
  fused, scanned = _both_paths(variant)
  x = jnp.asarray(inputs(31))
  lengths = LENGTHS if padded else None
  params = _perturbed(fused.init(jax.random.key(0), x, lengths)["params"], 3)
  carry = jnp.asarray(np.random.default_rng(32).standard_normal((B, H)), jnp.float32)
  out_f, grads_f = _outputs_and_grads(fused, params, x, lengths, carry)
  out_s, grads_s = _outputs_and_grads(scanned, params, x, lengths, carry)
  _assert_trees_close(out_f, out_s, rtol=1e-5, atol=1e-6)
  _assert_trees_close(grads_f, grads_s, rtol=1e-4, atol=1e-5)
  # Every parameter, the inputs and the initial state received a gradient.
  assert all(float(jnp.max(jnp.abs(g))) > 0 for g in jax.tree.leaves(grads_f))


@pytest.mark.extended
@pytest.mark.parametrize("variant", ["ln", "rms"])
def test_fused_gru_equals_scan_stacked_bidirectional_unrolled(variant):
  options = dict(num_layers=2, bidirectional=True, learned_init=True, unroll=3)
  fused, scanned = _both_paths(variant, **options)
  x = jnp.asarray(inputs(33))
  params = _perturbed(fused.init(jax.random.key(0), x, LENGTHS)["params"], 4)

  def loss(layer, params):
    out = layer.apply({"params": params}, x, LENGTHS, train=True,
                      rngs={"dropout": jax.random.key(3)})
    return jnp.sum(out.outputs ** 2) + jnp.sum(out.final_hidden), out.outputs

  (_, y_f), g_f = jax.value_and_grad(lambda p: loss(fused, p), has_aux=True)(params)
  (_, y_s), g_s = jax.value_and_grad(lambda p: loss(scanned, p), has_aux=True)(params)
  np.testing.assert_allclose(y_f, y_s, rtol=1e-5, atol=1e-6)
  _assert_trees_close(g_f, g_s, rtol=1e-4, atol=1e-5)
  assert float(jnp.max(jnp.abs(g_f["layer_1_bwd_init_0"]))) > 0


def _custom_vjp_calls(layer, params, x):
  jaxpr = str(jax.make_jaxpr(lambda p: layer.apply({"params": p}, x, LENGTHS).outputs)(
      params))
  return re.findall(r"custom_vjp_call\[\s*name=(\w+)", jaxpr)


def test_the_gru_layer_runs_the_fused_recurrence():
  # One fused recurrence per layer (beside the input LNs' fused rows); none when the
  # layer scans the cell step by step.
  layer = RecurrentLayer(make_gru_cell("ln"), H, num_layers=2)
  x = jnp.asarray(inputs(34))
  params = layer.init(jax.random.key(0), x, LENGTHS)["params"]
  assert _custom_vjp_calls(layer, params, x).count("_recurrence") == 2
  scanned = layer.clone(fused=False)
  assert "_recurrence" not in _custom_vjp_calls(scanned, params, x)


_SHARDED_PROBE = """
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from lnorm.rnn import RecurrentLayer, make_gru_cell
x = jnp.asarray(np.random.default_rng(0).standard_normal((8, 5, 4)), jnp.float32)
lengths = jnp.asarray([5, 3, 1, 5, 2, 4, 5, 1])
mesh = Mesh(np.array(jax.devices()), ("data",))
for variant in ("none", "ln", "rms"):
  def step(fused):
    layer = RecurrentLayer(make_gru_cell(variant), 6, num_layers=2, fused=fused)
    loss = lambda p, x: jnp.sum(layer.apply({"params": p}, x, lengths).outputs ** 2)
    return layer, jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
  layer, fused_step = step(True)
  params = layer.init(jax.random.key(0), x, lengths)["params"]
  want = step(False)[1](params, x)   # the step-by-step path, on one device
  got = fused_step(params, jax.device_put(x, NamedSharding(mesh, P("data"))))
  for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
print(len(jax.devices()))
"""


@pytest.mark.extended
def test_fused_gru_with_the_batch_sharded_over_devices():
  # A batch split over 4 (emulated) devices gives the values and gradients of the
  # step-by-step path on one, for two stacked layers over padded sequences.
  run_on_four_devices(_SHARDED_PROBE)
