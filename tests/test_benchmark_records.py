"""Records a user can trust (issue 56): only the suite's own members reach a checkout's
results/, a record is never overwritten by a run of another config, every record read
is whole or named as damaged, and bad --norms, --seeds or --records are one line.
Members are trained by the stand-in of ``tests/test_benchmark_suite.py`` (no JAX)."""

from __future__ import annotations

import gzip
import os
import shutil

import pytest

from lnorm import cli
from lnorm.analysis import runs as runs_lib
from lnorm.errors import UserError
from lnorm.sweeps import benchmark as bench
from lnorm.sweeps import benchmark_suite as suite
from lnorm.sweeps import runner
from tests.test_benchmark_command import USER_NORM, checkout, users_norm  # pylint: disable=unused-import
from tests.test_benchmark_suite import _fake_train

PERM_MNIST = suite.BY_NAME["perm_mnist"]
NONE0 = "batch_size=4,norm=none,seed=0"


def benchmark(*args):
  """``lnorm benchmark --experiments perm_mnist ARGS --no-wandb``; its exit status."""
  return cli.main(["benchmark", "--experiments", "perm_mnist", *args, "--no-wandb"])


@pytest.fixture
def trained(monkeypatch):
  calls = []
  monkeypatch.setattr(runner, "_run_member", _fake_train(calls))
  return calls


def _files(folder):
  """Every file under ``folder`` with its bytes."""
  out = {}
  for root, _, names in os.walk(folder):
    for name in names:
      with open(os.path.join(root, name), "rb") as f:
        out[os.path.relpath(os.path.join(root, name), folder)] = f.read()
  return out


# --- which members are the suite's own ----------------------------------------------------


def test_a_suite_member_is_a_normalizer_it_runs_at_the_config_it_gives():
  def plan(norms=None, overrides=None, experiment=PERM_MNIST):
    (p,) = bench.plans([experiment], "cpu", "w", norms, [0], "rec", None, "own", overrides)
    return p

  (m,) = plan(["ln"]).members
  assert plan(["ln"]).is_suite_member(m)
  # Overrides that change only where data and logs go, or set the suite's own value.
  assert plan(["ln"], {"wandb.mode": "offline", "data.data_dir": "/d"}).is_suite_member(m)
  assert plan(["ln"], {"data.source": "files", "num_epochs": "1"}).is_suite_member(m)
  # One field changed, of the config or of the data's source, is not the suite's.
  assert not plan(["ln"], {"num_epochs": "2"}).is_suite_member(m)
  assert not plan(["ln"], {"data.source": "embedded"}).is_suite_member(m)
  assert plan(["ln"], {"num_epochs": "2"}).record_dir("rec", m) == os.path.join(
      "own", "perm_mnist", "batch_size=4,norm=ln,seed=0")
  assert plan(["ln"]).record_dir("rec", m) == os.path.join(
      "rec", "perm_mnist", "batch_size=4,norm=ln,seed=0")
  # A normalizer the suite does not run there: a user's (the suite runs every built-in
  # its task takes, tests/test_specs.py) ...
  (user,) = plan([USER_NORM]).members
  assert not plan([USER_NORM]).is_suite_member(user)
  # ... or one a variant leaves out.
  # A variant that runs some normalizers only: the reader's gain 0.1 runs LN alone.
  reader = plan(["ln"], experiment=suite.BY_NAME["attentive_reader"])
  gain = next(m for m in reader.members if m.variant)
  assert reader.is_suite_member(gain)
  assert not reader.is_suite_member(suite.Member("attentive_reader", gain.variant, "rms", 0))
  # With --records, one folder holds every member.
  (p,) = bench.plans([PERM_MNIST], "cpu", "w", ["ln"], [0], "rec", None, None,
                     {"num_epochs": "2"})
  assert p.record_dir("rec", m) == os.path.join("rec", "perm_mnist",
                                                "batch_size=4,norm=ln,seed=0")


def test_an_override_keeps_the_checkouts_committed_records_as_they_are(checkout, trained,
                                                                      capsys):
  # The suite's own run first: its records are the checkout's.
  assert benchmark("--seeds", "0", "--norms", "none", "--workdir", "runs") == 0
  results = checkout / "results" / "cpu"
  committed = _files(results)
  assert sorted(committed) == [os.path.join("perm_mnist", NONE0, f)
                             for f in ("config.json", "metrics.jsonl")]
  capsys.readouterr()
  trained.clear()
  # The command: another data source retrains none beside its runs.
  assert benchmark("--seeds", "0", "--norms", "none,ln", "--workdir", "other",
                   "--config.data.source=embedded") == 0
  assert trained == ["batch_size=4,norm=none,seed=0", "batch_size=4,norm=ln,seed=0"]
  assert _files(results) == committed
  own = os.path.join("other", "records", "cpu")
  assert sorted(os.listdir(os.path.join(own, "perm_mnist"))) == [
      "batch_size=4,norm=ln,seed=0", NONE0]
  captured = capsys.readouterr()
  assert captured.err.splitlines() == [
      f"Records go under {own}: 2 not of the suite (the suite's config -> this command's: "
      "data.source: files -> embedded)."]
  # The report is of the command's records alone, and its header says where they are.
  assert f"Generated from the records under `{own}/` (one run" in captured.out
  assert "Records made under another rule" not in captured.out
  # The suite's own report, with the same workdir, reads the checkout's records only:
  # the override's runs of the suite's normalizers are not its members.
  assert benchmark("--seeds", "0", "--norms", "none", "--workdir", "other",
                   "--report-only") == 0
  out = capsys.readouterr().out
  assert f"Generated from the records under `{results}/` (one run" in out
  assert "Records made under another rule" not in out
  assert "| perm_mnist, batch_size=4 | none (baseline) | validation/error | 1 |" in out
  assert "| perm_mnist, batch_size=4 | ln |" not in out
  # docs/gpu.md's batch 128, in the same workdir: refused, the workdir's runs named.
  assert benchmark("--seeds", "0", "--norms", "none", "--workdir", "other",
                   "--records", "elsewhere", "--config.batch_size=128") == 2
  assert capsys.readouterr().err == (
      f"lnorm: error: {os.path.join('other', 'cpu', 'perm_mnist', 'batch_size=4,norm=none', 'seed=0')} "
      "holds a run of another config (the run's -> this command's: batch_size: 4 -> 128, "
      "data.source: embedded -> files), which is not batch_size=4,norm=none,seed=0 of this "
      "command. Give this config another --workdir, or delete that run.\n")
  assert _files(results) == committed


def test_a_record_of_another_config_is_never_overwritten(tmp_path, trained, capsys,
                                                        monkeypatch):
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  records = tmp_path / "mine"
  assert benchmark("--seeds", "0", "--norms", "none", "--workdir", str(tmp_path / "a"),
                   "--records", str(records), "--config.data.source=embedded") == 0
  made = _files(records)
  trained.clear()
  capsys.readouterr()
  argv = ("--seeds", "0,1", "--norms", "none", "--workdir", str(tmp_path / "b"),
          "--records", str(records), "--config.hidden_sizes=(16,16)",
          "--config.optimizer.learning_rate=0.01", "--config.activation=tanh",
          "--config.num_epochs=1")
  assert benchmark(*argv) == 2
  # Refused before the first member ran, naming both configs' differing fields.
  assert trained == [] and _files(records) == made
  assert capsys.readouterr().err == (
      f"lnorm: error: {records / 'perm_mnist' / NONE0} holds a record of another config "
      "(the record's -> this command's: activation: relu -> tanh, data.source: embedded "
      "-> files, hidden_sizes: [1000, 1000] -> [16, 16] and 1 more field), which this "
      "command would overwrite. Keep "
      "this config's records apart with --records DIR, or delete that record to replace "
      "it.\n")
  # --print-commands refuses as well: its commands' records would be refused later.
  assert benchmark(*argv, "--print-commands") == 2
  assert "holds a record of another config" in capsys.readouterr().err
  # The same config (a rerun under a new rule) may replace it; so may one deleted.
  shutil.rmtree(records / "perm_mnist" / NONE0)
  assert benchmark(*argv) == 0 and len(trained) == 2


def test_a_finished_run_of_another_config_in_the_workdir_is_not_recorded(tmp_path, trained,
                                                                        capsys, monkeypatch):
  # --report-only records the members finished in the workdir: only as what they are.
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  assert benchmark("--seeds", "0", "--norms", "none", "--workdir", str(tmp_path / "w"),
                   "--records", str(tmp_path / "a"), "--config.num_epochs=1",
                   "--config.activation=tanh") == 0
  capsys.readouterr()
  (tmp_path / "b").mkdir()
  assert benchmark("--seeds", "0", "--norms", "none", "--workdir", str(tmp_path / "w"),
                   "--records", str(tmp_path / "b"), "--report-only") == 2
  assert capsys.readouterr().err.startswith(
      f"lnorm: error: {tmp_path / 'w' / 'cpu' / 'perm_mnist' / 'batch_size=4,norm=none' / 'seed=0'} "
      "holds a run of another config (the run's -> this command's: activation: tanh -> relu)")
  assert not any((tmp_path / "b").iterdir())
  # A --records folder that does not exist is named first: the workdir is not looked at.
  assert benchmark("--seeds", "0", "--norms", "none", "--workdir", str(tmp_path / "w"),
                   "--records", str(tmp_path / "typo"), "--report-only") == 2
  assert capsys.readouterr().err.startswith(f"lnorm: error: --records {tmp_path / 'typo'}: "
                                            "no such folder.")


# --- every record read is whole or named -----------------------------------------------------


@pytest.fixture(scope="module")
def recorded_once(tmp_path_factory):
  """perm_mnist's none and ln at seeds 0-2, recorded once for the module."""
  folder = tmp_path_factory.mktemp("recorded")
  with pytest.MonkeyPatch.context() as m:
    m.setenv("LNORM_DATA_DIR", str(folder / "data"))
    m.setattr(runner, "_run_member", _fake_train([]))
    assert benchmark("--seeds", "0-2", "--norms", "none,ln", "--workdir", str(folder / "w"),
                     "--records", str(folder / "rec")) == 0
  return folder / "rec"


@pytest.fixture
def recorded(recorded_once, tmp_path, monkeypatch):
  """A copy of ``recorded_once``'s records of their own: the records' perm_mnist folder."""
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  shutil.copytree(recorded_once, tmp_path / "rec")
  return tmp_path / "rec" / "perm_mnist"


def _cut(path, keep):
  with open(path, "rb") as f:
    data = f.read()
  with open(path, "wb") as f:
    f.write(data[:keep] if keep >= 0 else data[:len(data) + keep])


def test_damage_of_every_kind_is_named(recorded):
  def damaged(name):
    with pytest.raises(runs_lib.DamagedRunError) as e:
      runs_lib.read_finished_run(str(recorded / name), name)
    return os.path.relpath(e.value.path, recorded), e.value.what

  whole = runs_lib.read_finished_run(str(recorded / NONE0), NONE0)
  assert whole.finished and len(whole.points) == 7
  # A last line cut short.
  _cut(recorded / NONE0 / "metrics.jsonl", -20)
  assert damaged(NONE0) == (os.path.join(NONE0, "metrics.jsonl"),
                            "line 7 of 7 is not JSON (cut short: Unterminated string "
                            "starting at)")
  # A line lost whole: the run ends before its config's end.
  ln0 = "batch_size=4,norm=ln,seed=0"
  with open(recorded / ln0 / "metrics.jsonl") as f:
    lines = f.readlines()
  with open(recorded / ln0 / "metrics.jsonl", "w") as f:
    f.writelines(lines[:3] + lines[4:-1])
  assert damaged(ln0) == (os.path.join(ln0, "metrics.jsonl"),
                          "ends at step 0 (epoch 0), before the end its config asks for "
                          "(num_epochs=1): lines are missing")
  # A config.json that is not JSON, one that is no run's record, one missing.
  none1 = "batch_size=4,norm=none,seed=1"
  _cut(recorded / none1 / "config.json", 30)
  path, what = damaged(none1)
  assert path == os.path.join(none1, "config.json") and what.startswith("not valid JSON (")
  ln1 = "batch_size=4,norm=ln,seed=1"
  (recorded / ln1 / "config.json").write_text("[1, 2]")
  assert damaged(ln1) == (os.path.join(ln1, "config.json"),
                          'not a run\'s record (no "config" object)')
  none2 = "batch_size=4,norm=none,seed=2"
  os.remove(recorded / none2 / "config.json")
  assert damaged(none2) == (os.path.join(none2, "config.json"), "missing")
  # A gzipped log cut short.
  ln2 = "batch_size=4,norm=ln,seed=2"
  with open(recorded / ln2 / "metrics.jsonl", "rb") as src, gzip.open(
      recorded / ln2 / "metrics.jsonl.gz", "wb") as out:
    out.write(src.read())
  os.remove(recorded / ln2 / "metrics.jsonl")
  assert runs_lib.read_finished_run(str(recorded / ln2), ln2).finished
  _cut(recorded / ln2 / "metrics.jsonl.gz", -10)
  path, what = damaged(ln2)
  assert path == os.path.join(ln2, "metrics.jsonl.gz")
  assert what.startswith("not a whole gzip file (")


def test_a_damaged_record_is_listed_and_the_report_fails(recorded, tmp_path, capsys):
  doc = tmp_path / "results.md"
  doc.write_text("# Results\n")
  argv = ("--seeds", "0-2", "--norms", "none,ln", "--workdir", str(tmp_path / "nowhere"),
          "--records", str(recorded.parent), "--report-only", "--update", str(doc))
  assert benchmark(*argv) == 0
  whole = capsys.readouterr().out
  assert "Members with records: perm_mnist 6/6." in whole and "Damaged" not in whole
  # A step-time timing kept beside the members (results/<scale>/<experiment>/timing/)
  # is not a member's record, damaged or whole.
  (recorded / "timing").mkdir()
  (recorded / "timing" / "ln,rms-0.json").write_text("{}")
  assert benchmark(*argv) == 0 and "Damaged" not in capsys.readouterr().out
  _cut(recorded / NONE0 / "metrics.jsonl", -20)  # The truncated log.
  doc.write_text("# Results\n")
  assert benchmark(*argv) == 1
  captured = capsys.readouterr()
  path = recorded / NONE0 / "metrics.jsonl"
  what = "line 7 of 7 is not JSON (cut short: Unterminated string starting at)"
  assert (f"**Damaged records, not judged** (restore them from git, or delete them and run "
          f"their members again): `{path}`: {what}.") in captured.out
  assert "Members with records: perm_mnist 5/6." in captured.out
  # The table judges the seeds it has, and says so; the document is left as it was.
  assert "| perm_mnist, batch_size=4 | none (baseline) | validation/error | 2 |" in (
      captured.out)
  assert doc.read_text() == "# Results\n"
  assert (f"Did not write the report into {doc}: 1 damaged record (listed above) left out "
          "of it.") in captured.out
  assert captured.err == (f"lnorm benchmark: 1 damaged record not judged, the first "
                          f"{path}: {what}.\n")


def test_a_damaged_record_is_not_trained_over(recorded, tmp_path, trained, capsys):
  _cut(recorded / NONE0 / "config.json", 30)
  assert benchmark("--seeds", "0", "--norms", "none", "--workdir", str(tmp_path / "w2"),
                   "--records", str(recorded.parent)) == 2
  err = capsys.readouterr().err
  assert err.startswith(f"lnorm: error: {recorded / NONE0 / 'config.json'}: not valid JSON (")
  assert err.endswith(f"This command would overwrite that record of {NONE0}: restore it "
                      f"(from git), or delete {recorded / NONE0} to run the member again.\n")
  assert trained == []


def test_report_only_needs_records_and_names_the_folder_it_read(recorded, tmp_path, capsys):
  common = ("--report-only", "--workdir", str(tmp_path / "nowhere"))
  missing = tmp_path / "typo"
  assert benchmark(*common, "--records", str(missing)) == 2
  assert capsys.readouterr().err == (
      f"lnorm: error: --records {missing}: no such folder. --report-only reads the records "
      "`lnorm benchmark` saved there: give the folder it named.\n")
  empty = tmp_path / "empty"
  (empty / "perm_mnist").mkdir(parents=True)
  assert benchmark(*common, "--records", str(empty)) == 2
  assert capsys.readouterr().err == (
      f"lnorm: error: --records {empty} holds no records of perm_mnist: nothing to report. "
      "Give the folder `lnorm benchmark` saved them in.\n")
  assert benchmark(*common, "--records", str(recorded.parent), "--seeds", "0-2") == 0
  assert (f"Generated from the records under `{recorded.parent}/` (one run per member"
          in capsys.readouterr().out)


# --- --norms and --seeds are checked as lnorm train checks its config -------------------------


@pytest.mark.parametrize("argv, message", [
    (("--norms", "none,lnn"),
     "--norms lnn: Normalizer 'lnn' is not available for experiment 'perm_mnist'. Valid "
     "choices: none, ln, rms, prms, dyt, scalenorm, ln_simple, bn, wn, bln, or your own as "
     "module:attribute (docs/extending.md)."),
    (("--norms", "none,no_such_pkg.norms:X"),
     "--norms no_such_pkg.norms:X: norm='no_such_pkg.norms:X': no module "
     "'no_such_pkg.norms' on the Python path."),
    (("--seeds", "3-1"), "--seeds '3-1': the range 3-1 is empty; write it low to high (1-3)."),
    (("--seeds", "0,-1"), "--seeds '0,-1': a seed is a non-negative integer, e.g. 0,1,2."),
    (("--seeds", ","), "--seeds ',' names nothing; give a comma-separated list."),
])
def test_bad_norms_and_seeds_are_one_line(argv, message, tmp_path, capsys):
  assert benchmark(*argv, "--report-only", "--records", str(tmp_path)) == 2
  err = capsys.readouterr().err
  assert err.startswith(f"lnorm: error: {message}") and err.count("\n") == 1


def test_a_normalizer_one_of_the_experiments_does_not_take_is_refused(capsys, users_norm):
  assert suite.parse_norms("none,ln", list(suite.SUITE)) == ["none", "ln"]
  assert suite.parse_norms(f"none,{users_norm}", [PERM_MNIST]) == ["none", users_norm]
  with pytest.raises(UserError, match=r"^--norms bln: Normalizer 'bln' is not available for "
                     r"experiment 'transformer_lm'\. Valid choices: none, ln, rms"):
    suite.parse_norms("none,bln", [PERM_MNIST, suite.BY_NAME["transformer_lm"]])
  assert suite.parse_norms("none,bln", [PERM_MNIST]) == ["none", "bln"]


def test_report_only_outside_a_checkout_without_records_says_where_it_looked(
    tmp_path, monkeypatch, capsys):
  monkeypatch.chdir(tmp_path)
  assert benchmark("--report-only", "--workdir", "w") == 2
  assert capsys.readouterr().err == (
      f"lnorm: error: No records of perm_mnist under {os.path.join('w', 'records', 'cpu')}: "
      "nothing to report. Run `lnorm benchmark` first, or give the folder of its records "
      "with --records DIR.\n")
