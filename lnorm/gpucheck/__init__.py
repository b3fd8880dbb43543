"""The GPU check: how fast lnorm runs on an accelerator, measured in one short call.

``scripts/gpu/run.sh`` runs its phases, each in a process of its own with its own time
limit, and each writes one JSON record (``lnorm.gpucheck.records``) into the output
folder as it goes, so that a phase that fails or runs out of time leaves its finished
items and the other phases' records:

* ``device`` (:mod:`lnorm.gpucheck.ceilings`): the device, its driver and the library
  versions; the measured matmul rates (float32 at JAX's default precision, TF32 on an
  NVIDIA GPU; float32 at ``highest``; bfloat16) and the device-to-device copy bandwidth.
* ``experiments`` (:mod:`lnorm.gpucheck.steps`): every experiment's train step at its
  config's size, per normalizer: compile time, median step time, examples per second,
  achieved TFLOP/s from the experiments' own FLOP counts (``lnorm flops``), peak
  device memory, and how its recurrences ran.
* ``rnn`` (:mod:`lnorm.gpucheck.rnn_layers`): one recurrent layer forward and backward
  at the papers' sizes, lnorm's LSTM and GRU against cuDNN through JAX and PyTorch.
* ``fig6`` (:mod:`lnorm.gpucheck.fig6`): LN paper Figure 6 (permutation-invariant
  MNIST, batch 128, 20 epochs) through ``lnorm benchmark --scale paper``.

``python -m lnorm.gpucheck PHASE --out DIR [--toy]`` runs one phase; ``--toy`` shrinks
every size so that the rehearsal (``run.sh --rehearse``) runs the same code on a CPU.
``python -m lnorm.gpucheck collect`` files a device's records under
``results/gpu/<device>/``, and :mod:`lnorm.analysis.gpu_report` turns them into
docs/gpu.md's tables (``lnorm gpu-report``).

May import lnorm.training, lnorm.rnn, lnorm.data and lnorm.analysis; PyTorch only
inside the functions that time it (it is optional).
"""
