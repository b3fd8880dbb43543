"""NumPy reference of the attentive reader, written from docs/experiments.md sec. 5
and the authors' Theano attention (``build_attention``: the ``use_dq_sims`` bilinear
term), on the LSTM reference of tests/references.py. Float64; reads the flax
parameter tree.
"""

from __future__ import annotations

import numpy as np

from tests import references as ref


def lstm_states(p, x, lengths, variant, h0, c0=None):
  """All outputs and the final h of an LSTM layer started from (c0, h0) (c0 None:
  zero)."""
  batch = x.shape[0]
  c0 = np.zeros_like(h0) if c0 is None else c0
  init = (np.broadcast_to(c0, (batch, len(c0))), np.broadcast_to(h0, (batch, len(h0))))
  outs, (_, h), _ = ref.lstm(np, p["layer_0"], x, lengths, variant, train=True, init=init)
  return outs, h


def initial_state(p, which):
  """(h0, c0) of the LSTM ``which``: the model's learned h0 and c0 = 0, or, with
  ``learn_initial_cell``, the RecurrentLayer's learned (c0, h0)."""
  if f"{which}_lstm_initial_h" in p:
    return p[f"{which}_lstm_initial_h"], None
  layer = p[f"{which}_lstm"]
  return layer["layer_0_init_1"], layer["layer_0_init_0"]


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
  d, _ = lstm_states(p["passage_lstm"], embed[passage], passage_length, variant,
                     *initial_state(p, "passage"))
  _, q = lstm_states(p["question_lstm"], embed[question], question_length, variant,
                     *initial_state(p, "question"))
  mask = np.arange(passage.shape[1])[None, :] < np.asarray(passage_length)[:, None]
  alpha = attention(p, d, mask, q, bilinear)
  ctx = np.einsum("bt,bth->bh", alpha, d)
  mean = (d * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
  pre = ref.dense(ctx, p["out_context"]) + ref.dense(q, p["out_question"])
  if "out_mean" in p:  # readout_description_skip
    pre = pre + ref.dense(mean, p["out_mean"])
  r = np.tanh(pre)
  return alpha, ref.dense(r, p["logit"])


def cross_entropy(logits, answer):
  """-log softmax(logits)[answer] per example."""
  log_p = ref.log_softmax(np.asarray(logits, np.float64))
  return -log_p[np.arange(len(answer)), answer]
