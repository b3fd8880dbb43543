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


# Two processors as Linux's x86 listing gives them: "model" (a number) comes before
# "model name", and the second processor differs only where it must not be read.
CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9B14
stepping\t: 1
flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 fma avx avx2 f16c avx512f avx512bw avx_vnni amx_tile smep bmi2

processor\t: 1
vendor_id\t: AuthenticAMD
model\t\t: 99
model name\t: another
flags\t\t: sse2
"""


def test_the_cpu_model_is_read_when_model_comes_before_model_name():
  cpu = environment.parse_cpuinfo(CPUINFO)
  assert cpu["cpu"] == "AMD EPYC 9B14"  # Not "17": the key is matched whole.
  assert (cpu["cpu_vendor"], cpu["cpu_family"], cpu["cpu_model"], cpu["cpu_stepping"]) == (
      "AuthenticAMD", "25", "17", "1")


def test_the_instruction_sets_that_decide_xlas_code_are_recorded():
  # fpu, sse, smep and bmi2 do not change what XLA emits for a float program.
  assert environment.parse_cpuinfo(CPUINFO)["cpu_isa"] == [
      "amx_tile", "avx", "avx2", "avx512bw", "avx512f", "avx_vnni", "f16c", "fma",
      "sse4_1", "sse4_2"]


def test_an_arm_listing_has_features_and_no_x86_fields():
  cpu = environment.parse_cpuinfo("processor\t: 0\nBogoMIPS\t: 50.00\n"
                                  "Features\t: fp asimd asimdhp sve sve2 crc32\n"
                                  "CPU implementer\t: 0x41\n")
  assert cpu["cpu_isa"] == ["asimd", "asimdhp", "sve", "sve2"]
  assert cpu["cpu_family"] is None and cpu["cpu_model"] is None and cpu["cpu"]


def test_a_missing_cpuinfo_still_names_the_processor(tmp_path):
  cpu = environment.cpu_description(str(tmp_path / "absent"))
  assert cpu["cpu"] and cpu["cpu_isa"] == [] and cpu["cpu_model"] is None


def test_describe_records_the_processors_family_model_and_instruction_sets():
  described = environment.describe()
  for key in ("cpu_family", "cpu_model", "cpu_stepping", "cpu_isa"):
    assert key in described


def _git(root, *args):
  subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def checkout(tmp_path):
  """A git checkout with lnorm/ and docs/ committed."""
  for folder in ("lnorm", "docs"):
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "a.py").write_text("x = 1\n")
  _git(tmp_path, "init", "-q")
  _git(tmp_path, "add", ".")
  _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
  return tmp_path


def test_the_code_revision_names_the_commit_and_a_clean_tree(tmp_path):
  root = checkout(tmp_path)
  head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                        capture_output=True, text=True).stdout.strip()
  (root / "docs" / "a.py").write_text("x = 2\n")  # Docs do not decide a run's numbers.
  assert environment.code_revision(str(root)) == {
      "commit": head, "dirty": False, "changed_files": 0, "changed": []}


def test_the_code_revision_names_edited_and_untracked_code(tmp_path):
  root = checkout(tmp_path)
  (root / "lnorm" / "a.py").write_text("x = 2\n")
  (root / "lnorm" / "new.py").write_text("y = 1\n")
  code = environment.code_revision(str(root))
  assert code["dirty"] and code["changed_files"] == 2
  assert code["changed"] == ["lnorm/a.py", "lnorm/new.py"]


def test_without_git_the_code_revision_says_why(tmp_path):
  code = environment.code_revision(str(tmp_path))
  assert code == {"commit": None,
                  "why": f"{tmp_path} is not a git checkout (an installed package?)"}


def test_the_code_revision_of_this_checkout_is_a_commit():
  assert len(environment.code_revision()["commit"]) == 40
