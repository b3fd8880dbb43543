"""Lower a config's train and eval steps for accelerators that this machine lacks.

No GPU or TPU is needed to find out whether a step will compile for one: JAX lowers a
function for any platform from abstract arguments (``jax.export`` with
``platforms=("cuda", "tpu")``), which catches a CPU-only operation, a host callback,
or a shape only the CPU path tolerates, before anyone pays for an accelerator.

The model is built at the config's own size (the paper's, by default) from a small
synthetic copy of its data, which gives the vocabulary, the feature sizes and each
feature's dtype and trailing shape; the steps are then traced with
``jax.ShapeDtypeStruct`` arguments of the configured batch sizes, so no memory of the
real size is allocated. The train step is the one ``lnorm train`` jits: the chunk of
``steps_per_call`` fused steps.

Caveats: the vocabulary is ``data.vocab_size`` where the config sets one (else the
synthetic data's); padded lengths are the synthetic source's where the config does not
fix them (``max_*`` fields), so a corpus with longer examples (captions, text lines)
needs more activation memory than reported.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from jaxlib.mlir import ir

from lnorm.data.core import Dataset
from lnorm.errors import UserError
from lnorm.rnn.kernel_launch import TRITON_CUSTOM_CALL
from lnorm.training import assembly
from lnorm.training.steps import make_eval_step, make_train_chunk, make_train_step
from lnorm.training.task import Task
from lnorm.training.train_state import TrainStateInitializer

#: Platforms ``jax.export`` lowers for.
PLATFORMS = ("cpu", "cuda", "rocm", "tpu")

#: Custom calls the steps may hold that ``jax.export`` refuses by default: the Pallas
#: step kernels' Triton modules (``lstm_impl='pallas'``, lnorm.rnn.kernel_launch),
#: which XLA compiles for the device but whose format has no compatibility guarantee
#: across jaxlib versions. The check lowers a step and discards it, so nothing is kept.
_EXPORTED_CUSTOM_CALLS = (jax.export.DisabledSafetyCheck.custom_call(TRITON_CUSTOM_CALL),)

#: Platforms whose runtime copies a conditional's predicate to the host and waits for
#: it (XLA:GPU's conditional thunk): a branch chosen at run time there is a host round
#: trip each time the step runs.
HOST_BRANCH_PLATFORMS = ("cuda", "rocm")

#: Datasets without a synthetic source, and the small local source used instead.
SMALL_SOURCES = {"mnist": "embedded", "binarized_mnist": "derived"}

#: How many examples (or images) the synthetic splits hold. A few suffice: the batches
#: are abstract, and the data only gives each feature its dtype and trailing shape.
_SYNTHETIC_SIZES = {"synthetic_size": 64, "synthetic_examples": 64,
                    "synthetic_train_images": 64, "synthetic_validation_images": 16,
                    "synthetic_test_images": 16}


def synthetic_data_config(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """``config`` with its data switched to a small synthetic source (the rest untouched)."""
  config = ml_collections.ConfigDict(config.to_dict())
  data = config.data
  data.source = SMALL_SOURCES.get(data.name, "synthetic")
  with data.unlocked():
    for field, size in _SYNTHETIC_SIZES.items():
      if field in data:
        data[field] = size
    data.use_cache = False
  return config


def synthetic_model(config: ml_collections.ConfigDict,
                    data_config: ml_collections.ConfigDict | None = None,
                    ) -> tuple[Task, Dataset, Any]:
  """``(task, dataset, model)`` of ``config`` assembled as a run is
  (``assembly.assemble_model``: the config checked, its data loaded, its model built)
  on ``data_config`` (default: ``synthetic_data_config(config)``), with the vocabulary
  of the paper's corpus (:func:`paper_vocabulary`): the model at the config's size."""
  data_config = data_config or synthetic_data_config(config)
  task = assembly.check(data_config)
  dataset = task.load_data()
  dataset = dataclasses.replace(dataset,
                                info={**dataset.info, **paper_vocabulary(config, dataset)})
  return assembly.assemble_model(data_config, task=task, dataset=dataset)


def paper_vocabulary(config: ml_collections.ConfigDict, dataset) -> dict[str, int]:
  """The vocabulary size the config caps the real data at, where the synthetic data's
  own is smaller: the embedding and the output layer are then built at the size a
  real run has (a corpus has at least ``data.vocab_size`` distinct words)."""
  configured = config.data.get("vocab_size")
  if configured and "vocab_size" in dataset.info and dataset.info["vocab_size"] < configured:
    return {"vocab_size": int(configured)}
  return {}


def _abstract(array: np.ndarray, leading: Sequence[int]) -> jax.ShapeDtypeStruct:
  return jax.ShapeDtypeStruct((*leading, *array.shape[1:]), array.dtype)


def abstract_batch(split: dict[str, np.ndarray], leading: Sequence[int],
                   mask: bool = False) -> dict[str, jax.ShapeDtypeStruct]:
  """A batch of a split's features with leading axes ``leading`` (e.g. [K, B])."""
  batch = {k: _abstract(v, leading) for k, v in split.items()}
  if mask:
    batch["mask"] = jax.ShapeDtypeStruct(tuple(leading), jnp.float32)
  return batch


def _itemsize(dtype) -> int:
  if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
    return 8  # A threefry key: two uint32.
  return np.dtype(dtype).itemsize


def nbytes(tree) -> int:
  """Bytes of every array (or ShapeDtypeStruct) in ``tree``."""
  return sum(math.prod(x.shape) * _itemsize(x.dtype) for x in jax.tree.leaves(tree))


@dataclasses.dataclass
class StepReport:
  """What lowering one step found: its arguments' and outputs' bytes, and per platform
  either None (lowered) or the error; ``cpu_temp_bytes`` when compiled for the CPU."""

  name: str
  argument_bytes: int
  output_bytes: int
  lowered: dict[str, str | None]
  lower_seconds: float
  cpu_temp_bytes: int | None = None
  cpu_compile_seconds: float | None = None
  #: Per platform of HOST_BRANCH_PLATFORMS lowered: the conditionals chosen at run
  #: time in one call of the step (:func:`runtime_branches`), each a host round trip.
  host_branches: dict[str, int] = dataclasses.field(default_factory=dict)

  @property
  def ok(self) -> bool:
    return all(error is None for error in self.lowered.values())


@dataclasses.dataclass
class CheckReport:
  experiment: str
  norm: str | None
  num_params: int
  param_bytes: int
  state_bytes: int
  train_batch: dict[str, tuple[tuple[int, ...], str]]
  eval_batch: dict[str, tuple[tuple[int, ...], str]]
  steps: list[StepReport]

  @property
  def ok(self) -> bool:
    return all(s.ok for s in self.steps)


def _shapes(batch) -> dict[str, tuple[tuple[int, ...], str]]:
  return {k: (tuple(v.shape), np.dtype(v.dtype).name) for k, v in batch.items()}


def runtime_branches(module: ir.Module) -> int:
  """The conditionals of a lowered program whose branch is chosen from data at run
  time: every ``stablehlo.case`` or ``stablehlo.if`` but the platform selection of
  ``lax.platform_dependent`` (lnorm's, or JAX's own inside its functions), whose index
  is a constant once the program is lowered for one platform, and which XLA removes:
  the index a constant, a case on one, a loop's carried value that starts as one and
  passes through unchanged, a function's result that is one, or a function's argument
  that every call of the function passes such an index. A ``lax.cond`` inside a loop counts once."""
  calls: dict[str, list[ir.Operation]] = {}
  functions: dict[str, ir.Operation] = {}

  def collect(op):
    op = op.operation if hasattr(op, "operation") else op
    if op.name == "func.call":
      calls.setdefault(ir.FlatSymbolRefAttr(op.attributes["callee"]).value, []).append(op)
    elif op.name == "func.func":
      functions[ir.StringAttr(op.attributes["sym_name"]).value] = op
    return ir.WalkResult.ADVANCE

  module.operation.walk(collect)

  def carried(loop, index: int, seen) -> bool:
    """Whether a while loop's carried value ``index`` is static: its initial value
    is, and the body passes it on unchanged."""
    body = loop.regions[1].blocks[0]
    terminator = list(body.operations)[-1]
    return (terminator.operands[index] == body.arguments[index]
            and static(loop.operands[index], seen))

  def static(value, seen=()) -> bool:
    if isinstance(value, ir.BlockArgument):
      parent = value.owner.owner
      parent = parent.operation if hasattr(parent, "operation") else parent
      if parent.name == "stablehlo.while":
        return carried(parent, value.arg_number, seen)
      if parent.name != "func.func" or parent in seen:
        return False
      name = ir.StringAttr(parent.attributes["sym_name"]).value
      sites = calls.get(name, [])
      return bool(sites) and all(static(call.operands[value.arg_number], (*seen, parent))
                                 for call in sites)
    owner = value.owner
    owner = owner.operation if hasattr(owner, "operation") else owner
    if owner.name == "stablehlo.constant":
      return True
    if owner.name == "stablehlo.while":
      return carried(owner, ir.OpResult(value).result_number, seen)
    if owner.name == "func.call":  # A function's result: what its return gives.
      function = functions.get(ir.FlatSymbolRefAttr(owner.attributes["callee"]).value)
      if function is None or function in seen:
        return False
      returned = list(function.regions[0].blocks[0].operations)[-1]
      return static(returned.operands[ir.OpResult(value).result_number], (*seen, function))
    return owner.name == "stablehlo.case" and static(owner.operands[0], seen)

  found = []

  def visit(op):
    op = op.operation if hasattr(op, "operation") else op
    if op.name in ("stablehlo.case", "stablehlo.if") and not static(op.operands[0]):
      found.append(op.name)
    return ir.WalkResult.ADVANCE

  module.operation.walk(visit)
  return len(found)


def lower_step(name: str, fn: Callable, args: Sequence[Any], platforms: Sequence[str],
               compile_cpu: bool) -> StepReport:
  """Lowers ``jit(fn)(*args)`` for every platform at once (a multi-platform export, so
  that ``lax.platform_dependent`` branches are lowered for each) and, if asked,
  compiles it for this machine's CPU for its memory analysis."""
  jitted = jax.jit(fn)
  start = time.perf_counter()
  lowered: dict[str, str | None] = {}
  out_bytes = 0
  try:
    exported = jax.export.export(jitted, platforms=tuple(platforms),
                                 disabled_checks=_EXPORTED_CUSTOM_CALLS)(*args)
    out_bytes = nbytes(exported.out_avals)
    lowered = {p: None for p in platforms}
  except Exception:  # pylint: disable=broad-except
    # Lower one platform at a time, to say which failed and why.
    for platform in platforms:
      try:
        exported = jax.export.export(jitted, platforms=(platform,),
                                     disabled_checks=_EXPORTED_CUSTOM_CALLS)(*args)
        out_bytes = nbytes(exported.out_avals)
        lowered[platform] = None
      except Exception as e:  # pylint: disable=broad-except
        lowered[platform] = f"{type(e).__name__}: {e}".splitlines()[0]
  report = StepReport(name, nbytes(args), out_bytes, lowered, time.perf_counter() - start)
  for platform in HOST_BRANCH_PLATFORMS:
    if lowered.get(platform, "absent") is None:
      report.host_branches[platform] = runtime_branches(jitted.trace(*args).lower(
          lowering_platforms=(platform,)).compiler_ir("stablehlo"))
  if compile_cpu:
    start = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    report.cpu_compile_seconds = time.perf_counter() - start
    analysis = compiled.memory_analysis()
    report.cpu_temp_bytes = None if analysis is None else int(analysis.temp_size_in_bytes)
  return report


def check(config: ml_collections.ConfigDict, platforms: Sequence[str] = ("cuda", "tpu"),
          compile_cpu: bool = False) -> CheckReport:
  """Builds ``config``'s model and lowers its train and eval steps for ``platforms``."""
  unknown = set(platforms) - set(PLATFORMS)
  if unknown:
    raise UserError(f"Unknown platform(s) {', '.join(sorted(unknown))}: choose from "
                    f"{', '.join(PLATFORMS)}.")
  # The model's fields are the config's own: only the data is swapped for a small
  # synthetic copy (whose task computes what it needs from the data, e.g. pixel means).
  task, dataset, model = synthetic_model(config)
  split = dataset.splits[task.train_split()]

  one = abstract_batch(split, (config.batch_size,))
  state = TrainStateInitializer(config, task, model).abstract(one)
  train_batches = abstract_batch(split, (config.steps_per_call, config.batch_size))
  eval_batch = abstract_batch(split, (config.eval_batch_size,), mask=True)
  rng = jax.ShapeDtypeStruct((), jax.random.key(0).dtype)

  train = lower_step("train", make_train_chunk(make_train_step(task, model)),
                     (state, train_batches, rng), platforms, compile_cpu)
  evaluate = lower_step("eval", make_eval_step(task, model), (state, eval_batch),
                        platforms, compile_cpu)
  return CheckReport(
      experiment=config.experiment, norm=config.get("norm"),
      num_params=sum(math.prod(x.shape) for x in jax.tree.leaves(state.params)),
      param_bytes=nbytes(state.params), state_bytes=nbytes(state),
      train_batch=_shapes(train_batches), eval_batch=_shapes(eval_batch),
      steps=[train, evaluate])


def format_bytes(n: int) -> str:
  """``n`` bytes in MiB below a GiB, else in GiB."""
  return f"{n / 2**20:.1f} MiB" if n < 2**30 else f"{n / 2**30:.2f} GiB"


def format_report(report: CheckReport) -> str:
  lines = [f"{report.experiment} (norm={report.norm}): {report.num_params:,} parameters, "
           f"{format_bytes(report.param_bytes)}; train state (params, optimizer, batch stats) "
           f"{format_bytes(report.state_bytes)}"]
  for title, batch in (("train batch [steps_per_call, batch]", report.train_batch),
                       ("eval batch", report.eval_batch)):
    lines.append(f"  {title}: " + ", ".join(f"{k} {list(s)} {d}"
                                            for k, (s, d) in batch.items()))
  for step in report.steps:
    status = ", ".join(f"{p} {'ok' if e is None else 'FAILED: ' + e}"
                       for p, e in step.lowered.items())
    lines.append(f"  {step.name} step: arguments {format_bytes(step.argument_bytes)}, "
                 f"outputs {format_bytes(step.output_bytes)}; lowered in "
                 f"{step.lower_seconds:.1f} s: {status}")
    for platform, n in step.host_branches.items():
      lines.append(f"    {platform}: " + ("no branch chosen at run time" if not n else
                   f"{n} branch{'es' if n > 1 else ''} chosen at run time (lax.cond): "
                   "each waits for its predicate on the host, every call"))
    if step.cpu_temp_bytes is not None:
      lines.append(f"    compiled for this CPU in {step.cpu_compile_seconds:.1f} s: "
                   f"temporaries {format_bytes(step.cpu_temp_bytes)}")
  return "\n".join(lines)
