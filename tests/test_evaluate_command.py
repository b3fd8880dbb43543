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
