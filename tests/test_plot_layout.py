"""What a plot shows a user: only the panels some run can fill, titles that do not
overlap, numbers on a short run's log axis, and files named by what was drawn."""

from __future__ import annotations

import json
import os

import matplotlib
import pytest

from lnorm import cli
from lnorm.analysis import plotting
from lnorm.analysis.runs import load_runs
from tests.test_paper_figures import drawn


def write_run(workdir, batch_size, norm, seed=0, nll=(0.5, 0.42, 0.36), lr=1e-3):
  os.makedirs(workdir)
  config = {"experiment": "perm_mnist", "norm": norm, "seed": seed, "num_epochs": len(nll),
            "batch_size": batch_size, "optimizer.learning_rate": lr}
  with open(os.path.join(workdir, "config.json"), "w") as f:
    json.dump({"config": config, "data": {}}, f)
  with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
    for i, v in enumerate(nll, 1):
      f.write(json.dumps({"step": 10 * i, "epoch": i, "time/epoch_seconds": 1.0,
                          "train/nll": v, "test/error": v / 10}) + "\n")


@pytest.fixture
def lr_sweep(tmp_path):
  """A learning-rate sweep at batch size 4 only: no run for Figure 6's batch-128 panels."""
  for lr in (1e-3, 3e-3):
    write_run(str(tmp_path / "sweep" / f"lr={lr}"), 4, "ln", lr=lr)
  return str(tmp_path / "sweep")


def test_fig6_of_a_batch_4_sweep_draws_only_its_panels(lr_sweep, monkeypatch):
  _, panels = drawn(monkeypatch, "ln-fig6", [lr_sweep])
  assert [p["title"] for p in panels] == ["train NLL, batch 4", "test error, batch 4"]
  assert all(len(p["lines"]) == 2 for p in panels)


def _render(monkeypatch, draw):
  captured = {}
  monkeypatch.setattr(plotting, "_save", lambda fig, out: captured.setdefault("fig", fig))
  draw()
  fig = captured["fig"]
  fig.canvas.draw()
  return fig


def test_a_short_runs_log_axis_has_numbers(lr_sweep, monkeypatch):
  # train/nll from 0.5 to 0.36: within one decade, so no major tick is in view.
  fig = _render(monkeypatch, lambda: plotting.plot_figure("ln-fig6", load_runs([lr_sweep]),
                                                          "unused"))
  ax = next(a for a in fig.axes if a.get_title() == "train NLL, batch 4")
  assert ax.get_yscale() == "log"
  labels = [t.get_text() for t in ax.yaxis.get_ticklabels(which="both")
            if t.get_visible() and 0.36 <= t.get_position()[1] <= 0.5]
  assert any(labels), "no y-axis numbers in the panel's range"
  matplotlib.pyplot.close(fig)


@pytest.mark.parametrize("draw", ["figure", "metric"])
def test_single_panel_titles_do_not_overlap(lr_sweep, monkeypatch, draw):
  runs = load_runs([lr_sweep])
  if draw == "figure":
    # Figure 2's layout (one panel, a long description) on perm_mnist runs' metric.
    spec = plotting.FIGURES["ln-fig2"]
    monkeypatch.setitem(plotting.FIGURES, "one", plotting.Figure(
        "perm_mnist", spec.description, (plotting.Panel(("test/error",), {}, "test error"),),
        columns=1, x="step"))
    fig = _render(monkeypatch, lambda: plotting.plot_figure("one", runs, "unused"))
  else:
    fig = _render(monkeypatch, lambda: plotting.plot_metrics(runs, ["test/error"], "unused"))
  renderer = fig.canvas.get_renderer()
  (ax,) = [a for a in fig.axes if a.get_visible()]
  top = fig._suptitle.get_window_extent(renderer)  # pylint: disable=protected-access
  assert not top.overlaps(ax.title.get_window_extent(renderer))
  assert top.y0 >= ax.title.get_window_extent(renderer).y1
  matplotlib.pyplot.close(fig)


def test_plot_names_its_file_by_what_it_drew(lr_sweep, capsys):
  assert cli.main(["plot", lr_sweep, "--metric", "test/error"]) == 0
  assert cli.main(["plot", lr_sweep, "--metric", "train/nll", "--x", "step", "--log"]) == 0
  out = capsys.readouterr().out
  figures = os.path.join(lr_sweep, "figures")
  assert sorted(os.listdir(figures)) == [
      "test-error.png", "test-error.svg", "train-nll_by_step_log.png",
      "train-nll_by_step_log.svg"]
  assert os.path.join(figures, "test-error.png") in out
