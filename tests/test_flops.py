"""Every experiment counts its train step's matmul FLOPs (``Task.forward_macs``), and
the count equals the multiply-accumulates of the matmuls and convolutions its model
really traces, at a small config with odd sizes; ``lnorm flops`` prints them."""

from __future__ import annotations

import json
import math
import re

import jax
import pytest

from lnorm import cli
from lnorm import config as config_lib
from lnorm.rnn import make_gru_cell, make_lstm_cell
from lnorm.training import task as task_lib
from lnorm.training import throughput
from lnorm.training.steps import length_buckets


def jaxpr_macs(jaxpr) -> int:
  """Multiply-accumulates of the dot products and convolutions a jaxpr computes: a scan
  counts its body once per step; calls and custom derivatives count what they call."""
  total = 0
  for eqn in jaxpr.eqns:
    name = eqn.primitive.name
    if name == "dot_general":
      (contracting, _), _ = eqn.params["dimension_numbers"]
      lhs = eqn.invars[0].aval.shape
      total += math.prod(eqn.outvars[0].aval.shape) * math.prod(lhs[d] for d in contracting)
    elif name == "conv_general_dilated":
      kernel = eqn.invars[1].aval.shape
      spec = eqn.params["dimension_numbers"].rhs_spec  # (out, in, spatial...)
      total += (math.prod(eqn.outvars[0].aval.shape) * kernel[spec[1]]
                * math.prod(kernel[d] for d in spec[2:]))
    elif name == "scan":
      total += eqn.params["length"] * jaxpr_macs(eqn.params["jaxpr"].jaxpr)
    elif name == "while":
      raise AssertionError("a while loop: its trip count is unknown here")
    elif name == "cond":
      total += max(jaxpr_macs(b.jaxpr) for b in eqn.params["branches"])
    else:
      for key, value in eqn.params.items():
        if key in ("jaxpr", "call_jaxpr"):
          total += jaxpr_macs(getattr(value, "jaxpr", value))
  return total


def traced_macs(task, model, batch) -> int:
  key = jax.random.key(0)
  rngs = {"params": key, **{name: key for name in task.rng_streams}}
  inputs = task.model_inputs(batch)
  # Shapes only: nothing is computed, the forward pass is traced.
  variables = jax.eval_shape(lambda: model.init(rngs, *inputs, train=True))
  forward = lambda v: model.apply(v, *inputs, train=True, rngs=rngs, mutable=["batch_stats"])
  return jaxpr_macs(jax.make_jaxpr(forward)(variables).jaxpr)


#: Small configs with sizes that differ from each other and divide nothing evenly.
CONFIGS = {
    "perm_mnist": ("configs/perm_mnist.py:norm=ln,smoke=true,batch_size=3",
                   {"hidden_sizes": (9, 5)}),
    "bln_cifar": ("configs/bln_cifar.py:norm=bln,smoke=true", {"batch_size": 3}),
    "bln_imdb": ("configs/bln_imdb.py:norm=ln,smoke=true",
                 {"batch_size": 3, "model.embed_size": 5, "model.lstm_sizes": (7, 3),
                  "model.hidden_size": 6}),
    "draw": ("configs/draw.py:norm=ln_cell,smoke=true",
             {"batch_size": 3, "hidden_size": 7, "latent_size": 5, "num_glimpses": 3}),
    "draw_without_attention": ("configs/draw.py:norm=none,smoke=true",
                               {"batch_size": 3, "hidden_size": 7, "latent_size": 5,
                                "num_glimpses": 2, "attention": False}),
    "handwriting": ("configs/handwriting.py:norm=ln,smoke=true",
                    {"batch_size": 3, "hidden_size": 7, "num_layers": 2}),
    "attentive_reader": ("configs/attentive_reader.py:norm=ln,smoke=true",
                         {"batch_size": 3, "model.hidden_size": 7, "model.embed_size": 5}),
    # The earlier readout's third term (W_m mean_t d_t), off by default.
    "attentive_reader_with_mean_readout": (
        "configs/attentive_reader.py:norm=none,smoke=true",
        {"batch_size": 3, "model.hidden_size": 7, "model.embed_size": 5,
         "model.readout_description_skip": True}),
    "skip_thoughts": ("configs/skip_thoughts.py:norm=ln,smoke=true",
                      {"batch_size": 3, "model.hidden_size": 7, "model.embed_size": 5}),
    "order_embeddings": ("configs/order_embeddings.py:norm=ln,smoke=true",
                         {"batch_size": 3, "model.embed_size": 7, "model.word_size": 5}),
    "transformer_lm": ("configs/transformer_lm.py:norm=ln,placement=post,smoke=true",
                       {"batch_size": 3, "model.width": 10, "model.num_heads": 2,
                        "model.mlp_size": 7, "model.num_layers": 3, "data.context": 13}),
    "transformer_lm_untied": ("configs/transformer_lm.py:norm=none,placement=none,smoke=true",
                              {"batch_size": 3, "model.width": 10, "model.num_heads": 5,
                               "model.mlp_size": 7, "model.tie_embeddings": False}),
}


def _config(name):
  spec, overrides = CONFIGS[name]
  config = config_lib.load_config(spec)
  with config.unlocked():
    for field, value in overrides.items():
      parent = config
      *path, last = field.split(".")
      for part in path:
        parent = parent[part]
      parent[last] = value
  return config


def test_every_experiment_counts_its_flops():
  for name in task_lib.EXPERIMENTS:
    task_class = task_lib.task_class(name)
    assert task_class.forward_macs is not task_lib.Task.forward_macs, name
    assert any(spec.startswith(f"configs/{name}.py") for spec, _ in CONFIGS.values()), name


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_count_equals_the_traced_matmuls(name):
  config = _config(name)
  task = task_lib.load_task(config)
  dataset = task.load_data()
  arrays = dataset.splits[task.train_split()]
  batches = throughput.training_batches(config, arrays,
                                        length_buckets(config, task, arrays))
  model = task.build_model(dataset)
  for batch in batches:
    assert task.forward_macs(dataset, batch) == traced_macs(task, model, batch)
    assert task.train_step_flops(dataset, batch) == 6 * task.forward_macs(dataset, batch)


def test_lnorm_flops_prints_the_count_the_time_and_the_share(tmp_path, capsys):
  path = tmp_path / "out" / "flops.json"
  assert cli.main(["flops", "--config", "configs/perm_mnist.py:norm=bn,smoke=true",
                   "--config.hidden_sizes=(9,)", "--config.batch_size=6", "--steps", "2",
                   "--matmul-size", "64", "--matmul-reps", "2", "--json", str(path)]) == 0
  printed = capsys.readouterr().out
  # 6 images of 784 pixels through 784x9 and 9x10, twice as much backward: 6 x 6 x 7146.
  flops = 6 * 6 * (784 * 9 + 9 * 10)
  assert f"{flops / 1e9:.4g} GFLOP a train step" in printed
  record = json.loads(path.read_text())
  assert record["machine"]["jax_backend"] == jax.default_backend()
  assert record["args"]["steps"] == 2 and record["overrides"] == {
      "hidden_sizes": "(9,)", "batch_size": "6"}
  (row,) = record["rows"]
  assert row["shapes"] == {"image": [6, 28, 28], "label": [6]}
  assert row["train_step_matmul_flops"] == flops
  assert row["ratio_wall"] == pytest.approx(
      flops / row["matmul_flops_per_sec_wall"] / row["step_seconds_wall"])
  share = re.search(r"share of the matmul rate .*: ([\d.]+) wall", printed).group(1)
  assert share == f"{row['ratio_wall']:.3f}"


def test_a_bucketed_config_is_measured_at_each_bucket():
  config = _config("attentive_reader")  # Two length buckets.
  task = task_lib.load_task(config)
  arrays = task.load_data().splits["train"]
  buckets = length_buckets(config, task, arrays)
  batches = throughput.training_batches(config, arrays, buckets)
  lengths = [b["passage"].shape[1] for b in batches]
  assert len(lengths) == 2 and lengths == sorted(set(lengths))
  assert lengths[-1] <= buckets.edges[-1] and lengths[0] <= buckets.edges[0]
  assert all(b["passage"].shape[0] == 3 for b in batches)
  (unbucketed,) = throughput.training_batches(config, arrays, None)
  assert unbucketed["passage"].shape == (3, arrays["passage"].shape[1])


def test_lnorm_flops_compares_normalizers_round_robin(tmp_path, capsys):
  path = tmp_path / "norms.json"
  assert cli.main(["flops", "--config", "configs/perm_mnist.py:norm=bn,smoke=true",
                   "--config.hidden_sizes=(9,)", "--config.batch_size=7", "--steps", "3",
                   "--compare-norms", "rms,ln", "--json", str(path)]) == 0
  printed = capsys.readouterr().out
  record = json.loads(path.read_text())
  assert record["baseline"] == "rms" and record["rounds"] == 3
  assert [r["norm"] for r in record["rows"]] == ["rms", "ln"]
  assert record["shapes"] == {"image": [7, 28, 28], "label": [7]}
  rms, ln = record["rows"]
  assert rms["wall_over_baseline"] == 1.0 and rms["cpu_over_baseline"] == 1.0
  assert ln["wall_over_baseline"] == pytest.approx(
      ln["step_seconds_wall_median"] / rms["step_seconds_wall_median"])
  assert re.search(rf"\n  ln +{ln['step_seconds_wall_median'] * 1e3:.2f} ", printed)
  assert "wall/rms" in printed


def test_lnorm_flops_refuses_a_comparison_of_one_normalizer(capsys):
  assert cli.main(["flops", "--config", "configs/perm_mnist.py:smoke=true",
                   "--compare-norms", "ln"]) != 0
  err = capsys.readouterr().err
  assert "--compare-norms 'ln' names fewer than two normalizers" in err
  assert "Traceback" not in err


def test_lnorm_flops_writes_a_timing_record_by_the_stopping_rule(tmp_path, capsys,
                                                                  monkeypatch):
  from lnorm.analysis import timing  # pylint: disable=g-import-not-at-top
  # Any interval is narrow at ±1000%: the rule stops at its first check, round 7.
  monkeypatch.setattr(timing, "MIN_ROUNDS", 7)
  monkeypatch.setattr(timing, "TARGET_HALF_WIDTH", 10.0)
  assert cli.main(["flops", "--config", "configs/perm_mnist.py:norm=bn,smoke=true",
                   "--config.hidden_sizes=(9,)", "--config.batch_size=7",
                   "--compare-norms", "ln,rms", "--timing-record",
                   "--records", str(tmp_path)]) == 0
  printed = capsys.readouterr().out
  (path,) = (tmp_path / "perm_mnist" / "timing").glob("ln,rms-*.json")
  record = json.loads(path.read_text())
  assert record["kind"] == timing.RECORD_KIND and record["baseline"] == "ln"
  assert record["rounds"] == 7 and record["stopped"] == "every interval within ±1000%"
  for norm in ("ln", "rms"):
    cpu = record["seconds"][norm]["cpu"]
    assert len(cpu) == len(record["seconds"][norm]["wall"]) == 7
    assert record["summary"][norm]["cpu"]["median"] == sorted(cpu)[3]
  ratio = record["ratios"]["cpu"]["rms"]
  assert ratio["low"] <= ratio["ratio"] <= ratio["high"] and ratio["rounds"] == 7
  assert record["config"]["hidden_sizes"] == [9] and record["config"]["batch_size"] == 7
  assert record["command"] == ("lnorm flops --config configs/perm_mnist.py:norm=bn,smoke=true "
                               "--compare-norms ln,rms '--config.hidden_sizes=(9,)' "
                               "--config.batch_size=7")
  assert record["environment"]["cpu_affinity"] and "cpu_isa" in record["environment"]
  assert set(record["environment"]["load_average_1min"]) == {"before", "after"}
  assert "commit" in record["code"]
  assert "7 rounds, stopped at every interval within ±1000%" in printed
  assert f"timing record: {path}" in printed


@pytest.mark.parametrize("args, message", [
    (["--timing-record"], "--timing-record times normalizers against each other: add "
                          "--compare-norms BASELINE,OTHER"),
    (["--compare-norms", "ln,rms", "--steps", "0"], "--steps 0: give at least 1 step"),
])
def test_lnorm_flops_refuses_a_timing_it_cannot_make(args, message, capsys):
  assert cli.main(["flops", "--config", "configs/perm_mnist.py:smoke=true", *args]) == 2
  err = capsys.readouterr().err
  assert message in err and "Traceback" not in err


def test_the_scanned_context_turns_the_fused_recurrences_off():
  # `--compare-scan` times fused against scanned cells. flax wraps a Module's
  # properties in its own descriptor, and the context, looking for a bare property,
  # once found none: it changed nothing, and timed fused against fused.
  with throughput.scanned_recurrences():
    assert not make_lstm_cell("ln")(4).fusable
    assert not make_gru_cell("ln")(4).fusable
  assert make_lstm_cell("ln")(4).fusable and make_gru_cell("ln")(4).fusable
