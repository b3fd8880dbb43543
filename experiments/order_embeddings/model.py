"""Order-embeddings of images and captions (Vendrov et al. 2016; LN paper sec. 6.1;
docs/experiments.md, sec. 7), and the loss both are trained with.

  caption: word embedding 300 -> GRU 1024 (LN-GRU for norm=ln), last state over the
           real tokens (the words, then EOS when the data append it, as the authors'
           code did) -> L2-normalise -> |.|
  image:   linear D -> 1024 (D = 4096 VGG features) -> L2-normalise -> |.|

A score s(caption, image) from ``experiments.order_embeddings.retrieval`` (higher = better match) ranks
pairs: the order-violation penalty ``-||max(0, s - im)||^2`` or, for the symmetric
model of Kiros et al., the cosine (then without the absolute value).
"""

from __future__ import annotations

from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from experiments.order_embeddings import retrieval
from lnorm.models.initializers import symmetric_uniform
from lnorm.rnn import RecurrentLayer, make_gru_cell


def l2_normalize(x: jax.Array) -> jax.Array:
  # The guard only matters for an all-zero vector (a caption of no known word).
  return x * jax.lax.rsqrt(jnp.maximum(jnp.sum(jnp.square(x), -1, keepdims=True), 1e-12))


class OrderEmbedding(nn.Module):
  """``(captions [B, K, T], lengths [B, K], images [B, D]) -> embeddings``.

  Training (``train=True``, needs a 'caption' rng) embeds one caption per image, drawn
  at random (the authors' "one random caption per image per epoch": the loop shows
  every image once an epoch): ``{'captions': [B, E], 'images': [B, E]}``.
  Evaluation embeds all K captions: ``{'captions': [B, K, E], 'images': [B, E]}``.
  """

  vocab_size: int
  # ``factory(hidden_size, name=...)``: ``make_gru_cell('none')`` or ``('ln')``.
  cell: Callable[..., nn.RNNCellBase] = make_gru_cell("none")
  word_size: int = 300
  embed_size: int = 1024
  use_abs: bool = True  # Order-embeddings: True; the symmetric (cosine) model: False.

  def setup(self):
    self.word_embed = nn.Embed(self.vocab_size, self.word_size,
                               embedding_init=symmetric_uniform(0.1), name="word_embed")
    self.gru = RecurrentLayer(self.cell, self.embed_size, name="gru")
    self.image_proj = nn.Dense(self.embed_size, kernel_init=nn.initializers.glorot_uniform(),
                               name="image_proj")

  def _finish(self, x):
    x = l2_normalize(x.astype(jnp.float32))
    return jnp.abs(x) if self.use_abs else x

  def embed_captions(self, tokens, lengths, *, train: bool = False):
    """``tokens [B, T]``, ``lengths [B]`` -> ``[B, E]``: the GRU's state after the last
    real token (padding after it never reaches it)."""
    out = self.gru(self.word_embed(tokens), lengths, train=train)
    return self._finish(out.final_hidden)

  def embed_images(self, images):
    return self._finish(self.image_proj(images))

  def __call__(self, captions, lengths, images, *, train: bool = False):
    batch, per_image, steps = captions.shape
    if train:
      pick = jax.random.randint(self.make_rng("caption"), (batch,), 0, per_image)
      tokens = jnp.take_along_axis(captions, pick[:, None, None], axis=1)[:, 0]
      length = jnp.take_along_axis(lengths, pick[:, None], axis=1)[:, 0]
      caption_emb = self.embed_captions(tokens, length, train=train)
    else:
      flat = self.embed_captions(captions.reshape(batch * per_image, steps),
                                 lengths.reshape(batch * per_image), train=train)
      caption_emb = flat.reshape(batch, per_image, -1)
    return {"captions": caption_emb, "images": self.embed_images(images)}


def contrastive_loss(caption_emb, image_emb, score: str = "order", margin: float = 0.05):
  """The hinge over every non-matching pair of the batch, in both directions.

  With S = score(captions, images) ([B, B], matching pairs on the diagonal):
    caption i against image j: max(0, margin - S[i, i] + S[i, j]),
    image j against caption i: max(0, margin - S[j, j] + S[i, j]),  for i != j.
  Returns ``(total, per_example [B])``: the sum over all pairs (the authors' loss, not
  a mean) and each pair's share, its row of the first term plus its column of the
  second, which sums to the total. The margin was 0.05 for the order model and 0.2
  for the symmetric (cosine) one in the authors' ``driver.py``.
  """
  s = retrieval.score_function(score)(caption_emb, image_emb)
  positive = jnp.diagonal(s)
  off_diagonal = 1.0 - jnp.eye(s.shape[0], dtype=s.dtype)
  against_images = jnp.maximum(0.0, margin - positive[:, None] + s) * off_diagonal
  against_captions = jnp.maximum(0.0, margin - positive[None, :] + s) * off_diagonal
  per_example = jnp.sum(against_images, axis=1) + jnp.sum(against_captions, axis=0)
  return jnp.sum(per_example), per_example


def forward_macs(c, batch_size: int, words: int, feature_size: int) -> int:
  """Multiply-accumulates of the matmuls in one forward pass over a batch of
  image-caption pairs with captions padded to ``words``, for ``lnorm flops``: the GRU's
  input and recurrent maps at every padded step, and the image projection. The loss's
  [B, B] score matrix is left out: B x B x E, small beside the GRU, and no matmul at
  all under the order-violation score (an elementwise max)."""
  w, e = c.model.word_size, c.model.embed_size
  return batch_size * (words * (w * 3 * e + e * 3 * e) + feature_size * e)
