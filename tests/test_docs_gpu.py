"""docs/gpu.md and the accelerator extras: the install names extras that the installed
JAX defines, and every command the page gives runs a config and sweep that exist."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import tomllib

import pytest

from lnorm import config as config_lib
from lnorm.analysis import plotting
from lnorm.sweeps import runner as sweep
from tests.helpers import REPO


def read(path):
  with open(os.path.join(REPO, path)) as f:
    return f.read()


def commands(markdown: str) -> list[list[str]]:
  """The `lnorm ...` commands of the page's code blocks, continuation lines joined."""
  blocks = re.findall(r"```bash\n(.*?)```", markdown, flags=re.DOTALL)
  lines = "\n".join(blocks).replace("\\\n", " ").splitlines()
  return [shlex.split(line, comments=True) for line in lines
          if re.match(r"\s*(JAX_PLATFORMS=\S+ )?lnorm ", line)]


def test_accelerator_extras_name_extras_of_jax():
  with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
    extras = tomllib.load(f)["project"]["optional-dependencies"]
  jax_extras = set(importlib.metadata.metadata("jax").get_all("Provides-Extra"))
  assert extras["cuda"] == ["jax[cuda12]"] and extras["tpu"] == ["jax[tpu]"]
  for name in ("cuda", "cuda13", "tpu"):
    (requirement,) = extras[name]
    assert re.fullmatch(r"jax\[(.+)\]", requirement)[1] in jax_extras, requirement
  readme = read("README.md")
  for line in ("pip install -e '.[cuda,test]'", "pip install -e '.[tpu,test]'",
               "[docs/gpu.md](docs/gpu.md)"):
    assert line in readme


def test_every_command_of_docs_gpu_names_a_config_and_sweep_that_exist():
  found = commands(read("docs/gpu.md"))
  sweeps = [c for c in found if c[:2] == ["lnorm", "sweep"]]
  assert len(sweeps) >= 8  # Every paper-scale experiment.
  for argv in found:
    args = dict(zip(argv[2::], argv[3::]))
    if "--config" in args:
      config_lib.load_config(os.path.join(REPO, args["--config"]))
    if "--sweep" in args:
      assert sweep.load_sweep(os.path.join(REPO, args["--config"]), args["--sweep"])
    if "--figure" in args:
      assert re.sub(r"<N>", "1", args["--figure"]) in plotting.FIGURES


@pytest.mark.parametrize("experiment", ["DRAW", "handwriting", "attentive reader",
                                        "skip-thoughts", "order-embeddings"])
def test_docs_gpu_gives_a_time_per_run_labelled_as_estimate_or_measurement(experiment):
  page = read("docs/gpu.md")
  timings = page.split("## 4.")[1].split("## 5.")[0]  # Section 4's tables of run times.
  measured, estimated = [[c.strip() for c in l.strip("|").split("|")]
                         for l in timings.splitlines() if l.startswith("|") and experiment in l]
  assert "**Measured on an H100**" in timings
  assert all(re.search(r"\d", cell) for cell in measured[2:6])  # Steps and times, none and LN.
  assert estimated[6] and estimated[6] != "—"  # The estimate per run.
  assert "**estimates**" in page and "20 TFLOP/s" in page and "50 µs" in page


def test_docs_gpu_gives_lnorm_check_figures_for_every_experiment():
  from lnorm.training.task import EXPERIMENTS  # pylint: disable=g-import-not-at-top
  section = read("docs/gpu.md").split("## 5.")[1].split("## 6.")[0]
  rows = [l for l in section.splitlines() if l.startswith("| ") and "---" not in l][1:]
  assert sorted(r.split("|")[1].split()[0] for r in rows) == sorted(EXPERIMENTS)
  assert "lnorm check --config" in section and "16 / 40 / 80 GB" in section


def test_the_pages_benchmark_report_judges_the_committed_figure_6_members(capsys,
                                                                          monkeypatch):
  # The command the page gives for a device's Figure 6 members: it must read them, judge
  # them (not refuse them as another setting's), and name the folder it read.
  from lnorm import cli  # pylint: disable=g-import-not-at-top
  (argv,) = [c for c in commands(read("docs/gpu.md")) if c[:2] == ["lnorm", "benchmark"]]
  devices = [d for d in sorted(os.listdir(os.path.join(REPO, "results", "gpu")))
             if os.path.isdir(os.path.join(REPO, "results", "gpu", d, "fig6"))]
  assert devices, "no device's Figure 6 members are committed"
  monkeypatch.chdir(REPO)
  folder = os.path.join("results", "gpu", devices[0], "fig6")
  argv = [a.replace("results/gpu/<device>/fig6", folder) for a in argv[1:]]
  assert cli.main(argv + ["--workdir", "/nonexistent/runs", "--no-wandb"]) == 0
  out = capsys.readouterr().out
  assert f"Generated from the records under `{folder}/`" in out
  assert "Members with records: perm_mnist 3/3." in out
  assert "another rule or setting" not in out
  rows = [line for line in out.splitlines() if line.startswith("| perm_mnist, batch_size=128 |")]
  assert [row.split(" | ")[1] for row in rows] == ["none (baseline)", "ln", "bn"]
