"""``lnorm plot --figure``: every LN-paper figure drawn from metrics.jsonl files written
here, in the paper's layout, and a clear error for runs of another experiment."""

from __future__ import annotations

import json
import math
import os

import matplotlib
import pytest

from lnorm import cli
from lnorm.analysis import plotting
from lnorm.commands import plot as plot_command
from lnorm.errors import UserError
from lnorm.analysis.runs import load_runs


def write_run(workdir, experiment, norm, records):
  """A run directory as `lnorm train` leaves it (config fields in alphabetical order)."""
  os.makedirs(workdir)
  config = {"experiment": experiment, "norm": norm, "seed": 0, "num_epochs": 1}
  with open(os.path.join(workdir, "config.json"), "w") as f:
    json.dump({"config": config, "data": {}}, f, sort_keys=True)
  with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
    for r in records:
      f.write(json.dumps(r) + "\n")


def drawn(monkeypatch, name, paths, **kw):
  """Lays out figure ``name`` and returns, per visible panel, its title, axis scales,
  lines {label: (x, y)} and texts, instead of writing files."""
  captured = {}
  with monkeypatch.context() as m:
    m.setattr(plotting, "_save", lambda fig, out: captured.setdefault("fig", fig))
    plotting.plot_figure(name, load_runs(paths), "unused", **kw)
  fig = captured["fig"]
  panels = []
  for ax in fig.axes:
    if not ax.get_visible():
      continue
    panels.append({
        "title": ax.get_title(), "xscale": ax.get_xscale(), "yscale": ax.get_yscale(),
        "xlabel": ax.get_xlabel(),
        "lines": {l.get_label(): (list(l.get_xdata()), list(l.get_ydata())) for l in ax.lines},
        "colors": {l.get_label(): matplotlib.colors.to_hex(l.get_color()) for l in ax.lines},
        "text": " ".join(" ".join(t.get_text().split()) for t in ax.texts)})
  matplotlib.pyplot.close(fig)
  return fig, panels


def test_fig1_order_embeddings_image_recall_at_k_against_updates(tmp_path, monkeypatch):
  for norm, gain in (("none", 1.0), ("ln", 2.0)):
    write_run(str(tmp_path / norm), "order_embeddings", norm,
              [{"step": s, "epoch": s / 78, **{f"validation/image_r{k}": gain * k * s / 100
                                               for k in (1, 5, 10)},
                "validation/caption_r1": 0.0} for s in (20, 40, 60)])
  fig, panels = drawn(monkeypatch, "ln-fig1", [str(tmp_path)])
  assert [p["title"] for p in panels] == [f"image retrieval R@{k} (validation)"
                                         for k in (1, 5, 10)]
  assert fig.axes[0].get_position().y0 == fig.axes[2].get_position().y0  # One row.
  r10 = panels[2]
  assert r10["xlabel"] == "updates"
  assert r10["lines"]["norm=ln"] == ([20, 40, 60], [4.0, 8.0, 12.0])
  assert r10["lines"]["norm=none"] == ([20, 40, 60], [2.0, 4.0, 6.0])


def test_fig2_attentive_reader_validation_error(tmp_path, monkeypatch):
  for norm in ("none", "bn", "bn_everywhere", "ln"):
    write_run(str(tmp_path / norm), "attentive_reader", norm,
              [{"step": s, "epoch": s / 68, "validation/error": 0.5 if s == 100 else 0.25}
               for s in (100, 200)])
  _, (panel,) = drawn(monkeypatch, "ln-fig2", [str(tmp_path)])
  assert panel["title"] == "validation error rate" and panel["xlabel"] == "updates"
  assert set(panel["lines"]) == {"norm=none", "norm=bn", "norm=bn_everywhere", "norm=ln"}
  assert panel["lines"]["norm=ln"] == ([100, 200], [0.5, 0.25])


def test_fig3_skip_thoughts_scores_and_perplexity_with_empty_panels_saying_why(
    tmp_path, monkeypatch):
  """The runs evaluated SICK and MR periodically, not CR, SUBJ or MPQA: those panels
  say what is missing; the perplexity is exp(validation/token_nll)."""
  for norm, r in (("none", 0.5), ("ln", 0.6)):
    write_run(str(tmp_path / norm), "skip_thoughts", norm, [
        {"step": 4, "epoch": 0.4, "eval/sick_pearson": r, "eval/sick_mse": 1 - r,
         "eval/mr_accuracy": 60.0},
        {"step": 8, "epoch": 0.8, "eval/sick_pearson": r + 0.1, "eval/sick_mse": 0.9 - r,
         "eval/mr_accuracy": 62.0},
        {"step": 10, "epoch": 1, "time/epoch_seconds": 1.0, "train/loss": 50.0,
         "validation/token_nll": math.log(100.0) if norm == "none" else math.log(80.0)}])
  fig, panels = drawn(monkeypatch, "ln-fig3", [str(tmp_path)])
  assert [p["title"] for p in panels] == ["SICK (r)", "SICK (MSE)", "MR", "CR", "SUBJ", "MPQA",
                                         "validation perplexity"]
  assert fig.axes[0].get_position().y0 == fig.axes[2].get_position().y0  # 3 a row.
  assert fig.axes[3].get_position().y0 < fig.axes[2].get_position().y0
  by_title = {p["title"]: p for p in panels}
  assert by_title["SICK (r)"]["lines"]["norm=ln"] == ([4, 8], [0.6, 0.7])
  assert by_title["SICK (MSE)"]["lines"]["norm=none"] == ([4, 8], [0.5, 0.4])
  for title, task in (("CR", "cr"), ("SUBJ", "subj"), ("MPQA", "mpqa")):
    assert not by_title[title]["lines"]
    assert f"no run logged eval/{task}_accuracy" in by_title[title]["text"]
    assert "periodic_eval_every_steps" in by_title[title]["text"]
  xs, ys = by_title["validation perplexity"]["lines"]["norm=ln"]
  assert xs == [10] and ys == pytest.approx([80.0])


def test_fig5_handwriting_nll_against_updates_on_a_log_axis(tmp_path, monkeypatch):
  """Held-out and training NLL per run, in the run's colour; validation (logged along
  the way) rather than test (logged once, at the end)."""
  for norm, shift in (("none", 0.0), ("ln", -100.0)):
    records = []
    for s in (50, 100, 150, 200, 250, 300):
      records.append({"step": s, "epoch": s / 300, "train/nll": 900.0 - s + shift})
      if s % 150 == 0:
        records.append({"step": s, "epoch": s / 300, "validation/nll": 1000.0 - s + shift})
    records.append({"step": 300, "epoch": 1, "time/epoch_seconds": 1.0, "train/nll": 600.0,
                    "test/nll": 690.0 + shift})
    write_run(str(tmp_path / norm), "handwriting", norm, records)
  _, (panel,) = drawn(monkeypatch, "ln-fig5", [str(tmp_path)])
  assert panel["xscale"] == "log" and panel["xlabel"] == "updates"
  assert panel["lines"]["norm=ln held out"] == ([150, 300], [750.0, 600.0])
  train_x, train_y = panel["lines"]["norm=ln train"]
  assert train_x == [50, 100, 150, 200, 250, 300, 300] and train_y[0] == 750.0
  assert panel["colors"]["norm=ln held out"] == panel["colors"]["norm=ln train"]
  assert panel["colors"]["norm=ln train"] != panel["colors"]["norm=none train"]
  # From the command line, against the paper's axis by default.
  out = str(tmp_path / "fig5")
  assert cli.main(["plot", str(tmp_path), "--figure", "ln-fig5", "--out", out]) == 0
  assert os.path.getsize(out + ".png") > 1000


def test_a_figure_of_runs_of_another_experiment_fails_clearly(tmp_path, monkeypatch, caplog):
  write_run(str(tmp_path / "st"), "skip_thoughts", "ln",
            [{"step": 4, "epoch": 0.4, "eval/sick_pearson": 0.5}])
  with pytest.raises(UserError, match=r"Figure ln-fig2 needs runs of experiment "
                     r"'attentive_reader'; the runs given are of skip_thoughts \(.*st\)\. "
                     r"Figures for those: ln-fig3\."):
    plotting.plot_figure("ln-fig2", load_runs([str(tmp_path)]), str(tmp_path / "x"))
  # Beside runs of the right experiment, the others are left out with a warning.
  write_run(str(tmp_path / "ar"), "attentive_reader", "ln",
            [{"step": 100, "epoch": 1, "validation/error": 0.5}])
  _, (panel,) = drawn(monkeypatch, "ln-fig2", [str(tmp_path)])
  assert list(panel["lines"]) == ["ar"]  # One run left: named by its directory.
  assert "left out 1 runs of skip_thoughts, not attentive_reader" in caplog.text


def test_a_figure_with_no_panel_drawn_lists_what_the_runs_logged(tmp_path):
  write_run(str(tmp_path / "ar"), "attentive_reader", "ln",
            [{"step": 100, "epoch": 1, "validation/nll": 0.5}])
  with pytest.raises(UserError, match=r"no run matches any panel \(validation error rate: "
                     r"validation/error\)\. The runs logged: validation/nll\."):
    plotting.plot_figure("ln-fig2", load_runs([str(tmp_path)]), str(tmp_path / "x"))


def test_plot_help_names_every_figure():
  for name in plotting.FIGURES:
    assert name in plot_command.FIGURE_HELP
