"""Every experiment's facts are declared once, in its own spec
(experiments/<name>/spec.py, read by name through lnorm.analysis.specs): the suite,
the published numbers, the figures and the GPU check are read from the specs, the
specs follow the one list of experiments (lnorm.training.experiments), and every
config's scale grids are the suite's."""

from __future__ import annotations

import os

import pytest

from experiments.draw import spec as draw_spec
from experiments.perm_mnist import spec as perm_mnist_spec
from lnorm import config as config_lib
from lnorm.analysis import plotting
from lnorm.analysis import published
from lnorm.analysis import specs
from lnorm.gpucheck import steps as gpu_steps
from lnorm.sweeps import benchmark_suite as suite
from lnorm.sweeps import runner
from lnorm.training import experiments
from lnorm.training import task as task_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_one_list_names_the_experiments():
  # The registry is the list; training loads from it, the specs and the GPU check
  # follow it rather than naming the experiments again.
  assert task_lib.EXPERIMENTS is experiments.EXPERIMENTS
  assert [s.name for s in specs.all_specs()] == list(experiments.EXPERIMENTS)
  assert sorted(gpu_steps.EXPERIMENTS) == sorted(experiments.EXPERIMENTS)
  assert len(gpu_steps.EXPERIMENTS) == len(set(gpu_steps.EXPERIMENTS))


def test_a_registered_experiment_without_a_spec_is_refused():
  declared = {"perm_mnist": perm_mnist_spec.SPEC, "draw": draw_spec.SPEC}
  assert specs.in_registry_order(declared, ("draw", "perm_mnist")) == (draw_spec.SPEC,
                                                                        perm_mnist_spec.SPEC)
  with pytest.raises(ValueError, match="without a spec: toy, other; declare each as SPEC"):
    specs.in_registry_order(declared, ("perm_mnist", "toy", "draw", "other"))
  with pytest.raises(ValueError, match="'toy' is no experiment"):
    specs.spec("toy")


def test_a_spec_is_read_by_its_experiments_name(monkeypatch):
  assert specs.spec("draw") is draw_spec.SPEC
  # A registered experiment whose package has no spec module is named as missing.
  monkeypatch.setitem(experiments.EXPERIMENTS, "toy", "experiments.no_such_experiment")
  with pytest.raises(ValueError, match="without a spec: toy"):
    specs.all_specs()
  # One whose spec module declares another experiment's spec is refused.
  monkeypatch.setitem(experiments.EXPERIMENTS, "toy", "experiments.draw")
  with pytest.raises(ValueError, match="declares no SPEC = ExperimentSpec\\('toy'"):
    specs.spec("toy")


def test_the_suite_figures_and_published_numbers_are_the_specs():
  assert suite.SUITE == specs.all_specs()
  assert all(suite.BY_NAME[s.name] is s for s in specs.all_specs())
  assert plotting.FIGURES == specs.figures()
  assert published.PUBLISHED == tuple(p for s in specs.all_specs() for p in s.published)
  assert {f.experiment for f in plotting.FIGURES.values()} <= set(suite.BY_NAME)
  for spec in specs.all_specs():
    assert all(plotting.FIGURES[n] is f for n, f in spec.figures.items())


def test_every_setting_names_a_config_that_exists():
  for spec in specs.all_specs():
    for setting in spec.scales.values():
      path = setting.config.split(":")[0]
      assert os.path.exists(os.path.join(REPO, path)), (spec.name, path)
      assert os.path.basename(path) == f"{spec.name}.py", (spec.name, path)


@pytest.mark.parametrize("experiment", list(experiments.EXPERIMENTS))
@pytest.mark.parametrize("scale", specs.SCALES)
def test_every_configs_scale_sweep_is_the_suites_grid(experiment, scale):
  grid = runner.load_sweep(f"configs/{experiment}.py", scale)
  e = suite.BY_NAME[experiment]
  members = suite.members([e], scale)
  assert len(grid) == len(members)
  setting = e.scales[scale]
  for overrides, member in zip(grid, members):
    assert overrides["norm"] == member.norm and int(overrides["seed"]) == member.seed
    for key, value in {**setting.overrides, **member.variant}.items():
      assert str(overrides[key]) == value, key
    # Runs of the sweep are the benchmark's members: the rule judges them.
    assert overrides["benchmark_hash"] == suite.member_hash(e, scale, member.variant)


def test_perm_mnists_batch_rule_is_written_once():
  # One batch size, 10 normalizers, the pilot's first 3 seeds (lnorm benchmark sizes
  # the pilot from seed 0's minutes and adds the seeds by power).
  grid = runner.load_sweep("configs/perm_mnist.py", "cpu")
  assert len(grid) == 30
  config = config_lib.load_config("configs/perm_mnist.py")
  config_lib.apply_overrides(config, grid[-1])
  assert (config.num_epochs, config.batch_size, config.norm_options.bn.unbiased) == (1, 4, True)
  # The config argument, the suite's variants and the config's own grids agree, at the
  # threshold (4: unbiased) and past it, and with a batch that divides 256 unevenly.
  for b in (3, 4, 5, 128):
    config = config_lib.load_config(f"configs/perm_mnist.py:batch_size={b}")
    assert (config.steps_per_call, config.norm_options.bn.unbiased) == (256 // b, b <= 4)
    assert perm_mnist_spec.batch_variant(b) == {
        "batch_size": str(b), "steps_per_call": str(256 // b),
        "norm_options.bn.unbiased": str(b <= 4).lower()}
  figure6 = runner.load_sweep("configs/perm_mnist.py", "figure6")
  assert [(m["batch_size"], m["steps_per_call"], m["norm_options.bn.unbiased"])
          for m in figure6[::3]] == [("128", "2", "False"), ("4", "64", "True")]


def _spec(**changes):
  fields = dict(name="toy", norms=("ln",), claims=(),
                scales={s: specs.Setting("configs/toy.py", {}) for s in specs.SCALES})
  return specs.ExperimentSpec(**{**fields, **changes})


def test_a_spec_refuses_another_experiments_figure_or_published_value():
  figure = specs.Figure("draw", "d", (specs.Panel(("test/error",), {}, "t"),))
  with pytest.raises(ValueError, match="toy.*draw"):
    _spec(figures={"f": figure})
  with pytest.raises(ValueError, match="toy.*draw"):
    _spec(published=(specs.Published("draw", {}, "test/nll", 1.0, "s"),))
  _spec(figures={"f": specs.Figure("toy", "d", figure.panels)})  # Its own is fine.


def test_a_spec_refuses_an_unknown_scale():
  with pytest.raises(ValueError, match="unknown scales.*tpu.*the scales: cpu, gpu, paper"):
    _spec(scales={"tpu": specs.Setting("configs/toy.py", {})})
  _spec(scales={"cpu": specs.Setting("configs/toy.py", {})})  # A subset is fine.


def test_a_spec_refuses_to_run_first_what_is_not_a_claim_of_that_scale():
  with pytest.raises(ValueError, match="run_first at scale gpu names toy_typo, not claims"):
    _spec(scales={"gpu": specs.Setting("configs/toy.py", {}, run_first={"toy_typo": 1})})


@pytest.mark.parametrize("experiment", experiments.EXPERIMENTS)
def test_every_experiment_runs_every_normalizer_its_task_takes(experiment):
  # Issue 60: every normalizer lnorm has gets its row in every experiment it runs in.
  spec = specs.spec(experiment)
  takes = task_lib.task_class(experiment).norms
  assert len(set(spec.norms)) == len(spec.norms), spec.norms
  missing = [n for n in takes if n not in spec.norms]
  assert not missing, f"{experiment}'s spec lacks {missing}: add them to its norms"
  assert set(spec.norms) <= set(takes)
  cpu = spec.scales["cpu"]
  run = {n for i in range(len(cpu.variants)) for n in cpu.norms_at(i, spec.norms)}
  assert run == set(spec.norms), f"no cpu variant of {experiment} runs {set(spec.norms) - run}"


def test_every_experiment_is_given_at_every_scale():
  for spec in specs.all_specs():
    assert set(spec.scales) == set(specs.SCALES), spec.name


def test_every_figure_says_what_it_draws_in_the_plot_commands_help():
  from lnorm.commands import plot as plot_command  # pylint: disable=g-import-not-at-top
  for name, figure in specs.figures().items():
    assert figure.summary, name
    assert f"{name} ({figure.experiment}: {figure.summary})" in plot_command.FIGURE_HELP


def test_two_experiments_cannot_declare_one_figure_name():
  panels = (specs.Panel(("test/error",), {}, "t"),)
  one, two = (_spec(name=n, figures={"fig": specs.Figure(n, "d", panels)})
              for n in ("one", "two"))
  with pytest.raises(ValueError, match="'fig' is declared by one and two"):
    specs.figures_of((one, two))
  assert list(specs.figures_of((one,))) == ["fig"]


#: Every member's hash, pinned: the committed records are judged by these (a record
#: whose hash differs is not counted), so a spec that changes one makes its records
#: stale. (experiment, scale, variant index) -> the hash of what the member trains
#: (rule version 3: the rule is no part of it).
MEMBER_HASHES = {
    ("perm_mnist", "cpu", 0): "9896775497bb3c96",
    ("perm_mnist", "paper", 0): "b0e80d706f52d1ed",
    ("perm_mnist", "paper", 1): "1424bbe367d3b2f2",
    ("order_embeddings", "cpu", 0): "d5de36bba33e94ce",
    ("order_embeddings", "paper", 0): "ebabf101df7118a0",
    ("bln_imdb", "cpu", 0): "02a906e420339972",
    ("bln_imdb", "paper", 0): "a7210f16888995f9",
    ("bln_imdb", "paper", 1): "01455bc673651359",
    ("bln_cifar", "cpu", 0): "daec3d3a33a769c4",
    ("bln_cifar", "cpu", 1): "274cb3ea7eb47fe9",
    ("bln_cifar", "paper", 0): "0e3d23db37a04adc",
    ("bln_cifar", "paper", 1): "9548ec190de2a59d",
    ("skip_thoughts", "cpu", 0): "408830e660972e80",
    ("skip_thoughts", "paper", 0): "62527b77b11684ef",
    ("handwriting", "cpu", 0): "2ed0bd28212069f7",
    ("handwriting", "paper", 0): "cbe9cae345102f70",
    ("draw", "cpu", 0): "f29745585d7490e8",
    ("draw", "paper", 0): "a7a7c9b2583bfa58",
    ("attentive_reader", "cpu", 0): "809e1b7ce53637ca",
    ("attentive_reader", "cpu", 1): "c6b10e0be47dc969",
    ("attentive_reader", "paper", 0): "c48ef51280feea37",
    ("attentive_reader", "paper", 1): "8c0e5d8ac42ee444",
    ("transformer_lm", "cpu", 0): "6235be1731c7b559",
    ("transformer_lm", "cpu", 1): "3b93774091db8d40",
    ("transformer_lm", "cpu", 2): "30d01d07fa052595",
    ("transformer_lm", "cpu", 3): "6beeb6d5f9aedda9",
    ("transformer_lm", "cpu", 4): "bc2e60cdf7827147",
    ("transformer_lm", "paper", 0): "d7348ac7f95ab5d0",
    ("transformer_lm", "paper", 1): "7d4d5fbb8d76c196",
    ("transformer_lm", "paper", 2): "3eb6dffcf7ecd4cd",
    ("transformer_lm", "paper", 3): "fd50c9f119ba1b1e",
    ("transformer_lm", "paper", 4): "9c51435e07f361b0",
    # The gpu scale (issue 60), pinned before any of its records was made.
    ("perm_mnist", "gpu", 0): "2e215fa5194fa527",
    ("perm_mnist", "gpu", 1): "b83e9a36453760ef",
    ("order_embeddings", "gpu", 0): "aaf9d24efd81ae3f",
    ("bln_imdb", "gpu", 0): "34f74e7023e26467",
    ("bln_cifar", "gpu", 0): "cb81a33ec5e42644",
    ("bln_cifar", "gpu", 1): "721bd4ac3c86e58c",
    ("skip_thoughts", "gpu", 0): "1e0483cfcd1840dc",
    ("handwriting", "gpu", 0): "1a4da3187426afbf",
    ("draw", "gpu", 0): "27260ef1786880f5",
    ("attentive_reader", "gpu", 0): "04578de2097081e3",
    ("attentive_reader", "gpu", 1): "757860030d1be08d",
    ("transformer_lm", "gpu", 0): "ca51e7d779125c2a",
    ("transformer_lm", "gpu", 1): "ed6cbefe0e02b39e",
    ("transformer_lm", "gpu", 2): "6d9ab3fdfc04e1f2",
    ("transformer_lm", "gpu", 3): "2a7046521d44e7e4",
    ("transformer_lm", "gpu", 4): "6bc7aaf85c55c87d",
}

#: The same under rule version 2, which hashed the rule, the claims and the pilot's
#: seeds in: the committed records made then carry these.
V2_MEMBER_HASHES = {
    ("perm_mnist", "cpu", 0): "390a9a25289bda4a",
    ("perm_mnist", "paper", 0): "b7185ac85fbaa1ae",
    ("perm_mnist", "paper", 1): "88d600781f3ffdfc",
    ("order_embeddings", "cpu", 0): "4d621c75bf628470",
    ("order_embeddings", "paper", 0): "4492b6d71f4bd974",
    ("bln_imdb", "cpu", 0): "63997a8c5a7733f2",
    ("bln_imdb", "paper", 0): "3c24afbfc0b7a4dc",
    ("bln_imdb", "paper", 1): "9fbd33b0718aa258",
    ("bln_cifar", "cpu", 0): "000125f3d224805a",
    ("bln_cifar", "cpu", 1): "f9c34d86924bc14f",
    ("bln_cifar", "paper", 0): "11e4b0cf86f1cdc4",
    ("bln_cifar", "paper", 1): "0453d466d726e53c",
    ("skip_thoughts", "cpu", 0): "c4a02d8ea75e44c5",
    ("skip_thoughts", "paper", 0): "c35af484a4685dc4",
    ("handwriting", "cpu", 0): "b8f933e8d773776c",
    ("handwriting", "paper", 0): "e8b844fa249aa6ac",
    ("draw", "cpu", 0): "a314c7560ade2cc4",
    ("draw", "paper", 0): "e54a3bfbd203321a",
    # Rerun on 2026-11-28 under the gain variant and the gain claim (issue 42).
    ("attentive_reader", "cpu", 0): "afd47d51daf263c0",
    ("attentive_reader", "cpu", 1): "3a9d194a1d4635e3",
    ("attentive_reader", "paper", 0): "5ee83440ec052dc7",
    ("attentive_reader", "paper", 1): "e1f854e0c5c889b9",
    ("transformer_lm", "cpu", 0): "bf1f7c2ae69abaa8",
    ("transformer_lm", "cpu", 1): "a6e6776fa62b35c8",
    ("transformer_lm", "cpu", 2): "3e520b46324677bb",
    ("transformer_lm", "cpu", 3): "c721dcea97198449",
    ("transformer_lm", "cpu", 4): "1f805e4bc68935b8",
    ("transformer_lm", "paper", 0): "cafc75b8d536f5b4",
    ("transformer_lm", "paper", 1): "65ee9663d4bd08ad",
    ("transformer_lm", "paper", 2): "ae316859177cc773",
    ("transformer_lm", "paper", 3): "f99598c92ec34dee",
    ("transformer_lm", "paper", 4): "1588cdab8a6666d4",
}


def test_the_member_hashes_are_pinned():
  found = {(e.name, scale, i): suite.member_hash(e, scale, v)
           for e in specs.all_specs() for scale in specs.SCALES
           for i, v in enumerate(e.scales[scale].variants)}
  changed = sorted(k for k in found.keys() | MEMBER_HASHES.keys()
                   if found.get(k) != MEMBER_HASHES.get(k))
  assert not changed, (
      f"member hashes changed for {changed}: the committed records of those members "
      "no longer count. If the change is meant, rerun them and pin the new hashes here.")


def test_each_rule_2_hash_stands_for_its_settings_hash_now():
  """benchmark_suite.RULE_V2_HASHES maps every version-2 hash to the version-3 hash of
  the same member setting, and holds nothing else. (A setting changed after version 3
  leaves its version-2 records stale: drop its entry from both tables then.)"""
  assert suite.RULE_V2_HASHES == {V2_MEMBER_HASHES[k]: MEMBER_HASHES[k]
                                  for k in V2_MEMBER_HASHES}
  assert all(suite.current_hash(h) == h for h in MEMBER_HASHES.values())


def test_a_spec_refuses_variants_its_keys_cannot_tell_apart():
  variants = ({"batch_size": "4", "steps_per_call": "64"},
              {"batch_size": "4", "steps_per_call": "32"})
  with pytest.raises(ValueError, match="two variants at scale cpu have the same name"):
    _spec(scales={"cpu": specs.Setting("configs/toy.py", {}, variants=variants)},
          variant_keys=("batch_size",))
  _spec(scales={"cpu": specs.Setting("configs/toy.py", {}, variants=variants)},
        variant_keys=("batch_size", "steps_per_call"))


def test_the_gpu_check_reads_the_specs():
  from lnorm.gpucheck import fig6, rnn_layers  # pylint: disable=g-import-not-at-top
  ranked = [s.name for s in sorted((s for s in specs.all_specs()
                                    if s.gpu.step_cost_rank is not None),
                                   key=lambda s: s.gpu.step_cost_rank)]
  assert list(gpu_steps.EXPERIMENTS[:len(ranked)]) == ranked == [
      "transformer_lm", "skip_thoughts", "handwriting", "attentive_reader", "draw"]
  assert gpu_steps.TOY_EXPERIMENTS == ("perm_mnist", "handwriting")
  assert set(rnn_layers.LAYERS[False]) == {"handwriting", "attentive_reader",
                                           "skip_thoughts", "draw", "order_embeddings"}
  # The experiments phase's timed lengths name their experiment's padded lengths.
  for spec in specs.all_specs():
    for timed in spec.gpu.timed_lengths:
      assert len(timed.deciles) == 11 and list(timed.deciles) == sorted(timed.deciles)
      assert 1 <= timed.deciles[0] and timed.deciles[-1] <= timed.padded, spec.name
  assert fig6.EXPERIMENT == "perm_mnist" and fig6.VARIANT == "batch_size=128"
  # The figure's variant is one of the suite's paper-scale variants.
  assert suite.members([suite.BY_NAME["perm_mnist"]], "paper", norms=["ln"], seeds=[0],
                       variants=suite.parse_variants(fig6.VARIANT))
