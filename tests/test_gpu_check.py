"""The GPU check (scripts/gpu/, lnorm.gpucheck) rehearsed on a CPU: its phases at toy
sizes, their records, the report docs/gpu.md is generated from, and the whole
``run.sh --rehearse`` as a slow test. No timing is asserted: only that each figure is
what its record says it is."""

from __future__ import annotations

import json
import os
import sys
import shutil
import subprocess
import time

import numpy as np
import pytest

from lnorm import config as config_lib
from lnorm.analysis import gpu_report
from lnorm.errors import UserError
from lnorm.gpucheck import __main__ as gpucheck
from lnorm.gpucheck import fig6, records, rnn_layers, steps
from lnorm.training.task import EXPERIMENTS
from tests.helpers import REPO, train_xla_flags, xla_flags_as_users_run
from tests.test_data_parsers import idx_bytes


@pytest.fixture(scope="module")
def rehearsed(tmp_path_factory):
  """The device and rnn phases at toy sizes, as run.sh runs them."""
  out = str(tmp_path_factory.mktemp("gpu_out"))
  assert gpucheck.main(["device", "--out", out, "--toy"]) == 0
  rows = "lstm,lstm_fused,jax_cudnn_lstm,ln_lstm,gru,gru_pallas"
  assert gpucheck.main(["rnn", "--out", out, "--toy", "--rows", rows]) == 0
  return out


def test_the_device_phase_measures_both_ceilings(rehearsed):
  record = records.read_json(records.phase_path(rehearsed, "device"))
  assert record["status"] == "done" and record["toy"] and record["machine"]["jax_backend"]
  assert record["device"]["platform"] == "cpu" and record["device"]["slug"] == "cpu"
  items = {i["name"]: i for i in record["items"]}
  assert set(items) == {"matmul_float32_default", "matmul_float32_highest",
                        "matmul_bfloat16", "copy"}
  for name in ("matmul_float32_default", "matmul_float32_highest", "matmul_bfloat16"):
    item = items[name]
    assert item["tflops"] == pytest.approx(2 * 256 ** 3 / item["median_s"] / 1e12)
    assert item["min_s"] <= item["median_s"] <= item["max_s"] and item["repeats"] == 3
  assert items["matmul_bfloat16"]["dtype"] == "bfloat16"
  assert items["matmul_float32_highest"]["precision"] == "highest"
  copy = items["copy"]
  assert copy["gb_per_s"] == pytest.approx(2 * 4 * 2 ** 20 / copy["median_s"] / 1e9)


def test_the_rnn_phase_times_each_row_and_says_why_one_cannot_run(rehearsed):
  record = records.read_json(records.phase_path(rehearsed, "rnn"))
  assert [(i["size"], i["row"]) for i in record["items"]] == [
      ("toy lstm", "lstm"), ("toy lstm", "lstm_fused"), ("toy lstm", "jax_cudnn_lstm"),
      ("toy lstm", "ln_lstm"), ("toy gru", "gru"), ("toy gru", "gru_pallas")]
  items = {i["row"]: i for i in record["items"]}
  for row in ("lstm", "ln_lstm", "gru"):
    item = items[row]
    assert item["median_s"] > 0 and item["compile_s"] > 0, row
    assert item["min_s"] <= item["median_s"] <= item["max_s"], row
    assert item["uneven"] == (item["max_s"] > 1.5 * item["min_s"]), row
    assert (item["batch"], item["steps"], item["input"], item["hidden"]) == (3, 7, 5, 6)
    # The implementation it ran, and the flags lnorm train runs under.
    assert item["implementation"] == "fused", row
    assert item["xla"]["xla_flags"] == train_xla_flags()
    assert item["xla"]["PJRT_NPROC"] == "1"
    # Compiled before any row was timed: the worker's rows time after its compiling.
    assert item["compiled_at"] <= item["timing_started_at"] <= item["timing_finished_at"]
  # Off an NVIDIA GPU auto runs the fused recurrence: the forced row is the same program.
  assert items["lstm_fused"]["skipped"] == (
      "the same program as lstm here (impl auto runs the fused recurrence on cpu)")
  assert items["gru_pallas"]["skipped"].startswith("the Pallas kernels run on an NVIDIA GPU")
  assert items["jax_cudnn_lstm"]["skipped"] == "cuDNN needs an NVIDIA GPU; JAX runs on cpu"
  assert record["xla"]["xla_flags"] == train_xla_flags()
  ratios = {(r["size"], r["name"]): r["value"] for r in gpu_report.rnn_ratios(record["items"])}
  assert ratios == {
      ("toy lstm", "ln_lstm / lstm"): items["ln_lstm"]["median_s"] / items["lstm"]["median_s"]}


def test_the_rnn_phase_times_each_experiments_own_layers():
  layers = {e: {(l.name, l.cell, l.batch, l.steps, l.input, l.hidden) for l in sizes}
            for e, sizes in rnn_layers.LAYERS[False].items()}
  # The reader's passages at 400 tokens and its questions at 100, not both at 100.
  assert layers["attentive_reader"] == {("passage", "lstm", 64, 400, 240, 240),
                                        ("question", "lstm", 64, 100, 240, 240)}
  assert layers["handwriting"] == {("upper", "lstm", 8, 500, 460, 400)}
  assert {e: {l[1] for l in v} for e, v in layers.items()} == {
      "attentive_reader": {"lstm"}, "handwriting": {"lstm"}, "skip_thoughts": {"gru"},
      "draw": {"lstm"}, "order_embeddings": {"gru"}}
  # Every row of a cell is one rnn_layers knows how to build.
  for rows in rnn_layers.ROWS.values():
    assert set(rows) <= set(rnn_layers.LNORM_ROWS) | {"jax_cudnn_lstm"} | set(
        rnn_layers.TORCH_IMPLEMENTATIONS)


def test_a_phase_record_is_valid_after_every_item_and_marks_a_stop(tmp_path):
  record = records.PhaseRecord(str(tmp_path), "rnn", toy=True, settings={"a": 1})
  record.add({"row": "x"})
  on_disk = records.read_json(records.phase_path(str(tmp_path), "rnn"))
  assert on_disk["status"] == "running" and on_disk["items"] == [{"row": "x"}]
  assert records.mark_stopped(str(tmp_path), "rnn", "killed at 30 s")
  on_disk = records.read_json(records.phase_path(str(tmp_path), "rnn"))
  assert on_disk["status"] == "stopped" and on_disk["notes"] == ["killed at 30 s"]
  assert not records.mark_stopped(str(tmp_path), "rnn", "again")  # Only a running one.
  assert not records.mark_stopped(str(tmp_path), "fig6", "never ran")
  with pytest.raises(ValueError, match="Unknown phase 'gpu'"):
    records.PhaseRecord(str(tmp_path), "gpu", toy=True, settings={})


def test_the_experiments_cover_every_experiment_first_two_norms_first():
  assert sorted(steps.EXPERIMENTS) == sorted(EXPERIMENTS)
  order = steps.items(["a", "b"], ["none", "ln", "rms"])
  assert order == [("a", "none"), ("a", "ln"), ("b", "none"), ("b", "ln"), ("a", "rms"),
                   ("b", "rms")]


def test_the_driver_records_a_failed_worker_and_what_the_limit_left(tmp_path):
  record = records.PhaseRecord(str(tmp_path), "experiments", toy=True, settings={})
  # An experiment the worker does not know: it exits with argparse's code 2.
  steps.run(record, toy=True, work=str(tmp_path / "work"),
            deadline=time.monotonic() + 120, experiments=["no_such"], norms=["none"],
            workers=1)
  (item,) = record.data["items"]
  assert item["experiment"] == "no_such" and item["error"].startswith(
      "exit code 2 while compiling:")
  assert "invalid choice: 'no_such'" in item["error"]
  record = records.PhaseRecord(str(tmp_path), "experiments", toy=True, settings={})
  steps.run(record, toy=True, work=str(tmp_path / "work"), deadline=time.monotonic(),
            experiments=["perm_mnist"], norms=["none", "ln"], workers=1)
  assert [i["error"] for i in record.data["items"]] == [
      "not run: the phase's time limit came first"] * 2


def _mnist(folder, train: int) -> None:
  rng = np.random.default_rng(0)
  (folder / "mnist").mkdir()
  for prefix, n in (("train", train), ("t10k", 10)):
    images = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
    (folder / "mnist" / f"{prefix}-images-idx3-ubyte").write_bytes(idx_bytes(images))
    labels = rng.integers(0, 10, n, dtype=np.uint8)
    (folder / "mnist" / f"{prefix}-labels-idx1-ubyte").write_bytes(idx_bytes(labels))


def test_a_worker_times_the_train_call_lnorm_train_jits(tmp_path, monkeypatch):
  # The smoke config keeps the paper's 5,000 validation images: 5,200 training images.
  _mnist(tmp_path, 5200)
  monkeypatch.setenv("LNORM_DATA_DIR", str(tmp_path))
  info, time_it = steps.prepare("perm_mnist", "ln", toy=True)
  assert "step_s" not in info  # Compiled, not yet timed.
  result = {**info, **time_it()}
  assert (result["experiment"], result["norm"], result["data"]) == ("perm_mnist", "ln", "files")
  k, b = result["steps_per_call"], result["batch_size"]
  assert (k, b) == (2, 128) and result["shapes"]["image"] == [128, 28, 28]
  calls = result["call"]["repeats"]
  assert result["updates_timed"] == calls * k >= steps.MIN_UPDATES[True]
  assert calls >= steps.MIN_CALLS[True]
  assert result["updates_run"] == (calls + steps.WARMUP_CALLS[True]) * k
  assert result["step_s"] == result["call"]["median_s"] / k
  assert result["examples_per_s"] == pytest.approx(b / result["step_s"])
  assert result["tflops"] == pytest.approx(result["train_step_flops"] / result["step_s"] / 1e12)
  # 784-32-32-10 at batch 128: 2 FLOPs a multiply-add, backward twice the forward.
  assert result["train_step_flops"] == 3 * 2 * 128 * (784 * 32 + 32 * 32 + 32 * 10)
  assert not result["cudnn_in_step"] and "recurrence" not in result  # An MLP.
  assert result["compile_s"] > 0 and result["parameters"] > 0
  assert result["lengths"] == {}  # An MLP: no variable length to draw.
  assert result["xla"]["xla_flags"] == train_xla_flags()


def test_fig6_runs_the_benchmark_at_figure_6s_batch_size(tmp_path):
  argv = fig6.benchmark_argv(["none", "bn"], [0, 1], records="R", workdir="W", toy=False)
  assert argv[1:] == ["-m", "lnorm", "benchmark", "--experiments", "perm_mnist", "--scale",
                      "paper", "--norms", "none,bn", "--seeds", "0,1", "--variants",
                      "batch_size=128", "--records", "R", "--workdir", "W", "--no-wandb",
                      "--config.data.source=files"]
  # The suite's batch-128 variant sets what the config's own argument batch_size=128
  # sets.
  from lnorm.sweeps import benchmark_suite  # pylint: disable=g-import-not-at-top
  (experiment,) = [e for e in benchmark_suite.SUITE if e.name == "perm_mnist"]
  (member,) = benchmark_suite.members([experiment], "paper", ["ln"], [0],
                                      benchmark_suite.parse_variants(fig6.VARIANT))
  setting = experiment.scales["paper"]
  config = config_lib.load_config(os.path.join(REPO, setting.config))
  config_lib.apply_overrides(config, {**setting.overrides, **member.variant,
                                      **fig6.overrides(toy=True)})
  paper = config_lib.load_config(os.path.join(REPO, "configs/perm_mnist.py:batch_size=128"))
  for field in ("batch_size", "steps_per_call", "num_epochs"):
    assert config[field] == paper[field], field
  assert config.norm_options.bn.unbiased == paper.norm_options.bn.unbiased is False
  assert config.max_steps == 6 and config.hidden_sizes == (16, 16)


def _as_device_run(out: str, kind: str) -> None:
  """The rehearsal's records made to look like a device's (not toy), for the report."""
  for phase in ("device", "rnn"):
    path = records.phase_path(out, phase)
    data = records.read_json(path)
    data["toy"] = False
    if phase == "device":
      data["device"].update(device_kind=kind, slug="test-gpu-9000")
    records.write_json(path, data)


def test_collect_files_a_devices_records_and_the_report_shows_them(rehearsed, tmp_path):
  with pytest.raises(UserError, match="a rehearsal's \\(toy sizes\\)"):
    records.collect(rehearsed, str(tmp_path / "gpu"))
  out = str(tmp_path / "out")
  shutil.copytree(rehearsed, out)
  _as_device_run(out, "Test GPU 9000")
  member = {"config.json": '{"config": {}}\n', "metrics.jsonl.gz": {"base64": "AAEC"}}
  records.write_json(records.phase_path(out, "fig6"), {
      "phase": "fig6", "toy": False, "status": "done", "members": {"norm=ln,seed=0": member},
      "variant": "batch_size=128", "overrides": {"data.source": "files"},
      "seeds_done": [0], "notes": [],
      "report": "| headline |"})
  dest = records.collect(out, str(tmp_path / "gpu"))
  assert dest == str(tmp_path / "gpu" / "test-gpu-9000")
  folder = os.path.join(dest, "fig6", "perm_mnist", "norm=ln,seed=0")
  assert open(os.path.join(folder, "config.json")).read() == '{"config": {}}\n'
  assert open(os.path.join(folder, "metrics.jsonl.gz"), "rb").read() == b"\x00\x01\x02"
  # The device's own output folder is no path a reader of the records can open.
  assert records.read_json(records.phase_path(dest, "device"))["settings"]["out"] == "$OUT"
  text = gpu_report.markdown(str(tmp_path / "gpu"))
  assert text.startswith("### Test GPU 9000 (`results/gpu/test-gpu-9000/`)")
  assert "| float32 matmul, precision highest |" in text
  assert ("| toy lstm (B 3, T 7, I 5, H 6) | jax_cudnn_lstm | — | — | — | — | skipped: "
          "cuDNN needs an NVIDIA GPU") in text
  assert "| toy lstm (B 3, T 7, I 5, H 6) | ln_lstm | fused | " in text
  assert "| toy lstm | ln_lstm / lstm |" in text
  assert ("Seeds run: 0 (the suite's paper setting, variant batch_size=128; overrides: "
          "data.source=files)") in text
  assert "```text\n| headline |\n```" in text
  assert "phases: device done, experiments missing, rnn done, fig6 done" in text


def test_the_summary_names_a_rehearsal_and_an_empty_folder(rehearsed, tmp_path):
  assert gpu_report.summary(rehearsed).startswith(
      f"### GPU check records in {rehearsed} (rehearsal: toy sizes)")
  assert gpu_report.summary(str(tmp_path)) == f"No records in {tmp_path}."


def test_docs_gpu_shows_what_results_gpu_holds():
  with open(os.path.join(REPO, "docs", "gpu.md")) as f:
    page = f.read()
  assert gpu_report.between_markers(page) == gpu_report.markdown()
  if not gpu_report.device_folders():
    assert "its tables there await the first GPU run" in page
    assert "**estimates**" in page


def test_the_report_refuses_a_page_without_markers():
  with pytest.raises(ValueError, match="no markers"):
    gpu_report.replace_between_markers("# A page\n", "tables\n")


@pytest.mark.slow
def test_run_sh_rehearses_every_phase(tmp_path):
  """The whole rehearsal: a fresh venv built offline, the install, the five phases."""
  prepared = os.path.join(REPO, "gpu_prepared")
  # The image the rehearsal copies is the Python running the tests (the one with JAX),
  # whether or not its virtual environment is activated.
  env = {**os.environ, "REHEARSAL_PYTHON": os.environ.get("REHEARSAL_PYTHON", sys.executable),
         # Compiled as on a GPU machine: its phases time training, which level 0 slows.
         "XLA_FLAGS": xla_flags_as_users_run()}
  if not os.path.exists(os.path.join(prepared, "MANIFEST")):
    prepared = str(tmp_path / "prepared")
    env["GPU_PREPARED"] = prepared
    subprocess.run([os.path.join(REPO, "scripts", "gpu", "prepare.sh")], env=env, check=True,
                   capture_output=True, timeout=600)
  out = tmp_path / "out"
  done = subprocess.run([os.path.join(REPO, "scripts", "gpu", "run.sh"), "--rehearse",
                         "--out", str(out)], env=env, capture_output=True, text=True,
                        timeout=900)
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  assert "lnorm from " in done.stdout and "/site/lnorm/__init__.py" in done.stdout
  statuses = {p: records.read_json(records.phase_path(str(out), p))["status"]
              for p in records.PHASES}
  assert statuses["device"] == statuses["rnn"] == "done", statuses
  assert statuses["experiments"] in ("done", "stopped") and statuses["fig6"] == "done"
  fig6_record = records.read_json(records.phase_path(str(out), "fig6"))
  seeds = fig6_record["seeds_done"]
  assert seeds == list(range(len(seeds))) and seeds  # Whole seeds, from the first.
  assert sorted(fig6_record["members"]) == sorted(
      f"{fig6.VARIANT},norm={norm},seed={seed}" for norm in fig6.NORMS for seed in seeds)
  assert "Claims, each judged on its experiment's planned seeds" in fig6_record["report"]
  # The first seed's LN member ran again; one XLA:CPU thread repeats it to the bit.
  rerun = fig6_record["rerun"]
  assert (rerun["norm"], rerun["seed"]) == ("ln", 0)
  if rerun["outcome"]["exit_code"] == 0:  # Unless the phase's limit stopped it.
    assert rerun["identical"] and rerun["values_compared"] > 0, rerun
  for phase in records.PHASES:  # Every phase under lnorm train's flags.
    assert records.read_json(records.phase_path(str(out), phase))["xla"]["xla_flags"] == (
        train_xla_flags(env["XLA_FLAGS"])), phase
  experiments = records.read_json(records.phase_path(str(out), "experiments"))["items"]
  assert {(i["experiment"], i["norm"]) for i in experiments if "error" not in i} >= {
      ("perm_mnist", "none"), ("perm_mnist", "ln")}
  # The rehearsal's own sizes: no third norm, at most TOY_SEEDS' waves.
  assert {i["norm"] for i in experiments} == set(steps.TOY_NORMS) == {"none", "ln"}
  assert len(seeds) <= len(fig6.TOY_SEEDS) == 2
  tables = done.stdout.split("== run.sh took")[1]  # The tables come last.
  assert f"### GPU check records in {out} (rehearsal: toy sizes)" in tables
  assert "#### Train steps at the configs' sizes" in tables and "Claims, each judged" in tables
  assert json.loads((out / "device.json").read_text())["toy"]
  # The benchmark phase: a chunk of the gpu scale at toy sizes, under its time limit,
  # its records in $OUT/benchmark as the benchmark's records.
  assert "== phase benchmark (limit 90 s)" in done.stdout
  assert "== phase benchmark: exit code 0" in done.stdout
  # Its two seeds trained together, in one process, each into records of its own.
  for seed in (0, 1):
    member = out / "benchmark" / "perm_mnist" / f"batch_size=128,norm=ln,seed={seed}"
    record = json.loads((member / "config.json").read_text())
    assert record["config"]["max_steps"] == 6 and record["config"]["seed"] == seed
    assert record["seeds_together"] == [0, 1]
  assert "at most 30 seeds at the gpu scale" in done.stdout


# --- prepare.sh without network --------------------------------------------------------

MNIST_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
               "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def _prepare_offline(tmp_path, data_dir=None) -> subprocess.CompletedProcess:
  """scripts/gpu/prepare.sh with a curl that fails as it does without network, first on
  PATH, and a python3 there that fails the test if the script reaches pip: nothing
  leaves the machine."""
  stubs = tmp_path / "stubs"
  stubs.mkdir()
  (stubs / "curl").write_text(
      "#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/curl.calls\"\n"
      "echo 'curl: (6) Could not resolve host: storage.googleapis.com' >&2\nexit 6\n")
  (stubs / "python3").write_text("#!/bin/sh\necho 'python3 was called' >&2\nexit 97\n")
  for stub in ("curl", "python3"):
    os.chmod(stubs / stub, 0o755)
  env = {k: v for k, v in os.environ.items() if k not in ("LNORM_DATA_DIR", "MNIST_MIRROR")}
  env.update(PATH=f"{stubs}:{os.environ['PATH']}", GPU_PREPARED=str(tmp_path / "prepared"))
  if data_dir is not None:
    env["LNORM_DATA_DIR"] = str(data_dir)
  return subprocess.run([os.path.join(REPO, "scripts", "gpu", "prepare.sh")], env=env,
                        capture_output=True, text=True, timeout=60)


def test_prepare_without_network_or_mnist_says_what_to_supply_in_one_line(tmp_path):
  done = _prepare_offline(tmp_path)
  assert done.returncode == 1
  assert done.stderr == (
      f"prepare.sh: MNIST's {', '.join(MNIST_FILES)} are not found (LNORM_DATA_DIR is not "
      "set) and could not be downloaded from https://storage.googleapis.com/cvdf-datasets/"
      "mnist (curl: (6) Could not resolve host: storage.googleapis.com). Set "
      f"LNORM_DATA_DIR to a folder holding MNIST's four files ({' '.join(MNIST_FILES)}), "
      "in it or in its mnist/, or rerun with network (MNIST_MIRROR=<url> for another "
      "mirror).\n")
  # One try, not one per file, and nothing half-written left behind.
  calls = (tmp_path / "stubs" / "curl.calls").read_text().splitlines()
  assert len(calls) == 1 and calls[0].endswith(
      "https://storage.googleapis.com/cvdf-datasets/mnist/train-images-idx3-ubyte.gz")
  assert not list((tmp_path / "prepared" / "data" / "mnist").iterdir())


def test_prepare_names_only_the_files_the_data_directory_lacks(tmp_path):
  data_dir = tmp_path / "data"
  (data_dir / "mnist").mkdir(parents=True)
  for name in MNIST_FILES[:3]:  # Three of four, found in <dir>/mnist.
    (data_dir / "mnist" / name).write_bytes(b"\x1f\x8b")
  done = _prepare_offline(tmp_path, data_dir)
  assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
  assert done.stderr.startswith(
      f"prepare.sh: MNIST's t10k-labels-idx1-ubyte.gz are in neither {data_dir} nor "
      f"{data_dir}/mnist and could not be downloaded from ")
  copied = sorted(p.name for p in (tmp_path / "prepared" / "data" / "mnist").iterdir())
  assert copied == sorted(MNIST_FILES[:3])
