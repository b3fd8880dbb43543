"""``lnorm sample``'s text: characters outside the model's alphabet are named in a
warning, not quietly written as something else."""

from __future__ import annotations

import logging
import types

import numpy as np

from experiments.handwriting import sampling
from experiments.handwriting import task as handwriting_task
from lnorm.data import strokes


def warnings(caplog):
  return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_characters_outside_the_alphabet_are_named(caplog):
  with caplog.at_level(logging.WARNING):
    ids = sampling.text_ids("LN, 2016!", strokes.ALPHABET)
  (message,) = warnings(caplog)
  assert message.startswith("5 characters of the text are outside the model's alphabet")
  assert "'!', '0', '1', '2', '6'" in message
  index = {ch: i + 1 for i, ch in enumerate(strokes.ALPHABET)}
  np.testing.assert_array_equal(ids, [index["L"], index["N"], index[","], index[" "]]
                                + [strokes.OTHER] * 5)


def test_a_text_inside_the_alphabet_writes_without_a_warning(caplog):
  with caplog.at_level(logging.WARNING):
    ids = sampling.text_ids('layer "normalization".', strokes.ALPHABET)
  assert not warnings(caplog) and (ids > 0).all()
  with caplog.at_level(logging.WARNING):
    sampling.text_ids("é", "abc")  # The run's own alphabet decides.
  assert warnings(caplog) == [
      "1 character of the text is outside the model's alphabet and will be written as "
      "its 'other' symbol (some rare character, not the one asked for): 'é'. The "
      "alphabet: 'abc'"]


def test_the_handwriting_sampler_checks_its_text(monkeypatch, caplog, tmp_path):
  """Task._write, which `lnorm sample` and every epoch's sample go through, encodes the
  text with text_ids (generation stubbed out: no model is built)."""
  seen = {}

  def write_text(generate, params, ids, seed, bias):
    seen["ids"] = ids
    return {"moves": np.zeros((1, 3)), "finished": True}

  monkeypatch.setattr(sampling, "write_text", write_text)
  monkeypatch.setattr(handwriting_task.pictures, "save_sample",
                      lambda sample, text, scale, out_base, title: {"png": out_base})
  fake = types.SimpleNamespace(config=types.SimpleNamespace(get=lambda k, d=None: d,
                                                            norm="ln"))
  record = {"alphabet": strokes.ALPHABET, "offset_scale": (1.0, 1.0)}
  with caplog.at_level(logging.WARNING):
    handwriting_task.Task._write(fake, lambda moves: None, None, record, "ab 7", seed=0,
                                 bias=0.0, out_base=str(tmp_path / "x"))
  assert "'7'" in warnings(caplog)[0]
  assert seen["ids"][-1] == strokes.OTHER
