"""Skip-thoughts through the CLI: a smoke run on the synthetic books, its resumption,
and `lnorm evaluate` of the checkpoint on benchmark fixture files."""

import json
import os

import numpy as np
import pytest

from lnorm import cli
from tests.helpers import epoch_records

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
  with open(os.path.join(workdir, "config.json")) as f:
    run = json.load(f)
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
  # Mistakes a user can make get a message, not a trace.
  assert cli.main(["evaluate", "--workdir", workdir, "--tasks", "mqpa"]) == 2
  assert cli.main(["evaluate", "--workdir", workdir, "--tasks", "mr", "--encoder", "x"]) == 2
  assert cli.main(["evaluate", "--workdir", str(tmp_path / "nothing")]) == 2
  assert "does not exist" in capsys.readouterr().err
