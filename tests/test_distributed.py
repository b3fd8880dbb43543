"""Joining a multi-process job from the environment (lnorm.training.distributed): every
launcher's variables start a job or give one line naming what is missing; the
processes meet at the coordinator, and one that never comes is named; a process lost
mid-run is named by the one that stays.

The job's settings are a pure function of the environment, tested here case by case;
the meeting runs over real sockets, one thread per process. Starting real processes
is tests/test_processes.py's.
"""

from __future__ import annotations

import socket
import threading

import jax
import pytest

from lnorm.errors import ConfigError
from lnorm.training import distributed
from lnorm.training.distributed import Job, job_from_environment

#: What srun sets for task 1 of a 2-task step on one node.
SLURM = {"SLURM_JOB_ID": "4242", "SLURM_NTASKS": "2", "SLURM_PROCID": "1",
         "SLURM_LOCALID": "1", "SLURM_STEP_NODELIST": "node[007-008]",
         "SLURM_STEP_NUM_NODES": "1"}
EXPLICIT = {"JAX_COORDINATOR_ADDRESS": "node0:12355", "JAX_NUM_PROCESSES": "3",
            "JAX_PROCESS_ID": "2"}


def _without(env: dict[str, str], name: str) -> dict[str, str]:
  return {k: v for k, v in env.items() if k != name}


# --- the environment ------------------------------------------------------------------


def test_no_launcher_or_one_task_is_one_process():
  assert job_from_environment({}) is None
  assert job_from_environment({**SLURM, "SLURM_NTASKS": "1"}) is None
  assert job_from_environment({"TPU_WORKER_HOSTNAMES": "t0"}) is None  # One host.


def test_slurm_under_srun_starts_on_the_first_node_at_jaxs_port_for_the_job():
  job = job_from_environment(SLURM)
  # JAX's port for SLURM job 4242: 4242 % 4096 + 61440.
  assert job == Job("SLURM, SLURM_NTASKS=2", "node007:61586", 2, 1, (1,))
  assert job_from_environment({**SLURM, "JAX_COORDINATOR_PORT": "9999"}).coordinator == (
      "node007:9999")


def test_one_slurm_task_per_node_takes_all_the_nodes_gpus():
  """JAX would give each task the GPU of its local rank only; with one task per node
  that leaves the node's other GPUs idle."""
  assert job_from_environment({**SLURM, "SLURM_STEP_NUM_NODES": "2"}).local_device_ids is None
  # Three tasks on two nodes: some node runs two, each on its own GPU.
  three = {**SLURM, "SLURM_NTASKS": "3", "SLURM_STEP_NUM_NODES": "2"}
  assert job_from_environment(three).local_device_ids == (1,)
  # JAX's own variable wins (JAX reads it when given None).
  assert job_from_environment({**SLURM, "JAX_LOCAL_DEVICE_IDS": "0,1"}).local_device_ids is None


class _RecordingJax:
  """Stands in for ``jax`` in ``distributed._initialize``: records what JAX is given."""

  def __init__(self):
    self.distributed = self
    self.given = None

  def initialize(self, **kwargs):
    self.given = kwargs


@pytest.mark.parametrize("nodes, local_devices", [("2", None), ("1", [1])])
def test_jaxs_detection_stays_off_when_the_settings_are_known(nodes, local_devices):
  """Else JAX fills the local devices left None (all of them) with SLURM_LOCALID, and
  one task per node would see one of its GPUs."""
  fake = _RecordingJax()
  job = job_from_environment({**SLURM, "SLURM_STEP_NUM_NODES": nodes})
  distributed._initialize(fake, job, 42.0)  # pylint: disable=protected-access
  assert fake.given["local_device_ids"] == local_devices
  assert fake.given["cluster_detection_method"] == "deactivate"
  assert fake.given["initialization_timeout"] == 42
  assert fake.given["heartbeat_timeout_seconds"] == 42
  # Where only JAX's detection can find the settings, it runs.
  distributed._initialize(fake, job_from_environment({"LNORM_DISTRIBUTED": "1"}), 400.0)  # pylint: disable=protected-access
  assert fake.given["cluster_detection_method"] is None
  assert fake.given["heartbeat_timeout_seconds"] == 100


@pytest.mark.parametrize("nodelist, host", [
    ("node007", "node007"), ("node007,gpu2", "node007"), ("node[007-009],gpu2", "node007"),
    ("node[012,007-009]", "node012"), ("a-b[1-2]", "a-b1"), (" gpu-3 ", "gpu-3")])
def test_the_first_host_of_a_slurm_host_list(nodelist, host):
  assert distributed.first_slurm_host(nodelist) == host


def test_explicit_variables_win_over_slurms():
  job = job_from_environment({**SLURM, **EXPLICIT})
  assert job == Job("JAX_COORDINATOR_ADDRESS", "node0:12355", 3, 2, None)


def test_lnorm_distributed_0_is_one_process_whatever_the_environment_says():
  for env in (SLURM, EXPLICIT, {"TPU_WORKER_HOSTNAMES": "t0,t1"}):
    assert job_from_environment({**env, "LNORM_DISTRIBUTED": "0"}) is None
  assert distributed.ignored_launcher({**SLURM, "LNORM_DISTRIBUTED": "0"}) == "SLURM_NTASKS=2"
  assert distributed.ignored_launcher({**EXPLICIT, "LNORM_DISTRIBUTED": "0"}) == (
      "JAX_NUM_PROCESSES=3")
  assert distributed.ignored_launcher(SLURM) is None  # Not opted out: nothing ignored.


def test_jaxs_detection_finds_a_tpu_slice_or_a_forced_job():
  assert job_from_environment({"TPU_WORKER_HOSTNAMES": "t0,t1"}) == Job(
      "TPU_WORKER_HOSTNAMES=t0,t1, a Cloud TPU pod slice")
  assert job_from_environment({"LNORM_DISTRIBUTED": "1"}) == Job("LNORM_DISTRIBUTED=1")
  # Forced, with the settings given: they are used.
  assert job_from_environment({**EXPLICIT, "LNORM_DISTRIBUTED": "1"}).coordinator == (
      "node0:12355")


@pytest.mark.parametrize("env, message", [
    # One process started from an sbatch script without srun.
    (_without(SLURM, "SLURM_STEP_NODELIST"),
     "SLURM_NTASKS=2 says this job has 2 tasks, but SLURM_STEP_NODELIST is not set: "
     "this process was not started by srun"),
    (_without(SLURM, "SLURM_PROCID"), "SLURM_STEP_NODELIST are set but SLURM_PROCID is "
     "not: start the command with `srun`"),
    (_without(SLURM, "SLURM_JOB_ID"), "but SLURM_JOB_ID is not"),
    ({**SLURM, "SLURM_PROCID": "2"}, "SLURM_PROCID=2 is outside 0..1 (SLURM_NTASKS=2)"),
    ({**SLURM, "SLURM_NTASKS": "two"}, "SLURM_NTASKS='two' is not a whole number"),
    ({**SLURM, "SLURM_STEP_NODELIST": "[1-2]"}, "SLURM_STEP_NODELIST='[1-2]' names no host"),
    (_without(EXPLICIT, "JAX_PROCESS_ID"),
     "JAX_COORDINATOR_ADDRESS=node0:12355 and JAX_NUM_PROCESSES=3 are set but "
     "JAX_PROCESS_ID is not: a multi-process job needs all three"),
    ({"JAX_COORDINATOR_ADDRESS": "node0:12355"}, "JAX_COORDINATOR_ADDRESS=node0:12355 is "
     "set but JAX_NUM_PROCESSES and JAX_PROCESS_ID are not"),
    ({**EXPLICIT, "JAX_COORDINATOR_ADDRESS": "node0"},
     "JAX_COORDINATOR_ADDRESS='node0' is not host:port"),
    ({**EXPLICIT, "JAX_PROCESS_ID": "3"}, "JAX_PROCESS_ID=3 is outside 0..2"),
    ({**EXPLICIT, "JAX_PROCESS_ID": "-1"}, "JAX_PROCESS_ID=-1 is outside 0..2"),
    ({**EXPLICIT, "JAX_NUM_PROCESSES": "0", "JAX_PROCESS_ID": "0"},
     "JAX_NUM_PROCESSES=0: a job has at least one process"),
    ({**SLURM, "LNORM_DISTRIBUTED": "yes"},
     "LNORM_DISTRIBUTED='yes' is neither 0 (one process) nor 1"),
])
def test_a_missing_or_wrong_variable_is_one_line_naming_it(env, message):
  with pytest.raises(ConfigError) as e:
    job_from_environment(env)
  assert message in str(e.value)
  assert "\n" not in str(e.value)


def test_the_coordinator_timeout():
  assert distributed.coordinator_timeout({}) == 300.0
  assert distributed.coordinator_timeout({"LNORM_COORDINATOR_TIMEOUT": "2.5"}) == 2.5
  for bad in ("0", "-1", "soon", "inf", "nan", ""):
    with pytest.raises(ConfigError, match="is not a number of seconds above 0"):
      distributed.coordinator_timeout({"LNORM_COORDINATOR_TIMEOUT": bad})


# --- meeting at the coordinator -------------------------------------------------------


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def _meet(jobs: list[Job], timeout: float) -> dict[int, Exception | None]:
  """Runs ``rendezvous`` for each job in its own thread; what each raised."""
  outcome: dict[int, Exception | None] = {}

  def one(job):
    try:
      distributed.rendezvous(job, timeout)
      outcome[job.process_id] = None
    except Exception as e:  # pylint: disable=broad-except
      outcome[job.process_id] = e

  threads = [threading.Thread(target=one, args=(job,)) for job in jobs]
  for t in threads:
    t.start()
  for t in threads:
    t.join(timeout + 30)
  return outcome


def _jobs(n: int, ids, count: int | None = None) -> list[Job]:
  address = f"localhost:{_free_port()}"
  return [Job("a test", address, count if count and i else n, i) for i in ids]


def test_every_process_meets_the_others_and_the_port_is_free_after():
  jobs = _jobs(3, (2, 0, 1))  # Process 2 comes before the coordinator listens.
  assert _meet(jobs, timeout=20) == {0: None, 1: None, 2: None}
  port = int(jobs[0].coordinator.rsplit(":", 1)[1])
  with socket.create_server(("", port)):  # JAX's coordinator can bind it.
    pass


def test_a_process_that_never_comes_is_named_by_the_coordinator_and_the_others():
  jobs = _jobs(4, (0, 1, 3))
  outcome = _meet(jobs, timeout=1.0)
  for i in (0, 1, 3):
    assert isinstance(outcome[i], distributed.CoordinatorError)
    assert str(outcome[i]) == (
        f"The coordinator at {jobs[0].coordinator} waited 1 s for the 4 processes of the "
        "job (a test); 3 came, and process 2 did not arrive. Start every process of the "
        "job (each with its own JAX_PROCESS_ID), or correct the process count; "
        "LNORM_COORDINATOR_TIMEOUT sets the wait.")


def test_a_coordinator_that_never_answers_is_named_with_its_address():
  job = _jobs(2, (1,))[0]
  outcome = _meet([job], timeout=0.5)
  assert str(outcome[1]).startswith(
      f"No answer within 0.5 s from the coordinator at {job.coordinator}, which process 0 "
      "of the 2-process job runs (a test): start process 0 on that host")


def test_processes_that_disagree_on_the_job_are_all_refused():
  outcome = _meet(_jobs(2, (0, 1), count=3), timeout=20)
  for i in (0, 1):
    assert "The processes of the job disagree: process 1 counts 3 processes and process 0 " \
        "counts 2." in str(outcome[i])
  jobs = _jobs(3, (0, 1))
  twin = Job("a test", jobs[0].coordinator, 3, 1)
  outcome = _meet([*jobs, twin], timeout=20)
  assert "two processes have index 1" in str(outcome[0])


# --- leaving --------------------------------------------------------------------------


def test_a_collective_whose_peer_is_gone_is_a_lost_process_named_in_one_line():
  gone = jax.errors.JaxRuntimeError(
      "UNKNOWN: Gloo all-reduce failed: [pair.cc:538] Read error [127.0.0.1]:17090: "
      "Connection reset by peer\nmore lines")
  assert distributed.lost_peer(gone)
  assert not distributed.lost_peer(jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: memory"))
  assert not distributed.lost_peer(ValueError("Connection reset by peer"))
  # A collective a jitted call dispatches: JAX raises XLA's status as a ValueError
  # (process_allgather's, seen with the peer killed under load).
  assert distributed.lost_peer(ValueError(
      "UNKNOWN: Gloo AllGather failed: [external/gloo/gloo/transport/tcp/pair.cc:538] "
      "Read error [127.0.0.1]:52451: Connection reset by peer"))
  assert not distributed.lost_peer(ValueError("UNKNOWN: Gloo AllGather failed: bad size"))
  assert not distributed.lost_peer(ValueError("UNKNOWN: Connection reset by peer"))
  assert distributed.lost_peer_message(gone, 0, 2) == (
      "Process 0 of the 2-process job lost process 1: it stopped answering (killed, "
      "crashed, or its host went down) [UNKNOWN: Gloo all-reduce failed: [pair.cc:538] "
      "Read error [127.0.0.1]:17090: Connection reset by peer]. Rerun the same command "
      "on every process: the job resumes from its latest checkpoint.")
  assert "Process 1 of the 4-process job lost one of processes 0, 2, 3:" in (
      distributed.lost_peer_message(gone, 1, 4))


class _Exit(Exception):
  pass


@pytest.fixture
def in_a_job(monkeypatch):
  """A process of a 2-process job, whose os._exit raises instead."""
  monkeypatch.setattr(jax.distributed, "is_initialized", lambda: True)
  monkeypatch.setattr(jax, "process_index", lambda: 1)
  monkeypatch.setattr(jax, "process_count", lambda: 2)

  def leave(code):
    raise _Exit(code)

  monkeypatch.setattr(distributed.os, "_exit", leave)


def test_in_a_job_an_error_leaves_at_once_with_its_line(in_a_job, capsys):
  from lnorm.errors import DivergenceError, Interrupted  # pylint: disable=g-import-not-at-top
  with pytest.raises(_Exit, match="1"):
    with distributed.errors_end_the_job():
      raise jax.errors.JaxRuntimeError("UNKNOWN: Gloo all-reduce failed: Connection closed "
                                       "by peer [10.0.0.5]:183")
  assert capsys.readouterr().err.startswith(
      "lnorm: error: Process 1 of the 2-process job lost process 0: it stopped answering")
  with pytest.raises(_Exit, match="2"):
    with distributed.errors_end_the_job():
      raise DivergenceError("The loss is nan at step 7.")
  assert capsys.readouterr().err == "lnorm: error: The loss is nan at step 7.\n"
  with pytest.raises(_Exit, match="1"):
    with distributed.errors_end_the_job():
      raise KeyError("a bug")
  err = capsys.readouterr().err
  assert "Traceback" in err and "KeyError: 'a bug'" in err
  assert err.endswith("lnorm: process 1 of the job stopped on the error above; the others "
                      "stop when they next wait for it.\n")
  # A stop every process decided together ends as usual.
  with pytest.raises(Interrupted):
    with distributed.errors_end_the_job():
      raise Interrupted("Stopped by SIGTERM")


def test_a_process_on_its_own_raises_as_usual():
  with pytest.raises(KeyError):
    with distributed.errors_end_the_job():
      raise KeyError("a bug")
