r"""Training throughput of the permutation-MNIST LN MLP: lnorm's train step against the
same model written in PyTorch, measured in the same run on the same machine.

  python scripts/bench_mlp.py [--batch-sizes 128,4] [--seconds 10]

lnorm's numbers come from the harness's own jitted step (with ``steps_per_call``
steps fused into one call, as the perm_mnist config does at small batch sizes), so
they are what `lnorm train` gets. Prints examples/s and the ratio per batch size.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from lnorm import config as config_lib
from lnorm.data.core import Dataset
from lnorm.training import assembly
from lnorm.training import parallel
from lnorm.training import process
from lnorm.training.steps import make_train_chunk, make_train_step
from lnorm.training.train_state import TrainStateInitializer


def _fake_mnist(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
  return {"image": rng.integers(0, 256, (n, 28, 28), dtype=np.uint8),
          "label": rng.integers(0, 10, n).astype(np.int32)}


def lnorm_throughput(batch_size: int, seconds: float) -> tuple[float, int]:
  config = config_lib.load_config(f"configs/perm_mnist.py:norm=ln,batch_size={batch_size}")
  process.set_up(config)
  task = assembly.check(config)
  rng = np.random.default_rng(0)
  dataset = Dataset("mnist", "synthetic", "benchmark", {"train": _fake_mnist(1024, rng)},
                    info={"num_classes": 10})
  model = task.build_model(dataset)
  k = config.steps_per_call
  mesh = parallel.make_mesh()
  batch = {key: v[:batch_size] for key, v in dataset.splits["train"].items()}
  # Replicated, as the harness's: one compilation, not two.
  state = TrainStateInitializer(config, task, model, mesh).from_scratch(batch)
  rep = parallel.replicated(mesh)
  chunk_fn = jax.jit(make_train_chunk(make_train_step(task, model)), donate_argnums=0,
                     out_shardings=(rep, rep))
  chunks = [parallel.shard_batch({key: np.stack([_fake_mnist(batch_size, rng)[key]
                                                  for _ in range(k)])
                                  for key in batch}, mesh, 1) for _ in range(4)]
  key = jax.random.key(1)
  for i in range(2):  # Compile, then one warm call.
    state, out = chunk_fn(state, chunks[i], key)
    jax.block_until_ready(out)
  calls, start = 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    state, out = chunk_fn(state, chunks[calls % len(chunks)], key)
    jax.device_get(out["loss"])  # The harness reads the loss back every call (NaN guard).
    calls += 1
  elapsed = time.perf_counter() - start
  return calls * k * batch_size / elapsed, k


def torch_throughput(batch_size: int, seconds: float) -> float | None:
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError:
    print("PyTorch is not installed (pip install torch): skipping the PyTorch rows.")
    return None
  torch.manual_seed(0)
  layers = []
  sizes = (784, 1000, 1000)
  for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
    layers += [torch.nn.Linear(fan_in, fan_out, bias=False), torch.nn.LayerNorm(fan_out),
               torch.nn.ReLU()]
  model = torch.nn.Sequential(*layers, torch.nn.Linear(1000, 10))
  opt = torch.optim.Adam(model.parameters(), lr=1e-3)
  loss_fn = torch.nn.CrossEntropyLoss()
  data = [(torch.rand(batch_size, 784), torch.randint(0, 10, (batch_size,)))
          for _ in range(16)]

  def step(i):
    x, y = data[i % len(data)]
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()

  for i in range(20):
    step(i)
  steps, start = 0, time.perf_counter()
  while time.perf_counter() - start < seconds:
    step(steps)
    steps += 1
  return steps * batch_size / (time.perf_counter() - start)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--batch-sizes", default="128,4")
  parser.add_argument("--seconds", type=float, default=10.0)
  args = parser.parse_args()
  process.set_up()  # As `lnorm train` runs: before JAX starts.
  try:
    import torch  # pylint: disable=g-import-not-at-top
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
  except ImportError:
    pass
  print(f"jax {jax.__version__} on {jax.devices()[0].platform} x{jax.device_count()}")
  ratios = []
  for b in (int(s) for s in args.batch_sizes.split(",")):
    ours, k = lnorm_throughput(b, args.seconds)
    theirs = torch_throughput(b, args.seconds)
    print(f"batch {b:4d}: lnorm {ours:9.0f} ex/s ({k} steps per call)"
          + (f", torch {theirs:9.0f} ex/s" if theirs else ""))
    if theirs:
      ratios.append((b, ours / theirs))
  for b, r in ratios:
    print(f"lnorm_ln_mlp / torch_ln_mlp at batch {b}: {r:.2f}x")


if __name__ == "__main__":
  main()
