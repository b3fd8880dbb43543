"""One definition per normalizer (lnorm/normalization/registry.py): the configs'
norm_options, make_norm and the recurrent cells all read the same options, with the
same defaults and the same checks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import handwriting as handwriting_config
from lnorm.errors import ConfigError
from lnorm.normalization import DEFINITIONS, PER_EXAMPLE_NORMS, make_norm
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
