"""The trivial baseline travels with every run: the loop writes it into config.json as
``"trivial"``, ``lnorm.analysis.runs`` reads it back (None for a record from before
it), and it is no part of a workdir's identity: a run recorded without it, or with
other values, resumes."""

from __future__ import annotations

import json
import os

from lnorm import cli
from lnorm.analysis import runs as runs_lib
from lnorm.sweeps import runner

# The embedded digits: 400 training images of each class, so the class prior is a tie
# that class 0 wins; 50 validation and 50 test images of each class: error 0.9.
SMOKE = ["--config", "configs/perm_mnist.py:norm=none,smoke=true",
         "--config.progress_bar=false", "--config.hidden_sizes=(8,)",
         "--config.eval_batch_size=500", "--config.steps_per_call=1"]
EMBEDDED_PRIOR = {"validation/error": 0.9, "test/error": 0.9}


def _train(workdir, max_steps):
  return cli.main(["train", *SMOKE, "--workdir", str(workdir),
                   f"--config.max_steps={max_steps}"])


def _record(workdir):
  with open(os.path.join(workdir, "config.json")) as f:
    return json.load(f)


def _rewrite(workdir, change):
  record = _record(workdir)
  change(record)
  with open(os.path.join(workdir, "config.json"), "w") as f:
    json.dump(record, f)


def test_the_trivial_record_is_written_read_and_outside_the_run_identity(tmp_path):
  workdir = tmp_path / "run"
  assert _train(workdir, 2) == 0
  trivial = _record(workdir)["trivial"]
  assert trivial["model"] == "class prior (majority class)"
  assert {k: trivial["values"][k] for k in EMBEDDED_PRIOR} == EMBEDDED_PRIOR
  (run,) = runs_lib.load_runs([str(workdir)])
  assert run.trivial == trivial
  (member,) = runner.member_runs([runner.Member("m", {}, str(workdir))])
  assert member.trivial == trivial

  # A record from before the field: read as None, and the run resumes.
  _rewrite(workdir, lambda r: r.pop("trivial"))
  assert runs_lib.load_runs([str(workdir)])[0].trivial is None
  assert _train(workdir, 3) == 0
  assert _record(workdir)["trivial"] == trivial  # Rewritten by the resumed run.

  # Other values (another version's baseline): still the same run.
  _rewrite(workdir, lambda r: r["trivial"]["values"].update({"test/error": 0.5}))
  assert _train(workdir, 4) == 0
  assert _record(workdir)["trivial"] == trivial
  steps = [p["step"] for p in runs_lib.read_records(str(workdir)) if "time/epoch_seconds" in p]
  assert steps == [2, 3, 4]  # Each rerun continued the run, none started it afresh.
