"""Every config offers its benchmark's grids under the scales' names, ``cpu`` and
``paper`` (read from its spec: tests/test_specs.py), and each LN-paper config its
figure's or table's grid under that figure's name, the baseline beside LN, and each
BLN config the BLN paper's comparison; every member of them is a valid set of
overrides."""

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


#: Steps fused per call at batch sizes 25 and 1: about 1,000 examples a call for
#: BLN-CIFAR, 500 for BLN-IMDB (their spec.BATCH), never more steps than examples.
BLN_STEPS_PER_CALL = {"bln_cifar": {25: 40, 1: 1000}, "bln_imdb": {25: 20, 1: 500}}


@pytest.mark.parametrize("name", sorted(BLN_STEPS_PER_CALL))
def test_bln_comparison_is_the_papers_three_norms_at_batches_25_and_1(name):
  members = sweep.load_sweep(f"configs/{name}.py", "comparison")
  steps = BLN_STEPS_PER_CALL[name]
  assert members == [{"norm": n, "batch_size": str(b), "steps_per_call": str(steps[b])}
                     for b in (25, 1) for n in ("bln", "bn", "ln")]
  for member in members:  # Each a valid set of overrides of the config.
    config_lib.apply_overrides(config_lib.load_config(f"configs/{name}.py"), member)
