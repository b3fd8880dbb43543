"""The train-step timing behind `lnorm flops`: its config flags, and a report whose
ratio is the analytic FLOPs over the measured matmul rate and step time."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from lnorm.data.core import Dataset
from lnorm.training import throughput
from lnorm.training.task import load_task, train_step_flops


def test_train_step_flops_counts_backward_as_twice_forward():
  assert train_step_flops(10) == 2 * 10 + 2 * 2 * 10


def test_parse_args_applies_config_overrides_and_extra_flags():
  args, config = throughput.parse_args(
      "d", "configs/perm_mnist.py:norm=bn,smoke=true",
      lambda p: p.add_argument("--words", type=int, default=3),
      argv=["--steps", "2", "--words", "7", "--config.batch_size=12"])
  assert (args.steps, args.words, args.matmul_size) == (2, 7, 2048)
  assert (config.norm, config.batch_size) == ("bn", 12)


def test_measure_train_step_reports_the_ratio_it_defines():
  _, config = throughput.parse_args("d", "configs/perm_mnist.py:norm=bn,smoke=true",
                                   argv=["--config.hidden_sizes=(8,)"])
  task = load_task(config)
  b = config.batch_size
  rng = np.random.default_rng(0)
  arrays = {"image": rng.random((b, 784)).astype(np.float32),
            "label": rng.integers(0, 10, b).astype(np.int32)}
  model = task.build_model(Dataset("mnist", "synthetic", "random", {"train": arrays},
                                   info={"num_classes": 10}))
  batch = {k: jnp.asarray(v) for k, v in arrays.items()} | {"mask": jnp.ones((b,))}
  flops = train_step_flops(b * (784 * 8 + 8 * 10))
  report = throughput.measure_train_step(task, model, config, batch, flops=flops, steps=2,
                                        matmul_size=64, matmul_reps=2)
  # BN on every layer, in place of the biases: 784x8 and 8x10 weights, a scale and a
  # shift for each of the 8 + 10 units.
  assert report["parameters"] == 784 * 8 + 8 * 10 + 2 * (8 + 10)
  assert report["norm"] == "bn" and report["batch_size"] == b
  assert report["compile_seconds_wall"] > 0 and report["step_seconds_wall"] > 0
  assert report["ratio_wall"] == pytest.approx(
      flops / report["matmul_flops_per_sec_wall"] / report["step_seconds_wall"])
  assert report["ratio_cpu"] == pytest.approx(
      flops / report["matmul_flops_per_sec_cpu"] / report["step_seconds_cpu"])
