"""Skip-thoughts through the CLI: a smoke run on the synthetic books, its resumption,
`lnorm evaluate` of the checkpoint on benchmark fixture files, the same evaluation
inside the training loop, and the report's table beside Table 3."""

import json
import os

import numpy as np
import pytest

from lnorm import cli
from tests.helpers import epoch_records, run_record

SMOKE = "configs/skip_thoughts.py:norm=ln,smoke=true"


def write_benchmarks(root):
  """Tiny MR, TREC and SICK files in their published formats."""
  rng = np.random.default_rng(0)
  words = [f"w{t}_{i}" for t in range(4) for i in range(12)]
  sentence = lambda: " ".join(rng.choice(words, size=rng.integers(3, 9)))
  (root / "senteval").mkdir(parents=True)
  (root / "sick").mkdir()
  for name in ("rt-polarity.pos", "rt-polarity.neg"):
    (root / "senteval" / name).write_text("".join(sentence() + " .\n" for _ in range(20)))
  for name, n in (("TREC.train", 30), ("TREC.test", 10)):
    (root / "senteval" / name).write_text(
        "".join(f"{('HUM', 'NUM')[i % 2]}:x {sentence()} ?\n" for i in range(n)))
  header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
  for name, n in (("SICK_train.txt", 40), ("SICK_trial.txt", 12),
                  ("SICK_test_annotated.txt", 12)):
    (root / "sick" / name).write_text(header + "".join(
        f"{i}\t{sentence()}\t{sentence()}\t{rng.uniform(1, 5):.1f}\tNEUTRAL\n"
        for i in range(n)))


@pytest.mark.slow
def test_train_resume_and_evaluate(tmp_path, capsys):
  workdir = str(tmp_path / "run")
  assert cli.main(["train", "--config", SMOKE, "--workdir", workdir]) == 0
  (first,) = epoch_records(workdir)
  for key in ("train/nll", "train/token_nll", "validation/nll", "validation/token_nll"):
    assert np.isfinite(first[key]), key
  run = run_record(workdir)
  assert run["data"]["synthetic"] and run["data"]["name"] == "books"
  with open(os.path.join(workdir, "vocabulary.txt")) as f:
    assert f.read().split("\n")[:3] == ["<pad>", "<oov>", "<eos>"]
  # A second epoch resumes from the first's checkpoint and goes on learning.
  assert cli.main(["train", "--config", SMOKE, "--workdir", workdir,
                   "--config.num_epochs=2"]) == 0
  records = epoch_records(workdir)
  assert [r["epoch"] for r in records] == [1, 2] and records[0] == first
  assert records[1]["validation/token_nll"] < first["validation/token_nll"]

  data = tmp_path / "data"
  write_benchmarks(data)
  capsys.readouterr()
  assert cli.main(["evaluate", "--workdir", workdir, "--tasks", "sick,mr,trec",
                   "--data-dir", str(data), "--folds", "2", "--inner-folds", "2"]) == 0
  printed = json.loads(capsys.readouterr().out)
  assert printed["step"] == records[1]["step"]
  keys = {"eval/sick_pearson", "eval/sick_spearman", "eval/sick_mse", "eval/mr_accuracy",
          "eval/trec_accuracy"}
  assert set(printed["metrics"]) == keys
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    last = json.loads(f.read().strip().split("\n")[-1])
  assert last["step"] == records[1]["step"] and keys <= set(last)
  assert 0.0 <= last["eval/mr_accuracy"] <= 100.0
  for encoder in ("random", "bow"):
    assert cli.main(["evaluate", "--workdir", workdir, "--tasks", "mr", "--encoder", encoder,
                     "--data-dir", str(data), "--folds", "2", "--inner-folds", "2"]) == 0
    with open(os.path.join(workdir, f"evaluation_{encoder}.json")) as f:
      assert f"eval_{encoder}/mr_accuracy" in json.load(f)["metrics"]
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
      baseline = json.loads(f.read().strip().split("\n")[-1])
    assert baseline["step"] == last["step"] and f"eval_{encoder}/mr_accuracy" in baseline
  # Mistakes a user can make get a message, not a trace.
  assert cli.main(["evaluate", "--workdir", workdir, "--tasks", "mqpa"]) == 2
  assert cli.main(["evaluate", "--workdir", workdir, "--tasks", "mr", "--encoder", "x"]) == 2
  assert cli.main(["evaluate", "--workdir", str(tmp_path / "nothing")]) == 2
  assert "does not exist" in capsys.readouterr().err


@pytest.mark.slow
def test_training_loop_runs_senteval_every_n_updates(tmp_path):
  data = tmp_path / "data"
  write_benchmarks(data)
  workdir = str(tmp_path / "run")
  assert cli.main(["train", "--config", SMOKE, "--workdir", workdir,
                   "--config.periodic_eval_every_steps=4",
                   "--config.sentence_eval.tasks=sick,mr",
                   f"--config.sentence_eval.data_dir={data}"]) == 0
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    points = [json.loads(line) for line in f]
  (epoch,) = epoch_records(workdir)
  evaluated = [p for p in points if "eval/mr_accuracy" in p]
  # Every 4 updates, and nowhere else.
  assert [p["step"] for p in evaluated] == list(range(4, epoch["step"] + 1, 4))
  for p in evaluated:
    assert {"eval/sick_pearson", "eval/sick_spearman", "eval/sick_mse"} <= set(p)
    assert 0.0 <= p["eval/mr_accuracy"] <= 100.0 and p["eval/sick_mse"] > 0
    assert "eval/trec_accuracy" not in p


def test_report_puts_the_evaluation_and_its_baselines_beside_table_3(tmp_path):
  """A run as `lnorm train` then `lnorm evaluate` (trained, random) leave it."""
  from lnorm.analysis import report  # pylint: disable=g-import-not-at-top
  workdir = tmp_path / "norm=ln"
  workdir.mkdir()
  flat = {"experiment": "skip_thoughts", "norm": "ln", "seed": 0, "max_steps": 10,
          "num_epochs": 1, "steps_per_call": 1}
  data = {"name": "books", "source": "files", "synthetic": False,
          "num_examples": {"train": 100, "validation": 10}}
  (workdir / "config.json").write_text(json.dumps({"config": flat, "data": data}))
  points = [{"step": 10, "epoch": 0.5, "time/epoch_seconds": 1.0, "validation/token_nll": 5.0},
            {"step": 10, "epoch": 0.5, "eval/mr_accuracy": 61.5, "eval/sick_pearson": 0.5},
            {"step": 10, "epoch": 0.5, "eval_random/mr_accuracy": 55.25}]
  (workdir / "metrics.jsonl").write_text("".join(json.dumps(p) + "\n" for p in points))
  rows = report.collect([str(tmp_path)]).rows
  mr = [r for r in rows if r.metric == "eval/mr_accuracy"]
  assert [(r.paper, r.measured) for r in mr] == [("79.5", "61.5"), ("—", "55.25")]
  assert mr[1].setting.endswith("encoder=random")
  assert [r.measured for r in rows if r.metric == "eval/sick_pearson"] == ["0.5"]
  assert next(r for r in rows if r.metric == "eval/cr_accuracy").measured == "—"
