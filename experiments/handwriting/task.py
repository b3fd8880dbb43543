"""Handwriting synthesis on IAM-OnDB (LN paper sec. 6.5, Figure 5; Graves 2013 sec. 5.2).

The loss is the exact negative log-likelihood of the pen moves and end-of-stroke
flags in nats per line (padding excluded), averaged over the batch (summed with
``loss_reduction='sum'``). Metrics per
line: 'nll' (nats per line), 'points' (real moves in the line) and 'nll_per_point'
('nll' / 'points' of each line; the epoch's value is its mean over lines).

The offsets' scale and the alphabet, which a sampler needs to turn model outputs
back into pen coordinates, are written to ``<workdir>/handwriting_data.json``. After
every epoch the model writes ``config.sample_text`` into ``<workdir>/images/``;
``lnorm sample`` writes any text with a trained run (:meth:`Task.sample`).
"""

from __future__ import annotations

import json
import os
import re

import jax
import jax.numpy as jnp
import numpy as np

from experiments.handwriting import model as model_lib
from experiments.handwriting import pictures
from experiments.handwriting import sampling
from experiments.handwriting.model import HandwritingSynthesis, sequence_nll
from lnorm.errors import UserError
from lnorm.evaluation import trivial
from lnorm.normalization import PER_EXAMPLE_NORMS
from lnorm.rnn import cell_options, make_lstm_cell
from lnorm.training.task import LOSS_REDUCTIONS, Task as BaseTask
from lnorm.training.train_state import TrainStateInitializer

DATA_RECORD = "handwriting_data.json"


def build_model(config, num_symbols: int) -> HandwritingSynthesis:
  c = config
  cell = make_lstm_cell(c.norm, forget_bias=c.forget_bias, **cell_options(c))
  return HandwritingSynthesis(cell=cell, hidden_size=c.hidden_size, num_layers=c.num_layers,
                              num_gaussians=c.num_gaussians, num_components=c.num_components,
                              num_symbols=num_symbols,
                              # Runs from before the field started the window at 1.
                              window_initial_step=c.get("window_initial_step", 1.0),
                              unroll=c.get("scan_unroll", 1))


class Task(BaseTask):
  norms = ("none",) + PER_EXAMPLE_NORMS
  loss_reductions = LOSS_REDUCTIONS

  def build_model(self, dataset):
    return build_model(self.config, dataset.info["num_symbols"])

  def forward_macs(self, dataset, batch):
    batch_size, points = batch["strokes"].shape[:2]
    return model_lib.forward_macs(self.config, batch_size, points, batch["text"].shape[1],
                                  dataset.info["num_symbols"])

  def model_inputs(self, batch):
    return batch["strokes"], batch["length"], batch["text"], batch["text_length"]

  def loss_and_metrics(self, outputs, batch, model):
    del model  # Unused.
    nll, points = sequence_nll(outputs, batch["strokes"], batch["length"],
                               self.config.num_components)
    metrics = {"nll": nll, "points": points,
               "nll_per_point": nll / jnp.maximum(points, 1.0)}
    return self.reduce_loss(nll), metrics

  def trivial_baseline(self, dataset):
    """One bivariate Gaussian for every pen offset and one Bernoulli for the
    end-of-stroke bit, fit to the training lines' real moves, whatever the text or
    the moves before: ``nll`` in nats per line and ``nll_per_point`` as the run logs
    them (``points`` is the data's, the same for any model)."""
    train = dataset.splits[self.train_split()]
    density = trivial.gaussian_and_bernoulli(train["strokes"][real_moves(train)])
    values = {}
    for split in trivial.held_out_splits(dataset, self.train_split()):
      arrays = dataset.splits[split]
      real = real_moves(arrays)
      log_p = trivial.gaussian_and_bernoulli_log_density(density, arrays["strokes"])
      nll = -np.sum(np.where(real, log_p, 0.0), axis=1)
      values[f"{split}/nll"] = float(np.mean(nll))
      values[f"{split}/nll_per_point"] = float(np.mean(nll / np.maximum(real.sum(1), 1)))
    return trivial.record("one Gaussian offset and one end-of-stroke Bernoulli", values)

  def end_of_epoch(self, run, state, workdir, step, writer):
    """Records the data scale and writes this epoch's sample of ``sample_text``."""
    if jax.process_index() != 0:
      return None
    record = write_data_record(workdir, run.dataset.info)
    text = self.config.get("sample_text", "")
    if text:
      base = os.path.join(workdir, "images", f"sample_{step:08d}")
      # Every epoch's sample of a run reuses one compilation (minutes at the paper's
      # size); another length gets its own.
      generator = lambda moves: run.compiled(
          ("sampler", moves), lambda: sampling.make_generator(run.model, moves))
      paths = self._write(generator, jax.device_get(state.params), record, text,
                          seed=step, bias=self.config.get("sample_bias", 0.0),
                          out_base=base)
      writer.write_images(step, {"sample": paths["png"],
                                 "sample_attention": paths["attention"]})
    return None

  def sample(self, workdir: str, *, text: str, bias: float = 0.0, seed: int = 0,
             out_base: str | None = None) -> dict[str, str]:
    """Writes ``text`` with the latest checkpoint of ``workdir``: SVG, PNG and the
    window's attention picture. Returns their paths (and whether it finished)."""
    path = os.path.join(workdir, DATA_RECORD)
    if not os.path.exists(path):
      raise UserError(f"{path} does not exist: the run in {workdir} has not finished an "
                      "epoch yet (the data scale is recorded at the end of each epoch).")
    with open(path) as f:
      record = json.load(f)
    model = build_model(self.config, record["num_symbols"])
    params = restore_params(self.config, self, model, workdir)
    if out_base is None:
      slug = re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_")[:40] or "text"
      out_base = os.path.join(workdir, "samples", f"{slug}_bias{bias:g}_seed{seed}")
    return self._write(lambda moves: sampling.make_generator(model, moves), params,
                       record, text, seed=seed, bias=bias, out_base=out_base)

  def _write(self, generator, params, record, text, *, seed, bias,
             out_base) -> dict[str, str]:
    """Writes ``text`` with the model's sampler for a number of moves,
    ``generator(moves)``, at ``params``: the pictures' paths."""
    ids = sampling.text_ids(text, record["alphabet"])
    if not len(ids):
      raise UserError("The text to write is empty.")
    # Lines average about 20 moves per character; leave room for slow writers.
    max_steps = int(self.config.get("sample_max_steps", 0)) or 40 * len(ids) + 100
    generate = generator(max_steps)
    sample = sampling.write_text(generate, params, ids, seed, bias)
    title = f"{text!r} (norm={self.config.norm}, bias={bias:g}, seed={seed}" + (
        ")" if sample["finished"] else f", stopped at {max_steps} moves)")
    paths = pictures.save_sample(sample, text, record["offset_scale"], out_base, title)
    return {**paths, "finished": sample["finished"], "moves": len(sample["moves"])}


def real_moves(arrays) -> np.ndarray:
  """``[N, T]``: which steps of a split's padded lines are real pen moves."""
  return np.arange(arrays["strokes"].shape[1]) < arrays["length"][:, None]


def write_data_record(workdir: str, info: dict) -> dict:
  """What turns outputs back into pen moves: offset scale, alphabet, sizes."""
  record = {k: info[k] for k in ("alphabet", "num_symbols", "offset_scale", "max_points",
                                 "max_chars")}
  with open(os.path.join(workdir, DATA_RECORD), "w") as f:
    json.dump(record, f, indent=2)
  return record


def restore_params(config, task: Task, model: HandwritingSynthesis, workdir: str):
  """The parameters of the latest checkpoint, restored without loading any data:
  their shapes depend only on the config and the alphabet."""
  n = config.batch_size
  examples = {"strokes": np.zeros((n, 2, 3), np.float32), "length": np.ones(n, np.int32),
              "text": np.zeros((n, 1), np.int32), "text_length": np.ones(n, np.int32)}
  return TrainStateInitializer(config, task, model).from_checkpoint(workdir, examples)[0].params
