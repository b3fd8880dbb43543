"""DRAW on binarized MNIST (LN paper sec. 6.4, Figure 4).

The loss is the negative variational bound in nats per image: the Bernoulli
reconstruction term -log p(x | c_T) summed over the 784 pixels plus the exact
Gaussian KL summed over the glimpses. Training draws fresh noise every step (the
'sample' RNG stream); evaluation uses one fixed noise sample per example, so the
reported bound is the DRAW paper's one-sample estimate, the same noise every epoch.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments.draw import model as model_lib
from experiments.draw import pictures
from experiments.draw.model import Draw
from lnorm.evaluation import trivial
from lnorm.normalization import PER_EXAMPLE_NORMS
from lnorm.rnn import cell_options, make_lstm_cell
from lnorm.training.task import Task as BaseTask

#: Examples in the sample grid and which test image the canvas strip follows.
NUM_SAMPLES = 64
STRIP_EXAMPLE = 0


class Task(BaseTask):
  # Each per-example normalizer on the whole LSTM or, as <name>_cell, on c only.
  norms = ("none", "wn") + tuple(
      v for name in PER_EXAMPLE_NORMS for v in (f"{name}_cell", name))
  rng_streams = ("sample",)

  def build_model(self, dataset):
    c = self.config
    image_shape = tuple(dataset.info.get("image_shape", (28, 28)))
    cell = make_lstm_cell(c.norm, forget_bias=c.forget_bias, **cell_options(c))
    attention = c.attention
    return Draw(cell=cell, hidden_size=c.hidden_size, latent_size=c.latent_size,
                num_glimpses=c.num_glimpses, read_n=c.read_n if attention else 0,
                write_n=c.write_n if attention else 0, image_shape=image_shape,
                unroll=c.get("scan_unroll", 1))

  def forward_macs(self, dataset, batch):
    del dataset
    image = batch["image"]
    return model_lib.forward_macs(self.config, image.shape[0], image.shape[1:3])

  def model_inputs(self, batch):
    return (batch["image"].astype(jnp.float32),)

  def loss_and_metrics(self, outputs, batch, model):
    del model  # Unused.
    return bound_metrics(outputs, batch["image"])

  def trivial_baseline(self, dataset):
    """Every pixel its own Bernoulli with the training images' mean: its exact
    -log p(x) in nats per image, as ``nll_bound`` (a model without latents has no KL,
    so its bound is its likelihood)."""
    pixels = trivial.independent_bernoulli(dataset.splits[self.train_split()]["image"])
    return trivial.record("independent Bernoulli pixels (training pixel means)", {
        f"{split}/nll_bound": float(np.mean(trivial.independent_bernoulli_nll(
            pixels, dataset.splits[split]["image"])))
        for split in trivial.held_out_splits(dataset, self.train_split())})

  def end_of_epoch(self, run, state, workdir, step, writer):
    """Writes the sample grid and the canvas strip of this epoch and logs them."""
    if jax.process_index() != 0:
      return None
    model = run.model
    generate, reconstruct = run.compiled("pictures", lambda: picture_fns(model))
    params = jax.device_get(state.params)
    key = jax.random.fold_in(jax.random.key(self.config.seed), step)
    height, width = model.image_shape
    samples = generate(params, jnp.zeros((NUM_SAMPLES, height, width)), key)
    image = run.dataset.splits["test"]["image"][STRIP_EXAMPLE:STRIP_EXAMPLE + 1]
    trace = reconstruct(params, jnp.asarray(image, jnp.float32), key)
    out_dir = os.path.join(workdir, "images")
    os.makedirs(out_dir, exist_ok=True)
    paths = {
        "samples": os.path.join(out_dir, f"samples_{step:08d}.png"),
        "canvas_strip": os.path.join(out_dir, f"canvas_strip_{step:08d}.png"),
    }
    pictures.save_samples(np.asarray(samples["trace"]["canvas"][-1]), paths["samples"])
    pictures.save_canvas_strip(
        jax.device_get(trace["trace"]), paths["canvas_strip"], image_shape=(height, width),
        sizes={"read": model.read_n, "write": model.write_n})
    writer.write_images(step, paths)
    return None


def bound_metrics(outputs, images):
  """(mean negative bound, per-example 'nll_bound', 'reconstruction', 'kl')."""
  logits = outputs["logits"].astype(jnp.float32)
  target = images.astype(jnp.float32)
  reconstruction = jnp.sum(optax.sigmoid_binary_cross_entropy(logits, target),
                           axis=tuple(range(1, logits.ndim)))
  kl = outputs["kl"]
  total = reconstruction + kl
  return jnp.mean(total), {"nll_bound": total, "reconstruction": reconstruction, "kl": kl}


def picture_fns(model: Draw):
  """``(generate, reconstruct)``: ``model`` jitted to draw samples and to trace a
  reconstruction, glimpse by glimpse (compiled once per run: ``run.compiled``)."""
  model = model.clone(trace=True)

  @jax.jit
  def generate(params, shape_like, key):
    return model.apply({"params": params}, shape_like, train=False, generate=True,
                       rngs={"sample": key})

  @jax.jit
  def reconstruct(params, images, key):
    return model.apply({"params": params}, images, train=False, rngs={"sample": key})

  return generate, reconstruct
