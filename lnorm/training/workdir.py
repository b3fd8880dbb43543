"""What a workdir says about the run it holds, and the checks that keep one run in it.

``config.json`` records the config, the data the run trained on, the machine and the
commit of the code (``write_run_record``). A
rerun with the same workdir resumes, so before it trains it must be the same run:
``check_workdir`` compares the config, ``check_data`` the data the config resolved
to. Data can change without any config field changing: under ``data.source=auto``,
setting ``$LNORM_DATA_DIR`` turns the embedded 5k MNIST digits into the full 55k, and
a resumed run would then mix two datasets in one curve and one test error.
(``lnorm.training.workdir_lock`` keeps a workdir to one process at a time.)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from typing import Any

import jax
import ml_collections
import numpy as np

from lnorm import config as config_lib
from lnorm.data.core import Dataset
from lnorm.errors import DataConflictError, WorkdirConflictError
from lnorm.training import environment
from lnorm.training.run_files import CONFIG_FILE, METRICS_FILE, read_jsonl
from lnorm.training.defaults import RESUMABLE_FIELDS

#: Config fields that may change on resume because ``check_data`` compares what they
#: resolve to instead: pinning ``data.source=embedded`` where ``auto`` chose the
#: embedded digits is the same run. (They do change results in general, so they are
#: not among the RESUMABLE_FIELDS that plots and sweeps ignore.)
DATA_FIELDS = ("data.source",)

#: The parts of the data record compared when the earlier record has no fingerprint
#: (a workdir from before fingerprints): the description alone.
DESCRIBED = ("name", "source", "location", "num_examples")


# --- the config -------------------------------------------------------------------------


def _comparable(flat: dict[str, Any]) -> dict[str, Any]:
  exempt = RESUMABLE_FIELDS + DATA_FIELDS
  return {k: v for k, v in flat.items()
          if not any(k == f or (f.endswith(".") and k.startswith(f)) for f in exempt)}


def _previous_record(workdir: str) -> dict[str, Any] | None:
  path = os.path.join(workdir, CONFIG_FILE)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    return json.load(f)


def check_workdir(workdir: str, config: ml_collections.ConfigDict) -> None:
  """Refuses a workdir that holds a run of a different config."""
  record = _previous_record(workdir)
  if record is None:
    return
  previous = _comparable(record.get("config", {}))
  current = _comparable(json.loads(json.dumps(config_lib.to_flat_dict(config))))
  # A field only one side has was added to (or removed from) lnorm between the two
  # runs; a field the user sets is in both, so only those can make two experiments.
  differing = sorted(k for k in set(previous) & set(current) if previous[k] != current[k])
  changed_fields = sorted(set(previous) ^ set(current))
  if changed_fields and not differing:
    logging.info("Resuming a run recorded by another lnorm version; fields only one "
                 "of the two configs has: %s.", ", ".join(changed_fields))
  if differing:
    details = "; ".join(f"{k}: {previous.get(k)!r} in the workdir, {current.get(k)!r} now"
                        for k in differing[:8])
    raise WorkdirConflictError(
        f"The workdir {workdir} holds a run of a different config ({details}). "
        "Resuming would mix two experiments: use a new --workdir, or delete this one.")


# --- the data ---------------------------------------------------------------------------


def _hash_value(h, value: Any) -> None:
  if isinstance(value, np.ndarray) and not value.dtype.hasobject:
    h.update(f"{value.dtype.str}{value.shape}".encode())
    h.update(np.ascontiguousarray(value).reshape(-1).view(np.uint8))
  elif isinstance(value, (np.ndarray, list, tuple)):  # Object arrays: ragged or text.
    h.update(f"[{len(value)}".encode())
    for item in (value.reshape(-1) if isinstance(value, np.ndarray) else value):
      _hash_value(h, item)
    h.update(b"]")
  else:
    h.update(repr(value).encode() + b"\0")


def data_fingerprint(dataset: Dataset) -> str:
  """A hash of every split's arrays (names, dtypes, shapes and values): equal for the
  same data wherever it was read from, different as soon as one example differs.
  SHA-256 reads about 2 GB/s, a fraction of the time the data took to load."""
  h = hashlib.sha256()
  for split in sorted(dataset.splits):
    for feature in sorted(dataset.splits[split]):
      h.update(f"{split}/{feature}:".encode())
      _hash_value(h, np.asarray(dataset.splits[split][feature]))
  return h.hexdigest()[:32]


def data_record(dataset: Dataset) -> dict[str, Any]:
  """What ``config.json`` says about the data: ``Dataset.describe()`` and its
  fingerprint."""
  return {**dataset.describe(), "fingerprint": data_fingerprint(dataset)}


def _data_differences(previous: dict[str, Any], current: dict[str, Any]) -> list[str]:
  keys = [k for k in DESCRIBED if previous.get(k) != current.get(k)]
  return [f"{k}: {previous.get(k)!r} in the workdir, {current.get(k)!r} now" for k in keys]


def _how_to_pin(previous: dict[str, Any]) -> str:
  """The overrides that load the data a run started with, as far as they can be told."""
  pin = f"--config.data.source={previous.get('source')}"
  location = previous.get("location", "")
  if previous.get("source") == "files":
    pin += (f" --config.data.data_dir={location}" if os.path.isdir(location) else
            f" --config.data.data_dir=<the data directory that held {location}>")
  return pin


def check_data(workdir: str, current: dict[str, Any]) -> None:
  """Refuses a workdir whose run trained on other data than ``current``
  (``data_record`` of the data loaded now).

  With fingerprints on both sides the content decides: the same data read from a new
  place (a moved data directory, TFDS instead of the same files) resumes, and the
  move is logged. A record from before fingerprints is compared by its description:
  name, source, location and split sizes.
  """
  record = _previous_record(workdir)
  previous = (record or {}).get("data")
  if not previous:
    return
  differences = _data_differences(previous, current)
  if previous.get("fingerprint") and current.get("fingerprint"):
    same = previous["fingerprint"] == current["fingerprint"]
    if not same:
      differences.append(f"content: fingerprint {previous['fingerprint']} in the workdir, "
                         f"{current['fingerprint']} now")
  else:
    same = not differences
  if same:
    if differences:
      logging.info("The data is the one this run trained on, read from elsewhere (%s).",
                   "; ".join(differences))
    return
  raise DataConflictError(
      f"The workdir {workdir} holds a run trained on other data than this command "
      "loads:\n" + "".join(f"  {d}\n" for d in differences) +
      "Resuming would mix two datasets in one run. To train on the data found now, use "
      "a new --workdir (or delete this one). To continue this run, load the data it "
      f"started with: {_how_to_pin(previous)} (data.source=auto takes the first source "
      "it finds, so setting $LNORM_DATA_DIR can change it).")


# --- earlier attempts and the record ------------------------------------------------------


def earlier_attempt(workdir: str) -> str | None:
  """What an earlier attempt that never saved a checkpoint left in ``workdir`` (None
  if nothing): the files a fresh start will replace."""
  left = []
  if os.path.exists(os.path.join(workdir, CONFIG_FILE)):
    left.append(CONFIG_FILE)
  points = len(read_jsonl(os.path.join(workdir, METRICS_FILE)))
  if points:
    left.append(f"{METRICS_FILE} with {points} point{'s' if points > 1 else ''}")
  return " and ".join(left) or None


def _code_before_resume(workdir: str, code: dict[str, Any]) -> list[dict[str, Any]]:
  """The code of the stretches of a resumed run that ``code`` did not train, as the
  record being replaced lists them (its own ``code`` last); [] when one code trained
  them all."""
  previous = _previous_record(workdir) or {}
  earlier = list(previous.get("code_before_resume", [])) + [
      previous.get("code") or {"commit": None, "why": "its record names no code"}]
  return earlier if any(c != code for c in earlier) else []


def write_run_record(workdir: str, config: ml_collections.ConfigDict,
                     data: dict[str, Any], extra: dict[str, Any],
                     resumed: bool = False) -> None:
  """Writes ``config.json``; ``data`` is the ``data_record`` the run trains on, which
  ``check_data`` has compared with the record it replaces. It names the code that
  trains (``environment.code_revision``) and, for a run ``resumed`` from a
  checkpoint, the code of its earlier stretches where that differs."""
  if jax.process_index() != 0:
    return
  code = environment.code_revision()
  earlier = _code_before_resume(workdir, code) if resumed else []
  record = {
      "config": config_lib.to_flat_dict(config),
      "data": data,
      "devices": {"count": jax.device_count(), "platform": jax.devices()[0].platform,
                  "processes": jax.process_count()},
      "jax_default_matmul_precision": str(jax.config.jax_default_matmul_precision),
      "code": code,
      **({"code_before_resume": earlier} if earlier else {}),
      **extra,
  }
  with open(os.path.join(workdir, CONFIG_FILE), "w") as f:
    json.dump(record, f, indent=2, default=str)
