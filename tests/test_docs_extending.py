"""docs/extending.md, run as it says: its normalizer file, taken from the document's
own code block, trains on permutation MNIST through ``lnorm train`` with the file on
PYTHONPATH, so that the document and the code cannot drift apart."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex

import pytest

from tests.helpers import epoch_records, lnorm_subprocess

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "extending.md"
REPO = DOC.parent.parent


def _doc() -> str:
  return DOC.read_text()


def user_file() -> tuple[str, str]:
  """(file name, source) of the document's ```python block that starts with its name."""
  (block,) = [b for b in re.findall(r"```python\n(.*?)```", _doc(), re.S)
              if re.match(r"# (\w+\.py)", b)]
  return re.match(r"# (\w+\.py)", block).group(1), block


def train_command(config_prefix: str) -> list[str]:
  """The document's ``lnorm train`` command for a config, its continuation lines
  joined, as arguments after ``lnorm``."""
  for block in re.findall(r"```bash\n(.*?)```", _doc(), re.S):
    joined = block.replace("\\\n", " ")
    for line in joined.splitlines():
      if line.startswith(f"lnorm train --config {config_prefix}"):
        return shlex.split(line)[1:]
  raise AssertionError(f"docs/extending.md has no `lnorm train --config {config_prefix}...`")


def test_the_document_names_the_file_it_defines():
  name, source = user_file()
  module = name[:-3]
  assert "def my_norm(" in source and "class MyLayerNorm(" in source
  command = train_command("configs/perm_mnist.py")
  assert f"norm={module}:my_norm" in command[2]
  assert f"norm={module}:my_norm" in " ".join(train_command("configs/handwriting.py"))
  assert benchmark_command()[benchmark_command().index("--norms") + 1] == (
      f"none,ln,{module}:my_norm")


def benchmark_command() -> list[str]:
  """The document's ``lnorm benchmark`` command, as arguments after ``lnorm``."""
  for block in re.findall(r"```bash\n(.*?)```", _doc(), re.S):
    for line in block.replace("\\\n", " ").splitlines():
      if line.startswith("lnorm benchmark "):
        return shlex.split(line)[1:]
  raise AssertionError("docs/extending.md has no `lnorm benchmark` command")


def test_the_documents_benchmark_trains_only_the_users_normalizer(tmp_path, capsys,
                                                                  monkeypatch):
  # The built-ins' records for the document's seeds are committed: the command left
  # to run is the user's normalizer's, once per seed, and its records go beside its runs.
  from lnorm import cli  # pylint: disable=g-import-not-at-top
  name, source = user_file()
  (tmp_path / name).write_text(source)
  monkeypatch.syspath_prepend(str(tmp_path))
  monkeypatch.chdir(REPO)  # The checkout whose committed records the document means.
  assert "is being built" not in _doc()
  args = benchmark_command() + ["--workdir", str(tmp_path / "runs"), "--print-commands"]
  assert cli.main(args) == 0
  lines = capsys.readouterr().out.splitlines()
  assert len(lines) == 3
  assert all(f"--config.norm={name[:-3]}:my_norm" in line for line in lines)
  assert "runs/benchmark/records/cpu/" in _doc()


@pytest.mark.slow
def test_the_documents_perm_mnist_run(tmp_path):
  name, source = user_file()
  research = tmp_path / "my_research"
  research.mkdir()
  (research / name).write_text(source)
  args = train_command("configs/perm_mnist.py")
  workdir = tmp_path / "run"
  args[args.index("--workdir") + 1] = str(workdir)
  # From outside the repository, the user's folder and lnorm on the path.
  env = {"PYTHONPATH": os.pathsep.join([str(research), str(REPO)])}
  proc = lnorm_subprocess(*args, "--config.progress_bar=false", env=env, cwd=tmp_path)
  out, err = proc.communicate(timeout=600)
  assert proc.returncode == 0, err[-3000:]
  (record,) = epoch_records(str(workdir))
  assert record["step"] == 20
  with open(workdir / "config.json") as f:
    run = json.load(f)
  assert run["config"]["norm"] == f"{name[:-3]}:my_norm"
  assert run["norm_source"] == {"path": f"{name[:-3]}:my_norm", "form": "function",
                                "file": str(research / name)}
  assert "recurrence" not in run  # an MLP: no recurrent cells
