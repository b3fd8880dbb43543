"""``lnorm benchmark`` as a first user meets it (issue 45): the report judges the seeds
it says it judges, ``--print-commands`` says when nothing is left, and a user's own
normalizer keeps its records out of the repository's results/. Members are trained
by the stand-in of ``tests/test_benchmark_suite.py`` (no JAX)."""

from __future__ import annotations

import json
import os

import pytest

from lnorm import cli
from lnorm.sweeps import benchmark as bench
from lnorm.sweeps import benchmark_suite as suite
from lnorm.sweeps import runner
from tests.test_benchmark_suite import TOY, _fake_train

USER_NORM = "my_pkg.norms:Centered"


@pytest.fixture
def users_norm(tmp_path, monkeypatch):
  """A normalizer of the user's own, importable as USER_NORM."""
  package = tmp_path / "src" / "my_pkg"
  package.mkdir(parents=True)
  (package / "__init__.py").write_text("")
  (package / "norms.py").write_text(
      "import jax.numpy as jnp\n\n"
      "def Centered(x):\n"
      "  return x - jnp.mean(x, axis=-1, keepdims=True)\n")
  monkeypatch.syspath_prepend(str(tmp_path / "src"))
  return USER_NORM


# --- --seeds: the report judges what it says it judges ----------------------------------------


def test_a_seed_selection_judges_those_seeds_only(tmp_path, monkeypatch):
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  monkeypatch.setattr(runner, "_run_member", _fake_train([]))
  (plan,) = bench.plans([TOY], "cpu", str(tmp_path / "runs"))
  records = str(tmp_path / "results")
  bench.run(plan, records)  # Seeds 0, 1 and 2 recorded.
  (one,) = bench.plans([TOY], "cpu", str(tmp_path / "runs"), seeds=[1])
  report = bench.build_report([one], records, "cpu", seeds=[1])
  assert [(r.norm, r.runs) for r in report.rows] == [("none", 1), ("ln", 1)]
  text = report.markdown()
  assert text.startswith("Judged on seed 1 only (--seeds): the table, the verdicts and the "
                         "member counts leave the other seeds' records out.\n")
  assert "Members with records: perm_mnist 2/2." in text
  # Two seeds, at the threshold of the plural; without a selection, every seed and no note.
  assert bench.build_report([plan], records, "cpu", seeds=[0, 2]).markdown().startswith(
      "Judged on seeds 0, 2 only")
  everything = bench.build_report([plan], records, "cpu")
  assert [r.runs for r in everything.rows] == [3, 3]
  assert not everything.markdown().startswith("Judged")


# --- every normalizer in every experiment: a row no claim reads at three seeds -------------


def _seeds_by_row(plan) -> dict[tuple, set[int]]:
  out: dict[tuple, set[int]] = {}
  for m in plan.members:
    out.setdefault((tuple(sorted(m.variant.items())), m.norm), set()).add(m.seed)
  return out


@pytest.mark.parametrize("experiment, read", [
    # Figure 6 at batch 4 reads LN, BN and the baseline.
    ("perm_mnist", {"none", "ln", "bn"}),
    # The reader's claims read the gain from each member's config (the default variant
    # names none), and its gain-0.1 variant runs LN alone, which the gain claim reads.
    ("attentive_reader", {"none", "ln", "bn"}),
])
def test_a_row_no_claim_reads_runs_at_the_first_three_of_the_rules_seeds(
    tmp_path, monkeypatch, experiment, read):
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  # Seven seeds planned (none recorded: the records folder is empty), not a multiple
  # of three.
  monkeypatch.setattr(bench, "seeds_by_power", lambda *_: list(range(7)))
  e = suite.BY_NAME[experiment]
  (plan,) = bench.plans([e], "cpu", str(tmp_path / "runs"), records=str(tmp_path / "rec"))
  rows = _seeds_by_row(plan)
  assert {norm for _, norm in rows} == set(e.norms)  # Every normalizer has its row.
  for (variant, norm), seeds in rows.items():
    expected = set(range(7)) if norm in read else {0, 1, 2}
    assert seeds == expected, (variant, norm)
  # Seeds given on the command line are every row's.
  (given,) = bench.plans([e], "cpu", str(tmp_path / "runs"), seeds=[0, 3, 4, 5])
  assert all(s == {0, 3, 4, 5} for s in _seeds_by_row(given).values())


def record(tmp_path, monkeypatch, norms, seeds):
  """Records of the suite's perm_mnist members ``norms`` x ``seeds`` under a folder of
  their own, made by the stand-in trainer; returns the folder."""
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  monkeypatch.setattr(runner, "_run_member", _fake_train([]))
  # BLN's inference search reads the data; the stand-in's runs have none to search.
  monkeypatch.setattr(bench, "search_bln_inference", lambda workdir: None)
  records = str(tmp_path / "recorded")
  (plan,) = bench.plans([suite.BY_NAME["perm_mnist"]], "cpu", str(tmp_path / "made"),
                        norms, seeds)
  bench.run(plan, records)
  return records


def test_lnorm_benchmark_seeds_with_report_only_counts_what_it_judges(tmp_path, monkeypatch,
                                                                      capsys):
  # The command: the seeds judged and the members counted are the same.
  records = record(tmp_path, monkeypatch, ["none", "ln"], [0, 1])
  assert cli.main(["benchmark", "--experiments", "perm_mnist", "--seeds", "0",
                   "--report-only", "--no-wandb", "--workdir", "/nonexistent/runs",
                   "--records", records]) == 0
  out = capsys.readouterr().out
  assert "Judged on seed 0 only (--seeds)" in out
  rows = [line for line in out.splitlines() if line.startswith("| perm_mnist, batch_size=4 |")]
  assert [row.split(" | ")[3] for row in rows] == ["1", "1"], rows
  per_seed = len(suite.BY_NAME["perm_mnist"].norms)
  assert f"Members with records: perm_mnist 2/{per_seed}." in out


# --- --print-commands with nothing left -------------------------------------------------------


def test_print_commands_says_when_every_member_is_recorded(tmp_path, monkeypatch, capsys):
  norms = list(suite.BY_NAME["perm_mnist"].norms)
  records = record(tmp_path, monkeypatch, norms, [0])
  capsys.readouterr()
  assert cli.main(["benchmark", "--experiments", "perm_mnist", "--seeds", "0",
                   "--print-commands", "--workdir", "/nonexistent/runs",
                   "--records", records]) == 0
  captured = capsys.readouterr()
  assert captured.out == ""  # Nothing for a scheduler to run...
  assert captured.err == (  # ...and the user is told why.
      f"Nothing to run: every selected member ({len(norms)}) has records under "
      f"{records} or a finished run under /nonexistent/runs. "
      "`lnorm benchmark --report-only` prints their report.\n")


def test_print_commands_with_members_left_prints_only_them(tmp_path, monkeypatch, capsys,
                                                         users_norm):
  records = record(tmp_path, monkeypatch, ["none"], [0])
  capsys.readouterr()
  assert cli.main(["benchmark", "--experiments", "perm_mnist", "--seeds", "0",
                   "--norms", f"none,{users_norm}", "--print-commands",
                   "--workdir", "/nonexistent/runs", "--records", records]) == 0
  captured = capsys.readouterr()
  (line,) = captured.out.splitlines()  # none,seed=0 is committed: only the user's.
  assert f"--config.norm={users_norm}" in line and captured.err == ""


def test_a_record_made_under_another_rule_is_run_again(tmp_path, monkeypatch, capsys):
  # The committed records of an earlier rule or setting must not pass for finished
  # members: the member runs again and its new record replaces the old.
  records = record(tmp_path, monkeypatch, ["none"], [0])
  (config_path,) = [os.path.join(root, "config.json") for root, _, files in os.walk(records)
                    if "config.json" in files]
  with open(config_path) as f:
    made = json.load(f)
  made["config"]["benchmark_hash"] = "0123456789abcdef"
  with open(config_path, "w") as f:
    json.dump(made, f)
  capsys.readouterr()
  assert cli.main(["benchmark", "--experiments", "perm_mnist", "--seeds", "0",
                   "--norms", "none", "--print-commands",
                   "--workdir", "/nonexistent/runs", "--records", records]) == 0
  (line,) = capsys.readouterr().out.splitlines()
  assert "--config.norm=none" in line


# --- where records go: the checkout's results/ for the suite's own, else beside the runs -------


@pytest.fixture
def checkout(tmp_path, monkeypatch):
  """A second checkout of lnorm (its pyproject.toml and results/), the command run
  from a folder inside it; lnorm itself imports from this repository, as from an
  editable install of another clone."""
  root = tmp_path / "clone"
  (root / "results").mkdir(parents=True)
  (root / "pyproject.toml").write_text('[project]\nname = "lnorm"\nversion = "0.1.0"\n')
  (root / "notes").mkdir()
  monkeypatch.chdir(root / "notes")
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  return root


def test_the_default_records_folder_is_the_checkouts_the_command_runs_in(checkout, tmp_path,
                                                                        monkeypatch):
  assert bench.checkout_root() == str(checkout)
  assert bench.records_root("cpu") == str(checkout / "results" / "cpu")
  assert bench.records_root("paper", "w") == str(checkout / "results" / "paper")
  # A folder with lnorm's pyproject.toml but no results/, or another project's, is none.
  (checkout / "notes" / "pyproject.toml").write_text('[project]\nname = "lnorm"\n')
  assert bench.checkout_root() == str(checkout)
  (checkout / "notes" / "results").mkdir()
  (checkout / "notes" / "pyproject.toml").write_text('[project]\nname = "other"\n')
  assert bench.checkout_root() == str(checkout)
  # Outside any checkout: beside the workdir.
  outside = tmp_path / "elsewhere"
  outside.mkdir()
  monkeypatch.chdir(outside)
  assert bench.checkout_root() is None
  assert bench.records_root("cpu", "my_runs") == os.path.join("my_runs", "records", "cpu")


def test_records_of_the_suites_members_go_to_the_checkout_the_command_runs_in(
    checkout, monkeypatch, capsys):
  monkeypatch.setattr(runner, "_run_member", _fake_train([]))
  assert cli.main(["benchmark", "--experiments", "perm_mnist", "--seeds", "1", "--norms",
                   "none", "--workdir", "runs", "--no-wandb"]) == 0
  assert os.listdir(checkout / "results" / "cpu" / "perm_mnist") == [
      "batch_size=4,norm=none,seed=1"]
  captured = capsys.readouterr()
  # From checkout/notes, the results folder is named in full (it is not below).
  assert captured.err.splitlines() == [
      f"Records go under {checkout / 'results' / 'cpu'}: 1 of the suite's own members."]
  assert f"Generated from the records under `{checkout / 'results' / 'cpu'}/`" in captured.out


def test_outside_a_checkout_the_records_go_beside_the_workdir_and_the_command_says_so(
    tmp_path, monkeypatch, capsys):
  monkeypatch.chdir(tmp_path)
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  monkeypatch.setattr(runner, "_run_member", _fake_train([]))
  assert cli.main(["benchmark", "--experiments", "perm_mnist", "--seeds", "0", "--norms",
                   "none", "--workdir", "w", "--no-wandb"]) == 0
  assert os.listdir(tmp_path / "w" / "records" / "cpu" / "perm_mnist") == [
      "batch_size=4,norm=none,seed=0"]
  captured = capsys.readouterr()
  assert captured.err.splitlines()[:2] == [
      f"No lnorm checkout at or above {tmp_path}: the records go beside the workdir "
      "(--records DIR puts them elsewhere).",
      f"Records go under {os.path.join('w', 'records', 'cpu')}: 1 of the suite's own members."]
  assert (f"Generated from the records under `{os.path.join('w', 'records', 'cpu')}/`"
          in captured.out)


def test_a_users_normalizer_records_go_beside_its_runs(checkout, monkeypatch, capsys,
                                                       users_norm):
  calls = []
  monkeypatch.setattr(runner, "_run_member", _fake_train(calls))
  repository = checkout / "results" / "cpu"
  workdir = checkout / "runs"
  argv = ["benchmark", "--experiments", "perm_mnist", "--seeds", "0", "--norms",
          f"none,{users_norm}", "--workdir", str(workdir), "--no-wandb"]
  assert cli.main(argv) == 0
  own = (workdir / "records" / "cpu" / "perm_mnist" /
         "batch_size=4,norm=my_pkg.norms_Centered,seed=0")
  assert sorted(os.listdir(own)) == ["config.json", "metrics.jsonl"]
  # The built-in normalizer's records go where the suite's are; the user's do not.
  assert os.listdir(repository / "perm_mnist") == ["batch_size=4,norm=none,seed=0"]
  captured = capsys.readouterr()
  assert captured.err.splitlines()[1] == (
      f"Records go under {workdir / 'records' / 'cpu'}: 1 not of the suite (the suite does "
      f"not run {users_norm} there).")
  assert (f"records saved for batch_size=4,norm=my_pkg.norms_Centered,seed=0 under "
          f"{workdir / 'records' / 'cpu' / 'perm_mnist'}") in captured.out
  # The report reads both: the user's row beside the suite's baseline.
  assert (f"Generated from the records under `{repository}/` and "
          f"`{workdir / 'records' / 'cpu'}/`") in captured.out
  assert (f"| perm_mnist, batch_size=4 | {users_norm} |" in captured.out
          and "| perm_mnist, batch_size=4 | none (baseline) |" in captured.out)
  # A second command finds both recorded and trains nothing.
  calls.clear()
  assert cli.main(argv) == 0
  assert calls == []


def test_records_given_with_records_hold_everything(tmp_path, monkeypatch, users_norm):
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  monkeypatch.setattr(runner, "_run_member", _fake_train([]))
  records = tmp_path / "mine"
  assert cli.main(["benchmark", "--experiments", "perm_mnist", "--seeds", "0", "--norms",
                   f"none,{users_norm}", "--workdir", str(tmp_path / "runs"), "--records",
                   str(records), "--no-wandb"]) == 0
  assert sorted(os.listdir(records / "perm_mnist")) == [
      "batch_size=4,norm=my_pkg.norms_Centered,seed=0", "batch_size=4,norm=none,seed=0"]
  assert not (tmp_path / "runs" / "records").exists()
  with open(records / "perm_mnist" / "batch_size=4,norm=my_pkg.norms_Centered,seed=0" /
            "config.json") as f:
    assert json.load(f)["config"]["norm"] == users_norm


# --- records name no machine's folders --------------------------------------------------------


def test_records_name_the_cache_folder_as_a_variable(tmp_path, monkeypatch):
  cache = tmp_path / "cache"
  monkeypatch.setenv("LNORM_CACHE_DIR", str(cache))
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  run = tmp_path / "run"
  run.mkdir()
  (run / "config.json").write_text(json.dumps({"config": {}, "data": {
      "location": f"{cache}/cbt-books-d302/cbt", "notes": f"from {tmp_path}/data/books",
      "elsewhere": f"{cache}2/x"}}))
  (run / "metrics.jsonl").write_text('{"step": 1}\n')
  bench.save_records(str(run), str(tmp_path / "rec"))
  with open(tmp_path / "rec" / "config.json") as f:
    assert json.load(f)["data"] == {"location": "$LNORM_CACHE_DIR/cbt-books-d302/cbt",
                                    "notes": "from $LNORM_DATA_DIR/books",
                                    "elsewhere": f"{cache}2/x"}  # Not a longer name.


def test_no_committed_record_names_a_home_folder():
  results = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         "results")
  named = []
  for root, _, files in os.walk(results):
    for name in files:
      if name.endswith(".json"):
        with open(os.path.join(root, name)) as f:
          text = f.read()
        if any(home in text for home in ("/root/", "/home/", "/Users/")):
          named.append(os.path.relpath(os.path.join(root, name), results))
  assert not named, f"{len(named)} records name a machine's folder, e.g. {named[0]}"


def test_a_claim_on_a_variant_the_scale_does_not_run_says_which_scale_does():
  perm_mnist = suite.BY_NAME["perm_mnist"]
  by_batch = {c.where["batch_size"]: c for c in perm_mnist.claims if c.against == "bn"}
  cpu, paper = perm_mnist.scales["cpu"], perm_mnist.scales["paper"]
  assert bench._outside_setting(by_batch["128"], cpu) == "batch_size=128"
  assert bench._outside_setting(by_batch["4"], cpu) is None
  assert bench._outside_setting(by_batch["128"], paper) is None
