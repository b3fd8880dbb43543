"""What a plot shows a user: only the panels some run can fill, titles that do not
overlap, numbers on a short run's log axis, and files named by what was drawn."""

from __future__ import annotations

import json
import logging
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


def test_fig6_of_a_batch_4_sweep_draws_only_its_panels(lr_sweep, monkeypatch, caplog):
  caplog.set_level(logging.INFO)
  _, panels = drawn(monkeypatch, "ln-fig6", [lr_sweep])
  assert [p["title"] for p in panels] == ["train NLL, batch 4", "test error, batch 4"]
  assert all(len(p["lines"]) == 2 for p in panels)
  # The log names the panels left out, not the figure: the figure was drawn.
  assert caplog.messages == [
      "Figure ln-fig6: drawn without its panels 'train NLL, batch 128', 'test error, batch "
      "128'; no run has their settings (batch_size=128)."]


# --- the figures a sweep draws: only those whose settings its members are -----------------


def write_sweep(root, members):
  """A finished sweep's folder: ``members`` maps a member's overrides (as typed) to its
  config's batch size, normalizer and learning rate."""
  entries = []
  for i, (overrides, (batch_size, norm, lr)) in enumerate(members.items()):
    write_run(os.path.join(root, f"m{i}"), batch_size, norm, seed=i, lr=lr)
    entries.append({"name": f"m{i}", "overrides": dict(overrides), "workdir": f"m{i}"})
  with open(os.path.join(root, "sweep.json"), "w") as f:
    json.dump({"members": entries}, f)
  return load_runs([root])


@pytest.mark.parametrize("members, why", [
    ({(("optimizer.learning_rate", "1e-3"),): (4, "ln", 1e-3),
      (("optimizer.learning_rate", "3e-3"),): (4, "ln", 3e-3)},
     "the sweep varies optimizer.learning_rate, which the figure does not"),
    ({(("norm", n), ("optimizer.learning_rate", lr)): (4, n, float(lr))
      for n in ("none", "ln") for lr in ("1e-3", "3e-3")},
     "the sweep varies optimizer.learning_rate, which the figure does not"),
    ({(("seed", "0"),): (4, "ln", 1e-3), (("seed", "1"),): (4, "ln", 1e-3)},
     "the sweep does not vary the normalizer, which the figure compares"),
    ({(("norm", "none"), ("batch_size", "64")): (64, "none", 1e-3),
      (("norm", "ln"), ("batch_size", "64")): (64, "ln", 1e-3)},
     "its run m0 is at batch_size=64, which no panel of the figure shows"),
    # Figure 6's settings: the normalizers at its batch sizes (one or both), any seeds.
    ({(("norm", n), ("seed", s)): (4, n, 1e-3) for n in ("none", "bn", "ln") for s in "01"},
     None),
    ({(("batch_size", str(b)), ("norm", n)): (b, n, 1e-3) for b in (128, 4)
      for n in ("none", "ln")}, None),
])
def test_a_sweep_is_a_figures_settings_only_when_its_members_are(tmp_path, members, why):
  runs = write_sweep(str(tmp_path / "sweep"), members)
  assert plotting.not_the_figures_settings(plotting.FIGURES["ln-fig6"], runs) == why


def test_a_learning_rate_sweep_draws_no_paper_figure_and_says_why(tmp_path, monkeypatch,
                                                                  caplog):
  caplog.set_level(logging.INFO)
  write_sweep(str(tmp_path / "sweep"), {
      (("optimizer.learning_rate", "1e-3"),): (128, "ln", 1e-3),
      (("optimizer.learning_rate", "3e-3"),): (128, "ln", 3e-3)})
  monkeypatch.setattr(plotting, "plot_figure", lambda *a, **k: pytest.fail("drew a figure"))
  monkeypatch.setattr(plotting, "plot_metrics", lambda runs, metrics, out, **kw: [out])
  assert plotting.sweep_figures(str(tmp_path / "sweep"), "perm_mnist") == [
      str(tmp_path / "sweep" / "figures" / "curves")]
  assert caplog.messages == ["Figure ln-fig6 not drawn: the sweep varies "
                             "optimizer.learning_rate, which the figure does not."]


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


def test_the_readers_figure_2_compares_its_ln_gains_but_not_another_corpus():
  from lnorm.analysis.runs import Run  # pylint: disable=g-import-not-at-top
  fig2 = plotting.FIGURES["ln-fig2"]

  def runs(*overrides):
    return [Run(f"m{i}", f"m{i}", {"experiment": "attentive_reader"}, {}, [], [],
                overrides=dict(o)) for i, o in enumerate(overrides)]

  gains = runs({"norm": "none"}, {"norm": "ln", "norm_options.ln.scale_init": "1.0"},
               {"norm": "ln", "norm_options.ln.scale_init": "0.1"})
  assert plotting.not_the_figures_settings(fig2, gains) is None
  # The config's paper sweep adds runs on the real CBT: not Figure 2's lines.
  cbt = gains + runs({"norm": "none", "data.source": "cbt"})
  assert plotting.not_the_figures_settings(fig2, cbt) == (
      "the sweep varies data.source, which the figure does not")
