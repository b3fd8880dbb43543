"""What the README tells a newcomer matches the code: the test markers it names, the
smoke argument every config takes, the cache sizes `lnorm train --help` gives too."""

from __future__ import annotations

import os
import re
import tomllib

import pytest

from lnorm import config as config_lib
from lnorm.data import cache

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme() -> str:
  with open(os.path.join(REPO, "README.md")) as f:
    return f.read()


def test_the_test_tiers_name_declared_markers():
  assert "pytest -m quick -n 2" in readme() and "about 2 minutes" in readme()
  assert "pytest -n 2`: every test" in readme() and "about 10 minutes" in readme()
  with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
    markers = tomllib.load(f)["tool"]["pytest"]["ini_options"]["markers"]
  assert any(m.startswith("slow:") for m in markers)
  assert any(m.startswith("quick:") for m in markers)


class _Item:
  """What quick_tier.is_quick reads of a collected test: its id and its markers."""

  def __init__(self, nodeid, *markers):
    self.nodeid, self.markers = nodeid, markers

  def get_closest_marker(self, name):
    return name if name in self.markers else None


@pytest.mark.parametrize("nodeid, markers, quick", [
    ("tests/test_a.py::test_plain", (), True),
    ("tests/test_a.py::test_plain", ("slow",), False),
    ("tests/test_a.py::test_plain", ("real_data",), False),
    ("tests/test_a.py::test_plain", ("slow", "quick"), True),  # Asked for by name.
    ("tests/test_a.py::test_listed", (), False),  # Every case of a listed function.
    ("tests/test_a.py::test_listed[1]", (), False),
    ("tests/test_a.py::test_case[2]", (), False),  # A listed case...
    ("tests/test_a.py::test_case[1]", (), True),  # ...and the others of its function.
])
def test_the_quick_tier_leaves_out_slow_real_data_and_listed_tests(monkeypatch, nodeid,
                                                                   markers, quick):
  from tests import quick_tier  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(quick_tier, "SLOW", frozenset({"test_a.py::test_listed",
                                                     "test_a.py::test_case[2]"}))
  assert quick_tier.is_quick(_Item(nodeid, *markers)) is quick


CONFIGS = sorted(f[:-3] for f in os.listdir(os.path.join(REPO, "configs"))
                 if f.endswith(".py") and not f.startswith("_"))


@pytest.mark.parametrize("name", CONFIGS)
def test_every_config_takes_the_documented_smoke_argument(name):
  smoke = config_lib.load_config(f"configs/{name}.py:smoke=true")
  full = config_lib.load_config(f"configs/{name}.py")
  assert config_lib.to_flat_dict(smoke) != config_lib.to_flat_dict(full)
  assert "smoke=true" in readme()


def test_readme_and_train_help_give_the_measured_cloze_cache():
  row = next(line for line in readme().splitlines() if "CBT-style cloze questions" in line)
  assert "78 MB `.npz` + 41 MB CBT text" in row
  assert re.search(r"78 MB of \.npz plus 41 MB of CBT-format text", cache.HELP)
  assert "7 MB" not in cache.HELP and "one `.npz` per dataset" not in readme()


def test_the_readme_copies_no_verdict_and_points_to_the_generated_results():
  """The verdicts live in docs/results.md, which `lnorm benchmark --report-only
  --update` writes from the records: a copy in the README went stale (issue 56)."""
  section = readme().split("## Experiments", 1)[1].split("\n## ", 1)[0]
  assert "[docs/results.md](docs/results.md)" in section
  assert "--report-only --update docs/results.md" in section
  verdict_words = ("reproduced", "inconclusive", "not testable", "no difference")
  assert not [w for w in verdict_words if w in section.lower()]
  # Every experiment of the registry has its row, by its config.
  from lnorm.training.experiments import EXPERIMENTS  # pylint: disable=g-import-not-at-top
  assert all(f"`configs/{name}.py`" in section for name in EXPERIMENTS)


@pytest.mark.slow
def test_the_readme_counts_the_quick_tier_and_the_suite_as_they_are():
  """"about 1,400 of the 2,000 tests": each count to the nearest hundred of what
  pytest collects now (a count copied once went stale: 964 of 1,367 against 1,240 of
  1,725)."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top

  def collected(*args):
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False)
    last = done.stdout.strip().splitlines()[-1]  # "1422/2006 tests collected (...)"
    return [int(n) for n in re.match(r"(\d+)(?:/(\d+))? tests? collected", last).groups()
            if n is not None]

  quick, everything = collected("-m", "quick")
  claimed = re.search(r"about ([\d,]+) of the ([\d,]+) tests", readme())
  assert claimed, "the README no longer says how many tests the quick tier runs"
  said = [int(n.replace(",", "")) for n in claimed.groups()]
  assert [round(quick, -2), round(everything, -2)] == said, (
      f"the quick tier is {quick} of {everything} tests: say so in the README and "
      "docs/testing.md, to the nearest hundred")
