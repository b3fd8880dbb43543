"""Joining a multi-process job from the environment: it starts, or one line says why not.

Which launcher started this process, and so how many processes the job has, which one
this is and where their coordinator listens (:func:`job_from_environment`, a pure
function of the environment, in this order):

- ``LNORM_DISTRIBUTED=0``: one process, whatever the environment says;
- ``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``: any
  launcher; all three;
- SLURM, several tasks (``SLURM_NTASKS`` > 1): ``srun`` gives the rest
  (``SLURM_PROCID``, ``SLURM_STEP_NODELIST``, ``SLURM_JOB_ID``); the coordinator is
  the step's first node, on JAX's port for the job (or ``JAX_COORDINATOR_PORT``);
- a Cloud TPU pod slice (``TPU_WORKER_HOSTNAMES`` with several hosts), or
  ``LNORM_DISTRIBUTED=1`` with none of the above: JAX's own cluster detection (TPU
  metadata, Kubernetes, Open MPI).

A variable missing or malformed is a :class:`ConfigError` naming it and what to set.
Where the settings are known (every case but JAX's detection), the processes first
meet at the coordinator's address (:func:`rendezvous`), so that a process that never
comes is named, after ``LNORM_COORDINATOR_TIMEOUT`` seconds (300), instead of JAX
waiting silently and then aborting with a stack trace. The same timeout bounds how
long JAX waits for a process that stops answering mid-run (its heartbeat, at most
JAX's 100 s) and for the others at the end.

In a job, a process that stops on an error leaves at once (:func:`errors_end_the_job`),
so that the others, which wait for it in their next collective, stop too, with a line
that names the process they lost, instead of waiting for it for minutes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import re
import selectors
import socket
import sys
import time
import traceback
from typing import Iterator, Mapping

from lnorm.errors import ConfigError, Interrupted, UserError

#: ``0``: one process whatever the environment says; ``1``: a job even where no
#: launcher variable says so (JAX's cluster detection finds the settings).
DISTRIBUTED_ENV = "LNORM_DISTRIBUTED"
#: Seconds the processes wait for each other: at the start, for a heartbeat, at the end.
TIMEOUT_ENV = "LNORM_COORDINATOR_TIMEOUT"
DEFAULT_TIMEOUT_SECS = 300.0
#: JAX's own heartbeat timeout; a shorter LNORM_COORDINATOR_TIMEOUT shortens it.
_HEARTBEAT_SECS = 100.0
#: The explicit settings, as JAX itself names them.
_EXPLICIT_ENV = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")
#: Set by Cloud TPU on every worker of a pod slice: a comma-separated host list.
_TPU_HOSTS_ENV = ("TPU_WORKER_HOSTNAMES", "TPU_PROCESS_ADDRESSES")
#: How XLA's status codes open an error's text.
_XLA_STATUSES = ("UNKNOWN:", "INTERNAL:", "UNAVAILABLE:", "ABORTED:", "DEADLINE_EXCEEDED:")
#: What a collective says when a process at the other end is gone (Gloo on CPUs,
#: NCCL on GPUs, the coordination service's RPCs).
_LOST_PEER_TEXTS = ("closed by peer", "reset by peer", "Socket closed", "Broken pipe",
                    "remote process exited", "UNAVAILABLE", "heartbeat")


class CoordinatorError(UserError):
  """The processes of a job did not all meet at their coordinator."""


@dataclasses.dataclass(frozen=True)
class Job:
  """One process's place in a multi-process job. ``coordinator`` is None when JAX's
  cluster detection finds the settings (then ``num_processes`` and ``process_id`` are
  None too)."""
  launcher: str  # What said this is a job, as the log and the errors say it.
  coordinator: str | None = None
  num_processes: int | None = None
  process_id: int | None = None
  local_device_ids: tuple[int, ...] | None = None


# --- the environment ------------------------------------------------------------------


def job_from_environment(env: Mapping[str, str]) -> Job | None:
  """This process's job, or None for a process on its own (see the module)."""
  switch = env.get(DISTRIBUTED_ENV, "")
  if switch not in ("", "0", "1"):
    raise ConfigError(f"{DISTRIBUTED_ENV}={switch!r} is neither 0 (one process) nor 1 "
                      "(a multi-process job): set one of them, or unset it to let the "
                      "launcher's variables decide.")
  if switch == "0":
    return None
  if any(name in env for name in _EXPLICIT_ENV):
    return _explicit_job(env)
  if _integer(env, "SLURM_NTASKS", default=1) > 1:
    return _slurm_job(env)
  if switch == "1":
    return Job(f"{DISTRIBUTED_ENV}=1")
  tpu_hosts = next((name for name in _TPU_HOSTS_ENV if "," in env.get(name, "")), None)
  if tpu_hosts:
    return Job(f"{tpu_hosts}={env[tpu_hosts]}, a Cloud TPU pod slice")
  return None


def ignored_launcher(env: Mapping[str, str]) -> str | None:
  """What LNORM_DISTRIBUTED=0 overrules, for the log: a launcher's job size."""
  if env.get(DISTRIBUTED_ENV) != "0":
    return None
  for name in ("JAX_NUM_PROCESSES", "SLURM_NTASKS"):
    if env.get(name, "1") not in ("", "0", "1"):
      return f"{name}={env[name]}"
  return next((f"{name}={env[name]}" for name in (*_EXPLICIT_ENV, *_TPU_HOSTS_ENV)
               if name in env), None)


def _explicit_job(env: Mapping[str, str]) -> Job:
  missing = [name for name in _EXPLICIT_ENV if name not in env]
  if missing:
    given = [f"{name}={env[name]}" for name in _EXPLICIT_ENV if name in env]
    raise ConfigError(
        f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} set but "
        f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not: a "
        "multi-process job needs all three on every process (JAX_COORDINATOR_ADDRESS="
        "host0:port, the host of process 0; JAX_NUM_PROCESSES=N; JAX_PROCESS_ID=0..N-1), "
        f"or none of them for one process.")
  address = env["JAX_COORDINATOR_ADDRESS"]
  if not re.fullmatch(r"\[?[^\s\[\]]+\]?:\d+", address):
    raise ConfigError(f"JAX_COORDINATOR_ADDRESS={address!r} is not host:port: set it to "
                      "the host of process 0 and a free port, e.g. node0:12355.")
  count = _integer(env, "JAX_NUM_PROCESSES")
  index = _integer(env, "JAX_PROCESS_ID")
  _check_index(index, count, "JAX_PROCESS_ID", "JAX_NUM_PROCESSES")
  return Job("JAX_COORDINATOR_ADDRESS", address, count, index,
             _local_device_ids(env, None))


def _slurm_job(env: Mapping[str, str]) -> Job:
  count = _integer(env, "SLURM_NTASKS")
  if "SLURM_STEP_NODELIST" not in env:
    raise ConfigError(
        f"SLURM_NTASKS={count} says this job has {count} tasks, but SLURM_STEP_NODELIST "
        "is not set: this process was not started by srun, so the other tasks are not "
        f"running. Start the command with `srun` (one process per task), or set "
        f"{DISTRIBUTED_ENV}=0 to train in this one process.")
  for name in ("SLURM_PROCID", "SLURM_JOB_ID"):
    if name not in env and not (name == "SLURM_JOB_ID" and "JAX_COORDINATOR_PORT" in env):
      raise ConfigError(
          f"SLURM_NTASKS={count} and SLURM_STEP_NODELIST are set but {name} is not: "
          "start the command with `srun`, which sets them all, or set "
          "JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID instead.")
  index = _integer(env, "SLURM_PROCID")
  _check_index(index, count, "SLURM_PROCID", "SLURM_NTASKS")
  host = first_slurm_host(env["SLURM_STEP_NODELIST"])
  if "JAX_COORDINATOR_PORT" in env:
    port = _integer(env, "JAX_COORDINATOR_PORT")
  else:  # JAX's choice for SLURM: one port per job, among the last 4096.
    port = _integer(env, "SLURM_JOB_ID") % 4096 + 65536 - 4096
  # JAX gives each task the GPU of its local rank, for one task per GPU. With one
  # task per node (the --ntasks-per-node=1 of docs/parallel.md) that would leave all
  # but one of the node's GPUs idle: the task takes them all instead.
  nodes = _integer(env, "SLURM_STEP_NUM_NODES", default=count)
  one_per_node = nodes >= count
  local = None if one_per_node else (_integer(env, "SLURM_LOCALID", default=0),)
  return Job(f"SLURM, SLURM_NTASKS={count}", f"{host}:{port}", count, index,
             _local_device_ids(env, local))


def first_slurm_host(nodelist: str) -> str:
  """The first host of a SLURM host list: ``node[007-009,012],gpu1`` -> ``node007``."""
  match = re.match(r"([^,\[]+)(?:\[([^\]\-,]+))?", nodelist.strip())
  if not match or not match.group(1):
    raise ConfigError(f"SLURM_STEP_NODELIST={nodelist!r} names no host: start the "
                      "command with `srun`, which sets it.")
  return match.group(1) + (match.group(2) or "")


def _local_device_ids(env: Mapping[str, str],
                      default: tuple[int, ...] | None) -> tuple[int, ...] | None:
  """JAX_LOCAL_DEVICE_IDS, JAX's own variable, wins (JAX reads it when given None)."""
  return None if "JAX_LOCAL_DEVICE_IDS" in env else default


def _integer(env: Mapping[str, str], name: str, default: int | None = None) -> int:
  value = env.get(name)
  if value is None and default is not None:
    return default
  try:
    return int(value)
  except (TypeError, ValueError):
    raise ConfigError(f"{name}={value!r} is not a whole number: set it to one, as the "
                      "launcher would.") from None


def _check_index(index: int, count: int, index_name: str, count_name: str) -> None:
  if count < 1:
    raise ConfigError(f"{count_name}={count}: a job has at least one process.")
  if not 0 <= index < count:
    raise ConfigError(f"{index_name}={index} is outside 0..{count - 1} ({count_name}="
                      f"{count}): give each process its own index, from 0.")


def coordinator_timeout(env: Mapping[str, str]) -> float:
  """LNORM_COORDINATOR_TIMEOUT in seconds (300 when unset)."""
  value = env.get(TIMEOUT_ENV)
  if value is None:
    return DEFAULT_TIMEOUT_SECS
  try:
    seconds = float(value)
  except ValueError:
    seconds = float("nan")
  if not seconds > 0 or seconds == float("inf"):
    raise ConfigError(f"{TIMEOUT_ENV}={value!r} is not a number of seconds above 0: set "
                      f"it to how long the processes wait for each other (default "
                      f"{DEFAULT_TIMEOUT_SECS:.0f}).")
  return seconds


# --- joining --------------------------------------------------------------------------


def join_from_environment(env: Mapping[str, str] | None = None) -> None:
  """Joins the job the environment describes, if any; idempotent. Must run before
  anything touches a JAX device: even ``jax.process_count()`` starts the backends,
  after which joining is impossible."""
  import jax  # pylint: disable=g-import-not-at-top  (lnorm's CLI starts without JAX)
  env = os.environ if env is None else env
  job = job_from_environment(env)
  timeout = coordinator_timeout(env)
  if job is None:
    ignored = ignored_launcher(env)
    if ignored:
      _note_single_process(ignored)
    return
  if jax.distributed.is_initialized():
    return
  if job.coordinator is not None:
    logging.info(
        "Joining a %d-process job as process %d (from %s): waiting up to %g s (%s) "
        "for the others at the coordinator %s.", job.num_processes, job.process_id,
        job.launcher, timeout, TIMEOUT_ENV, job.coordinator)
    rendezvous(job, timeout, env.get("JAX_COORDINATOR_BIND_ADDRESS"))
  else:
    logging.info("Joining a multi-process job (%s) as JAX's cluster detection finds it: "
                 "waiting up to %g s (%s) for the others.", job.launcher, timeout,
                 TIMEOUT_ENV)
  _initialize(jax, job, timeout)
  logging.info("Joined a %d-process job as process %d.", jax.process_count(),
               jax.process_index())


@functools.lru_cache(maxsize=None)  # Once per process: set_up may run more than once.
def _note_single_process(ignored: str) -> None:
  logging.info("%s=0: training in this one process (%s is ignored).", DISTRIBUTED_ENV,
               ignored)


def _initialize(jax, job: Job, timeout: float) -> None:
  # Settings known: JAX's cluster detection stays off, because it would also fill the
  # local devices left None (all of them) with the SLURM task's local rank.
  detection = None if job.coordinator is None else "deactivate"
  try:
    jax.distributed.initialize(
        coordinator_address=job.coordinator, num_processes=job.num_processes,
        process_id=job.process_id,
        local_device_ids=list(job.local_device_ids) if job.local_device_ids else None,
        cluster_detection_method=detection,
        initialization_timeout=max(1, round(timeout)),
        heartbeat_timeout_seconds=max(1, round(min(timeout, _HEARTBEAT_SECS))),
        shutdown_timeout_seconds=max(1, round(timeout)))
  except ValueError:  # JAX's detection found no launcher it knows.
    raise ConfigError(
        f"{job.launcher} says this is a multi-process job, but JAX's cluster detection "
        "found no launcher it knows (a TPU pod slice's metadata, Kubernetes, Open MPI): "
        "set JAX_COORDINATOR_ADDRESS=host0:port, JAX_NUM_PROCESSES=N and "
        f"JAX_PROCESS_ID=i on every process, or set {DISTRIBUTED_ENV}=0 for one "
        "process.") from None
  except RuntimeError as e:
    if "before" not in str(e):
      raise
    raise ConfigError(
        "This process is one of a multi-process job, but JAX was already in use before "
        "lnorm could join the job. Call lnorm.training.process.set_up(config) before any "
        "other JAX call.") from e


# --- meeting at the coordinator -------------------------------------------------------

#: How often a process retries a coordinator that is not listening yet.
_RETRY_SECS = 0.25
#: A connection that says nothing within this is not one of the job's processes.
_HELLO_SECS = 10.0
#: How much longer than the coordinator a process waits for its verdict.
_VERDICT_GRACE_SECS = 10.0


def rendezvous(job: Job, timeout: float, bind_address: str | None = None) -> None:
  """Waits until every process of ``job`` has reached its coordinator's address, or
  raises :class:`CoordinatorError` naming the ones that did not (on process 0) or the
  coordinator that did not answer (on the others).

  Before JAX's own start, whose wait cannot say who is missing: process 0 listens on
  the coordinator's port, each other process connects and says ``lnorm-join N i``, and
  process 0 answers ``go`` to all once all have come, or ``missing ...`` to those that
  did when the timeout passes. The port is free again before JAX's coordinator binds
  it: the others close first.
  """
  if job.process_id == 0:
    _wait_for_processes(job, timeout, bind_address)
  else:
    _report_to_coordinator(job, timeout)


def _wait_for_processes(job: Job, timeout: float, bind_address: str | None) -> None:
  _, port = _split_address(job.coordinator)
  try:
    server = _listen(bind_address, port)
  except OSError as e:
    raise CoordinatorError(
        f"Process 0 cannot listen on the coordinator's port {port} ({e.strerror}): "
        f"another job may hold it. Choose another port (JAX_COORDINATOR_ADDRESS, or "
        f"JAX_COORDINATOR_PORT under SLURM) on every process.") from None
  arrived: dict[int, socket.socket] = {}
  selector = selectors.DefaultSelector()
  selector.register(server, selectors.EVENT_READ)
  deadline = time.monotonic() + timeout
  try:
    while len(arrived) < job.num_processes - 1:
      events = selector.select(max(0.0, deadline - time.monotonic()))
      if not events and time.monotonic() >= deadline:
        missing = [i for i in range(1, job.num_processes) if i not in arrived]
        _tell(arrived.values(), "missing " + ",".join(map(str, missing)))
        raise CoordinatorError(_missing_message(job, timeout, missing))
      for key, _ in events:
        if key.fileobj is server:
          _greet(server, job, arrived, selector)
        else:  # One that had arrived left again (killed, or its own timeout).
          gone = next(i for i, s in arrived.items() if s is key.fileobj)
          selector.unregister(key.fileobj)
          arrived.pop(gone).close()
          logging.warning("Process %d of the job came to the coordinator, then left.",
                          gone)
    _tell(arrived.values(), "go")
    for s in arrived.values():  # They close first: their side keeps the TIME_WAIT.
      s.settimeout(_HELLO_SECS)
      with contextlib.suppress(OSError):
        s.recv(1)
  finally:
    selector.close()
    server.close()
    for s in arrived.values():
      s.close()


def _listen(bind_address: str | None, port: int) -> socket.socket:
  """Where JAX's coordinator will listen: JAX_COORDINATOR_BIND_ADDRESS (JAX's own
  variable), else every interface on the coordinator's port."""
  if bind_address:
    host, bind_port = _split_address(bind_address)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host.strip("[]"), bind_port), family=family)
  if socket.has_dualstack_ipv6():
    return socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
  return socket.create_server(("", port))


def _greet(server: socket.socket, job: Job, arrived: dict[int, socket.socket],
           selector: selectors.BaseSelector) -> None:
  """Reads a newcomer's ``lnorm-join N i``: one of the job, or refused."""
  conn, _ = server.accept()
  conn.settimeout(_HELLO_SECS)
  try:
    hello = _read_line(conn).split()
  except OSError:
    hello = []
  if (len(hello) != 3 or hello[0] != "lnorm-join" or not hello[1].isdigit() or
      not hello[2].isdigit()):
    conn.close()  # Not one of ours (a port scanner, another program).
    return
  count, index = int(hello[1]), int(hello[2])
  problem = None
  if count != job.num_processes:
    problem = (f"process {index} counts {count} processes and process 0 counts "
               f"{job.num_processes}")
  elif index in arrived:
    problem = f"two processes have index {index}"
  if problem:
    _tell([conn], "refused " + problem)
    conn.close()
    _tell(arrived.values(), "refused " + problem)
    raise CoordinatorError(f"The processes of the job disagree: {problem}. Start every "
                           "process with the same job size and its own index.")
  arrived[index] = conn
  selector.register(conn, selectors.EVENT_READ)


def _report_to_coordinator(job: Job, timeout: float) -> None:
  host, port = _split_address(job.coordinator)
  deadline = time.monotonic() + timeout
  conn = None
  while conn is None:
    try:
      conn = socket.create_connection((host.strip("[]"), port),
                                      timeout=max(0.1, deadline - time.monotonic()))
    except OSError:  # Not listening yet (refused), or its host not up yet.
      if time.monotonic() >= deadline:
        raise CoordinatorError(
            f"No answer within {timeout:g} s from the coordinator at {job.coordinator}, "
            f"which process 0 of the {job.num_processes}-process job runs ({job.launcher}): "
            f"start process 0 on that host, or correct the address; {TIMEOUT_ENV} sets "
            "the wait.") from None
      time.sleep(_RETRY_SECS)
  with conn:
    conn.sendall(f"lnorm-join {job.num_processes} {job.process_id}\n".encode())
    conn.settimeout(max(0.1, deadline - time.monotonic()) + _VERDICT_GRACE_SECS)
    try:
      verdict = _read_line(conn)
    except OSError:
      verdict = ""
  if verdict == "go":
    return
  if verdict.startswith("missing "):
    missing = [int(i) for i in verdict.split()[1].split(",")]
    raise CoordinatorError(_missing_message(job, timeout, missing))
  if verdict.startswith("refused "):
    raise CoordinatorError(f"The processes of the job disagree: {verdict[8:]}. Start "
                           "every process with the same job size and its own index.")
  raise CoordinatorError(
      f"The coordinator at {job.coordinator} (process 0) stopped before the "
      f"{job.num_processes}-process job started: see its log.")


def _missing_message(job: Job, timeout: float, missing: list[int]) -> str:
  came = job.num_processes - len(missing)
  names = _processes(missing)
  start = ("srun starts one per task" if job.launcher.startswith("SLURM") else
           "each with its own JAX_PROCESS_ID")
  return (f"The coordinator at {job.coordinator} waited {timeout:g} s for the "
          f"{job.num_processes} processes of the job ({job.launcher}); {came} came, and "
          f"{names} did not arrive. Start every process of the job ({start}), or correct "
          f"the process count; {TIMEOUT_ENV} sets the wait.")


def _processes(ids: list[int]) -> str:
  return ("process " if len(ids) == 1 else "processes ") + ", ".join(map(str, ids))


def _split_address(address: str) -> tuple[str, int]:
  host, _, port = address.rpartition(":")
  return host, int(port)


def _tell(connections, line: str) -> None:
  for conn in connections:
    with contextlib.suppress(OSError):
      conn.sendall(f"{line}\n".encode())


def _read_line(conn: socket.socket, limit: int = 4096) -> str:
  data = b""
  while not data.endswith(b"\n") and len(data) < limit:
    chunk = conn.recv(limit)
    if not chunk:
      break
    data += chunk
  return data.decode(errors="replace").strip()


# --- leaving --------------------------------------------------------------------------


def lost_peer(error: BaseException) -> bool:
  """Whether ``error`` is a collective that failed because a process at its other end
  is gone."""
  import jax  # pylint: disable=g-import-not-at-top
  message = str(error)
  from_xla = isinstance(error, jax.errors.JaxRuntimeError) or (
      # A collective a jitted call dispatches (process_allgather's) fails there, and JAX
      # raises XLA's status as a ValueError: "UNKNOWN: Gloo AllGather failed: ...".
      isinstance(error, ValueError) and message.startswith(_XLA_STATUSES)
      and "Gloo" in message)
  return from_xla and any(text in message for text in _LOST_PEER_TEXTS)


def lost_peer_message(error: BaseException, process_id: int, num_processes: int) -> str:
  """One line naming the process lost (the other one, in a job of two) and the rerun."""
  others = [i for i in range(num_processes) if i != process_id]
  who = (f"process {others[0]}" if len(others) == 1 else
         f"one of processes {', '.join(map(str, others))}")
  first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
  return (f"Process {process_id} of the {num_processes}-process job lost {who}: it "
          f"stopped answering (killed, crashed, or its host went down) [{first}]. Rerun "
          "the same command on every process: the job resumes from its latest "
          "checkpoint.")


@contextlib.contextmanager
def errors_end_the_job() -> Iterator[None]:
  """In a multi-process job, a process that stops on an error says why in one line
  and leaves at once, without JAX's goodbye: that waits for every process, and the
  others are waiting for this one in a collective that now never comes (their own
  collective then fails, and they leave the same way, naming the process they lost).
  A stop that every process decided together (:class:`Interrupted`) ends normally."""
  try:
    yield
  except Interrupted:
    raise
  except Exception as e:  # pylint: disable=broad-except
    import jax  # pylint: disable=g-import-not-at-top
    if not jax.distributed.is_initialized():
      raise
    if lost_peer(e):
      line, code = "lnorm: error: " + lost_peer_message(
          e, jax.process_index(), jax.process_count()), 1
    elif isinstance(e, UserError):
      line, code = f"lnorm: error: {e}", 2
    else:
      traceback.print_exc()
      line, code = (f"lnorm: process {jax.process_index()} of the job stopped on the "
                    "error above; the others stop when they next wait for it."), 1
    print(line, file=sys.stderr, flush=True)
    for handler in logging.getLogger().handlers:  # The run's log file among them.
      handler.flush()
    sys.stdout.flush()
    os._exit(code)  # pylint: disable=protected-access
