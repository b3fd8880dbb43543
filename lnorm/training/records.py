"""The loop's host-side records: running sums between records, and the records made
from them.

The sums live in one JSON-able dict (``host``), saved with every checkpoint, so that a
resumed run's records equal an uninterrupted one's. It holds the current epoch's sums
(``epoch_sums()``), the gradient window since the last mid-epoch evaluation
(``gradient_window()``), and ``train_seconds``, which spans the whole run: the clock
``lnorm compare`` reads time-to-target on.

- ``add_call`` adds one jitted call's outputs (``lnorm.training.steps``: per-step
  losses and clip indicators, norms measured at the call's last step);
- ``epoch_metrics`` is an epoch record's training part, ``window_metrics`` the
  gradient's record at a mid-epoch evaluation;
- ``check_finite`` stops the run at the first step whose loss or gradient norm is not
  finite.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lnorm.errors import DivergenceError
from lnorm.normalization import is_import_path
from lnorm.training.metrics_writer import read_metrics
from lnorm.training.steps import NORM_METRICS


def gradient_window() -> dict[str, Any]:
  """Sums over the steps since the last mid-epoch evaluation (or the epoch's start)."""
  return {"steps": 0, "norm_samples": 0, "grad_norm": 0.0, "clips": {}}


def epoch_sums() -> dict[str, Any]:
  """The host-side sums of one epoch, reset at each epoch end."""
  return {"epoch_sums": {}, "epoch_examples": 0, "epoch_seconds": 0.0,
          "timed_examples": 0, "timed_seconds": 0.0, "compile_seconds": 0.0,
          "epoch_norms": {}, "epoch_steps": 0, "norm_samples": 0, "epoch_clips": {},
          "eval_window": gradient_window()}


def initial() -> dict[str, Any]:
  """The records of a run that has not trained yet."""
  return {**epoch_sums(), "train_seconds": 0.0}


def add_call(host: dict[str, Any], out, examples: int) -> None:
  """Adds one jitted call's outputs (``[K]`` per-step values for its K steps) and the
  ``examples`` it trained on."""
  for k, v in out["sums"].items():
    host["epoch_sums"][k] = host["epoch_sums"].get(k, 0.0) + float(np.sum(v))
  host["epoch_norms"]["loss"] = host["epoch_norms"].get("loss", 0.0) + float(np.sum(out["loss"]))
  for k in NORM_METRICS:
    host["epoch_norms"][k] = host["epoch_norms"].get(k, 0.0) + float(out[k][-1])
  host["norm_samples"] += 1
  host["epoch_examples"] += examples
  host["epoch_steps"] += len(out["loss"])
  window = host["eval_window"]
  window["steps"] += len(out["loss"])
  window["norm_samples"] += 1
  window["grad_norm"] += float(out["grad_norm"][-1])
  # Whether the clips acted is known for every step: count them all.
  for k, v in out.get("clips", {}).items():
    clipped = float(np.sum(v))
    host["epoch_clips"][k] = host["epoch_clips"].get(k, 0.0) + clipped
    window["clips"][k] = window["clips"].get(k, 0.0) + clipped


def add_time(host: dict[str, Any], examples: int, call_seconds: float,
             input_seconds: float) -> None:
  """Adds a train call's time: the jitted call alone to the throughput, the call and
  the assembly of its input to ``train_seconds``. Compilation is timed apart
  (``compile_seconds``), so that every call counts, even one that had to compile
  first: a run of a few calls, each of a new shape, still has a training time."""
  host["timed_examples"] += examples
  host["timed_seconds"] += call_seconds
  host["train_seconds"] += call_seconds + input_seconds


def window_metrics(window: dict[str, Any]) -> dict[str, float]:
  """The gradient's record over a mid-epoch evaluation's window."""
  if not window["norm_samples"]:
    return {}
  metrics = {"train/grad_norm": window["grad_norm"] / window["norm_samples"]}
  metrics.update({f"train/{k}": v / window["steps"] for k, v in window["clips"].items()})
  return metrics


def epoch_metrics(host: dict[str, Any], epoch: float) -> dict[str, float]:
  """The epoch record's training part; ``epoch`` is fractional for a partial epoch."""
  n = max(host["epoch_examples"], 1)
  steps = max(host["epoch_steps"], 1)
  metrics = {"epoch": epoch}
  metrics.update({f"train/{k}": v / n for k, v in host["epoch_sums"].items()})
  # The loss is averaged over every step, the norms over the steps that measured them
  # (the last of each fused call).
  samples = max(host["norm_samples"], 1)
  metrics.update({f"train/{k}": v / (samples if k in NORM_METRICS else steps)
                  for k, v in host["epoch_norms"].items()})
  metrics.update({f"train/{k}": v / steps for k, v in host["epoch_clips"].items()})
  metrics["time/epoch_seconds"] = host["epoch_seconds"]
  # Throughput of the jitted steps alone: compilation and evaluation excluded.
  if host["timed_seconds"] > 0:
    metrics["train/examples_per_sec"] = host["timed_examples"] / host["timed_seconds"]
  if host["compile_seconds"] > 0:
    metrics["time/compile_seconds"] = host["compile_seconds"]
  return metrics


def last_epoch_record(workdir: str) -> dict[str, float]:
  """The latest epoch record in ``workdir``'s metrics, without its step; {} if none."""
  epochs = [r for r in read_metrics(workdir) if "time/epoch_seconds" in r]
  return {k: v for k, v in epochs[-1].items() if k != "step"} if epochs else {}


def check_finite(out, step: int, epoch: int, last_checkpoint: int | None,
                 suspect: str | None = None) -> None:
  """Raises DivergenceError at the first of a call's steps (the call began at
  ``step``) whose loss, or the gradient norm its last step measured, is not finite.

  ``suspect`` (``normalizer_suspect``) names the normalizer when it, rather than the
  learning rate, is the likely cause: a divergence in the run's first call, or a loss
  that is not finite before any update (where the learning rate has done nothing)."""
  bad = ~np.isfinite(out["loss"])
  bad[-1] |= not np.isfinite(out["grad_norm"][-1])
  if not bad.any():
    return
  first = int(np.argmax(bad))
  what = "loss" if not np.isfinite(out["loss"][first]) else "gradient norm"
  value = out["loss"][first] if what == "loss" else out["grad_norm"][first]
  at = step + first
  lower = ("lower the learning rate (--config.optimizer.learning_rate), clip gradients "
           "(--config.optimizer.clip_global_norm=1.0) or change the seed")
  if at == 0 and what == "loss":
    advice = ("This is before any update, so the learning rate is not the cause: the "
              "initial model's loss is not finite. " + (suspect or "Check the model's "
                                                        "inputs and its normalizer."))
  elif suspect and step == 0:  # Within the run's first steps.
    advice = f"{suspect} If it is not that, {lower}."
  else:
    advice = lower[0].upper() + lower[1:] + "."
  saved = (f"The last good checkpoint is at step {last_checkpoint}; this state was not "
           "saved." if last_checkpoint is not None else
           "No checkpoint was saved yet: a rerun starts over.")
  raise DivergenceError(f"The {what} became {value} at training step {at} (epoch "
                        f"{epoch + 1}). {advice} {saved}", step=at)


def normalizer_suspect(norm: str | None, options: Any) -> str | None:
  """The normalizer as the likely cause of a loss that is not finite from the start,
  or None when nothing points at it: a user's normalizer (docs/extending.md: it must
  stay finite on an all-zero row), or a built-in one whose eps is set to 0."""
  if not norm or norm == "none":
    return None
  if is_import_path(norm):
    return (f"The likely cause is the normalizer {norm}: on an all-zero row (an LSTM's "
            "zero initial state, padded time steps, a layer of dead units) a "
            "normalizer that divides by a statistic of the row divides by zero, and "
            "gives NaN in its output, or in its gradient when its eps sits outside the "
            "square root. Add an eps inside it (x / jnp.sqrt(ms + eps)), as "
            "docs/extending.md says ('No mask').")
  eps = (options or {}).get(norm, {}).get("eps") if hasattr(options, "get") else None
  if eps == 0:
    return (f"The likely cause is norm={norm} with norm_options.{norm}.eps=0: on an "
            "all-zero row (an LSTM's zero initial state, padded time steps) its statistic "
            "is zero and it divides by zero. Give "
            f"--config.norm_options.{norm}.eps a positive value.")
  return None


def format_metrics(metrics: dict[str, float]) -> str:
  """``a=0.1234, b=5`` for a log line."""
  return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                   for k, v in metrics.items())
