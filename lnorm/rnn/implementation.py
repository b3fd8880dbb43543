"""How a recurrent cell runs: the cell option ``impl``, the config field ``lstm_impl``
(the GRU takes it too).

* ``auto`` (the default): on an NVIDIA GPU, cuDNN for the plain LSTM
  (:mod:`lnorm.rnn.cudnn`) and the Pallas step kernels for the normalized cells
  (:mod:`lnorm.rnn.gpu_recurrence`); elsewhere lnorm's own scan, the fastest measured
  there (the fused recurrences of :mod:`lnorm.rnn.fused` and :mod:`lnorm.rnn.fused_gru`,
  or step by step). On a CPU nothing changes.
* ``scan``: always lnorm's own scan.
* ``cudnn``: always cuDNN (the plain LSTM only), a one-line error where it cannot run.
* ``pallas``: always the Pallas kernels, for any per-example normalizer (LN, RMSNorm,
  pRMSNorm, DyT, ScaleNorm, LayerNorm-simple) or none; a one-line error for the others
  (recurrent BN, a user's normalizer). Without an NVIDIA GPU the kernels run in
  Pallas's interpreter: correct, and slow (the tests run it).

The choice is made where the model is traced, by that process's backend
(``jax.default_backend()``); the kernels themselves are chosen per platform when the
step is lowered (:mod:`lnorm.rnn.kernel_launch`), so a step exported on a CPU host for
cuda with ``impl='pallas'`` carries the Triton kernels. The run's ``config.json`` says
which ran (``recurrence``: ``cudnn``, ``pallas``, ``fused`` or ``step-by-step``).
"""

from __future__ import annotations

import jax

from lnorm.errors import ConfigError
from lnorm.rnn import cudnn

#: The values of the cells' ``impl`` option (config field ``lstm_impl``).
IMPLEMENTATIONS = ("auto", "scan", "cudnn", "pallas")

#: What the Pallas step kernels run, for the messages.
KERNEL_NORMS = "LN, RMSNorm, pRMSNorm, DyT, ScaleNorm, LayerNorm-simple or no normalizer"


def check_impl(impl: str) -> None:
  if impl not in IMPLEMENTATIONS:
    raise ConfigError(f"lstm_impl={impl!r}: use one of {', '.join(IMPLEMENTATIONS)} "
                      "(auto: cuDNN for the plain LSTM and the Pallas kernels for the "
                      "normalized cells on an NVIDIA GPU, lnorm's scan elsewhere).")


def on_nvidia_gpu() -> bool:
  """Whether this process traces for an NVIDIA GPU, where the kernels lower to Triton."""
  if jax.default_backend() != "gpu":
    return False
  return "cuda" in jax.devices()[0].client.platform_version.lower()


def _refuse(impl: str, kind: str, why: str, instead: str) -> ConfigError:
  return ConfigError(f"lstm_impl={impl!r} cannot run this {kind}: {why}. Use "
                     f"--config.lstm_impl=auto ({instead}) or scan.")


def resolve(kind: str, impl: str, variant: str, normalized: list[str],
            unrunnable: list[str], recurrent_dropout: float) -> str:
  """``'cudnn'``, ``'pallas'`` or ``'scan'``: what a cell runs as here, for its ``impl``.

  ``kind`` is ``'LSTM'`` or ``'GRU'``; ``variant`` names the cell's normalization
  variant, ``normalized`` the places where it normalizes something (``input_norm``,
  ``hidden_norm``, ``cell_norm``) and ``unrunnable`` the places in the recurrence whose
  normalizer has no step kernel, each as ``'place (Class)'``.
  """
  check_impl(impl)
  if impl == "scan":
    return "scan"
  if kind == "GRU" and impl == "cudnn":
    raise ConfigError("lstm_impl='cudnn': cuDNN runs the plain LSTM only (jax.experimental"
                      ".rnn), and this model's cells are GRUs. Use --config.lstm_impl=auto "
                      "or scan.")
  if kind == "LSTM" and impl in ("auto", "cudnn"):
    why = cudnn.refusal(variant, normalized, recurrent_dropout)
    if why is None:
      return "cudnn"
    if impl == "cudnn":
      raise _refuse(impl, kind, why, "cuDNN where it can, lnorm's scan elsewhere")
  if impl == "pallas":
    if unrunnable:
      raise _refuse(impl, kind, f"its normalizer ({variant!r}, on {', '.join(unrunnable)}) "
                                f"has no step kernel; the kernels run {KERNEL_NORMS}",
                    "the kernels where they can run, lnorm's scan elsewhere")
    return "pallas"
  return "pallas" if normalized and not unrunnable and on_nvidia_gpu() else "scan"
