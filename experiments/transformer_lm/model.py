"""A decoder-only Transformer language model whose normalizer and its placement are
config choices (docs/experiments.md, sec. 12).

  tokens -> embedding * sqrt(d) + positions -> L blocks -> [final norm] -> logits

Each block is causal multi-head self-attention then a two-layer MLP, each inside a
residual connection. ``placement`` says where the normalizer N sits:

* ``post`` (Vaswani et al. 2017): ``x = N(x + Attention(x))``, ``x = N(x + MLP(x))``;
* ``pre`` (Xiong et al. 2020; GPT-2): ``x = x + Attention(N(x))``,
  ``x = x + MLP(N(x))``, and one more N on the last block's output;
* ``none``: the residual sums alone, no normalizer.

The normalizer is a :class:`lnorm.normalization.Norm` (its ``layer``), so every
per-example normalizer lnorm has, and a user's by import path, goes in either place.
The attention's normalizer may differ from the others (``attention_norm``): DyT's
authors initialise its alpha higher before attention than elsewhere.

Initialisation as in the original Transformer: the linear maps Xavier-uniform with
zero biases, the embedding N(0, 1/d) and multiplied by sqrt(d) on input (so that
with tied embeddings the output logits ``x E^T`` start at unit scale), learned
positions N(0, 0.02). No dropout: the runs here are short against the corpus, and
dropout would make the normalizers' comparison depend on one more setting.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax.numpy as jnp
import numpy as np

from lnorm.normalization import Dense, Norm

PLACEMENTS = ("post", "pre", "none")
POSITIONS = ("learned", "sinusoidal")

_dense_init = nn.initializers.xavier_uniform()


def causal_mask(length: int) -> jnp.ndarray:
  """``[T, T]`` bool: query i may attend to keys j <= i."""
  return jnp.tril(jnp.ones((length, length), bool))


def sinusoidal_positions(length: int, width: int) -> np.ndarray:
  """Vaswani et al.'s ``PE[t, 2i] = sin(t / 10000^(2i/d))``, ``PE[t, 2i+1] = cos(...)``
  as ``[T, d]`` float32 (an odd ``d`` drops the last cosine)."""
  t = np.arange(length)[:, None]
  freq = 1.0 / 10000 ** (np.arange(0, width, 2) / width)
  pe = np.zeros((length, width), np.float32)
  pe[:, 0::2] = np.sin(t * freq)
  pe[:, 1::2] = np.cos(t * freq)[:, :width // 2]
  return pe


class CausalSelfAttention(nn.Module):
  """``[B, T, d] -> [B, T, d]``: ``num_heads`` heads of ``softmax(q k^T / sqrt(d_h)
  + causal) v``, their concatenation through the output map."""

  num_heads: int

  @nn.compact
  def __call__(self, x):
    batch, length, width = x.shape
    head = width // self.num_heads
    qkv = Dense(3 * width, kernel_init=_dense_init, name="qkv")(x)
    q, k, v = jnp.split(qkv.reshape(batch, length, 3, self.num_heads, head), 3, axis=2)
    q, k, v = q[:, :, 0], k[:, :, 0], v[:, :, 0]  # [B, T, H, d_h]
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(head)
    logits = jnp.where(causal_mask(length), logits, jnp.finfo(logits.dtype).min)
    weights = nn.softmax(logits, axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, length, width)
    return Dense(width, kernel_init=_dense_init, name="out")(out)


class MlpBlock(nn.Module):
  """``[..., d] -> [..., d]``: ``W_2 gelu(W_1 x + b_1) + b_2`` (GELU's tanh form)."""

  hidden_size: int

  @nn.compact
  def __call__(self, x):
    h = nn.gelu(Dense(self.hidden_size, kernel_init=_dense_init, name="hidden")(x))
    return Dense(x.shape[-1], kernel_init=_dense_init, name="output")(h)


class Block(nn.Module):
  """One Transformer layer with its normalizers placed by ``placement``."""

  num_heads: int
  mlp_size: int
  placement: str
  attention_norm: Norm
  norm: Norm

  @nn.compact
  def __call__(self, x, *, train: bool = False):
    attention = CausalSelfAttention(self.num_heads, name="attention")
    mlp = MlpBlock(self.mlp_size, name="mlp")
    if self.placement == "none":
      x = x + attention(x)
      return x + mlp(x)
    norm_1 = self.attention_norm.layer(name="attention_norm")
    norm_2 = self.norm.layer(name="mlp_norm")
    if self.placement == "pre":
      x = x + attention(norm_1(x, train=train))
      return x + mlp(norm_2(x, train=train))
    if self.placement == "post":
      x = norm_1(x + attention(x), train=train)
      return norm_2(x + mlp(x), train=train)
    raise ValueError(f"Unknown placement {self.placement!r}; valid: {', '.join(PLACEMENTS)}.")


class TransformerLM(nn.Module):
  """``tokens [B, T] -> logits [B, T, V]``: position t predicts token t + 1."""

  vocab_size: int
  num_layers: int
  width: int
  num_heads: int
  mlp_size: int
  context: int
  placement: str
  attention_norm: Norm
  norm: Norm
  positions: str = "learned"
  tie_embeddings: bool = True

  @nn.compact
  def __call__(self, tokens, *, train: bool = False):
    length = tokens.shape[1]
    embed = nn.Embed(self.vocab_size, self.width, name="embed",
                     embedding_init=nn.initializers.normal(self.width ** -0.5))
    x = embed(tokens) * math.sqrt(self.width)
    if self.positions == "learned":
      table = self.param("positions", nn.initializers.normal(0.02),
                         (self.context, self.width), jnp.float32)
    elif self.positions == "sinusoidal":
      table = jnp.asarray(sinusoidal_positions(self.context, self.width))
    else:
      raise ValueError(f"Unknown positions {self.positions!r}; valid: {', '.join(POSITIONS)}.")
    x = x + table[None, :length]
    for i in range(self.num_layers):
      x = Block(self.num_heads, self.mlp_size, self.placement, self.attention_norm,
                self.norm, name=f"block_{i}")(x, train=train)
    if self.placement == "pre":
      x = self.norm.layer(name="final_norm")(x, train=train)
    if self.tie_embeddings:
      return embed.attend(x)
    return Dense(self.vocab_size, kernel_init=_dense_init, name="output")(x)


def forward_macs(*, batch_size: int, length: int, vocab_size: int, num_layers: int,
                 width: int, mlp_size: int) -> int:
  """Multiply-accumulates of the matmuls in one forward pass over ``[B, T]`` tokens,
  for ``lnorm flops``: per token and layer the q, k, v and output maps (4 d^2) and the
  MLP (2 d m); per layer the attention logits and their weighted sum over all T x T
  pairs, the masked half included (2 T^2 d per sequence); the output layer (d V per
  token, tied or not)."""
  per_token = num_layers * (4 * width * width + 2 * width * mlp_size) + width * vocab_size
  attention = num_layers * 2 * length * length * width
  return batch_size * (length * per_token + attention)
