"""Static op counts of the RNN train step's optimized HLO: what one time step runs.

    python scripts/hlo_rnn_step.py                       # lstm, ln_lstm, naive flax LN-LSTM
    python scripts/hlo_rnn_step.py --rows ln_lstm --unroll 2 --dump /tmp/hlo

Compiles, and never runs or times, the train step of ``bench_rnn.py`` (built by its
own functions: the jitted ``value_and_grad`` of ``sum(h^2)/B`` with respect to the
parameters and the input, at the same default sizes), and counts in the body of the
forward and of the backward ``while`` loop over time what XLA executes once per
iteration: the ops that run (split by the jax op they come from: matmul, LN, residual
stores and loads, bookkeeping, other), fusions, dots with their shapes, reduces,
custom-calls, copies and transposes, ops with a result the size of the recurrent
weight W_h, and loops nested in the body. A third column counts the rest of the
program, whose other loops (lnorm's blocked LN, for instance) are listed below each
table. These are what the compiler emitted for this machine's backend: op counts,
not time.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
from typing import NamedTuple

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # scripts/ is not a package
import bench_rnn  # noqa: E402  (the models and train step that bench_rnn.py times)
from lnorm.training import process  # noqa: E402

ROWS = ("lstm", "ln_lstm", "lstm_scan", "ln_lstm_scan", "naive_flax_ln_lstm")
#: Further rows of bench_rnn.py that --rows accepts (the RMS-LSTM and the GRUs).
MORE_ROWS = ("rms_lstm", "rms_lstm_scan", "gru", "ln_gru", "rms_gru", "gru_scan",
             "ln_gru_scan", "rms_gru_scan")

#: Instructions that name or regroup buffers without running a kernel.
_BOOKKEEPING = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast"}

_HEADER = re.compile(r"^(ENTRY )?%(\S+) \(")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%(\S+) = ")
_CALLED = re.compile(r"(?:calls|to_apply|body|condition)=%([\w.\-]+)")
_CALLED_LISTS = re.compile(r"(?:branch_computations|called_computations)=\{([^}]*)\}")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_TRIP_COUNT = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')


class Instruction(NamedTuple):
  name: str
  shape: str  # e.g. "f32[32,1600]{1,0}", or a tuple type
  opcode: str
  operands: tuple[str, ...]
  line: str

  @property
  def dims(self) -> str:
    """The shape without its layout: "f32[32,1600]"."""
    return re.sub(r"\{[^}]*\}", "", self.shape)

  @property
  def called(self) -> list[str]:
    names = _CALLED.findall(self.line)
    for group in _CALLED_LISTS.findall(self.line):
      names += [n.strip().lstrip("%") for n in group.split(",") if n.strip()]
    return names

  @property
  def op_name(self) -> str:
    m = _OP_NAME.search(self.line)
    return m.group(1) if m else ""


def _split_shape(rest: str) -> tuple[str, str]:
  if not rest.startswith("("):
    shape, _, rest = rest.partition(" ")
    return shape, rest
  depth = 0
  for i, ch in enumerate(rest):
    depth += (ch == "(") - (ch == ")")
    if depth == 0:
      return rest[:i + 1], rest[i + 2:]
  raise ValueError(f"unbalanced tuple type: {rest[:80]}")


def parse_hlo(text: str) -> tuple[dict[str, list[Instruction]], str]:
  """The HLO module's computations (name -> instructions) and the entry's name."""
  computations, current, entry = {}, None, None
  for line in text.splitlines():
    header = _HEADER.match(line)
    if header and line.rstrip().endswith("{"):
      current = header.group(2)
      computations[current] = []
      entry = current if header.group(1) else entry
    elif line.startswith("}"):
      current = None
    elif current is not None and (m := _INSTRUCTION.match(line)):
      shape, rest = _split_shape(line[m.end():])
      opcode, _, args = rest.partition("(")
      depth, end = 1, 0
      for end, ch in enumerate(args):
        depth += (ch == "(") - (ch == ")")
        if depth == 0:
          break
      operands = tuple(re.findall(r"%([\w.\-]+)", args[:end]))
      computations[current].append(Instruction(m.group(1), shape, opcode, operands, line))
  return computations, entry


def walk(computations, names, seen=None):
  """Every instruction of the given computations and of those they call."""
  seen = set() if seen is None else seen
  for name in names:
    if name in seen:
      continue
    seen.add(name)
    for ins in computations[name]:
      yield name, ins
      yield from walk(computations, ins.called, seen)


def recurrence_loops(computations, entry):
  """(forward while, backward while, other while loops) of the program.

  The loops over time are jax's ``jvp(<Module>)/[RecurrentLayer._scan/]while``
  (``nn.scan``) or ``jvp(<Module>)/<layer>.fused_scan/while`` (lnorm's fused LSTM)
  and their transposes; any other loop (lnorm's blocked LN, for instance) is
  returned with the others.
  """
  forward = backward = None
  others = []
  layer_method = r"(/[\w.]+_scan)?"  # RecurrentLayer._scan or <cell>.fused_scan
  for _, ins in walk(computations, [entry]):
    if ins.opcode != "while":
      continue
    path = re.sub(r"^jit\([^)]*\)/", "", ins.op_name)
    if re.fullmatch(r"jvp\([^)/]*\)" + layer_method + "/while", path):
      forward = ins
    elif re.fullmatch(r"transpose\(jvp\([^)/]*\)\)" + layer_method + "/while", path):
      backward = ins
    else:
      others.append(ins)
  if forward is None or backward is None:
    raise RuntimeError("found no forward and backward while loop over time in the HLO")
  return forward, backward, others


def loop_body(loop: Instruction) -> str:
  return re.search(r"body=%([\w.\-]+)", loop.line).group(1)


def trip_count(loop: Instruction) -> str:
  m = _TRIP_COUNT.search(loop.line)
  return m.group(1) if m else "?"


def _dot_text(types, ins, library: bool) -> str:
  """"[32,1600]·[400,1600]ᵀ" for a 2-D dot (ᵀ: contracted over its first, for the left
  operand, or second, for the right, dimension); its contracting dims otherwise. "(lib)":
  run inside a library (kCustom) fusion."""
  lhs, rhs = (types.get(o, "?").replace("f32", "") for o in ins.operands[:2])
  contract = dict(re.findall(r"(lhs|rhs)_contracting_dims=\{([\d,]*)\}", ins.line))
  batch = "batch_dims" in ins.line
  if ins.opcode == "dot" and not batch and lhs.count(",") == rhs.count(",") == 1:
    text = (lhs + ("ᵀ" if contract.get("lhs") == "0" else "") + "·"
            + rhs + ("ᵀ" if contract.get("rhs") == "1" else ""))
  else:
    text = f"{ins.opcode}({lhs}, {rhs}; {ins.line.split(ins.opcode, 1)[1][:60]})"
  return text + (" (lib)" if library else "")


def _tally(items) -> str:
  counts = collections.Counter(items)
  return "; ".join(f"{k} ×{n}" if n > 1 else k for k, n in sorted(counts.items())) or "-"


def _root_opcode(computations, ins) -> str:
  """A fusion's fused root ("fusion(add)"); any other instruction's opcode."""
  if ins.opcode != "fusion":
    return ins.opcode
  roots = [i.opcode for i in computations[ins.called[0]] if i.line.lstrip().startswith("ROOT")]
  return f"fusion({roots[0]})" if roots else "fusion"


#: Where a kernel comes from, by the jax op_name XLA keeps in its metadata.
SOURCES = ("matmul", "LN", "residual store/load", "copy, loop counter, buffer init", "other")


def _source(ins: Instruction, runs_a_dot: bool) -> str:
  name = ins.op_name
  if runs_a_dot:
    return "matmul"
  if re.search(r"(_norm|/ln_\w+)/", name):  # lnorm's *_norm modules, flax's ln_* ones
    return "LN"
  if re.search(r"/dynamic_(update_)?slice$", name):
    return "residual store/load"
  if ins.opcode == "copy" or re.search(r"(^|/while/body/(add|closed_call))$", name):
    return "copy, loop counter, buffer init"
  return "other"


def count(computations, top: list[Instruction], weight_dims: set[str]) -> dict:
  """Counts over the instructions ``top`` (a loop body's, or the entry computation's)
  and the computations they call; the bodies of while loops in ``top`` are left out."""
  # (instruction, the top-level instruction it runs in): a fusion's fused ops, a
  # reduce's reducer, ... are counted with the instruction that calls them.
  everything = []
  for ins in top:
    everything.append((ins, ins))
    if ins.opcode != "while":
      everything += [(nested, ins) for _, nested in walk(computations, ins.called)]
  # Instruction names are unique in an HLO module: one map serves every computation.
  types = {ins.name: ins.dims for ins, _ in everything}
  ops = lambda *names: [(ins, owner) for ins, owner in everything if ins.opcode in names]
  fusions = [ins for ins in top if ins.opcode == "fusion"]
  dots = ops("dot", "convolution")
  with_dot = {owner.name for _, owner in dots}
  sources = collections.Counter(_source(ins, ins.name in with_dot) for ins in top
                                if ins.opcode not in _BOOKKEEPING | {"while"})
  return {
      "instructions": len(top),
      "ops run (all but parameter/tuple/constant/bitcast/while)": sum(sources.values()),
      **{f"· {k}": sources[k] for k in SOURCES},
      "fusions (of which library kCustom)":
          f"{len(fusions)} ({sum('kind=kCustom' in f.line for f in fusions)})",
      "dot/convolution": len(dots),
      "dot shapes": _tally(
          _dot_text(types, ins, "kind=kCustom" in owner.line) for ins, owner in dots),
      "reduce (by output shape)": f"{len(ops('reduce'))}: " + _tally(
          ins.dims.replace("f32", "") for ins, _ in ops("reduce")),
      "custom-call": len(ops("custom-call")),
      "copy / transpose": f"{len(ops('copy'))} / {len(ops('transpose'))}",
      "ops with a W_h-sized result": _tally(
          _root_opcode(computations, ins) for ins in top
          if ins.opcode not in _BOOKKEEPING and ins.opcode != "while"
          and re.sub(r"^\w+", "", ins.dims) in weight_dims),
      "dynamic-update-slice (stores into [T, ...] buffers)":
          len(ops("dynamic-update-slice")),
      "while loops inside": sum(ins.opcode == "while" for ins in top),
  }


def analyse(text: str, hidden: int):
  """Counts of the forward body, the backward body and the rest of the program; the
  while loops (over time first); the parsed computations."""
  computations, entry = parse_hlo(text)
  forward, backward, others = recurrence_loops(computations, entry)
  weight_dims = {f"[{hidden},{4 * hidden}]", f"[{4 * hidden},{hidden}]"}
  bodies = [loop_body(forward), loop_body(backward)]
  columns = [count(computations, computations[b], weight_dims) for b in bodies]
  # Outside the loops: the entry computation and what it calls, loops' bodies excluded
  # (a while instruction still counts as one instruction there).
  rest = count(computations, computations[entry], weight_dims)
  return columns[0], columns[1], rest, [forward, backward] + others, computations


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  bench_rnn.add_shape_arguments(parser)
  parser.add_argument("--rows", nargs="+", choices=ROWS + MORE_ROWS, default=list(ROWS))
  parser.add_argument("--dump", metavar="DIR",
                      help="also write each row's optimized HLO to DIR/<row>.txt")
  args = parser.parse_args(argv)
  process.set_up()  # As `lnorm train` runs: before JAX starts.

  x = jnp.asarray(bench_rnn.random_inputs(args))
  print(f"batch {args.batch}, steps {args.steps}, input {args.input}, hidden "
        f"{args.hidden}, unroll {args.unroll} (lstm and ln_lstm); optimized HLO of the "
        f"value_and_grad step; jax {jax.__version__} on {jax.devices()[0].platform}, "
        f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}. Static counts, not timings.")
  models = bench_rnn.jax_models(args.hidden, args.unroll)
  for row in args.rows:
    model, apply = models[row]
    step, params = bench_rnn.train_step(model, x, apply)
    text = step.lower(params, x).compile().as_text()
    if args.dump:
      os.makedirs(args.dump, exist_ok=True)
      with open(os.path.join(args.dump, f"{row}.txt"), "w") as f:
        f.write(text)
    fwd, bwd, rest, loops, computations = analyse(text, args.hidden)
    print(f"\n### {row}\n")
    print("| per iteration | forward body | backward body | outside the loops |")
    print("|---|---|---|---|")
    print(f"| iterations | {trip_count(loops[0])} | {trip_count(loops[1])} | 1 |")
    for key in fwd:
      print(f"| {key} | {fwd[key]} | {bwd[key]} | {rest[key]} |")
    print()
    for loop in loops:
      body = computations[loop_body(loop)]
      print(f"- while loop {re.sub(r'^jit[(][^)]*[)]/', '', loop.op_name)}: "
            f"{trip_count(loop)} iterations, "
            f"{sum(i.opcode not in _BOOKKEEPING for i in body)} ops run per iteration")


if __name__ == "__main__":
  main()
