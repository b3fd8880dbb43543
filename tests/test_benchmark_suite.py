"""``lnorm benchmark``: the suite's members, their records, the resume of a
half-finished suite (members trained by a stand-in for ``lnorm train``: no JAX), and
the check that docs/results.md shows what the committed records give."""

from __future__ import annotations

import dataclasses
import functools
import glob
import gzip
import io
import json
import os

import pytest

from experiments.transformer_lm import spec as transformer_spec
from lnorm import cli
from lnorm.analysis.specs import CORE_NORMS
from lnorm import config as config_lib
from lnorm.errors import UserError
from lnorm.sweeps import benchmark as bench
from lnorm.sweeps import benchmark_suite as suite
from lnorm.sweeps import runner
from lnorm.training.defaults import DIVERGED_AT
from lnorm.training.experiments import EXPERIMENTS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TOY = suite.Experiment(
    "perm_mnist", ("none", "ln"), (suite.Claim("toy", "LN is faster", "test", "ln", "none"),),
    {"cpu": suite.Setting("configs/perm_mnist.py:smoke=true", {"eval_every_steps": "7"})})


# --- the suite -----------------------------------------------------------------------------


def test_every_experiment_runs_the_core_norms_and_the_papers_comparisons():
  norms = {e.name: e.norms for e in suite.SUITE}
  assert list(norms) == list(EXPERIMENTS)  # Every registered experiment, in its order.
  assert all(set(CORE_NORMS) <= set(n) for k, n in norms.items() if k != "transformer_lm")
  assert set(norms["transformer_lm"]) == {"none", "ln", "rms", "prms", "dyt", "scalenorm",
                                          "ln_simple"}
  assert "bn" in norms["perm_mnist"] and "bn" in norms["attentive_reader"]
  assert {"wn", "ln_cell"} <= set(norms["draw"])
  assert {"bln", "bn"} <= set(norms["bln_cifar"]) and {"bln", "bn"} <= set(norms["bln_imdb"])
  for e in suite.SUITE:
    assert all(c.norm in e.norms and c.against in e.norms
               for c in e.claims if c.field == "norm"), e.name


def test_the_transformer_runs_placement_cells_with_ln_and_successors_in_pre_ln():
  e = suite.BY_NAME["transformer_lm"]
  names = [m.name for m in suite.members([e], "cpu", seeds=[2])]
  cell = "placement={},optimizer.warmup_steps={},norm={},seed=2"
  assert names == [cell.format("pre", 100, n) for n in transformer_spec.NORMS] + [
      cell.format("pre", 0, "ln"), cell.format("post", 100, "ln"), cell.format("post", 0, "ln"),
      cell.format("none", 100, "none")]
  # --norms keeps a variant's own normalizers; a user's own runs at every variant.
  asked = suite.members([e], "cpu", norms=["rms", "pkg.mod:Mine"], seeds=[0])
  assert [(m.variant["placement"], m.variant["optimizer.warmup_steps"], m.norm) for m in asked] == [
      ("pre", "100", "rms"), ("pre", "100", "pkg.mod:Mine"), ("pre", "0", "pkg.mod:Mine"),
      ("post", "100", "pkg.mod:Mine"), ("post", "0", "pkg.mod:Mine"),
      ("none", "100", "pkg.mod:Mine")]
  only_post = suite.members([e], "cpu", norms=["ln"], seeds=[0],
                            variants=suite.parse_variants("placement=post"))
  assert [m.group for m in only_post] == ["placement=post,optimizer.warmup_steps=100,norm=ln",
                                          "placement=post,optimizer.warmup_steps=0,norm=ln"]


def test_the_transformers_claims_compare_each_scales_warmup():
  e = suite.BY_NAME["transformer_lm"]
  for scale, warmup in (("cpu", "100"), ("paper", "4000")):
    by_key = {c.key: c for c in e.claims_at(scale)}
    post = by_key["transformer_lm_post_ln_needs_warmup"]
    assert (post.field, post.norm, post.against) == ("optimizer.warmup_steps", warmup, "0")
    assert all(warmup in {v["optimizer.warmup_steps"] for v in e.scales[scale].variants}
               for c in by_key.values())
    assert by_key["transformer_lm_rms_vs_ln"].where == {"placement": "pre",
                                                        "optimizer.warmup_steps": warmup}
  # A scale's claims are part of the rule that judges it (its hash), not of what its
  # members train (their records' hash).
  pre = e.scales["cpu"].variants[0]
  other = dataclasses.replace(e, scales={**e.scales, "cpu": dataclasses.replace(
      e.scales["cpu"], claims=e.scales["paper"].claims)})
  assert suite.member_hash(e, "cpu", pre) == suite.member_hash(other, "cpu", pre)
  assert (bench.rule.rule_hash(suite.claims_record([e]))
          != bench.rule.rule_hash(suite.claims_record([other])))


def test_variant_norms_must_name_each_variant():
  with pytest.raises(ValueError, match="2 variant_norms for 1 variants"):
    suite.Setting("c.py", {}, variants=({},), variant_norms=(("ln",), ("rms",)))


def test_final_value_claims_select_their_best_value_on_validation():
  # A best-over-epochs taken on the test split would select on test.
  finals = [e for e in suite.SUITE if any(c.kind == "final" for c in e.claims)]
  assert {e.name for e in finals} == {"bln_cifar", "bln_imdb"}
  assert all(e.metric.startswith("validation/") for e in suite.SUITE)


def test_members_are_seed_major_and_named_whatever_the_selection():
  members = suite.members([suite.BY_NAME["bln_imdb"]], "paper", norms=["ln", "bln"],
                          seeds=[3])
  assert [m.name for m in members] == [
      "batch_size=25,norm=ln,seed=3", "batch_size=25,norm=bln,seed=3",
      "batch_size=1,norm=ln,seed=3", "batch_size=1,norm=bln,seed=3"]
  pm = suite.members([suite.BY_NAME["perm_mnist"]], "cpu")
  per_seed = len(suite.BY_NAME["perm_mnist"].norms)
  assert [m.name for m in pm[:4]] == [f"batch_size=4,norm={n},seed=0"
                                      for n in ("none", "ln", "rms", "bn")]
  assert pm[per_seed].name == "batch_size=4,norm=none,seed=1"
  # A user's normalizer by import path keeps a readable name.
  (m,) = suite.members([TOY], "cpu", norms=["my_pkg.norms:Centered"], seeds=[0])
  assert m.name == "norm=my_pkg.norms_Centered,seed=0" and m.norm == "my_pkg.norms:Centered"


@pytest.mark.parametrize("text, message", [
    ("0,x", "--seeds '0,x': 'x' is not a seed; expected integers, e.g. 0,1,2 or 0-4."),
    ("1,1", "--seeds '1,1': the seeds must be distinct."),
    ("0-2,2", "--seeds '0-2,2': the seeds must be distinct."),
    ("", "--seeds '' names nothing; give a comma-separated list."),
    (" , ", "--seeds ' , ' names nothing; give a comma-separated list."),
    ("-1", "--seeds '-1': a seed is a non-negative integer, e.g. 0,1,2."),
    ("0,-2", "--seeds '0,-2': a seed is a non-negative integer, e.g. 0,1,2."),
    ("3-1", "--seeds '3-1': the range 3-1 is empty; write it low to high (1-3)."),
    ("0,4-3", "--seeds '0,4-3': the range 4-3 is empty; write it low to high (3-4)."),
    ("1.5", "--seeds '1.5': '1.5' is not a seed; expected integers")])
def test_bad_seeds_are_refused(text, message):
  with pytest.raises(UserError) as e:
    suite.parse_seeds(text)
  assert str(e.value).startswith(message)


def test_seed_ranges():
  assert suite.parse_seeds("0-2,7") == [0, 1, 2, 7]
  assert suite.parse_seeds("3-3") == [3]  # A range of one: low equal to high.
  assert suite.parse_seeds("5-6, 1") == [5, 6, 1]


def test_unknown_experiment_is_refused_with_the_list():
  with pytest.raises(UserError, match="unknown experiment.*drow.*draw"):
    suite.select_experiments("perm_mnist,drow")


def test_the_cli_refuses_a_bad_flag_value(capsys):
  assert cli.main(["benchmark", "--experiments", "nope", "--print-commands"]) == 2
  assert "unknown experiment(s) nope" in capsys.readouterr().err


# --- records -------------------------------------------------------------------------------


def _fake_train(calls):
  """Stands in for ``runner._run_member``: writes a finished run (every 3 updates a
  validation error falling to 0.1, an epoch of 21 updates; 1 s of training per
  evaluation, times the seed + 1, doubled for ln, and twice that of wall time) and
  counts the call."""

  def run_member(config_spec, member, extra, sweep_name, stream, signals):
    del sweep_name, stream, signals
    calls.append(f"{os.path.basename(os.path.dirname(member.workdir))},{member.name}")
    config = runner.member_config(config_spec, member, extra)
    os.makedirs(member.workdir, exist_ok=True)
    with open(os.path.join(member.workdir, "config.json"), "w") as f:
      json.dump({"config": config_lib.to_flat_dict(config),
                 "data": {"location": os.path.join(os.environ["LNORM_DATA_DIR"], "mnist")}}, f)
    with open(os.path.join(member.workdir, "metrics.jsonl"), "w") as f:
      for i, v in enumerate((0.5, 0.4, 0.3, 0.25, 0.2, 0.15, 0.1), 1):
        seconds = i * (config.seed + 1) * (2 if config.norm == "ln" else 1)
        record = {"step": 3 * i, "epoch": i / 7, "validation/error": v, "test/error": v,
                  "time/train_seconds": seconds, "time/wall_seconds": 2 * seconds}
        if i == 7:
          record["time/epoch_seconds"] = 3.0
        f.write(json.dumps(record) + "\n")
    return runner.Outcome(member, "finished", 0.0, 0)

  return run_member


@pytest.fixture
def half_finished(tmp_path, monkeypatch):
  """The toy suite (none and ln, seeds 0-2) after a first sitting: norm=none,seed=0 has
  committed records only (another machine ran it); norm=ln,seed=0 finished in the
  workdir, not yet recorded; norm=none,seed=1 was interrupted (half its records)."""
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  calls = []
  monkeypatch.setattr(runner, "_run_member", _fake_train(calls))
  (plan,) = bench.plans([TOY], "cpu", str(tmp_path / "runs"))
  records = str(tmp_path / "results")
  first = bench.Plan(TOY, plan.setting, plan.members[:1], str(tmp_path / "elsewhere"))
  bench.run(first, records)  # The other machine: norm=none,seed=0, recorded.
  runner_members, _ = plan.prepare_all({})
  ln0 = runner_members["norm=ln,seed=0"].workdir
  by_name = {m.name: m for m in plan.members}
  for name in ("norm=ln,seed=0", "norm=none,seed=1"):
    _fake_train([])(TOY.scales["cpu"].config, runner_members[name],
                    plan.group_overrides(by_name[name], {}), "", False, None)
  none1 = runner_members["norm=none,seed=1"].workdir
  with open(os.path.join(none1, "metrics.jsonl")) as f:
    lines = f.readlines()
  with open(os.path.join(none1, "metrics.jsonl"), "w") as f:
    f.writelines(lines[:2])  # Stopped before the epoch's end.
  calls.clear()
  return plan, records, calls, ln0


def test_resume_runs_only_what_is_missing_and_records_everything(half_finished):
  plan, records, calls, ln0 = half_finished
  assert bench.print_commands([plan], records, out=io.StringIO()) == 4
  out = io.StringIO()
  bench.print_commands([plan], records, out=out)
  assert "norm=none,seed=0" not in out.getvalue()  # Its records count as finished.

  bench.run(plan, records)
  # Not none/0 (records), not ln/0 (finished in the workdir); none/1 resumed.
  assert calls == ["norm=none,seed=1", "norm=ln,seed=1", "norm=none,seed=2", "norm=ln,seed=2"]
  names = sorted(os.listdir(os.path.join(records, "perm_mnist")))
  assert names == sorted(m.name for m in plan.members)
  assert bench.print_commands([plan], records, out=io.StringIO()) == 0
  # The committed record says where the data came from, not where this machine keeps it.
  with open(os.path.join(records, "perm_mnist", "norm=ln,seed=0", "config.json")) as f:
    assert json.load(f)["data"]["location"] == "$LNORM_DATA_DIR/mnist"
  # A second run trains nothing.
  calls.clear()
  bench.run(plan, records)
  assert calls == []


def test_the_report_rebuilds_from_records_alone(half_finished, tmp_path):
  plan, records, _, _ = half_finished
  bench.run(plan, records)
  report = bench.build_report([plan], records, "cpu")
  assert [(r.norm, r.runs) for r in report.rows] == [("none", 3), ("ln", 3)]
  assert report.missing == {"perm_mnist": []} and report.refused == {"perm_mnist": []}
  assert "Members with records: perm_mnist 6/6." in report.markdown()
  # none 7, 14 and 21 s of training; ln twice that: 126 s in all.
  assert ("excluded): 2.1 min over 6 members; the slowest, perm_mnist/norm=ln,seed=2, "
          "0.7 min.") in report.markdown()
  (v,) = report.verdicts  # Identical curves: a ratio of exactly 1, on a coarse grid.
  assert v.evidence.estimate.value == 0
  assert v.verdict.verdict == "inconclusive at this scale"
  assert "the evaluation grid's resolution" in v.verdict.why


def _edit_record(records, name, edit):
  """Applies ``edit`` to the ``config`` section of ``name``'s committed config.json."""
  path = os.path.join(records, "perm_mnist", name, "config.json")
  with open(path) as f:
    record = json.load(f)
  edit(record["config"])
  with open(path, "w") as f:
    json.dump(record, f)


def test_a_record_whose_config_drifted_is_stale_and_named_with_its_fields(half_finished):
  plan, records, _, _ = half_finished
  bench.run(plan, records)
  # Made when the config file said tanh; its command runs relu now (the same hash).
  _edit_record(records, "norm=ln,seed=1", lambda c: c.update(activation="tanh"))
  # Four fields off, one of them a field the record lacks that is not at lnorm's default.
  _edit_record(records, "norm=none,seed=2", lambda c: (
      c.update({"hidden_sizes": [16], "data.validation_size": 100, "eval_batch_size": 64}),
      c.pop("steps_per_call")))
  report = bench.build_report([plan], records, "cpu")
  assert report.refused == {"perm_mnist": ["norm=ln,seed=1", "norm=none,seed=2"]}
  assert report.drift["perm_mnist"] == {
      "norm=ln,seed=1": ["activation: tanh -> relu"],
      "norm=none,seed=2": ["data.validation_size: 100 -> 5000", "eval_batch_size: 64 -> 500",
                           "hidden_sizes: [16] -> [32, 32]", "steps_per_call: <absent> -> 2"]}
  assert sorted(os.path.basename(p) for p in report.judged["perm_mnist"]) == [
      "norm=ln,seed=0", "norm=ln,seed=2", "norm=none,seed=0", "norm=none,seed=1"]
  assert ("Records made under another rule or setting (rerun them: delete their records and "
          "run `lnorm benchmark` again): perm_mnist: norm=ln,seed=1, norm=none,seed=2 (config "
          "now differs: activation: tanh -> relu, data.validation_size: 100 -> 5000, "
          "eval_batch_size: 64 -> 500 and 2 more fields).") in report.markdown()
  (v,) = report.verdicts
  assert v.evidence.verdict == bench.rule.REFUSED
  # Their records do not count as finished, as those under another hash do not.
  _, configs = plan.prepare_all({})
  assert [m.name for m in plan.members if not bench.has_records(
      plan.record_dir(records, m), configs[m.name])] == ["norm=ln,seed=1", "norm=none,seed=2"]


def test_per_run_fields_and_fields_lnorm_gained_at_their_default_are_no_drift(half_finished):
  plan, records, _, _ = half_finished
  bench.run(plan, records)

  def per_run(c):
    c.update({"wandb.name": "perm_mnist/norm=ln/seed=1", "wandb.mode": "online",
              "data.data_dir": "$LNORM_DATA_DIR", "data.cache_dir": "/tmp/cache"})
    # Fields lnorm gained after the record was made, at their defaults.
    del c["optimizer.warmup_steps"], c["norm_options.scalenorm.scale_init"]

  _edit_record(records, "norm=ln,seed=1", per_run)
  report = bench.build_report([plan], records, "cpu")
  assert report.refused == {"perm_mnist": []} and report.drift == {"perm_mnist": {}}
  assert len(report.judged["perm_mnist"]) == 6
  _, configs = plan.prepare_all({})
  assert all(bench.has_records(plan.record_dir(records, m), configs[m.name])
             for m in plan.members)


def test_large_metrics_are_committed_gzipped_and_read_back(tmp_path, monkeypatch):
  monkeypatch.setattr(bench, "GZIP_ABOVE_BYTES", 10)
  run = tmp_path / "run"
  run.mkdir()
  (run / "config.json").write_text(json.dumps({"config": {"num_epochs": 1}, "data": {}}))
  (run / "metrics.jsonl").write_text('{"step": 1, "epoch": 1, "time/epoch_seconds": 1}\n')
  written = bench.save_records(str(run), str(tmp_path / "rec"))
  assert [os.path.basename(w) for w in written] == ["config.json", "metrics.jsonl.gz"]
  with gzip.open(written[1], "rt") as f:
    assert f.read() == (run / "metrics.jsonl").read_text()
  from lnorm.analysis import runs as runs_lib
  assert runs_lib.read_records(str(tmp_path / "rec"))[0]["step"] == 1
  assert runs_lib.find_run_dirs([str(tmp_path / "rec")]) == [str(tmp_path / "rec")]
  again = bench.save_records(str(run), str(tmp_path / "rec"))  # Byte for byte the same.
  with open(written[1], "rb") as f1, open(again[1], "rb") as f2:
    assert f1.read() == f2.read()
  bench.restore_records(str(tmp_path / "rec"), str(tmp_path / "back"))
  assert (tmp_path / "back" / "metrics.jsonl").read_text() == (run / "metrics.jsonl").read_text()


def test_a_bln_members_search_runs_once_and_goes_with_its_records(tmp_path, monkeypatch):
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  monkeypatch.setattr(runner, "_run_member", _fake_train([]))
  searched = []

  def search(workdir):  # Stands in for lnorm bln-search: a path to make portable.
    searched.append(os.path.basename(os.path.dirname(workdir)))
    with open(os.path.join(workdir, "bln_search.json"), "w") as f:
      json.dump({"dataset": os.path.join(os.environ["LNORM_DATA_DIR"], "cifar10")}, f)

  monkeypatch.setattr(bench, "search_bln_inference", search)
  toy = dataclasses.replace(TOY, norms=("bn", "bln"))
  (plan,) = bench.plans([toy], "cpu", str(tmp_path / "runs"), seeds=[0])
  records = str(tmp_path / "results")
  bench.run(plan, records)
  assert searched == ["norm=bln"]  # Not BN: the search is BLN's inference.
  with open(os.path.join(records, "perm_mnist", "norm=bln,seed=0", "bln_search.json")) as f:
    assert json.load(f) == {"dataset": "$LNORM_DATA_DIR/cifar10"}
  assert not os.path.exists(os.path.join(records, "perm_mnist", "norm=bn,seed=0",
                                         "bln_search.json"))
  bench.restore_records(os.path.join(records, "perm_mnist", "norm=bln,seed=0"),
                        str(tmp_path / "back"))
  assert os.path.exists(tmp_path / "back" / "bln_search.json")
  bench.run(plan, records)
  assert searched == ["norm=bln"]  # Recorded: not searched again.


def _bln_toy_with_search_spy(tmp_path, monkeypatch, run_member):
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  monkeypatch.setattr(runner, "_run_member", run_member)
  searched = []
  monkeypatch.setattr(bench, "search_bln_inference", searched.append)
  toy = dataclasses.replace(TOY, norms=("bln",))
  (plan,) = bench.plans([toy], "cpu", str(tmp_path / "runs"), seeds=[0])
  return plan, str(tmp_path / "results"), searched


def test_a_diverged_bln_member_is_recorded_without_a_search(tmp_path, monkeypatch):
  finished = _fake_train([])

  def run_member(config_spec, member, extra, sweep_name, stream, signals):
    finished(config_spec, member, extra, sweep_name, stream, signals)
    with open(os.path.join(member.workdir, "metrics.jsonl"), "a") as f:
      f.write(json.dumps({"step": 8, DIVERGED_AT: 8}) + "\n")  # No last model to search.
    return runner.Outcome(member, "failed", 0.0, 2)

  plan, records, searched = _bln_toy_with_search_spy(tmp_path, monkeypatch, run_member)
  bench.run(plan, records)
  assert searched == []
  assert os.path.isdir(os.path.join(records, "perm_mnist", "norm=bln,seed=0"))


def test_a_search_already_in_the_workdir_is_kept_not_run_again(tmp_path, monkeypatch):
  finished = _fake_train([])

  def run_member(config_spec, member, extra, sweep_name, stream, signals):
    outcome = finished(config_spec, member, extra, sweep_name, stream, signals)
    with open(os.path.join(member.workdir, "bln_search.json"), "w") as f:
      json.dump({"by": "hand"}, f)  # As `lnorm bln-search` leaves it.
    return outcome

  plan, records, searched = _bln_toy_with_search_spy(tmp_path, monkeypatch, run_member)
  bench.run(plan, records)
  assert searched == []
  with open(os.path.join(records, "perm_mnist", "norm=bln,seed=0", "bln_search.json")) as f:
    assert json.load(f) == {"by": "hand"}


def test_markers_are_added_after_the_title_then_replaced():
  doc = "# Results\n\nOlder text.\n"
  once = bench.replace_between_markers(doc, "table 1\n")
  assert once == (f"# Results\n\n{bench.BEGIN_MARKER}\ntable 1\n{bench.END_MARKER}\n\n"
                  "Older text.\n")
  twice = bench.replace_between_markers(once, "table 2\n")
  assert bench.between_markers(twice) == "table 2\n" and twice.endswith("\nOlder text.\n")


# --- the document ----------------------------------------------------------------------------


def test_results_md_shows_what_the_committed_records_give(monkeypatch):
  """docs/results.md's headline is exactly `lnorm benchmark --report-only`'s output
  from results/cpu: rerun `lnorm benchmark --report-only --update docs/results.md`
  after committing records."""
  monkeypatch.chdir(REPO)  # The command runs in this checkout.
  with open(os.path.join(REPO, "docs", "results.md")) as f:
    shown = bench.between_markers(f.read())
  assert shown is not None, "docs/results.md has no benchmark markers"
  records = bench.records_root("cpu")
  plans = bench.plans(list(suite.SUITE), "cpu", "runs/benchmark", records=records)
  expected = bench.build_report(plans, records, "cpu").markdown()
  assert shown == expected


def test_results_md_shows_the_gpu_records_or_that_every_gpu_verdict_awaits_a_run(
    monkeypatch):
  """The GPU section of docs/results.md: the report of the device's committed gpu-scale
  records (results/gpu/<device>/benchmark/), or, while no device has any, the line
  that says every verdict there awaits a run."""
  monkeypatch.chdir(REPO)
  with open(os.path.join(REPO, "docs", "results.md")) as f:
    text = f.read()
  shown = bench.between_markers(text, "gpu")
  assert shown is not None, "docs/results.md has no gpu benchmark markers"
  assert bench.between_markers(text, "cpu") != shown
  folders = sorted(p for p in glob.glob(os.path.join("results", "gpu", "*",
                                                     bench.GPU_RECORDS_FOLDER))
                   if os.listdir(p))
  if not folders:
    assert shown == "No GPU records yet: every claim at the gpu scale is not run yet.\n"
    return
  (records,) = folders  # The section is one device's.
  plans = bench.plans(list(suite.SUITE), "gpu", "runs/benchmark", records=records)
  assert shown == bench.build_report(plans, records, "gpu").markdown()


# --- the command -----------------------------------------------------------------------------


def test_report_only_writes_the_document_from_records(half_finished, tmp_path, capsys,
                                                     monkeypatch):
  plan, records, calls, _ = half_finished
  monkeypatch.setattr(suite, "SUITE", (TOY,))  # The command runs the toy suite.
  monkeypatch.setitem(suite.BY_NAME, "perm_mnist", TOY)
  doc = tmp_path / "results.md"
  doc.write_text("# Results\n\nEarlier runs.\n")
  argv = ["benchmark", "--experiments", "perm_mnist", "--records", records, "--report-only",
          "--workdir", os.path.dirname(os.path.dirname(plan.workdir)), "--update", str(doc),
          "--no-wandb"]
  assert cli.main(argv) == 0
  assert calls == []  # --report-only trains nothing...
  # ...but records the member that finished in the workdir (norm=ln,seed=0).
  assert os.path.isdir(os.path.join(records, "perm_mnist", "norm=ln,seed=0"))
  printed = capsys.readouterr().out
  shown = bench.between_markers(doc.read_text())
  assert shown and shown in printed and doc.read_text().endswith("Earlier runs.\n")
  # Seed 0's records took seconds: a pilot of five seeds, ten members.
  assert "Members with records: perm_mnist 2/10." in shown


class _FakeRun:
  def __init__(self):
    self.logged, self.finished = {}, False

  def log(self, values):
    self.logged.update(values)

  def finish(self):
    self.finished = True


def test_the_verdict_table_goes_to_wandb(half_finished, monkeypatch):
  import wandb
  from lnorm.training import metrics_writer
  plan, records, _, _ = half_finished
  bench.run(plan, records)
  report = bench.build_report([plan], records, "cpu")
  run, seen = _FakeRun(), {}
  monkeypatch.setattr(metrics_writer, "wandb_mode", lambda configured: ("offline", ""))
  monkeypatch.setattr(wandb, "init", lambda **kw: seen.update(kw) or run)
  bench.log_verdicts(report)
  assert (seen["group"], seen["job_type"], seen["mode"]) == ("benchmark", "report", "offline")
  table = run.logged["benchmark/verdicts"]
  assert table.columns[-4:] == ["verdict", "p", "p after Holm", "evidence"]
  v = report.verdicts[0].verdict
  assert table.data == [["perm_mnist", "LN is faster", "ln", "none", v.verdict, v.p,
                         v.p_adjusted, v.why]]
  headline = run.logged["benchmark/headline"]
  assert len(headline.data) == 2 and run.finished
  assert headline.data[1][:2] == ["perm_mnist", "ln"]


def test_wandb_disabled_logs_nothing(half_finished, monkeypatch):
  import wandb
  plan, records, _, _ = half_finished
  monkeypatch.setenv("WANDB_MODE", "disabled")
  monkeypatch.setattr(wandb, "init", lambda **kw: pytest.fail("wandb.init called"))
  bench.log_verdicts(bench.build_report([plan], records, "cpu"))


def test_a_later_seed_selection_trains_its_own_members(tmp_path, monkeypatch):
  # Run seed 0 alone, then seed 1 alone: each sweep has one seed, and the second must
  # not take the first's finished workdir for its own.
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  calls = []
  monkeypatch.setattr(runner, "_run_member", _fake_train(calls))
  records = str(tmp_path / "results")
  for seed in (0, 1):
    (plan,) = bench.plans([TOY], "cpu", str(tmp_path / "runs"), norms=["ln"], seeds=[seed])
    bench.run(plan, records)
  assert calls == ["norm=ln,seed=0", "norm=ln,seed=1"]
  group = tmp_path / "runs" / "cpu" / "perm_mnist" / "norm=ln"
  assert sorted(p.name for p in group.iterdir() if p.is_dir()) == ["seed=0", "seed=1"]
  with open(os.path.join(records, "perm_mnist", "norm=ln,seed=1", "config.json")) as f:
    config = json.load(f)["config"]
  assert (config["seed"], config["norm"], config["wandb.group"]) == (1, "ln", "perm_mnist")


def test_a_member_that_diverged_is_recorded_not_retried(tmp_path, monkeypatch):
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  calls = []
  finished = _fake_train(calls)

  def run_member(config_spec, member, extra, sweep_name, stream, signals):
    outcome = finished(config_spec, member, extra, sweep_name, stream, signals)
    if "norm=ln" in member.workdir and member.name == "seed=1":
      with open(os.path.join(member.workdir, "metrics.jsonl"), "w") as f:
        f.write(json.dumps({"step": 0, DIVERGED_AT: 0}) + "\n")  # As lnorm train does.
      return runner.Outcome(member, "failed", 0.0, 2)
    return outcome

  monkeypatch.setattr(runner, "_run_member", run_member)
  (plan,) = bench.plans([TOY], "cpu", str(tmp_path / "runs"))
  records = str(tmp_path / "results")
  assert bench.run(plan, records) == []  # Not a failure to retry...
  assert os.path.isdir(os.path.join(records, "perm_mnist", "norm=ln,seed=1"))  # ...recorded.
  calls.clear()
  bench.run(plan, records)
  assert calls == []
  rows = {r.norm: r for r in bench.build_report([plan], records, "cpu").rows}
  assert (rows["ln"].runs, rows["ln"].diverged) == (3, 1)
  # The diverged seed's crossings are all after the run: 4 levels of 12.
  assert (rows["ln"].speed.censored, rows["ln"].speed.crossings) == (4, 12)


def test_the_headline_divides_by_the_experiments_reference(tmp_path, monkeypatch):
  # The Transformer's pre-LN cell has no normalizer-free run: its rows are read against LN.
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  monkeypatch.setattr(runner, "_run_member", _fake_train([]))
  toy = dataclasses.replace(TOY, norms=("none", "ln", "rms"), reference="ln")
  (plan,) = bench.plans([toy], "cpu", str(tmp_path / "runs"), norms=["ln", "rms"])
  records = str(tmp_path / "results")
  assert bench.run(plan, records) == []
  report = bench.build_report([plan], records, "cpu")
  rows = {r.norm: r for r in report.rows}
  assert list(rows) == ["ln", "rms"] and rows["rms"].speed is not None
  assert "| perm_mnist | ln (baseline) |" in report.markdown()
  assert "| perm_mnist | rms |" in report.markdown()


def test_parallel_runs_a_groups_seeds_together(tmp_path, monkeypatch):
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  calls, streamed = [], []
  fake = _fake_train(calls)

  def run_member(config_spec, member, extra, sweep_name, stream, signals):
    streamed.append(stream)
    return fake(config_spec, member, extra, sweep_name, stream, signals)

  monkeypatch.setattr(runner, "_run_member", run_member)
  (plan,) = bench.plans([TOY], "cpu", str(tmp_path / "runs"))
  assert bench.run(plan, str(tmp_path / "results"), parallel=2) == []
  # Each group is one sweep of three seeds, two at a time: none's before ln's.
  assert sorted(calls[:3]) == [f"norm=none,seed={s}" for s in range(3)]
  assert sorted(calls[3:]) == [f"norm=ln,seed={s}" for s in range(3)]
  assert streamed == [False] * 6


def test_print_commands_pass_a_users_normalizer_through(tmp_path, capsys, monkeypatch):
  # Members are checked before any command is printed, the user's normalizer included:
  # it must import, as it will on the cluster.
  package = tmp_path / "src" / "my_pkg"
  package.mkdir(parents=True)
  (package / "__init__.py").write_text("")
  (package / "norms.py").write_text(
      "import jax.numpy as jnp\n\n"
      "def Centered(x):\n"
      "  return x - jnp.mean(x, axis=-1, keepdims=True)\n")
  monkeypatch.syspath_prepend(str(tmp_path / "src"))
  argv = ["benchmark", "--experiments", "bln_cifar", "--norms", "none,my_pkg.norms:Centered",
          "--seeds", "4", "--records", str(tmp_path / "rec"), "--workdir", str(tmp_path / "w"),
          "--print-commands"]
  assert cli.main(argv) == 0
  lines = capsys.readouterr().out.splitlines()
  assert len(lines) == 4  # none and the user's normalizer, at batch 25 and batch 1.
  assert "--config.batch_size=1 --config.steps_per_call=1000" in lines[3]
  assert lines[1].startswith("lnorm train --config configs/bln_cifar.py --workdir ")
  assert f"{tmp_path}/w/cpu/bln_cifar/batch_size=25,norm=my_pkg.norms_Centered/seed=4" in lines[1]
  for flag in ("--config.norm=my_pkg.norms:Centered", "--config.seed=4",
               "--config.batch_size=25", "--config.steps_per_call=40",
               "--config.wandb.group=bln_cifar", "--config.data.source=files"):
    assert f" {flag}" in lines[1]


def test_parallel_below_one_is_refused(capsys):
  assert cli.main(["benchmark", "--parallel", "0", "--report-only"]) == 2
  assert "--parallel 0: run at least 1 member at once" in capsys.readouterr().err


def test_records_name_the_data_directory_wherever_it_appears():
  data = "/srv/data"
  record = {"data": {"location": "/srv/data/mnist", "notes": "MNIST at /srv/data/mnist",
                     "other": "/srv/data2/x", "list": ["/srv/data"]}}
  assert bench._portable(record, data + "/") == {  # pylint: disable=protected-access
      "data": {"location": "$LNORM_DATA_DIR/mnist", "notes": "MNIST at $LNORM_DATA_DIR/mnist",
               "other": "/srv/data2/x", "list": ["$LNORM_DATA_DIR"]}}
  assert bench._portable(record, None) == record  # pylint: disable=protected-access


def test_a_variant_may_leave_a_field_at_the_configs_default(tmp_path, monkeypatch):
  # As the reader runs LN at gain 0.1 beside its {} variant: a record's variant is the
  # most specific one its config matches, and the LN-only variant's row is read
  # against the default variant's baseline.
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  monkeypatch.setattr(runner, "_run_member", _fake_train([]))
  setting = dataclasses.replace(TOY.scales["cpu"], variants=({}, {"batch_size": "7"}),
                                variant_norms=(("none", "ln"), ("ln",)))
  toy = dataclasses.replace(TOY, scales={"cpu": setting}, variant_keys=("batch_size",))
  (plan,) = bench.plans([toy], "cpu", str(tmp_path / "runs"))
  assert [m.name for m in plan.members][:3] == ["norm=none,seed=0", "norm=ln,seed=0",
                                                "batch_size=7,norm=ln,seed=0"]
  records = str(tmp_path / "results")
  assert bench.run(plan, records) == []
  report = bench.build_report([plan], records, "cpu")
  assert report.refused == {"perm_mnist": []} and len(report.judged["perm_mnist"]) == 9
  rows = [(r.context, r.norm, r.runs, r.speed is not None) for r in report.rows]
  assert rows == [("", "none", 3, True), ("", "ln", 3, True), ("batch_size=7", "ln", 3, True)]


def test_variant_index_prefers_the_variant_that_names_more_fields():
  variants = ({}, {"norm_options.ln.scale_init": "0.1"}, {"batch_size": "4"})
  assert suite.variant_index({"norm_options.ln.scale_init": 1.0}, variants) == 0
  assert suite.variant_index({"norm_options.ln.scale_init": 0.1}, variants) == 1
  assert suite.variant_index({"batch_size": 4, "norm_options.ln.scale_init": 1.0},
                             variants) == 2
  assert suite.variant_index({"batch_size": 4}, variants[1:]) == 1
  assert suite.variant_index({"batch_size": 5}, variants[1:]) is None
  # A field the config lacks matches nothing, not even the value "none" (a missing
  # field read as None once made a config without `placement` a placement=none run).
  assert suite.variant_index({"norm": "ln"}, ({"placement": "none"},)) is None
  assert suite.variant_index({"placement": "None"}, ({"placement": "none"},)) == 0


def test_the_readers_claims_are_at_the_papers_gain_and_compare_the_gains():
  e = suite.BY_NAME["attentive_reader"]
  by_key = {c.key: c for c in e.claims}
  assert by_key["attentive_reader_ln_speed"].where == {"norm_options.ln.scale_init": "1.0"}
  gain = by_key["attentive_reader_ln_gain"]
  assert (gain.field, gain.norm, gain.against, gain.where) == (
      "norm_options.ln.scale_init", "1.0", "0.1", {"norm": "ln"})
  assert bench._outside_setting(gain, e.scales["cpu"]) is None
  names = [m.name for m in suite.members([e], "cpu", seeds=[1])]
  assert names == [f"norm={n},seed=1" for n in e.norms] + [
      "norm_options.ln.scale_init=0.1,norm=ln,seed=1"]
  assert names[:4] == ["norm=none,seed=1", "norm=ln,seed=1", "norm=rms,seed=1",
                       "norm=bn,seed=1"]


# --- the gpu scale: chunks that fit a short allocation ----------------------------------------

#: The toy suite with a gpu setting: one claim, whose members train first there.
TOY_GPU = dataclasses.replace(TOY, scales={
    **TOY.scales, "gpu": suite.Setting("configs/perm_mnist.py:smoke=true",
                                       {"eval_every_steps": "5"}, run_first={"toy": 1})})


class _Timer:
  """Stands in for threading.Timer: it never fires by itself; the test fires it."""

  def __init__(self, seconds, callback):
    self.seconds, self.fire = seconds, callback
    self.daemon = self.started = self.cancelled = False

  def start(self):
    self.started = True

  def cancel(self):
    self.cancelled = True


@pytest.fixture
def toy_gpu_command(tmp_path, monkeypatch):
  """The command line of the toy suite at the gpu scale, members trained by the
  stand-in (no JAX); ``timers`` holds each --time-limit's timer, ``calls`` each
  member trained, ``at_call`` (when set) the call during which the timer fires: that
  member stops half-way, as one does on SIGTERM."""
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path / "data"))
  monkeypatch.setattr(suite, "SUITE", (TOY_GPU,))
  monkeypatch.setitem(suite.BY_NAME, "perm_mnist", TOY_GPU)
  timers, calls, at_call = [], [], []
  monkeypatch.setattr(bench, "TimeLimit", functools.partial(
      bench.TimeLimit, timer=lambda seconds, fire: timers.append(_Timer(seconds, fire))
      or timers[-1], clock=lambda: 0.0))  # No time passes but the test's.
  finished = _fake_train(calls)

  def run_member(config_spec, member, extra, sweep_name, stream, signals):
    outcome = finished(config_spec, member, extra, sweep_name, stream, signals)
    if at_call and len(calls) == at_call[0]:
      timers[-1].fire()  # The limit: a SIGTERM to the command, passed to this member.
      assert signals.received == "SIGTERM"
      path = os.path.join(member.workdir, "metrics.jsonl")
      with open(path) as f:
        lines = f.readlines()
      with open(path, "w") as f:
        f.writelines(lines[:3])  # It saved a checkpoint half-way and exited.
      return runner.Outcome(member, "interrupted", 0.0, runner.INTERRUPTED_CODE)
    return outcome

  def run_group(config_spec, group, configs, extra, sweep_name, stream, signals):
    """Seeds together: each trained by the stand-in, its record saying with which
    (its wall time stands for its share of the process's)."""
    del configs
    outcomes = [run_member(config_spec, m, extra, sweep_name, stream, signals)
                for m in group]
    for m in group:
      path = os.path.join(m.workdir, "config.json")
      with open(path) as f:
        record = json.load(f)
      record["seeds_together"] = [int(n.overrides["seed"]) for n in group]
      with open(path, "w") as f:
        json.dump(record, f)
    return outcomes

  monkeypatch.setattr(runner, "_run_member", run_member)
  monkeypatch.setattr(runner, "_run_group", run_group)
  records = str(tmp_path / "records")
  argv = ["benchmark", "--scale", "gpu", "--records", records, "--seeds", "0-2",
          "--workdir", str(tmp_path / "runs"), "--no-wandb"]
  return argv, records, timers, calls, at_call


def _recorded(records):
  folder = os.path.join(records, "perm_mnist")
  return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def test_a_time_limit_stops_cleanly_and_the_same_command_resumes(toy_gpu_command, capsys):
  argv, records, timers, calls, at_call = toy_gpu_command
  at_call.append(3)  # The limit strikes during the third member.
  assert cli.main(argv + ["--time-limit", "90"]) == 75
  (timer,) = timers
  assert (timer.seconds, timer.started, timer.cancelled) == (90, True, True)
  # Two members finished and keep their records; the third stopped, nothing after it.
  assert calls == ["norm=none,seed=0", "norm=ln,seed=0", "norm=none,seed=1"]
  assert _recorded(records) == ["norm=ln,seed=0", "norm=none,seed=0"]
  captured = capsys.readouterr()
  assert "Members with records: perm_mnist 2/6." in captured.out  # The report follows.
  assert ("lnorm benchmark: stopped at the time limit of 90 s, with 4 members of this "
          "command left to train. Rerun the same command to resume") in captured.err
  # The same command resumes: the stopped member first, from its workdir, then the rest.
  at_call.clear()
  calls.clear()
  assert cli.main(argv + ["--time-limit", "90"]) == 0
  assert calls == ["norm=none,seed=1", "norm=ln,seed=1", "norm=none,seed=2", "norm=ln,seed=2"]
  assert len(_recorded(records)) == 6
  assert "stopped at the time limit" not in capsys.readouterr().err


def test_a_limit_that_expires_after_the_last_member_changes_nothing(toy_gpu_command, capsys):
  argv, records, timers, calls, at_call = toy_gpu_command
  at_call.append(6)  # The last member: it stops, and is the one left.
  assert cli.main(argv + ["--time-limit", "3600"]) == 75
  assert len(_recorded(records)) == 5
  at_call.clear()
  assert cli.main(argv + ["--time-limit", "3600"]) == 0
  timers[-1].fire()  # After the command: disarmed, no SIGTERM reaches this process.
  assert len(_recorded(records)) == 6


def _seed_zero_recorded_and_the_clock_still(argv, calls, monkeypatch):
  """Trains seed 0 of each member (none/0 records 14 s of wall time, ln/0 28 s) as the
  estimates of the chunks that follow, whose limit then finds the clock standing
  still: the whole limit is left whenever a member is judged."""
  assert cli.main(argv + ["--seeds", "0"]) == 0
  calls.clear()
  monkeypatch.setattr(bench, "TimeLimit", functools.partial(
      bench.TimeLimit, timer=lambda seconds, fire: _Timer(seconds, fire),
      clock=lambda: 1000.0))


def test_a_member_the_time_left_cannot_hold_waits_for_the_next_chunk(toy_gpu_command,
                                                                   monkeypatch, capsys):
  """Before the limit, a member starts only if its group's records say it finishes:
  one stopped at the limit would start again where the workdir is not kept."""
  argv, records, _, calls, _ = toy_gpu_command
  _seed_zero_recorded_and_the_clock_still(argv, calls, monkeypatch)
  assert cli.main(argv + ["--time-limit", "20"]) == 75
  # none/1 fits (14 s); then its 28 s make none/2 wait too, and LN's 28 s every LN seed.
  assert calls == ["norm=none,seed=1"]
  captured = capsys.readouterr()
  assert ("[benchmark perm_mnist] norm=ln,seed=1 not started: 20 s left before the time "
          "limit, and its group's members took up to 28 s") in captured.out
  assert ("lnorm benchmark: did not start 3 members that would not finish within the time "
          "limit of 20 s, with 3 members of this command left to train.") in captured.err
  calls.clear()
  assert cli.main(argv) == 0  # Without a limit, the rest.
  assert calls == ["norm=ln,seed=1", "norm=none,seed=2", "norm=ln,seed=2"]


def test_seeds_together_start_as_many_as_the_time_left_holds(toy_gpu_command, monkeypatch,
                                                             capsys):
  """With --seeds-per-process, a chunk of seeds is one process: it starts with as many
  of its seeds as the time left holds, a seed counted at its process's whole time."""
  argv, records, _, calls, _ = toy_gpu_command
  _seed_zero_recorded_and_the_clock_still(argv, calls, monkeypatch)
  together = ["--seeds-per-process", "3", "--time-limit", "50"]
  assert cli.main(argv + ["--seeds", "0-3"] + together) == 75
  # none: 3 seeds together, 3 x 14 s = 42 s, fit; LN: 84 s do not, 56 s for two do
  # not, one alone (28 s) does.
  assert calls == ["norm=none,seed=1", "norm=none,seed=2", "norm=none,seed=3",
                   "norm=ln,seed=1"]
  assert ("[benchmark perm_mnist] norm=ln,seed=2, norm=ln,seed=3 not started: 50 s left "
          "before the time limit, and 3 seeds of its group together would take up to "
          "84 s") in capsys.readouterr().out
  with open(os.path.join(records, "perm_mnist", "norm=none,seed=3", "config.json")) as f:
    assert json.load(f)["seeds_together"] == [1, 2, 3]
  # A recorded seed stands for its whole process: none/3's 56 s, a third of the 168 s
  # its process took. So none/4 waits even alone; LN's two seeds (2 x 56 s) fit.
  calls.clear()
  assert cli.main(argv + ["--seeds", "0-4", "--seeds-per-process", "3",
                          "--time-limit", "150"]) == 75
  assert calls == ["norm=ln,seed=2", "norm=ln,seed=3"]
  out = capsys.readouterr().out
  assert ("norm=none,seed=4 not started: 150 s left before the time limit, and its "
          "group's members took up to 168 s") in out
  assert ("norm=ln,seed=4 not started: 150 s left before the time limit, and 3 seeds of "
          "its group together would take up to 168 s") in out


@pytest.mark.parametrize("extra, message", [
    (["--time-limit", "0"], "--time-limit 0: give the seconds the command may train"),
    (["--time-limit", "60", "--report-only"], "--time-limit limits training, and "
     "--report-only trains nothing"),
    (["--time-limit", "60", "--print-commands"], "--print-commands trains nothing"),
])
def test_a_time_limit_without_training_to_limit_is_refused(toy_gpu_command, capsys, extra,
                                                          message):
  argv, _, _, calls, _ = toy_gpu_command
  assert cli.main(argv + extra) == 2
  # Refused before anything else is said (where the records go, the plan).
  assert message in capsys.readouterr().err.splitlines()[0] and calls == []


def test_the_gpu_report_goes_between_its_own_markers(toy_gpu_command, tmp_path, capsys):
  argv, records, _, _, _ = toy_gpu_command
  assert cli.main(argv) == 0
  cpu_block = "the cpu scale's report\n"
  gpu = bench.results_block("gpu")
  doc = tmp_path / "results.md"
  doc.write_text(f"# Results\n\n{bench.BEGIN_MARKER}\n{cpu_block}{bench.END_MARKER}\n\n"
                 f"## At GPU scale\n\nAwaiting a run.\n\n{gpu.begin}\nnone yet\n{gpu.end}\n"
                 "\nAfter it.\n")
  report = argv + ["--report-only", "--update", str(doc)]
  assert cli.main(report) == 0
  text = doc.read_text()
  shown = bench.between_markers(text, "gpu")
  assert shown in capsys.readouterr().out and "`" + bench.shown(records) + "/`" in shown
  assert "at most 30 seeds at the gpu scale" in shown
  assert bench.between_markers(text, "cpu") == cpu_block  # The CPU's block is untouched.
  assert text.endswith(f"{gpu.end}\n\nAfter it.\n")
  # A page without the gpu scale's markers is refused, naming the two lines.
  doc.write_text(f"# Results\n\n{bench.BEGIN_MARKER}\n{cpu_block}{bench.END_MARKER}\n")
  assert cli.main(report) == 2
  err = capsys.readouterr().err
  assert f"the page has no markers of the gpu scale's report; add the two lines {gpu.begin}" in err
  assert doc.read_text().count(cpu_block) == 1


def test_the_undecided_claims_members_train_first(tmp_path):
  """At the gpu scale, each setting's run_first claims go first, rank by rank across
  experiments: Figure 6 at batch 128, the reader, the Transformer's placement, then
  perm-MNIST at batch 4 against no normalizer; then every other member."""
  plans = bench.plans(list(suite.SUITE), "gpu", str(tmp_path), seeds=[0])
  parts = [(p.experiment.name, [m.name for m in p.members]) for p in bench.run_order(plans)]
  assert [(e, names[0]) for e, names in parts[:4]] == [
      ("perm_mnist", "batch_size=128,norm=none,seed=0"),
      ("attentive_reader", "norm=none,seed=0"),
      ("transformer_lm", "placement=post,optimizer.warmup_steps=100,norm=ln,seed=0"),
      ("perm_mnist", "batch_size=4,norm=none,seed=0")]
  assert parts[0][1] == [f"batch_size=128,norm={n},seed=0" for n in ("none", "ln", "bn")]
  assert parts[3][1] == ["batch_size=4,norm=none,seed=0", "batch_size=4,norm=ln,seed=0"]
  assert "norm_options.ln.scale_init=0.1,norm=ln,seed=0" in parts[1][1]
  assert "norm=rms,seed=0" not in parts[1][1]  # No claim of the reader reads RMSNorm.
  # Every member once, and the cpu scale's order is the plans' own.
  assert sorted(n for _, names in parts for n in names) == sorted(
      m.name for p in plans for m in p.members)
  cpu = bench.plans(list(suite.SUITE), "cpu", str(tmp_path), seeds=[0])
  assert bench.run_order(cpu) == cpu


def test_a_gpus_records_go_to_its_own_folder(monkeypatch):
  monkeypatch.chdir(REPO)
  monkeypatch.setattr(bench, "accelerator", lambda: "NVIDIA H100 80GB HBM3")
  assert bench.records_root("gpu") == os.path.join(
      REPO, "results", "gpu", "nvidia-h100-80gb-hbm3", "benchmark")
  assert bench.records_root("cpu") == os.path.join(REPO, "results", "cpu")


def test_a_machine_without_a_gpu_has_no_gpu_records_folder():
  # This machine's JAX runs on the CPU (asked in a child process, as on a GPU).
  with pytest.raises(UserError, match=r"--scale gpu records a GPU's members under "
                     r"results/gpu/<device>/benchmark, and JAX here runs on cpu \(cpu\)"):
    bench.accelerator()


def test_in_parallel_a_group_under_a_limit_starts_whole_or_waits(toy_gpu_command,
                                                                 monkeypatch, capsys):
  """With --parallel, a group's processes start at once: each of up to K seeds is
  judged as one process, and the group starts whole or not at all (no shrinking)."""
  argv, _, _, calls, _ = toy_gpu_command
  _seed_zero_recorded_and_the_clock_still(argv, calls, monkeypatch)
  assert cli.main(argv + ["--seeds", "0-3", "--parallel", "2", "--seeds-per-process", "2",
                          "--time-limit", "30"]) == 75
  # none: processes of 2 seeds, 2 x 14 s = 28 s, fit; LN's 56 s do not, and none of
  # its seeds starts alone.
  assert sorted(calls) == ["norm=none,seed=1", "norm=none,seed=2", "norm=none,seed=3"]
  assert ("norm=ln,seed=1, norm=ln,seed=2, norm=ln,seed=3 not started: 30 s left before "
          "the time limit, and 2 seeds of its group together would take up to 56 s"
          ) in capsys.readouterr().out
