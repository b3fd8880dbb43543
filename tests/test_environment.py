"""The numerical environment a run records, and the thread count that makes reruns match."""

import subprocess
import sys


from lnorm.training import environment


def test_fix_cpu_threads_defaults_to_one_thread(monkeypatch):
  monkeypatch.delenv(environment.THREADS_ENV, raising=False)
  environment.fix_cpu_threads()
  assert environment.describe()["xla_cpu_threads"] == "1"


def test_fix_cpu_threads_leaves_a_users_choice(monkeypatch):
  monkeypatch.setenv(environment.THREADS_ENV, "3")
  environment.fix_cpu_threads()
  assert environment.describe()["xla_cpu_threads"] == "3"


def test_describe_names_the_versions_and_the_processor():
  described = environment.describe()
  assert described["jax"] and described["jaxlib"] and described["numpy"]
  assert described["python"].count(".") == 2 and described["cpu"]


def test_the_lnorm_command_fixes_the_threads_before_jax_starts():
  # In a fresh process, as a user runs it: main() must set it before JAX's CPU client.
  code = ("import os\nos.environ.pop('PJRT_NPROC', None)\nfrom lnorm import cli\n"
          "try:\n  cli.main(['check', '--help'])\nexcept SystemExit:\n  pass\n"
          "print(os.environ.get('PJRT_NPROC'))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=True).stdout
  assert out.strip().splitlines()[-1] == "1"


def test_fix_gpu_determinism_adds_the_flag_once_and_keeps_the_users(monkeypatch):
  monkeypatch.delenv(environment.GPU_DETERMINISM_ENV, raising=False)
  monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
  environment.fix_gpu_determinism()
  environment.fix_gpu_determinism()
  assert environment.describe()["xla_flags"] == (
      "--xla_dump_to=/tmp/x --xla_gpu_deterministic_ops=true")


def test_fix_gpu_determinism_can_be_turned_off(monkeypatch):
  monkeypatch.setenv(environment.GPU_DETERMINISM_ENV, "0")
  monkeypatch.delenv("XLA_FLAGS", raising=False)
  environment.fix_gpu_determinism()
  assert environment.describe()["xla_flags"] == ""
