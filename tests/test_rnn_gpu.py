"""The recurrences built for a GPU (lnorm.rnn.gpu_recurrence, the Pallas step kernels of
lnorm.rnn.pallas_steps), checked on a CPU, where the kernels run in Pallas's
interpreter; and the choice of ``impl`` (lnorm.rnn.implementation).

Against ``nn.scan`` of the same cells: every per-example normalizer in the LSTM and the
GRU, 50 steps, padded sequences whose lengths divide nothing (the longest shorter
than the padding, so that the loop stops early) and an empty one, dropout of x and h,
given initial carries: outputs, final carries and the gradients of every parameter,
of the inputs and of the initial carries. The recurrent matrices start small
(orthogonal, scaled by 0.5), so that the dynamics are not chaotic and float32
rounding does not grow over the steps; every other parameter is moved off its initial
value. Tolerances, each array against its largest entry (an entry near zero may
differ by float32's rounding of the larger ones): outputs and carries 2e-5, gradients
1e-4. The largest differences seen were 4.6e-6 in the outputs and 1.7e-5 in the
gradients (both the GRU with pRMSNorm); most cases stay below 1e-6 and 1e-5.
"""

from __future__ import annotations

import functools
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lnorm import config as config_lib
from lnorm.errors import ConfigError
from lnorm.normalization import functional as F
from lnorm.normalization.functional import RowNorm, rms_rows
from lnorm.rnn import (
    RecurrentLayer, cell_options, cudnn, fused, fused_gru, gpu_recurrence, implementation,
    kernel_launch, kernel_norms, make_gru_cell, make_lstm_cell, normalizer_record,
    recurrence_path, sequence_mask)
from lnorm.rnn.pallas_steps import GRUKernelParams, GRUSteps, LSTMKernelParams, LSTMSteps
from lnorm.training import defaults, lowering
from tests.helpers import DISTINCT_RECURRENCE_VARIANTS, REPO, extended_beyond
from tests.test_user_norms import user_module  # pylint: disable=unused-import

pytestmark = pytest.mark.usefixtures("precise_jax")

B, T, I, H = 3, 50, 4, 5
#: LN's and RMSNorm's eps (their registered default), which a RowNorm is given.
EPS = 1e-5
LENGTHS = np.array([43, 29, 0], np.int32)  # The longest < T: the loop stops at 43.

#: Each per-example normalizer in LN's places; for the LSTM also on c alone, with no
#: normalizer and weight-normalized.
LSTM_VARIANTS = ("ln", "rms", "prms", "dyt", "scalenorm", "ln_simple", "ln_cell", "none",
                 "wn")
GRU_VARIANTS = ("ln", "rms", "prms", "dyt", "scalenorm", "ln_simple", "none")


def _options(variant: str) -> dict:
  options = dict(dropout=0.2, recurrent_dropout=0.3,
                 recurrent_kernel_init=nn.initializers.orthogonal(scale=0.5))
  if variant.startswith("prms"):
    options["prms_p"] = 0.25  # Reads 5 of the 20 gate entries (6.25% would read one).
  return options


def _perturbed(params, seed):
  """Every parameter but the recurrent kernels moved off its initial value."""
  leaves = jax.tree_util.tree_leaves_with_path(params)
  keys = jax.random.split(jax.random.key(seed), len(leaves))
  moved = [p if "hidden_proj" in jax.tree_util.keystr(path)
           else p + 0.3 * jax.random.normal(key, p.shape)
           for (path, p), key in zip(leaves, keys)]
  return jax.tree.unflatten(jax.tree.structure(params), moved)


def _loss(layer, params, x, carry, lengths):
  width = 2 * H if layer.bidirectional else H
  w = jnp.asarray(np.random.default_rng(5).standard_normal((B, T, width)), jnp.float32)
  out = layer.apply({"params": params}, x, lengths, train=True, initial_carry=carry,
                    rngs={"dropout": jax.random.key(7)})
  final = jax.tree.leaves(out.final_carries)
  return (jnp.sum(out.outputs * w) + sum(jnp.sum(jnp.sin(c)) for c in final),
          (out.outputs, out.final_carries))


def _compare(make, variant, lengths=LENGTHS, carry_given=True, **layer_options):
  """The Pallas path against the scan, in values and gradients."""
  options = _options(variant)
  kernels = RecurrentLayer(make(variant, impl="pallas", **options), H, **layer_options)
  scanned = RecurrentLayer(make(variant, **options), H, fused=False, **layer_options)
  x = jnp.asarray(np.random.default_rng(21).standard_normal((B, T, I)), jnp.float32)
  params = _perturbed(jax.jit(scanned.init)(jax.random.key(0), x, lengths)["params"], 1)
  carry = None
  if carry_given:
    rng = np.random.default_rng(22)
    state = lambda: jnp.asarray(0.5 * rng.standard_normal((B, H)), jnp.float32)
    carry = (state(), state()) if make is make_lstm_cell else state()

  def run(layer):
    grad = jax.value_and_grad(functools.partial(_loss, layer, lengths=lengths),
                              argnums=(0, 1, 2), has_aux=True)
    return jax.jit(grad)(params, x, carry)

  (_, out_k), grads_k = run(kernels)
  (_, out_s), grads_s = run(scanned)
  _assert_close(out_k, out_s, 2e-5)
  _assert_close(grads_k, grads_s, 1e-4)
  return grads_k


def _assert_close(got, want, tolerance: float) -> None:
  """Each array of ``got`` within ``tolerance`` times the largest entry of ``want``'s."""
  assert jax.tree.structure(got) == jax.tree.structure(want)
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(g, w, rtol=0, atol=tolerance * float(np.max(np.abs(w))))


#: Each case compiles the kernels in Pallas's interpreter (5 to 15 s of a core): the
#: normalizers sharing LN's tile code are checked tile by tile in the suite
#: (test_the_tile_normalizers_equal_the_normalizers_with_padded_tiles) and through the
#: kernels as extended cases. RMSNorm among them: its tiles are pRMSNorm's over the
#: whole row, and pRMSNorm runs through the kernels in the suite
#: (test_unpadded_sequences_from_a_zero_state).
KERNEL_VARIANTS = tuple(v for v in DISTINCT_RECURRENCE_VARIANTS if v != "rms")


@pytest.mark.parametrize("variant", extended_beyond(LSTM_VARIANTS, KERNEL_VARIANTS))
def test_lstm_kernels_equal_the_scan(variant):
  _compare(make_lstm_cell, variant)


@pytest.mark.parametrize("variant", extended_beyond(GRU_VARIANTS, KERNEL_VARIANTS))
def test_gru_kernels_equal_the_scan(variant):
  _compare(make_gru_cell, variant)


def test_unpadded_sequences_from_a_zero_state():
  # No lengths: the loop's trip count is the static T.
  _compare(make_lstm_cell, "prms", lengths=None, carry_given=False)


@pytest.mark.parametrize("make", [make_lstm_cell, make_gru_cell])
def test_blocks_of_rows_that_overhang_the_batch(make, monkeypatch):
  # Two rows per program: the batch of 3 is two programs, the second half empty.
  monkeypatch.setattr(kernel_launch, "TILE_ENTRIES", 16)
  assert kernel_launch.Launch(B, H).grid == (2,)
  _compare(make, "ln")


@pytest.mark.slow  # 35 s on the shared machine: four layers' kernels, interpreted.
def test_stacked_bidirectional_layers_with_learned_initial_states():
  grads = _compare(make_lstm_cell, "ln", carry_given=False, num_layers=2,
                   bidirectional=True, learned_init=True)
  assert float(jnp.max(jnp.abs(grads[0]["layer_1_bwd_init_0"]))) > 0


# --- the normalizers on a row's tiles ---------------------------------------------------

_ROWS, _PARTS, _WIDTH, _PADDED = 3, 3, 4, 6  # A row of 12 features as 3 tiles of 4 (+ 2).


def _tiles_of(row):
  """``[rows, 12]`` as three ``[rows, 6]`` tiles whose padded columns hold 1e3."""
  pad = jnp.full((_ROWS, _PADDED - _WIDTH), 1e3, jnp.float32)
  return [jnp.concatenate([row[:, k * _WIDTH:(k + 1) * _WIDTH], pad], axis=1)
          for k in range(_PARTS)]


def _row_of(tiles):
  return jnp.concatenate([t[:, :_WIDTH] for t in tiles], axis=1)


_TILES = kernel_norms.Tiles(_PARTS * _WIDTH, tuple(k * _WIDTH for k in range(_PARTS)),
                            jnp.broadcast_to(jnp.arange(_PADDED) < _WIDTH, (_ROWS, _PADDED)),
                            jnp.arange(_PADDED)[None, :])


def _reference(norm, x):
  """The normalizer as lnorm.normalization.functional defines it, differentiated by JAX."""
  if isinstance(norm, kernel_norms.TanhNorm):
    return F.dynamic_tanh(x, norm.alpha, norm.scale, norm.bias)
  if norm.stats.centered:
    return F.layer_norm(x, norm.scale, norm.bias, eps=norm.eps)
  partial = 1.0 if norm.stats.size is None else norm.stats.size / x.shape[-1]
  return F.rms_norm(x, norm.scale, norm.bias, eps=norm.eps, partial=partial)


@pytest.mark.parametrize("kind", ["ln", "rms", "prms", "ln_simple", "dyt"])
def test_the_tile_normalizers_equal_the_normalizers_with_padded_tiles(kind):
  rng = np.random.default_rng(4)
  normal = lambda *shape: jnp.asarray(rng.standard_normal(shape), jnp.float32)
  features = _PARTS * _WIDTH
  norm = {"ln": RowNorm(1 + normal(features), normal(features), EPS),
          "rms": RowNorm(1 + normal(features), None, EPS, stats=rms_rows()),
          "prms": RowNorm(1 + normal(features), None, EPS, stats=rms_rows(5)),  # Over 2 tiles.
          "ln_simple": RowNorm(jnp.ones(features), None, EPS),
          "dyt": kernel_norms.TanhNorm(jnp.float32(0.7), 1 + normal(features),
                                       normal(features))}[kind]
  x, dy = 2 + 3 * normal(_ROWS, features), normal(_ROWS, features)
  p = kernel_norms.tile_parameters(
      jax.tree.map(lambda a: jnp.reshape(a, (1,)) if a.ndim == 0 else a, norm),
      lambda v, start: jnp.pad(v[start:start + _WIDTH], (0, _PADDED - _WIDTH))[None],
      _TILES.offsets)

  y, saved, rstd = kernel_norms.forward(norm, _tiles_of(x), p, _TILES)
  want, vjp = jax.vjp(_reference, norm, x)
  np.testing.assert_allclose(_row_of(y), want, rtol=1e-5, atol=1e-5)
  d_norm, dx = vjp(dy)
  got_dx = kernel_norms.backward(norm, _tiles_of(dy), saved, rstd, p, _TILES)
  np.testing.assert_allclose(_row_of(got_dx), dx, rtol=1e-4, atol=1e-5)
  # The parameters' gradients from the saved values, as after the loop ([T, B, F]).
  got = kernel_norms.parameter_gradients(norm, dy[None], _row_of(saved)[None])
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(d_norm)):
    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


# --- the loop runs to the longest sequence --------------------------------------------


def _recording_steps(monkeypatch) -> dict:
  """The time steps the LSTM's forward and backward loops run, in order."""
  ran = {"forward": [], "backward": []}
  record = lambda name: lambda step: ran[name].append(int(step))
  forward, backward = LSTMSteps.forward_step, LSTMSteps.backward_step

  def forward_step(self, params, z, projected, step, *rest):
    jax.debug.callback(record("forward"), step, ordered=True)
    return forward(self, params, z, projected, step, *rest)

  def backward_step(self, params, dh, step, *rest):
    jax.debug.callback(record("backward"), step, ordered=True)
    return backward(self, params, dh, step, *rest)

  monkeypatch.setattr(LSTMSteps, "forward_step", forward_step)
  monkeypatch.setattr(LSTMSteps, "backward_step", backward_step)
  return ran


@pytest.mark.parametrize("lengths,steps", [(LENGTHS, 43), (np.zeros(B, np.int32), 0),
                                           (None, T)])
def test_the_loop_runs_to_the_longest_sequence_both_ways(lengths, steps, monkeypatch):
  ran = _recording_steps(monkeypatch)
  layer = RecurrentLayer(make_lstm_cell("ln", impl="pallas"), H)
  x = jnp.ones((B, T, I))
  params = jax.jit(layer.init)(jax.random.key(0), x, lengths)["params"]
  loss = lambda p: jnp.sum(layer.apply({"params": p}, x, lengths).outputs ** 2)
  jax.block_until_ready(jax.jit(jax.grad(loss))(params))
  assert ran == {"forward": list(range(steps)), "backward": list(range(steps))[::-1]}


def _row_norm(rng, features, **kw):
  return RowNorm(jnp.asarray(1 + 0.3 * rng.standard_normal(features), jnp.float32),
                 jnp.asarray(0.3 * rng.standard_normal(features), jnp.float32),
                 **{"eps": EPS, **kw})


def test_outputs_past_a_sequence_hold_its_last_state_and_pass_their_gradients():
  """At the level of the recurrence (RecurrentLayer zeroes the outputs past the ends):
  the kernels' against the fused recurrence's, whose loop runs every padded step."""
  rng = np.random.default_rng(3)
  normal = lambda *shape: jnp.asarray(rng.standard_normal(shape), jnp.float32)
  mask = sequence_mask(jnp.asarray(LENGTHS), T).T
  w = normal(T, B, H)
  loss = lambda out: jnp.sum(out[1] * w) + sum(jnp.sum(jnp.sin(c))
                                               for c in jax.tree.leaves(out[0]))

  lstm = (0.3 * normal(H, 4 * H), _row_norm(rng, 4 * H), _row_norm(rng, H, stats=rms_rows()))
  carry = (normal(B, H), normal(B, H))
  kernels = lambda p, xs, c: loss(gpu_recurrence.recurrence(
      LSTMSteps(), LSTMKernelParams(*p), xs, c, lengths=LENGTHS))
  scanned = lambda p, xs, c: loss(fused.lstm_recurrence(
      fused.LSTMRecurrenceParams(p[0], jnp.zeros(4 * H), None, p[1], p[2]), xs, c,
      step_mask=mask))
  gru = (0.3 * normal(H, 3 * H), _row_norm(rng, 2 * H, stats=rms_rows(3)), _row_norm(rng, H))
  gru_kernels = lambda p, xs, c: loss(gpu_recurrence.recurrence(
      GRUSteps(), GRUKernelParams(*p), xs, c, lengths=LENGTHS))
  gru_scanned = lambda p, xs, c: loss(fused_gru.gru_recurrence(
      fused_gru.GRURecurrenceParams(*p), xs, c, step_mask=mask))

  for (got, want), args in (((kernels, scanned), (lstm, normal(T, B, 4 * H), carry)),
                            ((gru_kernels, gru_scanned), (gru, normal(T, B, 3 * H),
                                                          normal(B, H)))):
    value_got, grads_got = jax.jit(jax.value_and_grad(got, argnums=(0, 1, 2)))(*args)
    value_want, grads_want = jax.jit(jax.value_and_grad(want, argnums=(0, 1, 2)))(*args)
    _assert_close(value_got, value_want, 2e-5)
    _assert_close(grads_got, grads_want, 1e-4)


# --- lowered for cuda -------------------------------------------------------------------


def test_the_kernels_lower_for_cuda_and_run_interpreted_on_a_cpu():
  layer = RecurrentLayer(make_gru_cell("dyt", impl="pallas", recurrent_dropout=0.1), H)
  x = jax.ShapeDtypeStruct((B, T, I), jnp.float32)
  lengths = jax.ShapeDtypeStruct((B,), jnp.int32)
  params = jax.eval_shape(layer.init, jax.random.key(0), x, lengths)["params"]

  def loss(params, x, lengths):
    out = layer.apply({"params": params}, x, lengths, train=True,
                      rngs={"dropout": jax.random.key(0)})
    return jnp.sum(out.outputs ** 2)

  step = jax.jit(jax.value_and_grad(loss))
  exported = jax.export.export(step, platforms=("cuda",), disabled_checks=[
      jax.export.DisabledSafetyCheck.custom_call(kernel_launch.TRITON_CUSTOM_CALL)])(
          params, x, lengths)
  # One forward and one backward kernel, each a Triton module, in the loops over time.
  text = exported.mlir_module()
  assert text.count(f"@{kernel_launch.TRITON_CUSTOM_CALL}(") == 2
  assert 'name = "gru_step_forward"' in text and 'name = "gru_step_backward"' in text
  assert kernel_launch.TRITON_CUSTOM_CALL not in step.lower(params, x, lengths).as_text()


@pytest.mark.parametrize("experiment", ["attentive_reader", "skip_thoughts"])
def test_lnorm_check_lowers_a_recurrent_config_with_the_kernels_for_cuda(experiment):
  config = config_lib.load_config(os.path.join(REPO, "configs", f"{experiment}.py:smoke=true"))
  config.lstm_impl = "pallas"
  report = lowering.check(config, ("cuda",))
  assert [s.lowered for s in report.steps] == [{"cuda": None}, {"cuda": None}]


# --- the choice: lstm_impl -------------------------------------------------------------


@pytest.fixture
def on_nvidia_gpu(monkeypatch):
  """The backend reported as an NVIDIA GPU (where cuDNN and Triton run)."""
  monkeypatch.setattr(cudnn, "_on_gpu", lambda: True)
  monkeypatch.setattr(implementation, "on_nvidia_gpu", lambda: True)


@pytest.mark.parametrize("make,variant,options,path", [
    (make_lstm_cell, "none", {}, "cudnn"), (make_lstm_cell, "wn", {}, "cudnn"),
    (make_lstm_cell, "ln", {}, "pallas"), (make_lstm_cell, "ln_cell", {}, "pallas"),
    (make_lstm_cell, "dyt", {}, "pallas"), (make_lstm_cell, "prms", {}, "pallas"),
    (make_lstm_cell, "bn", {}, "step-by-step"),
    (make_lstm_cell, "none", {"recurrent_dropout": 0.2}, "fused"),
    (make_lstm_cell, "ln", {"impl": "scan"}, "fused"),
    (make_gru_cell, "ln", {}, "pallas"), (make_gru_cell, "scalenorm", {}, "pallas"),
    (make_gru_cell, "none", {}, "fused"), (make_gru_cell, "dyt", {"impl": "scan"},
                                           "step-by-step")])
def test_auto_on_an_nvidia_gpu(make, variant, options, path, on_nvidia_gpu):
  assert recurrence_path(make(variant, **options)) == path


@pytest.mark.parametrize("make,variant,path", [
    (make_lstm_cell, "none", "fused"), (make_lstm_cell, "ln", "fused"),
    (make_lstm_cell, "dyt", "step-by-step"), (make_gru_cell, "ln", "fused")])
def test_auto_on_a_cpu_keeps_todays_paths(make, variant, path):
  assert recurrence_path(make(variant)) == path


def test_auto_on_a_gpu_without_triton_keeps_the_scan_for_normalized_cells(monkeypatch):
  monkeypatch.setattr(cudnn, "_on_gpu", lambda: True)  # A ROCm GPU: cuDNN's LSTM runs.
  assert recurrence_path(make_lstm_cell("ln")) == "fused"
  assert recurrence_path(make_lstm_cell("none")) == "cudnn"


def test_pallas_runs_every_per_example_normalizer_anywhere():
  for variant in ("ln", "rms", "prms", "dyt", "scalenorm", "ln_simple", "dyt_cell", "none",
                  "wn"):
    assert recurrence_path(make_lstm_cell(variant, impl="pallas")) == "pallas"
  for variant in ("ln", "dyt", "none"):
    assert recurrence_path(make_gru_cell(variant, impl="pallas")) == "pallas"


def test_the_layer_runs_the_kernels_exactly_where_auto_chooses_them(on_nvidia_gpu,
                                                                     monkeypatch):
  calls = []
  recurrence = gpu_recurrence.recurrence
  monkeypatch.setattr(gpu_recurrence, "recurrence",
                      lambda *a, **k: calls.append(1) or recurrence(*a, **k))
  x = jax.ShapeDtypeStruct((B, 7, I), jnp.float32)
  for make, variant, runs in ((make_lstm_cell, "ln", 1), (make_gru_cell, "ln", 1),
                              (make_gru_cell, "none", 0)):
    layer = RecurrentLayer(make(variant), H, bidirectional=True)
    variables = jax.eval_shape(layer.init, jax.random.key(0), x)
    assert not calls  # Initialization scans.
    jax.eval_shape(layer.apply, variables, x)
    assert len(calls) == 2 * runs  # Both directions.
    calls.clear()
    jax.eval_shape(RecurrentLayer(make(variant), H, fused=False).apply,
                   {"params": variables["params"]}, x)
    assert not calls  # fused=False scans whatever impl says.


def test_pallas_for_recurrent_bn_is_refused_in_one_line():
  with pytest.raises(ConfigError) as e:
    make_lstm_cell("bn", impl="pallas")
  assert str(e.value) == (
      "lstm_impl='pallas' cannot run this LSTM: its normalizer ('bn', on hidden_norm "
      "(StepBatchNorm), cell_norm (StepBatchNorm)) has no step kernel; the kernels run "
      "LN, RMSNorm, pRMSNorm, DyT, ScaleNorm, LayerNorm-simple or no normalizer. Use "
      "--config.lstm_impl=auto (the kernels where they can run, lnorm's scan elsewhere) "
      "or scan.")


def test_pallas_for_a_users_normalizer_is_refused_in_one_line(user_module):
  with pytest.raises(ConfigError, match=r"^lstm_impl='pallas' cannot run this GRU: its "
                     r"normalizer \('[\w]+:centred', on hidden_norm \(ImportedNorm\)\) "
                     r"has no step kernel") as e:
    make_gru_cell(f"{user_module}:centred", impl="pallas")
  assert "\n" not in str(e.value)


def test_cudnn_for_a_normalized_lstm_is_still_refused(on_nvidia_gpu):
  with pytest.raises(ConfigError, match=r"lstm_impl='cudnn' cannot run this LSTM: its "
                                        r"normalizer \('ln', on input_norm"):
    make_lstm_cell("ln", impl="cudnn")


def test_an_unknown_implementation_names_every_choice():
  with pytest.raises(ConfigError, match=r"lstm_impl='triton': use one of auto, scan, "
                                        r"cudnn, pallas \(auto: cuDNN for the plain LSTM"):
    make_gru_cell("ln", impl="triton")


def test_the_config_field_reaches_the_gru_and_the_record_says_pallas():
  config = defaults.base_config()
  config.norm_options = defaults.norm_options()
  config.lstm_impl = "pallas"
  factory = make_gru_cell("ln", **cell_options(config))
  assert factory.keywords["impl"] == "pallas"

  class Holder(nn.Module):
    cell: object

    def __call__(self, x):
      return x

  assert normalizer_record(Holder(factory), "ln") == {"recurrence": "pallas"}
