"""`lnorm evaluate` options: task names in any case, the protocol, and what each
writes, on an untrained (random) encoder so that no training run is needed."""

import json
import os

from configs import skip_thoughts as config_lib
from experiments.skip_thoughts import task as task_lib
from lnorm import cli
from lnorm.config import to_flat_dict
from tests.test_skip_thoughts_cli import write_benchmarks


def _workdir(tmp_path):
  """What `lnorm train` leaves that a random encoder needs: config and vocabulary."""
  config = config_lib.get_config("norm=ln,smoke=true")
  config.wandb.mode = "disabled"
  workdir = tmp_path / "run"
  workdir.mkdir()
  with open(workdir / "config.json", "w") as f:
    json.dump({"config": to_flat_dict(config)}, f)
  words = [*task_lib.text.RESERVED, task_lib.text.EOS] + [
      f"w{t}_{i}" for t in range(4) for i in range(12)]
  task_lib.save_vocabulary(words, str(workdir))
  return str(workdir)


def test_protocol_and_task_names_through_the_cli(tmp_path, capsys):
  workdir = _workdir(tmp_path)
  data = tmp_path / "data"
  write_benchmarks(data)
  common = ["--workdir", workdir, "--encoder", "random", "--data-dir", str(data), "--folds",
            "2", "--inner-folds", "2"]
  assert cli.main(["evaluate", *common, "--tasks", "MR,Sick", "--protocol", "Kiros"]) == 0
  printed = json.loads(capsys.readouterr().out)
  assert printed["protocol"] == "kiros" and printed["tasks"] == ["mr", "sick"]
  keys = {"eval_random/kiros_mr_accuracy", "eval_random/kiros_sick_pearson",
          "eval_random/kiros_sick_spearman", "eval_random/kiros_sick_mse"}
  assert set(printed["metrics"]) == keys
  with open(os.path.join(workdir, "evaluation_random_kiros.json")) as f:
    assert set(json.load(f)["metrics"]) == keys
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    assert keys <= set(json.loads(f.read().strip().split("\n")[-1]))
  # SentEval's protocol (the default) keeps its names and file.
  assert cli.main(["evaluate", *common, "--tasks", "TREC"]) == 0
  with open(os.path.join(workdir, "evaluation_random.json")) as f:
    assert set(json.load(f)["metrics"]) == {"eval_random/trec_accuracy"}
  capsys.readouterr()
  # Mistakes are named with what would be valid, before any work.
  assert cli.main(["evaluate", *common, "--tasks", "sick,MQPA"]) == 2
  assert "valid (any case): mr, cr, subj, mpqa, trec, sick" in capsys.readouterr().err
  assert cli.main(["evaluate", *common, "--protocol", "authors"]) == 2
  assert "valid: senteval, kiros" in capsys.readouterr().err


def test_without_a_data_directory_one_message_names_the_flag_that_works(tmp_path, capsys,
                                                                         monkeypatch):
  monkeypatch.delenv("LNORM_DATA_DIR", raising=False)
  workdir = _workdir(tmp_path)
  assert cli.main(["evaluate", "--workdir", workdir, "--encoder", "random",
                   "--tasks", "mr"]) == 2
  err = capsys.readouterr().err
  assert "Could not find the MR dataset" in err
  assert "no data directory: neither --data-dir nor $LNORM_DATA_DIR is set" in err
  assert ("put rt-polarity.pos, rt-polarity.neg into <dir>/senteval/ or <dir> and set "
          "LNORM_DATA_DIR=<dir> or pass --data-dir <dir>;") in err
  assert err.count("To fix this") == 1 and "--config." not in err


def test_rerunning_evaluate_replaces_its_record(tmp_path, capsys):
  workdir = _workdir(tmp_path)
  data = tmp_path / "data"
  write_benchmarks(data)
  common = ["evaluate", "--workdir", workdir, "--encoder", "random", "--data-dir",
            str(data), "--folds", "2", "--inner-folds", "2"]
  path = os.path.join(workdir, "metrics.jsonl")
  with open(path, "w") as f:  # A training point, which the evaluation must keep.
    f.write(json.dumps({"step": 7, "epoch": 1, "train/loss": 1.5}) + "\n")
  for _ in range(2):
    assert cli.main([*common, "--tasks", "mr"]) == 0
  assert cli.main([*common, "--tasks", "trec"]) == 0  # Other metrics: a point of its own.
  capsys.readouterr()
  with open(path) as f:
    points = [json.loads(line) for line in f if line.strip()]
  assert [sorted(k for k in p if k not in ("step", "epoch")) for p in points] == [
      ["train/loss"], ["eval_random/mr_accuracy"], ["eval_random/trec_accuracy"]]
  assert {p["step"] for p in points} == {7}
