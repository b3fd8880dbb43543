"""DRAW (Gregor et al. 2015): a recurrent VAE that reads and writes with attention.

One glimpse t, with canvas c, encoder state h_enc and decoder state h_dec:

  x_hat   = x - sigmoid(c_{t-1})
  r_t     = read(x, x_hat, h_dec_{t-1})
  h_enc_t = LSTM_enc(h_enc_{t-1}, [r_t, h_dec_{t-1}])
  z_t     = mu + sigma * eps_t,  (mu, log sigma) = W h_enc_t,  eps_t ~ N(0, I) afresh
  h_dec_t = LSTM_dec(h_dec_{t-1}, z_t)
  c_t     = c_{t-1} + write(h_dec_t)

The image is Bernoulli(sigmoid(c_T)). Both LSTM inputs depend on the state of the
previous glimpse, so no input projection can leave the recurrence: the 64 glimpses run
under ``nn.scan`` (compiled once, not unrolled). Initial states and canvas are zero.

Gaussian attention (DRAW paper sec. 3.2): five numbers from a linear map of h_dec,
(g~x, g~y, log sigma^2, log delta~, log gamma), give an N x N grid of filters with
centre g = (A+1)/2 (g~+1), stride delta = (max(A,B)-1)/(N-1) delta~, variance sigma^2
and intensity gamma. Read and write have their own maps. Pixel and filter indices are
1-based, as in the paper's formulas, so g~ = 0 is the image centre and the grid is
symmetric about g.
"""

from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

#: Added to the filter normalizers: a filter whose centre lies far outside the image
#: has all its weights underflow to 0.
FILTER_EPS = 1e-8
#: The noise of evaluation when the caller gives no 'sample' RNG: fixed, so that the
#: one-sample bound of every epoch is computed with the same noise.
EVAL_NOISE_SEED = 0


# --- Gaussian attention ----------------------------------------------------------------


def attention_params(p: jax.Array, n: int, height: int, width: int) -> dict[str, jax.Array]:
  """The five outputs of an attention map ``p [..., 5]`` in image coordinates (1-based)."""
  gx_, gy_, log_var, log_delta, log_gamma = jnp.split(p, 5, axis=-1)
  return {
      "gx": (width + 1) / 2 * (gx_[..., 0] + 1),
      "gy": (height + 1) / 2 * (gy_[..., 0] + 1),
      "delta": (max(height, width) - 1) / max(n - 1, 1) * jnp.exp(log_delta[..., 0]),
      "var": jnp.exp(log_var[..., 0]),
      "gamma": jnp.exp(log_gamma[..., 0]),
  }


def filterbank(g: jax.Array, delta: jax.Array, var: jax.Array, n: int,
               size: int) -> jax.Array:
  """Normalised Gaussian filters along one axis: ``[B] -> [B, n, size]``.

  Filter i (1..n) is centred at mu_i = g + (i - n/2 - 0.5) delta; its weights over the
  pixels a = 1..size sum to 1.
  """
  i = jnp.arange(1, n + 1, dtype=jnp.float32)
  a = jnp.arange(1, size + 1, dtype=jnp.float32)
  mu = g[:, None] + (i - n / 2 - 0.5)[None, :] * delta[:, None]  # [B, n]
  f = jnp.exp(-jnp.square(a[None, None, :] - mu[:, :, None]) / (2 * var[:, None, None]))
  return f / (jnp.sum(f, axis=-1, keepdims=True) + FILTER_EPS)


def filters(att: dict[str, jax.Array], n: int, height: int, width: int):
  """(F_y [B, n, H], F_x [B, n, W]) of one attention."""
  fy = filterbank(att["gy"], att["delta"], att["var"], n, height)
  fx = filterbank(att["gx"], att["delta"], att["var"], n, width)
  return fy, fx


def read_glimpse(image: jax.Array, fy: jax.Array, fx: jax.Array) -> jax.Array:
  """``F_y image F_x^T``: ``[B, H, W] -> [B, n, n]``."""
  return jnp.einsum("bnh,bhw,bmw->bnm", fy, image, fx)


def write_patch(patch: jax.Array, fy: jax.Array, fx: jax.Array) -> jax.Array:
  """``F_y^T patch F_x``: ``[B, n, n] -> [B, H, W]``."""
  return jnp.einsum("bnh,bnm,bmw->bhw", fy, patch, fx)


# --- one glimpse ----------------------------------------------------------------------


class Glimpse(nn.Module):
  """One DRAW step; ``nn.scan`` runs it ``num_glimpses`` times.

  ``carry = (enc_carry, dec_carry, canvas)``; the scanned input is the step's noise
  ``[B, Z]``; the image ``[B, H, W]`` is broadcast. Returns the step's KL ``[B]`` (and,
  with ``trace``, the canvas and the attention parameters for pictures). With
  ``generate`` the encoder is skipped and z_t is the prior noise itself.
  """

  cell: Callable[..., nn.Module]  # lnorm.rnn LSTM factory: cell(hidden_size, name=)
  hidden_size: int
  latent_size: int
  image_shape: tuple[int, int]
  read_n: int  # 0: no attention, read the whole image
  write_n: int  # 0: no attention, write the whole canvas
  train: bool = False
  generate: bool = False
  trace: bool = False

  def setup(self):
    height, width = self.image_shape
    self.encoder = self.cell(self.hidden_size, name="encoder")
    self.decoder = self.cell(self.hidden_size, name="decoder")
    self.posterior = nn.Dense(2 * self.latent_size, name="posterior")
    if self.read_n:
      self.read_attention = nn.Dense(5, name="read_attention")
    if self.write_n:
      self.write_attention = nn.Dense(5, name="write_attention")
    patch = self.write_n ** 2 if self.write_n else height * width
    self.write = nn.Dense(patch, name="write")

  def _step(self, cell: nn.Module, carry, x, t):
    """One LSTM step; the input projection happens here, per step, as x depends on
    the state."""
    gates_x = cell.project(x[None], train=self.train)[0]
    return cell(carry, (gates_x, t, None), train=self.train)

  def _read(self, image, error, h_dec):
    if not self.read_n:
      return jnp.concatenate([image.reshape(image.shape[0], -1),
                              error.reshape(error.shape[0], -1)], axis=-1), None
    height, width = self.image_shape
    att = attention_params(self.read_attention(h_dec), self.read_n, height, width)
    fy, fx = filters(att, self.read_n, height, width)
    gamma = att["gamma"][:, None, None]
    r = jnp.concatenate([gamma * read_glimpse(image, fy, fx),
                         gamma * read_glimpse(error, fy, fx)], axis=-1)
    return r.reshape(r.shape[0], -1), att

  def _write(self, h_dec):
    height, width = self.image_shape
    w = self.write(h_dec)
    if not self.write_n:
      return w.reshape(-1, height, width), None
    att = attention_params(self.write_attention(h_dec), self.write_n, height, width)
    fy, fx = filters(att, self.write_n, height, width)
    patch = w.reshape(-1, self.write_n, self.write_n)
    return write_patch(patch, fy, fx) / att["gamma"][:, None, None], att

  def __call__(self, carry, eps, image):
    enc_carry, dec_carry, canvas, t = carry
    h_dec = self.decoder.output(dec_carry)
    out: dict[str, Any] = {}
    if self.generate:
      z = eps
      out["kl"] = jnp.zeros(eps.shape[:1], jnp.float32)
    else:
      r, read_att = self._read(image, image - nn.sigmoid(canvas), h_dec)
      enc_carry, h_enc = self._step(self.encoder, enc_carry,
                                    jnp.concatenate([r, h_dec], axis=-1), t)
      mu, log_sigma = jnp.split(self.posterior(h_enc), 2, axis=-1)
      sigma = jnp.exp(log_sigma)
      z = mu + sigma * eps
      out["kl"] = gaussian_kl(mu, log_sigma)
      if self.trace:
        out["read"] = read_att
    dec_carry, h_dec = self._step(self.decoder, dec_carry, z, t)
    delta, write_att = self._write(h_dec)
    canvas = canvas + delta
    if self.trace:
      out["canvas"] = nn.sigmoid(canvas)
      out["write"] = write_att
    return (enc_carry, dec_carry, canvas, t + 1), out


def gaussian_kl(mu: jax.Array, log_sigma: jax.Array) -> jax.Array:
  """KL(N(mu, sigma^2) || N(0, 1)) summed over the last axis, exact:
  ``0.5 * sum(mu^2 + sigma^2 - 2 log sigma - 1)``."""
  return 0.5 * jnp.sum(jnp.square(mu) + jnp.exp(2 * log_sigma) - 2 * log_sigma - 1, axis=-1)


# --- the network ----------------------------------------------------------------------


class Draw(nn.Module):
  """DRAW over images ``[B, H, W]`` in [0, 1].

  ``__call__`` returns ``{'logits': c_T [B, H, W], 'kl': [B]}`` (the KL summed over
  glimpses), plus ``'trace'`` (per-glimpse canvases and attention, time-major) when
  ``trace``. With ``generate=True`` the input only gives the batch size and the
  canvas is drawn from the prior.
  """

  cell: Callable[..., nn.Module]
  hidden_size: int = 256
  latent_size: int = 100
  num_glimpses: int = 64
  read_n: int = 2
  write_n: int = 5
  image_shape: tuple[int, int] = (28, 28)
  trace: bool = False
  unroll: int = 1  # glimpses per scan iteration (num_glimpses: a fully unrolled loop)

  @nn.compact
  def __call__(self, images, *, train: bool = False, generate: bool = False):
    batch = images.shape[0]
    images = images.astype(jnp.float32)
    # Fresh noise for every glimpse, drawn up front and scanned over.
    key = (self.make_rng("sample") if self.has_rng("sample")
           else jax.random.key(EVAL_NOISE_SEED))
    eps = jax.random.normal(key, (self.num_glimpses, batch, self.latent_size))
    glimpses = nn.scan(Glimpse, variable_broadcast="params", split_rngs={"params": False},
                       in_axes=(0, nn.broadcast), length=self.num_glimpses,
                       unroll=self.unroll)(
        cell=self.cell, hidden_size=self.hidden_size, latent_size=self.latent_size,
        image_shape=tuple(self.image_shape), read_n=self.read_n, write_n=self.write_n,
        train=train, generate=generate, trace=self.trace, name="glimpses")
    zeros = jnp.zeros((batch, self.hidden_size), jnp.float32)
    carry = ((zeros, zeros), (zeros, zeros), jnp.zeros_like(images), jnp.int32(0))
    (_, _, canvas, _), out = glimpses(carry, eps, images)
    result = {"logits": canvas, "kl": jnp.sum(out.pop("kl"), axis=0)}
    if self.trace:
      result["trace"] = out
    return result


def forward_macs(c, batch_size: int, image_hw: tuple[int, int] = (28, 28)) -> int:
  """Multiply-accumulates of the matmuls in one forward pass over a batch, for
  ``lnorm flops``: per glimpse, the read (attention map and filters, or the whole
  image), the encoder LSTM, the posterior, the decoder LSTM and the write."""
  h, z, t = c.hidden_size, c.latent_size, c.num_glimpses
  rows, cols = image_hw
  pixels = rows * cols
  rn = c.read_n if c.attention else 0
  wn = c.write_n if c.attention else 0

  def attend(n):  # F_y x F_x^T (or its transpose for writing): two small matmuls
    return n * rows * cols + n * n * cols

  read_size = 2 * rn * rn if rn else 2 * pixels
  per_glimpse = (
      ((h * 5 + 2 * attend(rn)) if rn else 0)  # read attention map, x and x_hat
      + (read_size + h) * 4 * h + h * 4 * h  # encoder LSTM
      + h * 2 * z  # posterior
      + z * 4 * h + h * 4 * h  # decoder LSTM
      + h * (wn * wn if wn else pixels)  # write patch / full canvas
      + ((h * 5 + attend(wn)) if wn else 0))  # write attention map and F_y^T w F_x
  return batch_size * t * per_glimpse
