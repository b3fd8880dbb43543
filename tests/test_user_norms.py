"""A normalizer from the user's own file (``norm=module:attribute``): both forms, in the
MLPs and in LN's places in the LSTM and GRU cells, on every experiment that accepts
``ln``, with a clear error for each way of getting it wrong."""

from __future__ import annotations

import sys
import textwrap

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lnorm import cli
from lnorm import config as config_lib
from lnorm.errors import ConfigError
from lnorm.normalization import DEFINITIONS, UserNormError, check_norm_choice, make_norm
from lnorm.normalization import user as user_norm
from lnorm.rnn import (
    RecurrentLayer, make_gru_cell, make_lstm_cell, normalizer_record, recurrence_path)
from lnorm.sweeps import space as sweep_space
from lnorm.training.task import EXPERIMENTS, load_task

# No precise_jax here: a user's normalizer may broadcast as NumPy does (Gained below),
# and every comparison is with JAX's own float32 arithmetic.

USER_FILE = '''
import flax.linen as nn
import jax.numpy as jnp


def centred(x):
  """LayerNorm-simple, written by hand."""
  mean = jnp.mean(x, axis=-1, keepdims=True)
  var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
  return (x - mean) / jnp.sqrt(var + 1e-5)


def halve(x):
  return x[..., : x.shape[-1] // 2]


def to_half(x):
  return centred(x).astype(jnp.float16)


def in_float32_back_to_its_dtype(x):
  """Computes in float32 and gives back the input's dtype: accepted."""
  return centred(x.astype(jnp.float32)).astype(x.dtype)


def max_scaled(x):
  """No eps: 0/0 on an all-zero row (docs/extending.md, 'No mask')."""
  return x / jnp.max(jnp.abs(x), axis=-1, keepdims=True)


class Gained(nn.Module):
  """tanh with a learned gain per feature."""

  @nn.compact
  def __call__(self, x):
    gain = self.param("gain", nn.initializers.ones, (x.shape[-1],))
    return gain * jnp.tanh(x)


def over_the_batch(x):
  """The issue's bug: LN's arithmetic over axis 0, the batch, instead of the features."""
  mean = jnp.mean(x, axis=0, keepdims=True)
  var = jnp.mean(jnp.square(x - mean), axis=0, keepdims=True)
  return (x - mean) / jnp.sqrt(var + 1e-5)


class GainedOverTheBatch(nn.Module):
  """A learned gain per feature on a normalization over the batch."""

  @nn.compact
  def __call__(self, x):
    return self.param("gain", nn.initializers.ones, (x.shape[-1],)) * over_the_batch(x)


class NeedsWidth(nn.Module):
  width: int

  @nn.compact
  def __call__(self, x):
    return x


class NotAModule:
  pass


SCALE = 2.0
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
  """Writes USER_FILE as a module of its own name on the path; returns the name."""
  name = f"user_norms_{abs(hash(str(tmp_path))) % 10 ** 8}"
  (tmp_path / f"{name}.py").write_text(textwrap.dedent(USER_FILE))
  monkeypatch.syspath_prepend(str(tmp_path))
  yield name
  sys.modules.pop(name, None)


def _x(shape, seed=0):
  return jnp.asarray(np.random.default_rng(seed).normal(size=shape) + 0.5, jnp.float32)


# --- The two forms -------------------------------------------------------------------


def test_function_form_in_a_feed_forward_layer(user_module):
  norm = make_norm(f"{user_module}:centred")
  x = _x((4, 7))
  layer = norm.layer()
  variables = layer.init(jax.random.key(0), x)
  assert variables == {}
  y = layer.apply(variables, x, train=True, mask=None)
  mean = x.mean(-1, keepdims=True)
  np.testing.assert_allclose(y, (x - mean) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5),
                             rtol=1e-5, atol=1e-6)
  assert not norm.has_bias  # the linear map before it keeps its bias


def test_module_form_holds_parameters(user_module):
  layer = make_norm(f"{user_module}:Gained").layer()
  x = _x((3, 5))
  variables = layer.init(jax.random.key(0), x)
  assert jax.tree.map(jnp.shape, variables["params"]) == {"Gained_0": {"gain": (5,)}}
  gain = jnp.arange(1.0, 6.0)
  y = layer.apply({"params": {"Gained_0": {"gain": gain}}}, x)
  np.testing.assert_allclose(y, gain * jnp.tanh(x), rtol=1e-6)


def test_conv_map_is_normalized_over_the_given_axes(user_module):
  x = _x((2, 3, 4, 5))
  y = make_norm(f"{user_module}:centred", {"axes": (1, 2, 3)}).layer().apply({}, x)
  rows = x.reshape(2, -1)
  want = (rows - rows.mean(-1, keepdims=True)) / jnp.sqrt(rows.var(-1, keepdims=True) + 1e-5)
  np.testing.assert_allclose(y, want.reshape(x.shape), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", [make_lstm_cell, make_gru_cell])
def test_in_the_cells_it_takes_every_place_of_ln(user_module, make):
  """The hand-written LN-simple gives what the built-in ln_simple variant gives (whose
  cells tests/test_rnn_cells.py checks against the reference loops): it sits in
  LN's places, all of them, with the same biases around it."""
  x, lengths = _x((3, 5, 4)), jnp.array([5, 2, 4])
  ours = RecurrentLayer(make(f"{user_module}:centred"), 6)
  builtin = RecurrentLayer(make("ln_simple"), 6)
  variables = jax.jit(builtin.init)(jax.random.key(0), x, lengths)
  assert (jax.tree.structure(jax.eval_shape(ours.init, jax.random.key(0), x, lengths))
          == jax.tree.structure(variables))
  variables = jax.tree.map(lambda p: p + 0.3, variables)  # biases away from zero
  outputs = lambda layer: jax.jit(layer.apply)(variables, x, lengths).outputs
  got = outputs(ours)
  np.testing.assert_allclose(got, outputs(builtin), rtol=1e-5, atol=1e-6)
  assert np.max(np.abs(outputs(RecurrentLayer(make("none"), 6)) - got)) > 1e-2


def test_module_form_in_the_gru_has_one_instance_per_place(user_module):
  layer = RecurrentLayer(make_gru_cell(f"{user_module}:Gained"), 5)
  params = jax.eval_shape(layer.init, jax.random.key(0), _x((2, 3, 4)))["params"]["layer_0"]
  shapes = {k: jax.tree.map(jnp.shape, v) for k, v in params.items() if k.endswith("norm")}
  assert shapes == {
      "input_gate_norm": {"Gained_0": {"gain": (10,)}},
      "input_candidate_norm": {"Gained_0": {"gain": (5,)}},
      "hidden_gate_norm": {"Gained_0": {"gain": (10,)}},
      "hidden_candidate_norm": {"Gained_0": {"gain": (5,)}}}


def test_runs_step_by_step_and_the_record_says_so(user_module):
  path = f"{user_module}:Gained"
  assert recurrence_path(make_lstm_cell(path)) == "step-by-step"

  class Holder(nn.Module):
    cell: object

    def __call__(self, x):
      return x

  record = normalizer_record(Holder(make_lstm_cell(path)), path)
  assert record["recurrence"] == "step-by-step"
  assert record["norm_source"]["form"] == "module"
  assert record["norm_source"]["file"].endswith(f"{user_module}.py")
  assert normalizer_record(Holder(make_lstm_cell("ln")), "ln") == {"recurrence": "fused"}
  assert normalizer_record(Holder(None), f"{user_module}:centred")["norm_source"][
      "form"] == "function"


# --- Errors, one cause each ----------------------------------------------------------


def test_missing_module_names_it_and_the_fix():
  with pytest.raises(UserNormError, match=r"no module 'no_such_norms_xyz'.*PYTHONPATH"):
    make_norm("no_such_norms_xyz:my_norm")


def test_missing_attribute_names_it_and_lists_the_module(user_module):
  with pytest.raises(UserNormError,
                     match=r"has no attribute 'my_norm'\. It defines: Gained, "
                           r"GainedOverTheBatch, NeedsWidth, NotAModule, centred, halve, "
                           r"in_float32_back_to_its_dtype, max_scaled, over_the_batch, "
                           r"to_half"):
    make_norm(f"{user_module}:my_norm")


def test_shape_changing_normalizer_is_refused_by_name(user_module):
  layer = make_norm(f"{user_module}:halve").layer()
  with pytest.raises(UserNormError, match=rf"{user_module}:halve \(function\) changed the "
                                          r"shape of its input from \(2, 6\) to \(2, 3\)"):
    layer.init(jax.random.key(0), _x((2, 6)))


def test_a_normalizer_that_changes_the_dtype_is_refused_by_name(user_module):
  layer = make_norm(f"{user_module}:to_half").layer()
  with pytest.raises(UserNormError) as e:
    layer.init(jax.random.key(0), _x((2, 6)))
  assert str(e.value) == (
      f"The normalizer {user_module}:to_half (function) returned float16 for float32 "
      "activations: a normalizer must keep the dtype of its input (compute in float32 if "
      "you like, and return y.astype(x.dtype)).")
  # Keeping the input's dtype passes, for bfloat16 input too.
  layer = make_norm(f"{user_module}:in_float32_back_to_its_dtype").layer()
  x = _x((2, 6)).astype(jnp.bfloat16)
  assert layer.apply(layer.init(jax.random.key(0), x), x).dtype == jnp.bfloat16


def test_shape_change_inside_a_cell_is_refused_too(user_module):
  layer = RecurrentLayer(make_lstm_cell(f"{user_module}:halve"), 4)
  with pytest.raises(UserNormError, match="halve.*changed the shape"):
    layer.init(jax.random.key(0), _x((2, 3, 5)))


# --- per example, checked per example -----------------------------------------------------


def _not_per_example(path: str) -> str:
  return (f"The normalizer {path} is not per example: its output for one example moved (by "
          "1.2 of its size) when only the other examples of the batch changed, so it "
          "reduces over the batch axis. A normalizer named by import path goes where LN "
          "goes and must compute each example's output from that example alone: reduce "
          "over the feature axis (axis=-1, keepdims=True), not axis 0.")


@pytest.mark.parametrize("attribute, form", [("over_the_batch", "function"),
                                             ("GainedOverTheBatch", "module")])
def test_a_normalizer_over_the_batch_is_refused_by_name(user_module, attribute, form):
  layer = make_norm(f"{user_module}:{attribute}").layer()
  with pytest.raises(UserNormError) as e:
    layer.init(jax.random.key(0), _x((5, 7)))
  assert str(e.value) == _not_per_example(f"{user_module}:{attribute} ({form})")


def test_a_normalizer_over_the_batch_is_refused_inside_a_cell_under_jit(user_module):
  # As training initialises: jitted, through the recurrent layer's scan.
  layer = RecurrentLayer(make_lstm_cell(f"{user_module}:over_the_batch"), 4)
  with pytest.raises(UserNormError, match="over_the_batch \\(function\\) is not per example"):
    jax.jit(layer.init)(jax.random.key(0), _x((2, 3, 5)))


@pytest.mark.parametrize("attribute", ["centred", "Gained", "in_float32_back_to_its_dtype",
                                       "max_scaled"])
def test_per_example_normalizers_pass_the_check(user_module, attribute):
  norm = user_norm.load_user_norm(f"{user_module}:{attribute}")
  user_norm.check_per_example(norm, (7,))
  user_norm.check_per_example(norm, (3, 5))  # A sequence's [T, F] per example.


def test_the_check_refuses_just_above_its_tolerance_and_passes_just_below():
  # Example 0's output leaks c times the sum of the other examples: a move of about c * 14
  # relative to its size here, linear in c.
  def leaking(c):
    return lambda x: x + c * jnp.sum(x[1:], axis=0, keepdims=True)
  per_unit = user_norm.batch_dependence(leaking(1e-3), (7,)) / 1e-3
  below, above = (user_norm._PROBE_TOLERANCE * f / per_unit for f in (0.8, 1.25))  # pylint: disable=protected-access
  assert user_norm.batch_dependence(leaking(below), (7,)) < user_norm._PROBE_TOLERANCE < (  # pylint: disable=protected-access
      user_norm.batch_dependence(leaking(above), (7,)))
  user_norm.check_per_example(user_norm.UserNormalizer("m:below", leaking(below), None), (7,))
  with pytest.raises(UserNormError, match="m:above \\(function\\) is not per example"):
    user_norm.check_per_example(user_norm.UserNormalizer("m:above", leaking(above), None), (7,))


@pytest.mark.parametrize("name", list(DEFINITIONS))
def test_the_check_tells_the_registered_per_example_normalizers_from_the_batch_ones(name):
  # The probe against the registry's declarations: LN and its successors never move,
  # BN and BLN (training statistics over the batch) do. `none` and WN normalize nothing.
  layer = make_norm(name).layer()
  batch = user_norm.probe_batches((7,))[0]
  variables = layer.init(jax.random.key(0), batch, train=True)

  def normalize(x):
    return layer.apply(variables, x, train=True, mutable=["batch_stats"])[0]

  moved = user_norm.batch_dependence(normalize, (7,))
  if DEFINITIONS[name].per_example or name in ("none", "wn"):
    assert moved == 0.0, moved
  else:
    assert name in ("bn", "bln") and moved > 0.1, moved


def test_attribute_that_is_not_callable(user_module):
  with pytest.raises(UserNormError, match="'SCALE' is a float, not a function"):
    make_norm(f"{user_module}:SCALE")


def test_class_that_is_not_a_flax_module(user_module):
  with pytest.raises(UserNormError, match="'NotAModule' is a class but not a Flax module"):
    make_norm(f"{user_module}:NotAModule")


def test_module_class_that_needs_arguments(user_module):
  layer = make_norm(f"{user_module}:NeedsWidth").layer()
  with pytest.raises(UserNormError, match="constructs without arguments.*default"):
    layer.init(jax.random.key(0), _x((2, 3)))


def test_path_without_an_attribute():
  with pytest.raises(UserNormError, match="not an import path of the form module:attribute"):
    make_norm("my_norms:")


def test_error_inside_the_users_module_is_not_called_a_missing_module(tmp_path, monkeypatch):
  (tmp_path / "broken_norms_q.py").write_text("import not_installed_pkg_q\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  with pytest.raises(UserNormError, match="importing 'broken_norms_q' failed.*not_installed"):
    make_norm("broken_norms_q:f")
  sys.modules.pop("broken_norms_q", None)


# --- Every experiment that accepts ln ------------------------------------------------


@pytest.mark.parametrize("experiment", sorted(EXPERIMENTS))
def test_every_experiment_accepts_it_and_the_successors(user_module, experiment):
  config = config_lib.load_config(f"configs/{experiment}.py")
  for norm in (f"{user_module}:centred", "dyt", "scalenorm", "ln_simple"):
    config_lib.apply_overrides(config, {"norm": norm})
    assert load_task(config).config.norm == norm


def test_an_experiment_without_ln_refuses_it(user_module):
  with pytest.raises(ConfigError, match=r"Valid choices: bn, wn\.$"):
    check_norm_choice(f"{user_module}:centred", ("bn", "wn"), "demo")


def test_a_bad_path_fails_when_the_task_is_built():
  config = config_lib.load_config("configs/perm_mnist.py")
  config_lib.apply_overrides(config, {"norm": "no_such_norms_xyz:f"})
  with pytest.raises(UserNormError, match="no_such_norms_xyz"):
    load_task(config)


def test_config_argument_and_sweep_grid_take_the_import_path(user_module):
  path = f"{user_module}:centred"
  assert config_lib.load_config(f"configs/perm_mnist.py:norm={path}").norm == path
  space = sweep_space.SweepSpace(grid=[sweep_space.parse_grid(f"norm=ln,{path}")])
  sweep_space.check_against_config("configs/perm_mnist.py", space)


def test_bln_cifar_gives_the_conv_maps_lns_axes():
  from experiments.bln_cifar.task import conv_axes  # pylint: disable=g-import-not-at-top
  for convention in ("conventional", "authors"):
    for norm in ("dyt", "scalenorm", "ln_simple", "my_norms:my_norm"):
      assert conv_axes(convention, norm) == conv_axes(convention, "ln") == {"axes": (1, 2, 3)}


# --- Through the command line: a message, never a traceback ---------------------------


@pytest.mark.parametrize("attribute, message", [
    ("halve", "changed the shape of its input from (128, 32) to (128, 16)"),
    ("to_half", "returned float16 for float32 activations"),
    ("my_norm", "has no attribute 'my_norm'"),
    ("over_the_batch", "over_the_batch (function) is not per example"),
])
def test_lnorm_train_reports_a_bad_normalizer(user_module, tmp_path, capsys, attribute,
                                              message):
  code = cli.main(["train", "--config",
                   f"configs/perm_mnist.py:norm={user_module}:{attribute},smoke=true",
                   "--workdir", str(tmp_path / "run"), "--config.max_steps=1",
                   "--config.progress_bar=false"])
  err = capsys.readouterr().err
  assert code == 2
  assert message in err and "Traceback" not in err


def test_a_normalizer_that_divides_by_zero_in_an_lstm_is_named_as_the_cause(user_module,
                                                                            tmp_path, capsys):
  # The LSTM's zero initial state is an all-zero row: the run was told to lower
  # the learning rate, and that "the last good checkpoint is at step None".
  code = cli.main(["train", "--config",
                   f"configs/handwriting.py:norm={user_module}:max_scaled,smoke=true",
                   "--workdir", str(tmp_path / "run"), "--config.max_steps=2",
                   "--config.progress_bar=false"])
  err = capsys.readouterr().err
  assert code == 2, err
  assert err.startswith("lnorm: error: The loss became nan at training step 0 (epoch 1). "
                        "This is before any update, so the learning rate is not the cause")
  assert f"The likely cause is the normalizer {user_module}:max_scaled: on an all-zero row" in err
  assert "docs/extending.md" in err and "Add an eps inside it" in err
  assert "Lower the learning rate" not in err and "step None" not in err
  assert err.endswith("No checkpoint was saved yet: a rerun starts over.\n")



def test_axes_whose_permutation_is_not_its_own_inverse_come_back_in_place(user_module):
  # Axis 1 of [B, C, H, W] normalized: moved last, (0, 2, 3, 1), whose inverse
  # (0, 3, 1, 2) differs from it (the conv test's axes (1, 2, 3) and the default -1
  # move nothing, so the inverse went untested).
  x = _x((2, 5, 3, 4))
  layer = make_norm(f"{user_module}:centred", {"axes": (1,)}).layer()
  y = np.asarray(layer.apply(layer.init(jax.random.key(0), x), x))
  mean = np.asarray(x).mean(axis=1, keepdims=True)
  var = np.asarray(x).var(axis=1, keepdims=True)
  np.testing.assert_allclose(y, (np.asarray(x) - mean) / np.sqrt(var + 1e-5), rtol=1e-4,
                             atol=1e-5)


def test_a_missing_package_and_a_missing_submodule_each_name_what_is_missing(tmp_path,
                                                                             monkeypatch):
  # The package is missing: the path advice. The package is there but not the
  # submodule: the same advice, naming the submodule. An import inside the user's
  # file that fails: not called a missing module.
  with pytest.raises(UserNormError) as e:
    make_norm("no_such_pkg_q.norms:f")
  assert str(e.value) == (
      "norm='no_such_pkg_q.norms:f': no module 'no_such_pkg_q.norms' on the Python path. "
      "Put the folder holding no_such_pkg_q/norms.py on PYTHONPATH (PYTHONPATH=/that/"
      "folder lnorm train ...).")
  (tmp_path / "pkg_q").mkdir()
  (tmp_path / "pkg_q" / "__init__.py").write_text("")
  (tmp_path / "pkg_q" / "inside.py").write_text("import not_installed_pkg_r\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  try:
    with pytest.raises(UserNormError) as e:
      make_norm("pkg_q.nope:f")
    assert str(e.value).startswith("norm='pkg_q.nope:f': no module 'pkg_q.nope' on the "
                                   "Python path. Put the folder holding pkg_q/nope.py")
    with pytest.raises(UserNormError) as e:
      make_norm("pkg_q.inside:f")
    assert str(e.value) == ("norm='pkg_q.inside:f': importing 'pkg_q.inside' failed: No "
                            "module named 'not_installed_pkg_r'")
  finally:
    for name in ("pkg_q", "pkg_q.nope", "pkg_q.inside"):
      sys.modules.pop(name, None)
