"""Writing a given text with a trained model, one pen move at a time (Graves 2013 sec. 5.3).

The trained network runs over whole sequences (layers 2 and 3 as ``RecurrentLayer``s),
but generation must step all three layers together, feeding each sampled move back
in. :func:`make_generator` rebuilds that step from the same parameter tree, so no
parameter is duplicated or renamed. Generation stops when the window has passed the
last character: when the weight ``phi(t, U)`` of the position one past the text
exceeds the weight of every character (Graves's rule), or after ``max_steps``.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from experiments.handwriting import mdn
from experiments.handwriting.model import HandwritingSynthesis, WindowedLSTM
from lnorm.data import strokes as strokes_lib
from lnorm.normalization import Dense

_log = logging.getLogger(__name__)


def text_ids(text: str, alphabet: str) -> np.ndarray:
  """The ids of ``text`` over the model's ``alphabet``, with a warning that names the
  characters outside it: they are written as the one 'other' symbol, which stood for
  every rare character (digits, '!', accents) in training, so the model writes some
  such character there, never the one asked for."""
  outside = sorted({ch for ch in text if ch not in alphabet})
  if outside:
    _log.warning(
        "%d character%s of the text %s outside the model's alphabet and will be written "
        "as its 'other' symbol (some rare character, not the one asked for): %s. The "
        "alphabet: %s", len(outside), "s" if len(outside) > 1 else "",
        "are" if len(outside) > 1 else "is", ", ".join(map(repr, outside)), repr(alphabet))
  return strokes_lib.encode_text(text, alphabet)


def _lstm_step(cell: nn.Module, params, carry, x):
  """One step of a ``lnorm.rnn`` cell on one input ``x [B, I]``."""

  def step(module, carry, x):
    gates_x = module.project(x[None])[0]
    mask = jnp.ones(x.shape[:1], bool)
    return module(carry, (gates_x, jnp.int32(0), mask))

  return cell.apply({"params": params}, carry, x, method=step)


def make_generator(model: HandwritingSynthesis, max_steps: int) -> Callable:
  """``generate(params, text [U], key, bias) -> (moves [max_steps, 3], phi [max_steps,
  U + 1], mixture [max_steps, 6M + 1], done [max_steps])`` for one line; moves are in
  the model's (scaled) units, and everything after the first ``done`` step is to be
  discarded."""
  layer1 = WindowedLSTM(model.cell, model.hidden_size, model.num_gaussians)
  upper = model.cell(model.hidden_size)
  output = Dense(mdn.num_outputs(model.num_components))

  @jax.jit
  def generate(params, text, key, bias):
    num_chars = text.shape[0]
    # One extra, empty position past the text: its window weight is the stop signal.
    chars = jnp.concatenate([jax.nn.one_hot(text, model.num_symbols),
                             jnp.zeros((1, model.num_symbols))])[None]
    char_mask = jnp.ones((1, num_chars + 1), bool)
    zeros = lambda n: jnp.zeros((1, n), jnp.float32)
    carry0 = (layer1.initialize_carry(1, model.num_symbols),
              tuple((zeros(model.hidden_size), zeros(model.hidden_size))
                    for _ in range(model.num_layers - 1)),
              zeros(3), jnp.zeros((), bool))

    def step(carry, inputs):
      t, step_key = inputs
      first, upper_carries, x, done = carry
      first, (h, w, phi) = layer1.apply(
          {"params": params["layer_0"]}, first, (x, t, jnp.ones((1,), bool)), chars,
          char_mask)
      hidden, below, new_upper = [h], h, []
      for n, c in enumerate(upper_carries, start=1):
        c, below = _lstm_step(upper, params[f"layer_{n}"]["layer_0"], c,
                              jnp.concatenate([x, w, below], -1))
        new_upper.append(c)
        hidden.append(below)
      raw = output.apply({"params": params["mixture"]}, jnp.concatenate(hidden, -1))
      move = mdn.sample(mdn.split(raw, model.num_components, bias), step_key)
      done = done | (phi[0, -1] > jnp.max(phi[0, :-1]))
      return (first, tuple(new_upper), move, done), (move[0], phi[0], raw[0], done)

    keys = jax.random.split(key, max_steps)
    _, outputs = jax.lax.scan(step, carry0, (jnp.arange(max_steps, dtype=jnp.int32), keys))
    return outputs

  return generate


def write_text(generate: Callable, params, text_ids: np.ndarray, seed: int,
               bias: float) -> dict[str, Any]:
  """Runs ``generate`` and cuts at the stop: 'moves' [T, 3] (scaled units), 'phi'
  [T, U] over the characters, 'mixture' [T, 6M + 1] (the raw outputs each move was
  drawn from), 'finished' (whether the window passed the text)."""
  moves, phi, mixture, done = jax.device_get(generate(params, jnp.asarray(text_ids, jnp.int32),
                                             jax.random.key(seed), jnp.float32(bias)))
  finished = bool(done.any())
  # The stopping step's move is still written: the window reached the end during it.
  length = int(np.argmax(done)) + 1 if finished else len(moves)
  return {"moves": np.asarray(moves[:length]), "phi": np.asarray(phi[:length, :-1]),
          "mixture": np.asarray(mixture[:length]), "finished": finished}
