"""LN paper Table 1, measured on a random single layer for BN, WN and LN, the RMSNorm
paper's rows for RMSNorm and pRMSNorm, and the rows of DyT, ScaleNorm and
LayerNorm-simple."""

from __future__ import annotations

import pytest

from lnorm import cli
from lnorm.evaluation import invariance


# Full-precision matmuls and no silent rank promotion (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("precise_jax")


@pytest.fixture(scope="module")
def table():
  return invariance.measure_invariance_table(seed=0)


@pytest.mark.parametrize("norm", invariance.NORMS)
@pytest.mark.parametrize("transformation", invariance.TRANSFORMATIONS)
def test_measured_cell_matches_paper(table, norm, transformation):
  change = table[norm][transformation]
  if invariance.PAPER_TABLE[norm][transformation]:
    assert change < invariance.INVARIANT_TOL
  else:
    assert change > invariance.CHANGED_TOL


def test_paper_table_is_the_published_one():
  # Rows of LN paper Table 1 and of the RMSNorm paper's Table 1, in the order of
  # invariance.TRANSFORMATIONS.
  published = {"bn": "YNYYYN", "wn": "YNYNNN", "ln": "YYNYNY", "rms": "YNNYNY",
               "prms": "YNNYNY"}
  for norm, row in published.items():
    assert [invariance.PAPER_TABLE[norm][t] for t in invariance.TRANSFORMATIONS] == [
        c == "Y" for c in row]


def test_another_seed_also_matches():
  assert invariance.mismatches(invariance.measure_invariance_table(seed=3)) == []


def test_prms_invariance_fails_by_eps_when_it_reads_one_unit(monkeypatch):
  # As the module says: with 12 units pRMSNorm reads one, whose summed input is near 0
  # for some example, and eps then breaks the re-scaling invariances; LN and RMSNorm,
  # which read all 12, keep them.
  monkeypatch.setattr(invariance, "_H", 12)
  bad = invariance.mismatches(invariance.measure_invariance_table(seed=0))
  assert ("prms", "dataset re-scaling") in bad
  assert all(norm == "prms" for norm, _ in bad)


def test_run_reports_and_fails_on_a_mismatch(table, monkeypatch, capsys):
  assert cli.main(["invariance", "--seed", "0"]) == 0
  out = capsys.readouterr().out
  assert "Matches LN paper Table 1" in out
  for name in invariance.TRANSFORMATIONS:
    assert name in out
  # Claim LN is invariant to dataset re-centering: the measurement must disagree.
  wrong = {n: dict(row) for n, row in invariance.PAPER_TABLE.items()}
  wrong["ln"]["dataset re-centering"] = True
  monkeypatch.setattr(invariance, "PAPER_TABLE", wrong)
  assert invariance.mismatches(table) == [("ln", "dataset re-centering")]
  assert "MISMATCH" in invariance.format_table(table)
  assert cli.main(["invariance"]) == 1


# What each successor's equation implies, written here so that the tool itself never
# assumes it: LayerNorm-simple is LN with g = 1, b = 0, so it has LN's row; ScaleNorm
# divides by ||a|| (RMSNorm's statistic times sqrt(H)), so it has RMSNorm's; DyT reads
# no statistic, so a scale or a shift of its inputs always shows.
SUCCESSOR_ROWS = {"ln_simple": "YYNYNY", "scalenorm": "YNNYNY", "dyt": "NNNNNN"}


@pytest.fixture(scope="module")
def table_seed_3():
  return invariance.measure_invariance_table(seed=3)


@pytest.mark.parametrize("norm", invariance.UNPUBLISHED)
def test_successor_rows_follow_from_their_equations(table, table_seed_3, norm):
  for measured in (table, table_seed_3):
    verdicts = [invariance.classify(measured[norm][t]) for t in invariance.TRANSFORMATIONS]
    assert verdicts == [c == "Y" for c in SUCCESSOR_ROWS[norm]]


def test_successors_are_printed_as_measured_not_judged(table):
  out = invariance.format_table(table)
  section = out.split("LN's successors, measured")[1]
  assert "DYT" in section and "SCALENORM" in section and "LN_SIMPLE" in section
  assert "ok" not in section and "MISMATCH" not in section
  # A successor's row never counts as a mismatch with a paper.
  assert all(norm not in invariance.UNPUBLISHED for norm, _ in invariance.mismatches(table))


# --- a normalizer named on the command line, the user's own included (issue 45) ------------


def test_a_users_normalizer_gets_a_measured_row(tmp_path, monkeypatch, capsys):
  # Max-abs scaling: invariant to every re-scaling of a row, to no re-centering.
  (tmp_path / "inv_user_norms.py").write_text(
      "import jax.numpy as jnp\n\n"
      "def max_scaled(x):\n"
      "  return x / (jnp.max(jnp.abs(x), axis=-1, keepdims=True) + 1e-5)\n")
  monkeypatch.syspath_prepend(str(tmp_path))
  assert cli.main(["invariance", "--norms", "inv_user_norms:max_scaled,none"]) == 0
  out = capsys.readouterr().out
  section = out.split("Asked for with --norms, measured (no published row to compare "
                      "with):\n")[1].splitlines()
  assert section[0].split() == ["transformation", "inv_user_norms:max_scaled", "none"]
  verdicts = {line[:28].strip(): line[28:].split()[1::2] for line in section[1:]}
  assert verdicts == {
      "weight matrix re-scaling": ["invariant", "changes"],
      "weight matrix re-centering": ["changes", "changes"],
      "weight vector re-scaling": ["changes", "changes"],
      "dataset re-scaling": ["invariant", "changes"],
      "dataset re-centering": ["changes", "changes"],
      "single case re-scaling": ["invariant", "changes"]}
  assert "Matches LN paper Table 1" in out  # The papers' rows are judged as before.


def test_a_normalizer_already_in_the_table_is_not_measured_twice(table):
  again = invariance.measure_invariance_table(seed=0, more=["ln", "dyt"])
  assert list(again) == list(table)
  assert "Asked for with --norms" not in invariance.format_table(again)


def test_an_unknown_normalizer_is_one_line(capsys):
  assert cli.main(["invariance", "--norms", "layernorm"]) == 2
  assert capsys.readouterr().err.startswith("lnorm: error: Unknown normalizer 'layernorm'.")


@pytest.mark.parametrize("change, verdict", [
    (invariance.INVARIANT_TOL * 0.999, True),
    (invariance.INVARIANT_TOL, None),  # At the threshold: not below it, so undecided.
    (invariance.CHANGED_TOL, None),  # At the other: not above it either.
    (invariance.CHANGED_TOL * 1.001, False),
])
def test_classify_at_its_thresholds(change, verdict):
  assert invariance.classify(change) is verdict
