"""Which training code made a claim's records: config.json names the commit
(lnorm.training.workdir.write_run_record), and the benchmark report adds a line to a
claim whose members do not all come from one clean commit. No training."""

from __future__ import annotations

import json
import os

import ml_collections

from lnorm.analysis import code_versions
from lnorm.analysis import runs as runs_lib
from lnorm.sweeps import benchmark as bench
from lnorm.sweeps import benchmark_suite as suite
from lnorm.training import environment
from lnorm.training import workdir as workdir_lib
from tests.test_rule import decay, perm_mnist_config, write_run


A, B = "a" * 40, "b" * 40


def code(commit, dirty=False):
  return {"commit": commit, "dirty": dirty} if commit else {"commit": None, "why": "x"}


def runs_with(tmp_path, codes):
  """One run per entry of ``codes``: its config.json's "code" (None: no key), or a
  (before resume, after) pair."""
  runs = []
  for i, c in enumerate(codes):
    path = tmp_path / f"run{i}"
    path.mkdir()
    record = {"config": {"seed": i}}
    if isinstance(c, tuple):
      record["code_before_resume"], record["code"] = [c[0]], c[1]
    elif c is not None:
      record["code"] = c
    (path / "config.json").write_text(json.dumps(record))
    runs.append(runs_lib.Run(str(path), f"run{i}", record["config"], {}, [], []))
  return runs


def test_one_clean_commit_needs_no_line(tmp_path):
  assert code_versions.training_code_note(runs_with(tmp_path, [code(A)] * 3)) == ""


def test_members_of_two_commits_and_none_are_counted(tmp_path):
  runs = runs_with(tmp_path, [code(A), code(B), code(A), None, code(None)])
  assert code_versions.training_code_note(runs) == (
      "training code differs between the 5 members: 2 at aaaaaaaaaa, 2 with no commit "
      "recorded, 1 at bbbbbbbbbb")


def test_records_without_a_commit_are_counted_once_not_under_each_claim(tmp_path):
  runs = runs_with(tmp_path, [None, code(A), None, (code(None), code(A))])
  assert code_versions.training_code_note(runs[:1] + runs[2:3]) == ""
  assert code_versions.without_commit([r.path for r in runs]) == 3


def test_uncommitted_changes_are_not_known_to_be_the_same_code(tmp_path):
  note = code_versions.training_code_note(runs_with(tmp_path, [code(A, dirty=True)] * 2))
  assert note.startswith("training code: all 2 members at aaaaaaaaaa with uncommitted")


def test_a_member_resumed_under_other_code_mixes_it(tmp_path):
  runs = runs_with(tmp_path, [(code(A), code(B)), code(B)])
  assert code_versions.training_code_note(runs) == (
      "training code differs between the 2 members: 2 at bbbbbbbbbb, 1 at aaaaaaaaaa; "
      "1 resumed under other code")


def test_the_report_adds_the_line_to_each_claim_of_mixed_members(tmp_path):
  e = suite.BY_NAME["perm_mnist"]
  (b4,) = e.scales["cpu"].variants
  records = tmp_path / "results"
  for s in range(3):
    for norm in ("none", "ln", "bn"):
      path = write_run(records / "perm_mnist", norm, s,
                       decay(200 if norm == "none" else 100, s), experiment="perm_mnist",
                       **perm_mnist_config(norm, s, benchmark_hash=suite.member_hash(
                           e, "cpu", b4)))
      with open(os.path.join(path, "config.json")) as f:
        record = json.load(f)
      record["code"] = code(B if (norm, s) == ("bn", 2) else A)
      with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(record, f)
  (plan,) = bench.plans([e], "cpu", str(tmp_path / "w"), ["none", "ln", "bn"], [0, 1, 2])
  lines = bench.build_report([plan], str(records), "cpu").markdown().splitlines()
  after = {line.split(" (Ba, Kiros")[0]: lines[i + 1] for i, line in enumerate(lines)
           if line.startswith("- **")}
  # LN against BN, whose seed 2 ran B, has the line; LN against none (6 members at A)
  # and batch 128's claims (no runs) have none.
  assert after["- **no difference**: At batch size 4, LN trains faster than BN"] == (
      "  - training code differs between the 6 members: 5 at aaaaaaaaaa, 1 at "
      "bbbbbbbbbb.")
  assert [line for line in after.values() if line.startswith("  - ")] == [
      after["- **no difference**: At batch size 4, LN trains faster than BN"]]


# --- config.json names its code -----------------------------------------------------------------


def write(workdir, resumed):
  workdir_lib.write_run_record(str(workdir), ml_collections.ConfigDict({"seed": 0}), {}, {},
                               resumed=resumed)
  return json.loads((workdir / "config.json").read_text())


def test_the_record_names_the_code_and_the_code_before_a_resume(tmp_path, monkeypatch):
  monkeypatch.setattr(environment, "code_revision", lambda: code(A))
  first = write(tmp_path, resumed=False)
  assert first["code"] == code(A) and "code_before_resume" not in first
  assert "code_before_resume" not in write(tmp_path, resumed=True)  # The same code.
  monkeypatch.setattr(environment, "code_revision", lambda: code(B))
  resumed = write(tmp_path, resumed=True)
  assert resumed["code"] == code(B) and resumed["code_before_resume"] == [code(A)]
  # Resumed again by B: A's stretch is still named; a fresh start names none.
  assert write(tmp_path, resumed=True)["code_before_resume"] == [code(A), code(B)]
  assert "code_before_resume" not in write(tmp_path, resumed=False)


def test_a_run_resumed_from_a_record_without_code_says_so(tmp_path, monkeypatch):
  (tmp_path / "config.json").write_text(json.dumps({"config": {"seed": 0}}))
  monkeypatch.setattr(environment, "code_revision", lambda: code(A))
  assert write(tmp_path, resumed=True)["code_before_resume"] == [
      {"commit": None, "why": "its record names no code"}]
