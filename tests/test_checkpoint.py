"""restore_latest: the latest checkpoint and its step, or an error that says what to do."""

from __future__ import annotations

import gc
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lnorm.errors import UserError
from lnorm.training import checkpoint, checkpoint_policy
from lnorm.training.checkpoint import Checkpointer, abstract_like, restore_latest


def test_an_empty_workdir_says_how_to_fix_it(tmp_path):
  like = abstract_like({"w": jnp.zeros((2,))})
  with pytest.raises(UserError, match="holds no checkpoint: evaluate --encoder random"):
    restore_latest(str(tmp_path), like, "evaluate --encoder random")


def test_restores_the_latest_state_and_its_step(tmp_path):
  checkpointer = Checkpointer(str(tmp_path))
  for step in (3, 7):
    checkpointer.save(step, {"w": jnp.full((2,), float(step))}, {"epoch": step})
  checkpointer.close()
  state, step = restore_latest(str(tmp_path), abstract_like({"w": jnp.zeros((2,))}))
  assert step == 7 and jax.device_get(state["w"]).tolist() == [7.0, 7.0]


# --- a full disk (issue 45, item 4) ----------------------------------------------------------


def _free(monkeypatch, free_bytes):
  import collections  # pylint: disable=g-import-not-at-top
  usage = collections.namedtuple("usage", "total used free")
  monkeypatch.setattr(checkpoint.shutil, "disk_usage",
                      lambda path: usage(10**12, 10**12 - free_bytes, free_bytes))


STATE = {"w": jnp.zeros((1000, 1000))}  # 4 MB of float32.
NEEDED = 4_000_000 + (1 << 20)  # Its bytes and the overhead allowed for.


@pytest.mark.parametrize("free, refused", [(NEEDED - 1, True), (NEEDED, False)])
def test_a_checkpoint_the_disk_cannot_hold_is_refused_before_orbax_writes(tmp_path,
                                                                           monkeypatch,
                                                                           free, refused):
  _free(monkeypatch, free)
  checkpointer = Checkpointer(str(tmp_path))
  try:
    if not refused:
      checkpointer.save(5, STATE, {})
      checkpointer.wait()
      assert checkpointer.latest_step() == 5
      return
    with pytest.raises(checkpoint.DiskFullError) as e:
      checkpointer.save(5, STATE, {})
  finally:
    checkpointer.close()
  assert str(e.value) == (
      f"No room for a checkpoint in {tmp_path / 'checkpoints'}: a checkpoint of this run "
      f"takes about 5.0 MB and the disk has {(NEEDED - 1) / 1e6:.1f} MB free. Free space "
      "on that disk, or use a --workdir on another one, and rerun the same command: it "
      "starts over, as no checkpoint was saved.")
  assert checkpointer.latest_step() is None


def test_a_disk_that_fills_during_a_write_names_the_last_complete_checkpoint(tmp_path,
                                                                            monkeypatch):
  checkpointer = Checkpointer(str(tmp_path))
  checkpointer.save(3, {"w": jnp.zeros((2,))}, {})
  checkpointer.wait()

  def orbax_out_of_space():
    raise ValueError('RESOURCE_EXHAUSTED: Error writing "params/0": Failed to write 1882894 '
                     "bytes to file 16: No space left on device [os_error_code='28']")

  monkeypatch.setattr(checkpointer._manager, "wait_until_finished", orbax_out_of_space)  # pylint: disable=protected-access
  with pytest.raises(checkpoint.DiskFullError, match=(
      "the disk filled while it was written. .* it resumes from the last complete "
      r"checkpoint \(step 3\)")):
    checkpointer.wait()
  monkeypatch.setattr(checkpointer._manager, "wait_until_finished",  # pylint: disable=protected-access
                      lambda: (_ for _ in ()).throw(ValueError("another failure")))
  with pytest.raises(ValueError, match="another failure"):  # Not taken for a full disk.
    checkpointer.wait()
  monkeypatch.undo()
  checkpointer.close()


def test_lnorm_train_on_a_full_disk_stops_before_training_with_one_line(tmp_path, capsys,
                                                                         monkeypatch):
  from lnorm import cli  # pylint: disable=g-import-not-at-top
  _free(monkeypatch, 200_000)
  workdir = tmp_path / "run"
  assert cli.main(["train", "--config", "configs/perm_mnist.py:smoke=true", "--workdir",
                   str(workdir), "--config.progress_bar=false"]) == 2
  err = capsys.readouterr().err
  assert err.startswith(f"lnorm: error: No room for a checkpoint in {workdir / 'checkpoints'}:")
  assert err.count("\n") == 1
  assert not (workdir / "metrics.jsonl").exists()  # Nothing trained that would be lost.


def test_a_record_written_on_a_full_disk_is_one_line(tmp_path, capsys, monkeypatch):
  import errno  # pylint: disable=g-import-not-at-top
  from lnorm import cli  # pylint: disable=g-import-not-at-top
  from lnorm.training import metrics_writer  # pylint: disable=g-import-not-at-top

  def full(self, step, metrics):
    raise OSError(errno.ENOSPC, "No space left on device", f"{self.workdir}/metrics.jsonl")

  monkeypatch.setattr(metrics_writer.MetricWriter, "write", full)
  workdir = tmp_path / "run"
  assert cli.main(["train", "--config", "configs/perm_mnist.py:smoke=true", "--workdir",
                   str(workdir), "--config.progress_bar=false"]) == 2
  assert capsys.readouterr().err == (
      f"lnorm: error: the disk is full: could not write {workdir}/metrics.jsonl. Free space "
      "on that disk and rerun the same command: a run resumes from its last complete "
      "checkpoint.\n")


# --- a damaged checkpoint (issue 56, item 4) ---------------------------------------------

# Values that do not compress, so that each array fills a data file of its own; two
# arrays, so that orbax reads two at once.
WIDE = {"w": jnp.zeros((3000,)), "v": jnp.zeros((2000,))}


def _weights(step):
  w, v = np.split(np.random.default_rng(step).standard_normal(5000, np.float32), [3000])
  return {"w": jnp.asarray(w), "v": jnp.asarray(v)}


def _saved(workdir, steps=(3, 7)):
  checkpointer = Checkpointer(str(workdir))
  for step in steps:
    checkpointer.save(step, _weights(step), {"epoch": step})
  checkpointer.close()


def _data_files(step_dir):
  return [p for p in step_dir.rglob("*") if p.is_file() and p.parent.name == "d"]


def _truncate_an_array(step_dir):
  biggest = max(_data_files(step_dir), key=lambda p: p.stat().st_size)
  with open(biggest, "r+b") as f:
    f.truncate(10)


def _delete_the_arrays(step_dir):
  for p in _data_files(step_dir):
    p.unlink()


def _cut_the_host_record(step_dir):
  (step_dir / "host" / "metadata").write_text('{"epo')


DAMAGES = [_truncate_an_array, _delete_the_arrays, _cut_the_host_record]


def _resume(workdir):
  checkpointer = Checkpointer(str(workdir))
  try:
    return checkpoint_policy.resume(checkpointer, WIDE, str(workdir)), checkpointer
  except BaseException:
    checkpointer.close()
    raise


@pytest.mark.parametrize("damage", DAMAGES, ids=lambda d: d.__name__.strip("_"))
def test_a_damaged_checkpoint_is_set_aside_and_the_one_before_it_restores(tmp_path, caplog,
                                                                          monkeypatch, damage):
  _saved(tmp_path)
  damage(tmp_path / "checkpoints" / "7")
  printed = []  # What Python would print as "Exception ignored": orbax's other reads.
  monkeypatch.setattr(sys, "unraisablehook", printed.append)
  with caplog.at_level("WARNING"):
    (state, host, step), checkpointer = _resume(tmp_path)
  gc.collect()
  assert not printed
  try:
    assert step == 3 and host["epoch"] == 3
    for name in WIDE:
      assert (jax.device_get(state[name]) == jax.device_get(_weights(3)[name])).all()
    (warning,) = [r for r in caplog.records if r.levelname == "WARNING"]
    assert warning.getMessage().startswith(
        f"The checkpoint at step 7 ({tmp_path / 'checkpoints' / '7'}) is damaged and does "
        "not restore (")
    assert warning.getMessage().endswith(
        f"); it is moved aside to {tmp_path / 'checkpoints' / '7.damaged'}, and the run "
        "resumes from the checkpoint at step 3.")
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["3", "7.damaged"]
    # The run saves step 7 again, and orbax lists it beside 3, not the damaged copy.
    checkpointer.save(7, {"w": jnp.full((3000,), 7.5), "v": jnp.zeros((2000,))},
                      {"epoch": 7})
    checkpointer.wait()
  finally:
    checkpointer.close()
  assert Checkpointer(str(tmp_path)).steps() == [3, 7]
  state, step = restore_latest(str(tmp_path), abstract_like(WIDE))
  assert step == 7 and jax.device_get(state["w"])[0] == 7.5


def test_a_step_damaged_twice_keeps_both_copies(tmp_path):
  _saved(tmp_path)
  (tmp_path / "checkpoints" / "7.damaged").mkdir()  # From an earlier repair.
  _truncate_an_array(tmp_path / "checkpoints" / "7")
  (_, _, step), checkpointer = _resume(tmp_path)
  checkpointer.close()
  assert step == 3
  assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
      "3", "7.damaged", "7.damaged-2"]


def test_every_checkpoint_damaged_is_one_error_naming_the_workdir_and_the_fix(tmp_path):
  _saved(tmp_path)
  for step in ("3", "7"):
    _delete_the_arrays(tmp_path / "checkpoints" / step)
  with pytest.raises(UserError) as e:
    _resume(tmp_path)
  message = str(e.value)
  assert message.startswith(f"No checkpoint of {tmp_path} restores (step 7: NOT_FOUND: ")
  assert "; step 3: NOT_FOUND: " in message
  assert message.endswith(
      f"). To start the run over, delete {tmp_path / 'checkpoints'} (or the whole "
      "workdir) and rerun the same command.")
  assert "\n" not in message
  # Nothing is moved when nothing restores: the cause may be this machine, not the files.
  assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["3", "7"]


def test_a_command_that_reads_a_damaged_checkpoint_says_how_to_repair_it(tmp_path):
  _saved(tmp_path)
  _truncate_an_array(tmp_path / "checkpoints" / "7")
  with pytest.raises(UserError) as e:
    restore_latest(str(tmp_path), abstract_like(WIDE))
  message = str(e.value)
  assert message.startswith(
      f"The checkpoint at step 7 ({tmp_path / 'checkpoints' / '7'}) does not restore: ")
  assert message.endswith(
      f"Rerun the `lnorm train` command of {tmp_path}: it sets the damaged checkpoint "
      "aside and trains on from the newest intact one.")
  assert "\n" not in message
