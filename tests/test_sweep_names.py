"""Every LN-paper config offers the same two sweep names: ``paper`` (the figure's grid)
and ``cpu`` (its claim test on a CPU: the baseline and LN, two seeds), and every
member of them is a valid set of overrides."""

from __future__ import annotations

import pytest

from lnorm import config as config_lib
from lnorm.sweeps import runner as sweep

LN_PAPER_CONFIGS = ("perm_mnist", "draw", "handwriting", "skip_thoughts",
                    "order_embeddings", "attentive_reader")
#: The LN variant each config's cpu sweep must hold beside the baseline ``none``.
LN_NORMS = ("ln", "ln_cell")


@pytest.mark.parametrize("name", LN_PAPER_CONFIGS)
def test_paper_and_cpu_sweeps(name):
  module = config_lib.load_config_module(f"configs/{name}.py")
  assert {"paper", "cpu"} <= set(module.get_sweep(None)), name
  for sweep_name in ("paper", "cpu"):
    members = sweep.load_sweep(f"configs/{name}.py", sweep_name)
    for member in members:  # Each member's overrides name real fields.
      config = config_lib.load_config(f"configs/{name}.py:scale=cpu"
                                      if sweep_name == "cpu" and name != "perm_mnist"
                                      else f"configs/{name}.py")
      config_lib.apply_overrides(config, member)
  cpu = module.get_sweep("cpu")
  for norm in ("none", next(n for n in LN_NORMS if any(m["norm"] == n for m in cpu))):
    seeds = {m.get("seed", 0) for m in cpu if m["norm"] == norm}
    assert len(seeds) >= 2, (name, norm, seeds)


def test_order_embeddings_keeps_seeds_as_the_old_name_of_cpu():
  module = config_lib.load_config_module("configs/order_embeddings.py")
  assert module.get_sweep("seeds") == module.get_sweep("cpu")
