"""NumPy reference of the attentive reader, written from docs/experiments.md sec. 5
and the authors' Theano attention (``build_attention``: the ``use_dq_sims`` bilinear
term), on the LSTM reference of tests/references.py. Float64; reads the flax
parameter tree.
"""

from __future__ import annotations

import numpy as np

from tests import references as ref


def lstm_states(p, x, lengths, variant):
  """All outputs and the final h of a RecurrentLayer with a learned initial state."""
  layer = p["layer_0"]
  batch = x.shape[0]
  init = (np.broadcast_to(p["layer_0_init_0"], (batch, p["layer_0_init_0"].shape[0])),
          np.broadcast_to(p["layer_0_init_1"], (batch, p["layer_0_init_1"].shape[0])))
  outs, (_, h), _ = ref.lstm(np, layer, x, lengths, variant, train=True, init=init)
  return outs, h


def attention(p, d, mask, q, bilinear=True):
  """alpha [B, T]: softmax over the real positions of w . tanh(W_d d_t + b + W_q q +
  (V d_t).(V q)); zero at padding."""
  pre = ref.dense(d, p["att_passage"]) + ref.dense(q, p["att_question"])[:, None, :]
  if bilinear:
    sim = np.sum(ref.dense(d, p["att_bilinear"]) * ref.dense(q, p["att_bilinear"])[:, None],
                 axis=-1)
    pre = pre + sim[..., None]
  scores = ref.dense(np.tanh(pre), p["att_score"])[..., 0]
  scores = np.where(mask, scores, -np.inf)
  e = np.exp(scores - scores.max(axis=-1, keepdims=True))
  return e / e.sum(axis=-1, keepdims=True)


def forward(params, passage, passage_length, question, question_length, variant="none",
            bilinear=True):
  """(alpha, logits) of the attentive reader in evaluation mode (no dropout, no
  entity renaming); ``variant`` is the LSTM's ('none' or 'ln')."""
  p = ref.f64(params)
  embed = p["embed"]["embedding"]
  d, _ = lstm_states(p["passage_lstm"], embed[passage], passage_length, variant)
  _, q = lstm_states(p["question_lstm"], embed[question], question_length, variant)
  mask = np.arange(passage.shape[1])[None, :] < np.asarray(passage_length)[:, None]
  alpha = attention(p, d, mask, q, bilinear)
  ctx = np.einsum("bt,bth->bh", alpha, d)
  mean = (d * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
  r = np.tanh(ref.dense(ctx, p["out_context"]) + ref.dense(q, p["out_question"])
              + ref.dense(mean, p["out_mean"]))
  return alpha, ref.dense(r, p["logit"])


def cross_entropy(logits, answer):
  """-log softmax(logits)[answer] per example."""
  log_p = ref.log_softmax(np.asarray(logits, np.float64))
  return -log_p[np.arange(len(answer)), answer]
