"""Every config offers its benchmark's grids under the scales' names, ``cpu`` and
``paper`` (read from its spec: tests/test_specs.py), and each LN-paper config its
figure's or table's grid under that figure's name, the baseline beside LN; every
member of them is a valid set of overrides."""

from __future__ import annotations

import pytest

from lnorm import config as config_lib
from lnorm.sweeps import runner as sweep

#: Each LN-paper config's grid of its figure or table.
FIGURE_SWEEPS = {"perm_mnist": "figure6", "draw": "figure4", "handwriting": "figure5",
                 "skip_thoughts": "table3", "order_embeddings": "table2",
                 "attentive_reader": "figure2"}
#: The LN variant each figure's grid must hold beside the baseline ``none``.
LN_NORMS = ("ln", "ln_cell")


@pytest.mark.parametrize("name", sorted(FIGURE_SWEEPS))
def test_scale_and_figure_sweeps(name):
  module = config_lib.load_config_module(f"configs/{name}.py")
  figure = FIGURE_SWEEPS[name]
  assert {"paper", "cpu", figure} <= set(module.get_sweep(None)), name
  for sweep_name in ("paper", "cpu", figure):
    members = sweep.load_sweep(f"configs/{name}.py", sweep_name)
    for member in members:  # Each member's overrides name real fields.
      config = config_lib.load_config(f"configs/{name}.py:scale=cpu"
                                      if sweep_name == "cpu" and name != "perm_mnist"
                                      else f"configs/{name}.py")
      config_lib.apply_overrides(config, member)
  norms = {m["norm"] for m in module.get_sweep(figure)}
  assert "none" in norms and norms & set(LN_NORMS), (name, norms)


def test_order_embeddings_keeps_seeds_as_the_old_name_of_cpu():
  module = config_lib.load_config_module("configs/order_embeddings.py")
  assert module.get_sweep("seeds") == module.get_sweep("cpu")
