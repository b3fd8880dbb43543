"""Every experiment's train and eval step lowers for GPU and TPU (``lnorm check``), on
this CPU-only machine, at the smoke size; the paper sizes are checked by the command
and reported in docs/gpu.md."""

from __future__ import annotations

import dataclasses
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lnorm import cli
from lnorm import config as config_lib
from lnorm.errors import UserError
from lnorm.rnn import fused
from lnorm.training import lowering
from lnorm.training.task import EXPERIMENTS
from tests.helpers import REPO


@pytest.mark.parametrize("experiment", sorted(EXPERIMENTS))
def test_train_and_eval_steps_lower_for_cuda_and_tpu(experiment):
  config = config_lib.load_config(os.path.join(REPO, "configs", f"{experiment}.py:smoke=true"))
  report = lowering.check(config, ("cuda", "tpu"))
  assert [s.name for s in report.steps] == ["train", "eval"]
  for step in report.steps:
    assert step.lowered == {"cuda": None, "tpu": None}, step.lowered
    assert step.argument_bytes > report.state_bytes >= report.param_bytes > 0
    assert step.output_bytes > 0 and step.cpu_temp_bytes is None
    # No host round trip per call on a GPU (issue 59).
    assert step.host_branches == {"cuda": 0}, step.name
  # The train step takes steps_per_call batches of batch_size, the eval step one batch
  # of eval_batch_size with its padding mask.
  train_shapes = [shape for shape, _ in report.train_batch.values()]
  assert all(s[:2] == (config.steps_per_call, config.batch_size) for s in train_shapes)
  assert report.eval_batch["mask"] == ((config.eval_batch_size,), "float32")
  assert report.num_params * 4 == report.param_bytes  # float32 parameters


@pytest.mark.parametrize("experiment,norm", [
    ("attentive_reader", "bn"),  # Recurrent BN: per-step statistics in the state.
    ("draw", "wn"),  # Weight norm's data-dependent initialisation, traced abstractly.
    ("perm_mnist", "bln"),
])
def test_normalizers_with_their_own_state_or_init_lower(experiment, norm):
  config = config_lib.load_config(os.path.join(REPO, "configs", f"{experiment}.py:smoke=true"))
  config.norm = norm
  report = lowering.check(config, ("cuda", "tpu"))
  assert report.ok, [s.lowered for s in report.steps]


def test_check_counts_parameters_and_bytes_of_a_known_model():
  # perm_mnist's MLP 784-7-5-10 with LN on the two hidden layers (whose bias replaces
  # the hidden layers' own): odd widths, counted by hand. Adam keeps two moments per
  # parameter, so the state is about three times it.
  config = config_lib.load_config(os.path.join(REPO, "configs/perm_mnist.py:smoke=true"))
  config.hidden_sizes = (7, 5)
  config.steps_per_call = 3
  report = lowering.check(config, ("cuda",))
  expected = 784 * 7 + 2 * 7 + 7 * 5 + 2 * 5 + (5 * 10 + 10)
  assert report.num_params == expected
  assert report.param_bytes == 4 * expected
  assert 3 * report.param_bytes <= report.state_bytes < 3 * report.param_bytes + 64
  assert report.train_batch == {"image": ((3, 128, 28, 28), "uint8"),
                                "label": ((3, 128), "int32")}
  train, _ = report.steps
  # The state, the batches (uint8 images, int32 labels) and one 8-byte key.
  assert train.argument_bytes == report.state_bytes + 3 * 128 * (784 + 4) + 8


def test_cpu_platform_compiles_and_reports_temporary_memory():
  config = config_lib.load_config(os.path.join(REPO, "configs/perm_mnist.py:smoke=true"))
  report = lowering.check(config, ("cpu",), compile_cpu=True)
  for step in report.steps:
    assert step.lowered == {"cpu": None}
    assert isinstance(step.cpu_temp_bytes, int) and step.cpu_temp_bytes > 0


def test_a_step_that_does_not_lower_is_reported_per_platform():
  # A host callback cannot be exported: the report names the failure for each platform.
  def step(x):
    return jax.pure_callback(lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct((3,), jnp.float32), x)

  report = lowering.lower_step("train", step, (jax.ShapeDtypeStruct((3,), jnp.float32),),
                               ("cuda", "tpu"), compile_cpu=False)
  assert not report.ok
  assert set(report.lowered) == {"cuda", "tpu"}
  assert all(error and platform in error for platform, error in report.lowered.items())


def test_a_branch_chosen_at_run_time_is_counted_where_a_gpu_waits_for_it():
  # XLA:GPU copies a lax.cond's predicate to the host and waits (issue 59); the
  # selection of lax.platform_dependent is made when the step is lowered, and is none.
  def by_platform(v):
    return jax.lax.platform_dependent(v, cpu=lambda v: v + 1, default=lambda v: v * 3)

  def step(x):
    return by_platform(jax.lax.cond(x[0] > 0, lambda v: v * 2, lambda v: v - 1, x))

  arg = (jax.ShapeDtypeStruct((3,), jnp.float32),)
  report = lowering.lower_step("train", step, arg, ("cuda", "rocm", "tpu"), compile_cpu=False)
  assert report.host_branches == {"cuda": 1, "rocm": 1}  # A TPU resolves it on the chip.
  text = lowering.format_report(lowering.CheckReport("toy", None, 1, 4, 4, {}, {}, [report]))
  assert ("    cuda: 1 branch chosen at run time (lax.cond): each waits for its predicate "
          "on the host, every call") in text
  plain = lowering.lower_step("eval", by_platform, arg, ("cuda",), compile_cpu=False)
  assert plain.host_branches == {"cuda": 0}
  assert "    cuda: no branch chosen at run time" in lowering.format_report(
      lowering.CheckReport("toy", None, 1, 4, 4, {}, {}, [plain]))


def _branchy(v):
  return jax.lax.cond(v[0] > 0, lambda u: u * 2, lambda u: u - 1, v)


@pytest.mark.parametrize("step, branches", [
    # A branch in a loop's body counts once; one in a function of its own too.
    (lambda x: jax.lax.scan(lambda c, _: (_branchy(c), None), x, None, length=4)[0], 1),
    (lambda x: jax.jit(_branchy)(x), 1),
    # JAX's own platform selection (jnp.diagonal's), its index passed out of one
    # function, through a loop and into another: none.
    (lambda x: jax.grad(lambda v: jnp.diagonal(jnp.outer(v, v)).sum())(x), 0),
    (lambda x: jax.grad(lambda v: jax.lax.scan(
        lambda c, _: (jnp.diagonal(jnp.outer(c, c)) * 0.5, None), v, None,
        length=3)[0].sum())(x), 0),
], ids=["in-a-loop", "in-a-function", "jax-selection", "jax-selection-through-a-loop"])
def test_branches_are_told_from_platform_selections_wherever_they_are(step, branches):
  arg = (jax.ShapeDtypeStruct((3,), jnp.float32),)
  report = lowering.lower_step("train", step, arg, ("cuda",), compile_cpu=False)
  assert report.host_branches == {"cuda": branches}


# A loop whose carried index drives a case: the index is static only while the body
# passes it on unchanged (JAX never emits the other form for its platform selections,
# so the program is written out).
_LOOP_WITH_A_CASE = """
func.func public @main(%x: tensor<f32>) -> tensor<f32> {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %three = stablehlo.constant dense<3> : tensor<i32>
  %out:3 = stablehlo.while(%i = %zero, %index = %zero, %v = %x)
      : tensor<i32>, tensor<i32>, tensor<f32>
   cond {
    %more = stablehlo.compare LT, %i, %three : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %more : tensor<i1>
  } do {
    %picked = "stablehlo.case"(%index) ({
      stablehlo.return %v : tensor<f32>
    }, {
      %twice = stablehlo.add %v, %v : tensor<f32>
      stablehlo.return %twice : tensor<f32>
    }) : (tensor<i32>) -> tensor<f32>
    %next_i = stablehlo.add %i, %one : tensor<i32>
    %next_index = stablehlo.add %index, %one : tensor<i32>
    stablehlo.return %next_i, NEXT_INDEX, %picked : tensor<i32>, tensor<i32>, tensor<f32>
  }
  return %out#2 : tensor<f32>
}
"""


@pytest.mark.parametrize("next_index, branches", [("%index", 0), ("%next_index", 1)],
                         ids=["index-passed-on", "index-changed-by-the-loop"])
def test_a_loop_carried_index_is_static_only_if_the_loop_passes_it_on(next_index, branches):
  from jax._src.interpreters import mlir  # pylint: disable=import-outside-toplevel
  from jax._src.lib.mlir import ir  # pylint: disable=import-outside-toplevel
  with mlir.make_ir_context():
    module = ir.Module.parse(_LOOP_WITH_A_CASE.replace("NEXT_INDEX", next_index))
    assert lowering.runtime_branches(module) == branches


def test_unknown_platform_is_a_user_error():
  config = config_lib.load_config(os.path.join(REPO, "configs/perm_mnist.py:smoke=true"))
  with pytest.raises(UserError, match="gpu.*choose from cpu, cuda, rocm, tpu"):
    lowering.check(config, ("gpu",))


def test_fused_weight_gradient_takes_each_platforms_form():
  # Exported on a CPU host for cuda, the contraction keeps its two axes; for the CPU it
  # merges them into rows. Both compute the same sum.
  a = jnp.asarray(np.random.default_rng(0).normal(size=(3, 5, 7)), jnp.float32)
  b = jnp.asarray(np.random.default_rng(1).normal(size=(3, 5, 11)), jnp.float32)
  args = (jax.ShapeDtypeStruct(a.shape, a.dtype), jax.ShapeDtypeStruct(b.shape, b.dtype))
  fn = jax.jit(fused.contract_steps_and_batch)
  cuda = jax.export.export(fn, platforms=("cuda",))(*args).mlir_module()
  cpu = jax.export.export(fn, platforms=("cpu",))(*args).mlir_module()
  assert "contracting_dims = [0, 1] x [0, 1]" in cuda and "reshape" not in cuda
  assert "reshape" in cpu
  expected = np.einsum("tbi,tbf->if", np.asarray(a, np.float64), np.asarray(b, np.float64))
  np.testing.assert_allclose(fn(a, b), expected, rtol=1e-5, atol=1e-5)


def test_lnorm_check_command_prints_the_figures(capsys):
  code = cli.main(["check", "--config", os.path.join(REPO, "configs/perm_mnist.py:smoke=true"),
                   "--platforms", "cuda,tpu", "--config.hidden_sizes=(7, 5)"])
  out = capsys.readouterr().out
  assert code == 0
  assert "perm_mnist (norm=ln): 5,607 parameters" in out
  assert "image [2, 128, 28, 28] uint8" in out
  assert out.count("cuda ok, tpu ok") == 2


def test_the_vocabulary_is_the_configs_cap_where_the_synthetic_data_has_fewer_words():
  config = config_lib.load_config(os.path.join(REPO, "configs/bln_imdb.py:smoke=true"))
  small = lowering.check(config, ("cuda",)).num_params
  config.data.vocab_size += 7
  # Seven more rows of the word embedding.
  assert lowering.check(config, ("cuda",)).num_params - small == 7 * config.model.embed_size


def test_paper_vocabulary_never_shrinks_the_datas_own():
  from lnorm.data.core import Dataset  # pylint: disable=g-import-not-at-top
  config = config_lib.load_config(os.path.join(REPO, "configs/bln_imdb.py:smoke=true"))
  config.data.vocab_size = 50
  dataset = Dataset("imdb", "synthetic", "x", {"train": {}}, info={"vocab_size": 80})
  assert lowering.paper_vocabulary(config, dataset) == {}
  dataset.info["vocab_size"] = 20
  assert lowering.paper_vocabulary(config, dataset) == {"vocab_size": 50}


def test_lnorm_check_json_and_exit_code(capsys, monkeypatch):
  argv = ["check", "--config", os.path.join(REPO, "configs/perm_mnist.py:smoke=true"),
          "--platforms", "cuda", "--json", "--config.hidden_sizes=(7, 5)"]
  assert cli.main(argv) == 0
  record = json.loads(capsys.readouterr().out)
  assert record["num_params"] == 5607 and record["experiment"] == "perm_mnist"
  assert [s["lowered"] for s in record["steps"]] == [{"cuda": None}, {"cuda": None}]
  # A step that does not lower makes the command fail (exit code 1).
  failed = lowering.StepReport("train", 0, 0, {"cuda": "ValueError: no"}, 0.0)
  real_check = lowering.check
  monkeypatch.setattr(lowering, "check", lambda *a, **k: dataclasses.replace(
      real_check(*a, **k), steps=[failed]))
  assert cli.main(argv) == 1



def test_one_platform_failing_fails_the_step_and_the_check():
  # With every platform failing (or none), "all lowered" and "any lowered" agree.
  mixed = lowering.StepReport("train", 0, 0, {"cuda": None, "tpu": "ValueError: no"}, 0.0)
  fine = lowering.StepReport("eval", 0, 0, {"cuda": None, "tpu": None}, 0.0)
  assert not mixed.ok and fine.ok
  report = lowering.CheckReport("perm_mnist", "ln", 1, 4, 4, {}, {}, [fine, mixed])
  assert not report.ok
  assert lowering.CheckReport("perm_mnist", "ln", 1, 4, 4, {}, {}, [fine, fine]).ok
