"""RMSNorm and pRMSNorm on every experiment that accepts LN: the experiments accept
them, their configs' options reach the normalizers, and models built by the tasks
compute the RMSNorm paper's equations (tests/references.py)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from configs import perm_mnist as perm_mnist_config
from configs import skip_thoughts as skip_thoughts_config
from experiments.perm_mnist import task as perm_mnist
from lnorm.errors import ConfigError
from lnorm.rnn import RecurrentLayer, cell_options, make_lstm_cell
from lnorm.training.task import EXPERIMENTS, task_class
from tests import references as ref
from tests import test_skip_thoughts
from tests.test_forward_models import TOL, _apply_train, _dataset, _init, mlp_ref

pytestmark = pytest.mark.usefixtures("precise_jax")


@pytest.mark.parametrize("experiment", sorted(EXPERIMENTS))
def test_every_experiment_that_accepts_ln_accepts_rms_and_prms(experiment):
  task_cls = task_class(experiment)
  assert "ln" in task_cls.norms
  assert {"rms", "prms"} <= set(task_cls.norms)
  if "ln_cell" in task_cls.norms:   # DRAW: LN on the cell state only, and its RMS twins
    assert {"rms_cell", "prms_cell"} <= set(task_cls.norms)


def test_an_unknown_norm_is_still_refused():
  config = skip_thoughts_config.get_config("norm=ln,smoke=true")
  config.norm = "rmsnorm"
  with pytest.raises(ConfigError, match="rms, prms"):
    task_class("skip_thoughts")(config)


@pytest.mark.parametrize("norm", ["rms", "prms"])
def test_perm_mnist_mlp_with_rms_matches_the_equations(norm):
  config = perm_mnist_config.get_config(f"norm={norm}")
  config.hidden_sizes = (40, 36)   # pRMSNorm then reads 2 of each layer's units
  task = perm_mnist.Task(config)
  model = task.build_model(_dataset(num_classes=4))
  images = np.random.default_rng(0).integers(0, 256, size=(6, 20), dtype=np.uint8)
  (x,) = task.model_inputs({"image": images})
  variables = _init(model, x, train=True)
  y = _apply_train(model, variables, x)
  p = ref.f64(variables["params"])
  np.testing.assert_allclose(y, mlp_ref(p, images / 255.0, norm, "pre", False), **TOL)
  other = "ln" if norm == "rms" else "rms"
  ref.assert_differs(y, mlp_ref(p, images / 255.0, other, "pre", False),
                     atol=TOL["atol"], what=f"the MLP with {other}")


def test_skip_thoughts_with_rms_grus_matches_the_equations():
  # The skip-thoughts test's own forward check, for the RMS-GRU (fused recurrence).
  test_skip_thoughts.test_forward_matches_reference("rms", None)


def test_config_options_reach_the_rms_cells():
  config = skip_thoughts_config.get_config("norm=prms,smoke=true")
  config.norm_options.prms.scale_init = 0.5
  config.norm_options.prms.p = 0.25
  config.norm_options.rms.eps = 1e-3
  options = cell_options(config)
  assert options["prms_p"] == 0.25 and options["rms_eps"] == 1e-3
  layer = RecurrentLayer(make_lstm_cell("prms", **options), 8)
  x = np.random.default_rng(1).normal(size=(2, 3, 5)).astype(np.float32)
  params = layer.init(jax.random.key(0), x)["params"]["layer_0"]
  for name in ("input_norm", "hidden_norm", "cell_norm"):
    np.testing.assert_array_equal(params[name]["scale"], 0.5)
    assert set(params[name]) == {"scale"}   # RMSNorm in the cells: a gain, no bias
  # p = 0.25 of the 8-unit cell state is its first 2 units.
  norm = layer.cell(8, name="layer_0").bind({"params": params}).cell_norm
  assert norm.row_norm().stats.size == 2
