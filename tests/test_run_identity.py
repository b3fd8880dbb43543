"""What makes a workdir the same run on resume, at its edges: the data fingerprint
(splits swapped, a feature renamed, ragged rows split differently, insertion order)
and the config check (exempt fields matched exactly or by their dotted prefix)."""

from __future__ import annotations

import json

import ml_collections
import numpy as np
import pytest

from lnorm.data.core import Dataset
from lnorm.errors import WorkdirConflictError
from lnorm.training import workdir as workdir_lib


def fingerprint(splits) -> str:
  return workdir_lib.data_fingerprint(Dataset("d", "files", "/x", splits))


A, B = np.arange(6, dtype=np.int32), np.arange(6, 12, dtype=np.int32)


def test_swapped_splits_are_other_data():
  assert fingerprint({"train": {"x": A}, "test": {"x": B}}) != fingerprint(
      {"train": {"x": B}, "test": {"x": A}})


def test_the_same_arrays_under_another_split_name_are_other_data():
  # A validation split carved out under a new name trains and selects on other data.
  assert fingerprint({"train": {"x": A}}) != fingerprint({"test": {"x": A}})
  assert fingerprint({"train": {"x": A}, "validation": {"x": B}}) != fingerprint(
      {"train": {"x": A}, "valid": {"x": B}})


def test_a_renamed_feature_is_other_data():
  assert fingerprint({"train": {"x": A}}) != fingerprint({"train": {"y": A}})


def test_insertion_order_of_splits_and_features_does_not_matter():
  one = fingerprint({"train": {"x": A, "y": B}, "test": {"x": B}})
  assert one == fingerprint({"test": {"x": B}, "train": {"y": B, "x": A}})


def test_ragged_rows_split_differently_are_other_data():
  def ragged(*rows):
    out = np.empty(len(rows), dtype=object)
    out[:] = [np.asarray(r, np.int32) for r in rows]
    return out

  assert fingerprint({"train": {"x": ragged([1, 2], [3])}}) != fingerprint(
      {"train": {"x": ragged([1], [2, 3])}})
  assert fingerprint({"train": {"t": np.array(["ab", "c"], object)}}) != fingerprint(
      {"train": {"t": np.array(["a", "bc"], object)}})


def write_record(workdir, flat: dict) -> None:
  with open(workdir / "config.json", "w") as f:
    json.dump({"config": flat, "data": {}}, f)


BASE = {"seed": 0, "num_epochs": 2, "num_epochs_warmup": 1, "wandb": {"project": "a"},
        "data": {"source": "auto", "data_dir": "/a", "name": "mnist"}}


@pytest.mark.parametrize("change", [
    {"num_epochs": 5},  # A longer run resumes.
    {"wandb": {"project": "b"}},  # "wandb." exempts the whole block.
    {"data": {"source": "files", "data_dir": "/a", "name": "mnist"}},  # check_data's job.
    {"data": {"source": "auto", "data_dir": "/b", "name": "mnist"}},
])
def test_exempt_fields_may_change_on_resume(tmp_path, change):
  write_record(tmp_path, _flat(BASE))
  workdir_lib.check_workdir(str(tmp_path), ml_collections.ConfigDict({**BASE, **change}))


@pytest.mark.parametrize("change,field", [
    ({"seed": 1}, "seed"),
    # Begins like the exempt num_epochs, but is not it.
    ({"num_epochs_warmup": 2}, "num_epochs_warmup"),
    ({"data": {"source": "auto", "data_dir": "/a", "name": "cifar10"}}, "data.name"),
])
def test_any_other_field_refuses_the_workdir_and_names_it(tmp_path, change, field):
  write_record(tmp_path, _flat(BASE))
  with pytest.raises(WorkdirConflictError, match=f"{field}: "):
    workdir_lib.check_workdir(str(tmp_path), ml_collections.ConfigDict({**BASE, **change}))


def _flat(d, prefix=""):
  out = {}
  for k, v in d.items():
    if isinstance(v, dict):
      out.update(_flat(v, f"{prefix}{k}."))
    else:
      out[prefix + k] = v
  return out


def test_a_field_lnorm_gained_since_the_run_started_does_not_refuse_the_resume(tmp_path):
  # The record predates a new normalizer's options; resuming under the newer lnorm
  # must not call it a different experiment (the benchmark resumes across sittings).
  write_record(tmp_path, _flat(BASE))
  newer = {**BASE, "norm_options": {"dyt": {"alpha_init": 0.5}}}
  workdir_lib.check_workdir(str(tmp_path), ml_collections.ConfigDict(newer))
  # A field both record, changed, still refuses.
  with pytest.raises(WorkdirConflictError, match="num_epochs_warmup: "):
    workdir_lib.check_workdir(str(tmp_path),
                              ml_collections.ConfigDict({**newer, "num_epochs_warmup": 3}))
