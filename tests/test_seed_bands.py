"""The benchmark's figures: each setting's mean over seeds with a 95% t-band, worked out
by hand on constructed runs, and the commands that draw them."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import types

import pytest

from lnorm import cli
from lnorm.analysis import plotting, seed_bands
from lnorm.analysis.runs import load_runs
from lnorm.sweeps import benchmark as bench
from lnorm.sweeps import benchmark_suite as suite
from lnorm.training.defaults import DIVERGED_AT

# scipy.stats.t.ppf(0.975, 2): the 95% two-sided quantile with three seeds.
T_2 = 4.302652729911275


def write_run(root, norm, seed, errors, steps=(5, 10, 15), extra=None):
  workdir = os.path.join(root, f"norm={norm},seed={seed}")
  os.makedirs(workdir)
  config = {"experiment": "perm_mnist", "norm": norm, "seed": seed, "batch_size": 4,
            **(extra or {})}
  with open(os.path.join(workdir, "config.json"), "w") as f:
    json.dump({"config": config, "data": {}}, f)
  with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
    for step, error in zip(steps, errors):
      record = {"step": step, "epoch": step / 15, "test/error": error}
      if step == 15:  # The epoch's end: a finished run.
        record["time/epoch_seconds"] = 1.0
      f.write(json.dumps(record) + "\n")


@pytest.fixture
def three_seeds(tmp_path):
  root = str(tmp_path / "runs")
  write_run(root, "ln", 0, (0.4, 0.2, 0.1))
  write_run(root, "ln", 1, (0.5, 0.3, 0.2))
  write_run(root, "ln", 2, (0.6, 0.4, 0.3))
  write_run(root, "none", 0, (0.7, 0.6, 0.5))
  write_run(root, "none", 1, (0.7, 0.6, 0.5))
  return root


def test_the_band_is_the_mean_and_t_interval_over_seeds(three_seeds):
  bands = {b.label: b for b in seed_bands.bands(load_runs([three_seeds]), "test/error")}
  assert sorted(bands) == ["norm=ln", "norm=none"]
  ln = bands["norm=ln"]
  assert ln.seeds == 3 and ln.xs == (5.0, 10.0, 15.0)
  assert ln.mean == pytest.approx((0.5, 0.3, 0.2))
  # Each point's three values are the mean +- 0.1: standard error 0.1 / sqrt(3).
  half = T_2 * 0.1 / math.sqrt(3)
  assert ln.low == pytest.approx(tuple(m - half for m in ln.mean))
  assert ln.high == pytest.approx(tuple(m + half for m in ln.mean))
  none = bands["norm=none"]  # Seeds that agree: a band of no width.
  assert none.low == pytest.approx(none.mean) and none.high == pytest.approx(none.mean)


def test_only_points_every_seed_logged_are_kept(tmp_path):
  root = str(tmp_path / "runs")
  write_run(root, "ln", 0, (0.4, 0.2, 0.1))
  write_run(root, "ln", 1, (0.5, 0.3), steps=(5, 10))  # Stopped early.
  write_run(root, "ln", 2, (0.6, float("nan"), 0.3))  # Not finite at step 10.
  (band,) = seed_bands.bands(load_runs([root]), "test/error")
  assert band.xs == (5.0,) and band.mean == pytest.approx((0.5,))


def test_a_field_only_newer_runs_have_does_not_split_a_setting(tmp_path):
  root = str(tmp_path / "runs")
  write_run(root, "ln", 0, (0.4, 0.2, 0.1))
  write_run(root, "ln", 1, (0.5, 0.3, 0.2), extra={"norm_options.dyt.alpha_init": 0.5})
  (band,) = seed_bands.bands(load_runs([root]), "test/error")
  assert band.seeds == 2


def test_one_seed_draws_a_line_without_a_band(tmp_path):
  root = str(tmp_path / "runs")
  write_run(root, "ln", 0, (0.4, 0.2, 0.1))
  write_run(root, "none", 0, (0.7, 0.6, 0.5))
  bands = seed_bands.bands(load_runs([root]), "test/error")
  assert [b.seeds for b in bands] == [1, 1]
  assert all(math.isnan(v) for b in bands for v in b.low)


def test_the_legend_names_diverged_seeds(tmp_path, monkeypatch):
  root = str(tmp_path / "runs")
  write_run(root, "ln", 0, (0.4, 0.2, 0.1))
  write_run(root, "ln", 1, (0.5,), steps=(5,))
  with open(os.path.join(root, "norm=ln,seed=1", "metrics.jsonl"), "a") as f:
    f.write(json.dumps({"step": 7, DIVERGED_AT: 7}) + "\n")
  write_run(root, "none", 0, ())  # Stopped before its first evaluation.
  with open(os.path.join(root, "norm=none,seed=0", "metrics.jsonl"), "w") as f:
    f.write(json.dumps({"step": 0, DIVERGED_AT: 0}) + "\n")
  captured = {}
  monkeypatch.setattr(plotting, "_save", lambda fig, out: captured.setdefault("fig", fig))
  plotting.plot_seed_bands(load_runs([root]), ["test/error"], "unused")
  (ax,) = captured["fig"].axes
  # Only what is drawn is in the legend (issue 45: an entry with no line was empty);
  # the setting without a point is named in the legend's title.
  assert [line.get_label() for line in ax.get_lines()] == ["norm=ln (2 seeds, 1 diverged)"]
  legend = ax.get_legend()
  assert [t.get_text() for t in legend.get_texts()] == ["norm=ln (2 seeds, 1 diverged)"]
  assert legend.get_title().get_text() == (
      "not drawn (no point that every seed logged):\nnorm=none (1 seed, 1 diverged)")


def test_a_log_axis_starts_at_the_first_update(tmp_path, monkeypatch):
  root = str(tmp_path / "runs")
  write_run(root, "ln", 0, (0.9, 0.4, 0.2), steps=(0, 10, 15))
  write_run(root, "ln", 1, (0.9, 0.6, 0.4), steps=(0, 10, 15))
  captured = {}
  monkeypatch.setattr(plotting, "_save", lambda fig, out: captured.setdefault("fig", fig))
  plotting.plot_seed_bands(load_runs([root]), ["test/error"], "unused", logx=True)
  (ax,) = captured["fig"].axes
  (line,) = ax.get_lines()
  assert ax.get_xscale() == "log" and list(line.get_xdata()) == [10.0, 15.0]
  assert list(line.get_ydata()) == pytest.approx([0.5, 0.3])


def test_plot_over_seeds_draws_one_line_and_band_per_setting(three_seeds, monkeypatch):
  captured = {}
  monkeypatch.setattr(plotting, "_save", lambda fig, out: captured.setdefault("fig", fig)
                      and [out + ".png", out + ".svg"])
  plotting.plot_seed_bands(load_runs([three_seeds]), ["test/error"], "unused")
  (ax,) = captured["fig"].axes
  labels = sorted(line.get_label() for line in ax.get_lines())
  assert labels == ["norm=ln (3 seeds)", "norm=none (2 seeds)"]
  assert len(ax.collections) == 2  # One band each.
  ln = next(line for line in ax.get_lines() if line.get_label().startswith("norm=ln"))
  assert ln.get_color() == plotting.NORM_COLORS["ln"]


def test_settings_that_share_a_normalizer_get_colours_of_their_own(tmp_path, monkeypatch):
  # The Transformer's placement cells are all LN: one colour would hide which is which.
  roots = [str(tmp_path / p) for p in ("post", "pre")]
  for root, placement in zip(roots, ("post", "pre")):
    for seed in (0, 1):
      write_run(root, "ln", seed, (0.9, 0.5, 0.3 + seed / 10), extra={"placement": placement})
  captured = {}
  monkeypatch.setattr(plotting, "_save", lambda fig, out: captured.setdefault("fig", fig))
  plotting.plot_seed_bands(load_runs(roots), ["test/error"], "unused")
  (ax,) = captured["fig"].axes
  colours = {line.get_label(): line.get_color() for line in ax.get_lines()}
  assert len(colours) == 2 and len(set(colours.values())) == 2, colours


def test_the_plot_command_writes_the_figure_and_refuses_a_figure_name(three_seeds, capsys):
  out = os.path.join(three_seeds, "bands")
  assert cli.main(["plot", three_seeds, "--metric", "test/error", "--x", "step",
                   "--over-seeds", "--out", out]) == 0
  assert os.path.exists(out + ".png") and os.path.exists(out + ".svg")
  assert cli.main(["plot", three_seeds, "--figure", "ln-fig6", "--over-seeds"]) == 2
  assert "--over-seeds" in capsys.readouterr().err


def test_the_plot_command_refuses_a_target_over_seeds(three_seeds, capsys):
  out = os.path.join(three_seeds, "bands")
  assert cli.main(["plot", three_seeds, "--metric", "test/error", "--x", "step",
                   "--over-seeds", "--target", "0.3", "--out", out]) == 2
  assert "--target" in capsys.readouterr().err and not os.path.exists(out + ".png")


def test_benchmark_figures_draw_each_experiment_with_records(three_seeds, tmp_path):
  records = str(tmp_path / "results")
  os.makedirs(records)
  os.rename(three_seeds, os.path.join(records, "perm_mnist"))
  # As the benchmark records them: under the rule's hash, with a validation curve.
  for run in os.listdir(os.path.join(records, "perm_mnist")):
    path = os.path.join(records, "perm_mnist", run)
    with open(os.path.join(path, "config.json")) as f:
      record = json.load(f)
    experiment = suite.BY_NAME["perm_mnist"]
    # The config its command runs now, the hash included: another would be stale.
    record["config"] = bench.command_config(
        experiment, "cpu", experiment.scales["cpu"].variants[0], record["config"]["norm"],
        record["config"]["seed"])
    with open(os.path.join(path, "config.json"), "w") as f:
      json.dump(record, f)
    with open(os.path.join(path, "metrics.jsonl")) as f:
      points = [json.loads(line) for line in f]
    with open(os.path.join(path, "metrics.jsonl"), "w") as f:
      f.writelines(json.dumps({**p, "validation/error": p["test/error"]}) + "\n"
                   for p in points)
  (plan,) = bench.plans([suite.BY_NAME["perm_mnist"]], "cpu", str(tmp_path / "w"),
                        ["none", "ln"], [0, 1, 2])
  report = bench.build_report([plan], records, "cpu")
  paths = bench.write_figures(report, records, str(tmp_path / "figures"))
  assert sorted(os.path.basename(p) for p in paths) == ["perm_mnist.png", "perm_mnist.svg"]
  # A second experiment's figure too (the suite has several; one loop ended at the first).
  second = types.SimpleNamespace(
      scale=report.scale, judged={**report.judged, "copy": report.judged["perm_mnist"]},
      rows=report.rows + [dataclasses.replace(report.rows[0], experiment="copy")])
  paths = bench.write_figures(second, records, str(tmp_path / "figures"))
  assert sorted(os.path.basename(p) for p in paths) == [
      "copy.png", "copy.svg", "perm_mnist.png", "perm_mnist.svg"]


# --- readable with many settings (issue 45: the attentive reader's figure) -----------------


def _window(artist, fig):
  return artist.get_window_extent(fig.canvas.get_renderer())


def test_the_legend_sits_outside_the_curves(three_seeds, monkeypatch):
  captured = {}
  monkeypatch.setattr(plotting, "_save", lambda fig, out: captured.setdefault("fig", fig))
  plotting.plot_seed_bands(load_runs([three_seeds]), ["test/error"], "unused")
  fig = captured["fig"]
  fig.canvas.draw()
  (ax,) = fig.axes
  legend, axes = _window(ax.get_legend(), fig), _window(ax, fig)
  assert legend.x0 >= axes.x1  # To the right of the axes, never over a curve.


@pytest.fixture
def many_settings(tmp_path):
  """MAX_BANDS_PER_PANEL + 1 settings of two seeds, the last without a common point."""
  root = str(tmp_path / "runs")
  norms = ["none", "ln", "rms", "dyt"][:plotting.MAX_BANDS_PER_PANEL + 1]
  for i, norm in enumerate(norms[:-1]):
    for seed in (0, 1):
      write_run(root, norm, seed, (0.5 - 0.1 * i, 0.4 - 0.1 * i, 0.3 - 0.1 * i + 0.01 * seed))
  write_run(root, norms[-1], 0, (0.4, 0.3, 0.2))
  write_run(root, norms[-1], 1, (0.4,), steps=(7,))  # No step in common with seed 0.
  return root, norms


def test_past_the_threshold_each_setting_gets_a_panel_over_the_others_in_grey(many_settings,
                                                                              monkeypatch):
  root, norms = many_settings
  captured = {}
  monkeypatch.setattr(plotting, "_save", lambda fig, out: captured.setdefault("fig", fig))
  plotting.plot_seed_bands(load_runs([root]), ["test/error"], "unused")
  panels = {ax.get_title(): ax for ax in captured["fig"].axes if ax.get_visible()}
  assert sorted(panels) == sorted(f"norm={n} (2 seeds)" for n in norms)
  for norm in norms[:-1]:
    ax = panels[f"norm={norm} (2 seeds)"]
    own = [line for line in ax.get_lines() if line.get_label().startswith(f"norm={norm}")]
    grey = [line for line in ax.get_lines() if line.get_color() == "0.75"]
    assert len(own) == 1 and own[0].get_color() == plotting.NORM_COLORS[norm]
    assert len(grey) == len(norms) - 2  # The other drawn settings' means, behind.
    assert len(ax.collections) == 1 and ax.get_legend() is None  # Its band; no legend.
  last = panels[f"norm={norms[-1]} (2 seeds)"]  # No common point: its panel says so.
  assert [t.get_text() for t in last.texts] == ["no point that every seed logged"]
  assert not [l for l in last.get_lines() if l.get_color() != "0.75"]


def test_at_the_threshold_the_settings_share_one_panel(many_settings, monkeypatch):
  root, norms = many_settings
  captured = {}
  monkeypatch.setattr(plotting, "_save", lambda fig, out: captured.setdefault("fig", fig))
  runs = [r for r in load_runs([root]) if r.config["norm"] != norms[-1]]
  plotting.plot_seed_bands(runs, ["test/error"], "unused")
  (ax,) = captured["fig"].axes
  assert len(ax.get_lines()) == plotting.MAX_BANDS_PER_PANEL


def test_the_same_records_draw_the_same_bytes(three_seeds, tmp_path):
  # A regenerated figure must show in a diff only when what it draws changed: no date
  # in the SVG, no random element ids.
  runs = load_runs([three_seeds])
  first = plotting.plot_seed_bands(runs, ["test/error"], str(tmp_path / "a"))
  second = plotting.plot_seed_bands(runs, ["test/error"], str(tmp_path / "b"))
  for a, b in zip(first, second):
    with open(a, "rb") as fa, open(b, "rb") as fb:
      assert fa.read() == fb.read(), os.path.basename(a)
