"""Every command's ``--help`` prints without loading JAX, SciPy or matplotlib (issue 45:
``benchmark``, ``invariance`` and ``bln-search`` took 10 to 13 s to print it): the
heavy imports happen when a command runs. Checked by the modules loaded, not by time."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lnorm import cli
from tests.helpers import REPO

HEAVY = ("jax", "scipy", "matplotlib", "flax", "tensorflow_datasets", "wandb")

SCRIPT = """
import json, sys
from lnorm import cli
try:
  cli.main([sys.argv[1], "--help"])
except SystemExit:
  pass
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))
"""


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_help_loads_no_heavy_module(command):
  proc = subprocess.run([sys.executable, "-c", SCRIPT.format(heavy=HEAVY), command],
                        capture_output=True, text=True, cwd=REPO, check=True)
  *help_text, loaded = proc.stdout.strip().splitlines()
  assert help_text and help_text[0].startswith(f"usage: lnorm {command}")
  # `train --help` prints the cache's help, which names no heavy module either.
  assert json.loads(loaded) == [], f"lnorm {command} --help imports {loaded}"
