"""The Transformer language model through the CLI: a smoke run on the synthetic books,
its resumption, ``lnorm flops`` and ``lnorm check`` on its config."""

import json

import numpy as np
import pytest

from lnorm import cli
from tests.helpers import epoch_records, run_record

SMOKE = "configs/transformer_lm.py:norm=rms,placement=post,smoke=true"


@pytest.mark.slow
def test_train_and_resume(tmp_path):
  workdir = str(tmp_path / "run")
  warm = ["--config.optimizer.warmup_steps=3"]
  assert cli.main(["train", "--config", SMOKE, "--workdir", workdir, *warm]) == 0
  (first,) = epoch_records(workdir)
  for key in ("train/nll", "validation/nll", "validation/bits_per_char", "test/nll"):
    assert np.isfinite(first[key]), key
  run = run_record(workdir)
  assert run["data"]["synthetic"] and run["data"]["name"] == "book_chars"
  assert run["config"]["placement"] == "post" and run["config"]["optimizer.warmup_steps"] == 3
  # The unigram of the training characters: what a model that learned nothing scores.
  trivial = run["trivial"]["values"]["validation/nll"]
  assert cli.main(["train", "--config", SMOKE, "--workdir", workdir, *warm,
                   "--config.num_epochs=4"]) == 0
  records = epoch_records(workdir)
  assert [r["epoch"] for r in records] == [1, 2, 3, 4] and records[0] == first
  assert records[-1]["validation/nll"] < min(first["validation/nll"], trivial)


def test_flops_and_check_commands(tmp_path, capsys):
  path = tmp_path / "flops.json"
  assert cli.main(["flops", "--config", SMOKE, "--steps", "2", "--matmul-size", "64",
                   "--matmul-reps", "2", "--json", str(path)]) == 0
  (row,) = json.loads(path.read_text())["rows"]
  # 8 windows of 32 characters; 2 layers of width 16, MLP 24; 18 characters.
  macs = 8 * (32 * (2 * (4 * 16 * 16 + 2 * 16 * 24) + 16 * 18) + 2 * 2 * 32 * 32 * 16)
  assert row["shapes"] == {"tokens": [8, 33]} and row["train_step_matmul_flops"] == 6 * macs
  capsys.readouterr()
  assert cli.main(["check", "--config", "configs/transformer_lm.py:placement=post",
                   "--platforms", "cuda,tpu", "--config.model.num_layers=1"]) == 0
  printed = capsys.readouterr().out
  assert "train step" in printed and "cuda ok, tpu ok" in printed
