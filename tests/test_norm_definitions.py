"""One definition per normalizer (lnorm/normalization/registry.py): the configs'
norm_options, make_norm and the recurrent cells all read the same options, with the
same defaults and the same checks."""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import handwriting as handwriting_config
from lnorm.errors import ConfigError
from lnorm.normalization import DEFINITIONS, PER_EXAMPLE_NORMS, LayerNorm, make_norm
from lnorm.rnn import DEFAULT_OPTIONS, cell_options, make_gru_cell, make_lstm_cell
from lnorm.training.defaults import norm_options


def _away_from_default(value):
  return {float: value * 3 + 0.125 if value else 0.25, bool: not value}.get(
      type(value), value)


def test_the_configs_blocks_are_the_definitions_options():
  blocks = norm_options().to_dict()
  assert sorted(blocks) == sorted(DEFINITIONS)
  for name, definition in DEFINITIONS.items():
    assert blocks[name] == dict(definition.options), name


@pytest.mark.parametrize("name", PER_EXAMPLE_NORMS)
def test_options_away_from_defaults_reach_the_layer_and_every_place_of_the_cells(name):
  # The module a feed-forward layer builds and the one in each cell place get the same
  # fields from the same options; only those the definition sets for the cells differ.
  config = handwriting_config.get_config(f"norm={name},smoke=true")
  block = config.norm_options[name]
  for option, value in DEFINITIONS[name].options.items():
    if isinstance(value, (float, bool)):
      block[option] = _away_from_default(value)
  if "p" in block:
    block.p = 0.25
  if name == "scalenorm":
    block.scale_init = 2.5
  layer = make_norm(name, block).layer
  want = {k: v for k, v in layer.keywords.items() if k not in ("axes", "use_bias")}
  for make, places in ((make_lstm_cell, ("input_norm", "hidden_norm", "cell_norm")),
                       (make_gru_cell, ("input_norm", "hidden_norm"))):
    norms = make(name, **cell_options(config)).keywords["norms"]
    for place in places:
      module = getattr(norms, place)
      assert module.func is layer.func, (name, place)
      got = {k: v for k, v in module.keywords.items() if k != "use_bias"}
      assert got.keys() == want.keys(), (name, place)
      for key in want:
        if key == "scale_init" and callable(want[key]):   # initializers: by their value
          assert float(got[key](None, ())) == float(want[key](None, ())), (name, key)
        else:
          assert got[key] == want[key], (name, place, key)


def test_ln_simple_options_are_not_taken_for_lns():
  # ln_simple_eps is ln_simple's eps, not an option 'simple_eps' of ln.
  config = handwriting_config.get_config("norm=ln_simple,smoke=true")
  config.norm_options.ln_simple.eps = 1e-3
  config.norm_options.ln.eps = 1e-2
  norms = make_lstm_cell("ln_simple", **cell_options(config)).keywords["norms"]
  assert norms.cell_norm.keywords["eps"] == 1e-3
  norms = make_lstm_cell("ln", **cell_options(config)).keywords["norms"]
  assert norms.cell_norm.keywords["eps"] == 1e-2


def test_rmsnorm_has_a_bias_in_layers_and_none_in_the_cells():
  x = jnp.ones((2, 6))
  ff = make_norm("rms").layer()
  assert set(ff.init(jax.random.key(0), x)["params"]) == {"scale", "bias"}
  norms = make_lstm_cell("rms").keywords["norms"]
  cell = norms.cell_norm()
  assert set(cell.init(jax.random.key(0), x, step=jnp.int32(0))["params"]) == {"scale"}
  assert not norms.input_norm_has_bias
  assert make_gru_cell("ln").keywords["norms"].input_norm_has_bias


def test_the_cells_ignore_a_per_row_mask_that_a_layer_would_use():
  # In a cell the mask marks rows ([B]); a per-example statistic must not read it.
  x = jnp.asarray(np.random.default_rng(0).normal(size=(3, 5)), jnp.float32)
  module = make_lstm_cell("ln").keywords["norms"].cell_norm()
  variables = module.init(jax.random.key(0), x, step=jnp.int32(0))
  rows = jnp.asarray([True, False, True])
  np.testing.assert_array_equal(
      module.apply(variables, x, step=jnp.int32(0), mask=rows), module.apply(variables, x))


def test_an_unknown_option_is_refused_with_the_valid_ones():
  with pytest.raises(ConfigError, match="'ln' has no option.*epsilon.*eps, scale_init"):
    make_norm("ln", {"epsilon": 1e-3})
  with pytest.raises(ConfigError, match="'bn' has no option"):
    make_norm("bn", {"gain": 1.0})


@pytest.mark.parametrize("name,options,message", [
    ("prms", {"p": 0.0}, "norm_options.prms.p=0.0"),
    ("prms", {"p": 1.5}, "norm_options.prms.p=1.5"),
    ("bln", {"population": "mean"}, "norm_options.bln.population='mean'"),
    ("bln", {"inference": "pxpp"}, "norm_options.bln.inference"),
    ("bn", {"momentum": 1.0}, "norm_options.bn.momentum=1.0"),
])
def test_values_no_run_can_use_are_refused_before_any_model_is_built(name, options,
                                                                       message):
  with pytest.raises(ConfigError, match=message):
    make_norm(name, options)


def test_the_edges_of_the_checks_are_allowed():
  make_norm("prms", {"p": 1.0})
  make_norm("bn", {"momentum": 0.0})


def test_the_flat_cell_options_are_a_view_of_the_definitions():
  assert DEFAULT_OPTIONS["ln_simple_eps"] == DEFINITIONS["ln_simple"].options["eps"]
  assert DEFAULT_OPTIONS["bn_scale_init"] == DEFINITIONS["bn"].options["scale_init"]
  assert DEFAULT_OPTIONS["bn_max_steps"] == DEFINITIONS["bn"].placement["max_steps"]
  assert "bln_eps" not in DEFAULT_OPTIONS   # the cells do not take BLN


# --- the module defaults are the registry's -----------------------------------------


def _field_defaults(module_class) -> dict:
  return {f.name: f.default for f in dataclasses.fields(module_class)
          if f.default is not dataclasses.MISSING}


def _same(default, given) -> bool:
  """An option's value as the definition hands it to the module, and the module's own
  default: numbers and tuples compared as they are, initializers by what they make."""
  if callable(default) and callable(given):
    shape = (3,)
    return np.array_equal(default(jax.random.key(0), shape, jnp.float32),
                          given(jax.random.key(0), shape, jnp.float32))
  return default == given


def _shown(value) -> str:
  """A default as a message names it: an initializer by the value it starts at."""
  if callable(value):
    return f"init {float(value(jax.random.key(0), (1,), jnp.float32)[0]):g}"
  return repr(value)


def _factories(definition, options) -> list:
  """Every module factory a definition makes from ``options``: its feed-forward layer
  and dense map, and each place of the recurrent cells."""
  norm = definition.feed_forward(options)
  out = [norm.layer, norm.dense]
  if definition.in_cells is not None:
    cells = definition.in_cells(options)
    out += [cells.input_norm, cells.hidden_norm, cells.cell_norm, cells.dense]
  return [f for f in out if isinstance(f, functools.partial)]


def _moved(options) -> dict:
  """Every number and flag of ``options`` moved off its value, within the checks."""
  return {k: (not v if isinstance(v, bool) else v / 2 if v else 0.25)
          for k, v in options.items() if isinstance(v, (bool, float))}


def default_disagreements(definitions) -> list[str]:
  """``name: Module.field default 0.1, registry 1.0`` for every module field a
  definition sets from an option (a field named as the option, which moves with it),
  where the option's default is not the module's own default. Fields a definition
  fixes whatever the options (RMSNorm's bias in the cells, WN's data_init there) are
  its choices, not defaults."""
  out = []
  for name, definition in definitions.items():
    named = {**definition.placement, **definition.options}
    at_defaults = _factories(definition, definition.resolve())
    moved = _factories(definition, definition.resolve(_moved(definition.options)))
    for factory, other in zip(at_defaults, moved):
      defaults = _field_defaults(factory.func)
      for field, given in factory.keywords.items():
        fixed = (isinstance(named.get(field), (bool, float))
                 and _same(given, other.keywords[field]))
        if field in named and field in defaults and not fixed and not _same(
            defaults[field], given):
          out.append(f"{name}: {factory.func.__name__}.{field} default "
                     f"{_shown(defaults[field])}, registry {_shown(given)}")
  return out


def test_every_module_default_is_the_registrys():
  # A module built without arguments (a test, a model that builds one itself) is the
  # registered normalizer at its defaults: one source for every default.
  assert default_disagreements(DEFINITIONS) == []


def test_a_module_default_that_disagrees_with_the_registry_is_named():
  # The check above bites: a module whose field default differs from the option.
  class Shadowing(LayerNorm):
    eps: float = 1e-6

  ln = DEFINITIONS["ln"]
  shadowed = dataclasses.replace(
      ln, feed_forward=lambda o: dataclasses.replace(
          ln.feed_forward(o), layer=functools.partial(Shadowing, eps=o["eps"])))
  assert default_disagreements({"ln": shadowed}) == [
      "ln: Shadowing.eps default 1e-06, registry 1e-05"]

  class SmallGain(LayerNorm):  # As recurrent BN's module started at 0.1, its option 1.0.
    scale_init: Callable = nn.initializers.constant(0.1)

  small_gain = dataclasses.replace(
      ln, feed_forward=lambda o: dataclasses.replace(
          ln.feed_forward(o), layer=functools.partial(
              SmallGain, scale_init=nn.initializers.constant(o["scale_init"]))))
  assert [line.split(" default")[0] for line in default_disagreements(
      {"ln": small_gain})] == ["ln: SmallGain.scale_init"]


def test_dyts_attention_alpha_is_a_registered_option():
  assert DEFINITIONS["dyt"].resolve({"alpha_init_attention": 0.7})[
      "alpha_init_attention"] == 0.7
  assert DEFINITIONS["dyt"].resolve()["alpha_init_attention"] is None
  # Everywhere but before a Transformer's attention it changes nothing.
  layer = make_norm("dyt", {"alpha_init_attention": 0.7}).layer
  assert layer.keywords["alpha_init"] == DEFINITIONS["dyt"].options["alpha_init"]
