"""Test-wide settings: no wandb traffic; a fixture for exact NumPy comparisons; the
``real_data`` marker for tests that read the real datasets."""

import atexit
import os
import shutil
import tempfile

from tests.helpers import UNOPTIMIZED_XLA_FLAG

#: Set to ``default`` to compile the suite's programs as lnorm compiles them for users.
#: Otherwise XLA:CPU's backend (LLVM) compiles them unoptimized: the suite's programs
#: are small and run a few updates, so compiling is much of its time, and the suite
#: takes about 12% less of a core at level 0 (docs/testing.md). Values move by rounding
#: (level 0 fuses no multiply-add; docs/testing.md says how much), inside every
#: tolerance the tests hold: the golden losses pass at either level.
XLA_OPT_ENV = "LNORM_TEST_XLA_OPT"
if (os.environ.get(XLA_OPT_ENV) != "default"
    and "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", "")):
  # Before JAX starts its backend, which reads XLA_FLAGS once; subprocesses inherit it.
  os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {UNOPTIMIZED_XLA_FLAG}".strip()

import jax  # pylint: disable=wrong-import-position
import pytest

from lnorm import data  # pylint: disable=wrong-import-position
from tests import quick_tier  # pylint: disable=wrong-import-position

pytest_plugins = ("pytester",)  # tests/test_data_real.py runs the marker in a sub-session.

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("WANDB_SILENT", "true")
# Decoded-data caches of the tests go to a folder of their own, removed at exit, never
# into the developer's ~/.cache/lnorm; tests of the cache's location set their own.
os.environ["LNORM_CACHE_DIR"] = tempfile.mkdtemp(prefix="lnorm-test-cache-")
atexit.register(shutil.rmtree, os.environ["LNORM_CACHE_DIR"], ignore_errors=True)

#: Set to 1 (CI does) to make a missing real dataset fail its tests instead of
#: skipping them, so that a wrong data directory cannot pass as green.
REQUIRE_DATA_ENV = "LNORM_REQUIRE_DATA"
#: Set to 1 to run the extended cases too: more variants of what the suite already
#: tests once (more normalizers through the same kernels, more layouts of the fused
#: recurrences, more interruption points), which its 15 minutes cannot hold. Run them
#: before and after a change to the code they cover (docs/testing.md).
EXTENDED_ENV = "LNORM_EXTENDED"


def pytest_configure(config):
  config.addinivalue_line(
      "markers", f"real_data(*relpath): reads $LNORM_DATA_DIR/<relpath>; skipped when it "
      f"is missing, failed when {REQUIRE_DATA_ENV}=1")
  config.addinivalue_line(
      "markers", f"extended: another variant of a case the suite runs; skipped unless "
      f"{EXTENDED_ENV}=1")


def pytest_collection_modifyitems(config, items):
  """Marks the quick tier (``tests/quick_tier.py``): ``pytest -m quick -n 2``."""
  del config
  for item in items:
    if quick_tier.is_quick(item):
      item.add_marker(pytest.mark.quick)


def pytest_runtest_setup(item):
  if item.get_closest_marker("extended") and os.environ.get(EXTENDED_ENV) != "1":
    pytest.skip(f"an extended case: {EXTENDED_ENV}=1 runs it")
  for marker in item.iter_markers("real_data"):
    data_dir = data.data_dir()
    path = os.path.join(data_dir, *marker.args) if data_dir else None
    if path and os.path.exists(path):
      continue
    message = (f"needs {'/'.join(marker.args)} in the data directory "
               f"({data_dir or f'${data.DATA_DIR_ENV} is not set'}): set "
               f"{data.DATA_DIR_ENV} to a folder that holds it")
    if os.environ.get(REQUIRE_DATA_ENV) == "1":
      pytest.fail(f"{message} ({REQUIRE_DATA_ENV}=1 forbids skipping)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def precise_jax():
  """For comparisons with NumPy: full-precision matmuls, no silent rank promotion."""
  saved = (jax.config.jax_default_matmul_precision, jax.config.jax_numpy_rank_promotion)
  jax.config.update("jax_default_matmul_precision", "highest")
  jax.config.update("jax_numpy_rank_promotion", "raise")
  yield
  jax.config.update("jax_default_matmul_precision", saved[0])
  jax.config.update("jax_numpy_rank_promotion", saved[1])
