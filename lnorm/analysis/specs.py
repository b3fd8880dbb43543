"""Every experiment's facts, declared once: one :class:`ExperimentSpec` per experiment.

A spec says what the benchmark runs (its normalizers, its settings per scale, its
claims and the validation metric they read), what the papers published (the numbers
``lnorm report`` sets beside a run) and how the paper drew it (the figures ``lnorm
plot --figure`` lays out). The benchmark's suite (``lnorm.sweeps.benchmark_suite``),
the published comparison (``lnorm.analysis.published``) and the figures
(``lnorm.analysis.plotting``) are read from :data:`SPECS`, which holds one spec for
each experiment of the registry, ``lnorm.training.experiments`` (training may not
import the analysis, so the list of experiments lives there), in its order.

Adding an experiment: its task under ``experiments/<name>/``, its config under
``configs/``, its line in the registry, and its spec here, declared with
``_declare``; an experiment without a spec stops this module's import with a message.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from lnorm.analysis.rule import Claim
from lnorm.training.experiments import EXPERIMENTS

#: The scales every experiment's benchmark settings are given at.
SCALES = ("cpu", "paper")
#: The normalizers every experiment is run with.
CORE_NORMS = ("none", "ln", "rms")
#: The successors of LN reported beside the claim grid where a run is cheap (their own
#: claims are the Transformer's): DyT, ScaleNorm, LayerNorm-simple.
SUCCESSORS = ("dyt", "scalenorm", "ln_simple")

#: The papers as the claims cite them ...
LN_PAPER = "Ba, Kiros & Hinton 2016"
BLN_PAPER = "Ziaee & Çano, Batch Layer Normalization"
#: ... and as the published numbers do.
LN_PAPER_PUBLISHED = "Ba, Kiros & Hinton 2016 (Layer Normalization)"
BLN_REPO = "BLN authors' repository logs (docs/experiments.md, sec. 8)"


# --- what a spec is made of --------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Setting:
  """An experiment at one scale: the config spec and the overrides every member gets,
  and the variants each normalizer is run at. Its seeds are the rule's: the pilot's,
  sized by the minutes its seed-0 records measure, then the seeds by power
  (lnorm.sweeps.benchmark.seeds_by_power).

  ``variant_norms``: per variant (in ``variants``' order), the normalizers it runs,
  where not every variant runs the experiment's all (the Transformer runs its
  placement and warm-up variants with LN only); empty: every variant runs them all.
  ``claims``: this scale's claims where its settings change what a claim compares
  (the Transformer's warm-up is 100 updates at the CPU scale, 4,000 at the paper's);
  None: the experiment's.
  """
  config: str
  overrides: Mapping[str, str]
  variants: tuple[Mapping[str, str], ...] = ({},)
  variant_norms: tuple[tuple[str, ...], ...] = ()
  claims: tuple[Claim, ...] | None = None

  def __post_init__(self):
    if self.variant_norms and len(self.variant_norms) != len(self.variants):
      raise ValueError(f"{len(self.variant_norms)} variant_norms for "
                       f"{len(self.variants)} variants")

  def norms_at(self, index: int, every: Sequence[str]) -> tuple[str, ...]:
    """The normalizers variant ``index`` runs (``every``: the experiment's)."""
    return tuple(self.variant_norms[index]) if self.variant_norms else tuple(every)


@dataclasses.dataclass(frozen=True)
class Published:
  """A published result: ``lnorm report`` matches finished runs to it by experiment
  and config setting. A value of None marks a result the paper shows only as a curve.
  Metric names are the keys of ``metrics.jsonl``; ``test/accuracy`` is derived from
  ``test/error`` when a run logs only the error."""
  experiment: str  # configs/<experiment>.py
  setting: Mapping[str, Any]  # Flat config fields a run must match, e.g. {"norm": "ln"}.
  metric: str  # A metrics.jsonl key.
  value: float | None  # None: the paper gives a curve, not a number.
  source: str  # Paper and table or figure.
  note: str = ""
  paper_epochs: int | None = None  # How long the published run trained, if stated.


@dataclasses.dataclass(frozen=True)
class Line:
  """A second quantity drawn in a panel for each run, e.g. the training NLL beside the
  held-out one, in the run's colour with its own style and name."""
  metrics: tuple[str, ...]  # Candidates, chosen as Panel.metrics are.
  name: str
  style: str = "--"


@dataclasses.dataclass(frozen=True)
class Panel:
  # Candidates: the first that some run logged at two or more points is drawn (else
  # the first logged at all), so that a test metric logged once at the end does not
  # displace a validation metric logged along the way. ``exp(m)``: m's exponential.
  metrics: tuple[str, ...]
  where: Mapping[str, Any]  # Config fields a run must have, e.g. {"batch_size": 128}.
  title: str
  logy: bool = False
  name: str = ""  # The main line's name beside the run's label, when there are others.
  lines: tuple[Line, ...] = ()
  missing: str = ""  # What a run must do to log this panel's metric.


@dataclasses.dataclass(frozen=True)
class Figure:
  """A paper's figure, laid out by ``lnorm plot --figure NAME``."""
  experiment: str
  description: str
  panels: tuple[Panel, ...]
  columns: int = 2
  x: str = "epoch"  # The paper's horizontal axis: 'epoch' or 'step' (updates).
  logx: bool = False
  summary: str = ""  # What it draws, in a few words, for `lnorm plot --help`.


@dataclasses.dataclass(frozen=True)
class ExperimentSpec:
  """One experiment's facts. ``norms``, ``claims``, ``scales`` and ``metric`` are the
  benchmark's (``claims``: those of every scale whose setting gives none of its own);
  ``published``: the papers' numbers; ``figures``: the paper's figures by name."""
  name: str
  norms: tuple[str, ...]
  claims: tuple[Claim, ...]
  scales: Mapping[str, Setting]
  # The validation metric every claim and the headline read: decisions are taken on
  # validation only (tests/test_benchmark_suite.py checks that it is one).
  metric: str = "validation/error"
  published: tuple[Published, ...] = ()
  figures: Mapping[str, Figure] = dataclasses.field(default_factory=dict)
  # The normalizer the headline table divides by in each variant: the normalizer-free
  # baseline, or LN where a variant has none (the Transformer's normalizer-free net
  # is a placement of its own, so its pre-LN rows are read against LN).
  reference: str = "none"

  def __post_init__(self):
    # The published entries and figures name their experiment for their readers;
    # one declared under another experiment's spec is a slip of the pen.
    named = ({p.experiment for p in self.published} |
             {f.experiment for f in self.figures.values()})
    strays = sorted(named - {self.name})
    if strays:
      raise ValueError(f"spec {self.name!r} holds published values or figures of {strays}")
    unknown = sorted(set(self.scales) - set(SCALES))
    if unknown:
      raise ValueError(f"spec {self.name!r} gives unknown scales {unknown}; the "
                       f"scales: {', '.join(SCALES)}")

  def claims_at(self, scale: str) -> tuple[Claim, ...]:
    own = self.scales[scale].claims
    return self.claims if own is None else own


#: The specs declared below, by experiment (:func:`_declare`); :data:`SPECS` orders them.
_DECLARED: dict[str, ExperimentSpec] = {}


def _declare(spec: ExperimentSpec) -> ExperimentSpec:
  """Records ``spec`` as its experiment's facts: one spec per registered experiment."""
  if spec.name not in EXPERIMENTS:
    raise ValueError(f"spec {spec.name!r} names no experiment of "
                     "lnorm/training/experiments.py: add the experiment there first")
  if spec.name in _DECLARED:
    raise ValueError(f"experiment {spec.name!r} is declared twice")
  _DECLARED[spec.name] = spec
  return spec


def in_registry_order(declared: Mapping[str, ExperimentSpec],
                      experiments: Sequence[str]) -> tuple[ExperimentSpec, ...]:
  """The spec of each of ``experiments`` (the registry), in its order; an experiment
  without one is refused, naming where to declare it."""
  missing = [name for name in experiments if name not in declared]
  if missing:
    raise ValueError(f"experiments without a spec: {', '.join(missing)}; declare each in "
                     "lnorm/analysis/specs.py (_declare(ExperimentSpec(...)))")
  return tuple(declared[name] for name in experiments)


# --- pieces several experiments share ----------------------------------------------------


def _batch(b: int, fused: int) -> dict[str, str]:
  """A batch size as a dotted override, with the steps fused per jitted call that the
  config sets with it (a dotted override of batch_size alone would keep the default's)."""
  return {"batch_size": str(b), "steps_per_call": str(max(1, fused // b))}


def _bln_claims(experiment: str, batch_sizes: Sequence[int]) -> tuple[Claim, ...]:
  """BLN against BN and LN at each batch size, twice: on each seed's best validation
  error as BLN trains (population statistics), and under the BLN paper's protocol
  (the last epoch, BLN's inference configuration selected on validation, judged on
  test: lnorm.analysis.bln_protocol)."""
  out = []
  for b in batch_sizes:
    for other in ("bn", "ln"):
      text = f"BLN ends with a lower error than {other.upper()} at batch size {b}"
      out.append(Claim(f"{experiment}_bln_vs_{other}_b{b}", text, f"{BLN_PAPER}, sec. 4",
                       "bln", other, kind="final", where={"batch_size": str(b)}))
      out.append(Claim(f"{experiment}_bln_vs_{other}_b{b}_protocol",
                       f"{text}, under the BLN paper's protocol", f"{BLN_PAPER}, sec. 4 and "
                       "Algorithm 2", "bln", other, kind="final",
                       where={"batch_size": str(b)}, value="bln_protocol"))
  return tuple(out)


def _bln_published(experiment: str, epochs: int,
                   table: Mapping[int, Mapping[str, tuple[float, float]]]
                   ) -> tuple[Published, ...]:
  """The BLN authors' logs: batch size -> norm -> (test loss, test accuracy)."""
  out = []
  for b, rows in table.items():
    for norm, (loss, acc) in rows.items():
      setting = {"norm": norm, "batch_size": b}
      out.append(Published(experiment, setting, "test/nll", loss, BLN_REPO,
                           "test loss, 20% training subset", epochs))
      out.append(Published(experiment, setting, "test/accuracy", acc, BLN_REPO,
                           "test accuracy, 20% training subset", epochs))
  return tuple(out)


# --- perm-MNIST: LN paper Figure 6 -------------------------------------------------------


def _mnist_batch(b: int) -> dict[str, str]:
  """perm-MNIST at batch ``b``: what the config argument batch_size=b sets, as dotted
  overrides (BN's unbiased variance at the small batch, 256 examples per call)."""
  return {**_batch(b, 256), "norm_options.bn.unbiased": str(b <= 4).lower()}


def _figure6_claims(batch_sizes: Sequence[int]) -> tuple[Claim, ...]:
  return tuple(
      Claim(f"perm_mnist_ln_vs_{other}_b{b}", f"At batch size {b}, LN trains faster than "
            f"{'BN' if other == 'bn' else 'no normalization'}", f"{LN_PAPER}, Figure 6", "ln",
            other, where={"batch_size": str(b)})
      for b in batch_sizes for other in ("bn", "none"))


PERM_MNIST = _declare(ExperimentSpec(
    "perm_mnist", CORE_NORMS + ("bn",) + SUCCESSORS, _figure6_claims((4, 128)),
    # Figure 6's claim at the small batch is where BN's statistics are noisy; the CPU
    # runs it alone, a GPU both of the figure's batch sizes. configs/perm_mnist.py's
    # `cpu` sweep is this setting's grid.
    {"cpu": Setting("configs/perm_mnist.py",
                    {"num_epochs": "1", "eval_every_steps": "500",
                     "data.source": "files"},
                    variants=(_mnist_batch(4),)),
     "paper": Setting("configs/perm_mnist.py", {"eval_every_steps": "2000"},
                      variants=(_mnist_batch(128), _mnist_batch(4)))},
    published=tuple(
        Published("perm_mnist", {"norm": n, "batch_size": b}, metric, None,
                  f"{LN_PAPER_PUBLISHED}, Figure 6", "curves only")
        for b in (128, 4) for n in ("none", "bn", "ln") for metric in ("train/nll", "test/error")),
    figures={"ln-fig6": Figure(
        "perm_mnist",
        "LN paper Figure 6: permutation-invariant MNIST, train NLL and test error per "
        "epoch for the baseline, BN and LN at batch sizes 128 and 4.",
        (Panel(("train/nll", "train/loss"), {"batch_size": 128}, "train NLL, batch 128", True),
         Panel(("test/error",), {"batch_size": 128}, "test error, batch 128"),
         Panel(("train/nll", "train/loss"), {"batch_size": 4}, "train NLL, batch 4", True),
         Panel(("test/error",), {"batch_size": 4}, "test error, batch 4")),
        summary="train NLL and test error at batch 128 and 4")}))


# --- order-embeddings: LN paper Figure 1 and Table 2 -------------------------------------


def _order_embeddings_published() -> tuple[Published, ...]:
  src = f"{LN_PAPER_PUBLISHED}, Table 2"
  names = ("caption_r1", "caption_r5", "caption_r10", "caption_mean_rank",
           "image_r1", "image_r5", "image_r10", "image_mean_rank")
  values = {"none": (46.6, 79.3, 89.1, 5.2, 37.8, 73.6, 85.7, 7.9),
            "ln": (48.5, 80.6, 89.8, 5.1, 38.9, 74.3, 86.3, 7.6)}
  return tuple(Published("order_embeddings", {"norm": n}, f"test/{m}", v, src,
                         "MSCOCO, mean over 5 folds of 1k test images")
               for n, vs in values.items() for m, v in zip(names, vs))


ORDER_EMBEDDINGS = _declare(ExperimentSpec(
    "order_embeddings", CORE_NORMS,
    (Claim("order_embeddings_ln_speed", "LN reaches the baseline's best validation "
           "score in less time (about 60%)", f"{LN_PAPER}, Figure 1", "ln", "none",
           claimed_ratio=0.6, about_convergence=True),),
    # 60 epochs: the baseline's validation R-sum still climbs at 20 (the last
    # quarter adds 9% of the run's gain) and is flat from about 40 (0.2% at 60);
    # validation every 40 updates instead of 20 halves its cost. The kept model is
    # the one with the best validation R-sum over both directions (not the authors'
    # image R@1+5+10), the claim's metric, so that its test scores are those at the
    # evaluation the benchmark selects.
    {"cpu": Setting("configs/order_embeddings.py:scale=cpu",
                    {"num_epochs": "60", "periodic_eval_every_steps": "40",
                     "retrieval.select_on": "rsum", "retrieval.select_images": "0"}),
     "paper": Setting("configs/order_embeddings.py", {})},
    # Figure 1's validation score: R@1, R@5 and R@10 of both retrieval directions.
    metric="validation/rsum",
    published=_order_embeddings_published(),
    figures={"ln-fig1": Figure(
        "order_embeddings",
        "LN paper Figure 1: order-embeddings, image retrieval Recall@K on the validation "
        "set against updates (the paper evaluated every 300), with and without LN.",
        tuple(Panel((f"validation/image_r{k}",), {}, f"image retrieval R@{k} (validation)")
              for k in (1, 5, 10)),
        columns=3, x="step", summary="image R@1, R@5, R@10 on validation against updates")}))


# --- the BLN paper: IMDB and CIFAR-10 ----------------------------------------------------


def _bln_figure(experiment: str, what: str) -> Figure:
  return Figure(
      experiment,
      f"BLN paper sec. 4: {what}, test error per epoch for BLN, BN and LN at batch "
      "sizes 25 and 1.",
      (Panel(("test/error",), {"batch_size": 25}, "test error, batch 25"),
       Panel(("test/error",), {"batch_size": 1}, "test error, batch 1")),
      summary="test error at batch 25 and 1")


BLN_IMDB = _declare(ExperimentSpec(
    "bln_imdb", CORE_NORMS + ("bln", "bn"), _bln_claims("bln_imdb", (25,)),
    {"cpu": Setting("configs/bln_imdb.py", {"data.source": "files"},
                    variants=(_batch(25, 500),)),
     "paper": Setting("configs/bln_imdb.py", {},
                      variants=(_batch(25, 500), _batch(1, 500)))},
    published=_bln_published("bln_imdb", 10, {
        25: {"bln": (0.496, 0.771), "bn": (0.620, 0.698), "ln": (0.639, 0.711)},
        1: {"bln": (0.583, 0.731), "bn": (0.979, 0.495), "ln": (0.688, 0.684)}}),
    figures={"bln-imdb": _bln_figure("bln_imdb", "IMDB LSTM")}))


BLN_CIFAR = _declare(ExperimentSpec(
    "bln_cifar", CORE_NORMS + ("bln", "bn"),
    _bln_claims("bln_cifar", (25, 1)) + (
        Claim("bln_cifar_bn_at_chance_b1", "At batch size 1, BN does not learn: its "
              "error stays at chance", f"{BLN_PAPER}, sec. 4", "bn", "bn",
              kind="at_chance", where={"batch_size": "1"}),),
    # The paper's 15 epochs: at 10, most BN and LN seeds were still improving
    # (the validity gate); batch 1 costs 14 s an epoch here.
    {"cpu": Setting("configs/bln_cifar.py", {"data.source": "files"},
                    variants=(_batch(25, 1000), _batch(1, 1000))),
     "paper": Setting("configs/bln_cifar.py", {},
                      variants=(_batch(25, 1000), _batch(1, 1000)))},
    published=_bln_published("bln_cifar", 15, {
        25: {"bln": (1.531, 0.455), "bn": (1.575, 0.453), "ln": (1.666, 0.423)},
        1: {"bln": (1.562, 0.442), "bn": (22.1, 0.109), "ln": (1.734, 0.378)}}),
    figures={"bln-cifar": _bln_figure("bln_cifar", "CIFAR-10 LeNet-5")}))


# --- skip-thoughts: LN paper Figure 3 and Table 3 ----------------------------------------


def _skip_thoughts_published() -> tuple[Published, ...]:
  src = f"{LN_PAPER_PUBLISHED}, Table 3"
  names = ("sick_pearson", "sick_spearman", "sick_mse", "mr_accuracy", "cr_accuracy",
           "subj_accuracy", "mpqa_accuracy")
  values = {"none": (0.842, 0.767, 0.298, 77.3, 81.8, 92.6, 87.9),
            "ln": (0.854, 0.785, 0.277, 79.5, 82.6, 93.4, 89.0)}
  return tuple(Published("skip_thoughts", {"norm": n}, f"eval/{m}", v, src,
                         "BookCorpus; 'Ours' and 'Ours + LN'")
               for n, vs in values.items() for m, v in zip(names, vs))


_SENTENCE_EVAL = ("not evaluated: set --config.periodic_eval_every_steps=N (and {task} in "
                  "--config.sentence_eval.tasks), or run `lnorm evaluate`")

SKIP_THOUGHTS = _declare(ExperimentSpec(
    "skip_thoughts", CORE_NORMS + SUCCESSORS,
    (Claim("skip_thoughts_ln_speed", "The LN-GRU trains faster than the GRU",
           f"{LN_PAPER}, Figure 3", "ln", "none"),),
    {"cpu": Setting("configs/skip_thoughts.py:scale=cpu",
                    {"data.source": "files", "max_steps": "150", "eval_every_steps": "25",
                     "periodic_eval_every_steps": "0"}),
     "paper": Setting("configs/skip_thoughts.py", {})},
    metric="validation/nll",
    published=_skip_thoughts_published(),
    figures={"ln-fig3": Figure(
        "skip_thoughts",
        "LN paper Figure 3: skip-thought vectors, downstream scores of the encoder against "
        "updates (the paper evaluated every 50k), and the validation perplexity.",
        (Panel(("eval/sick_pearson",), {}, "SICK (r)",
               missing=_SENTENCE_EVAL.format(task="sick")),
         Panel(("eval/sick_mse",), {}, "SICK (MSE)", missing=_SENTENCE_EVAL.format(task="sick")),
         *(Panel((f"eval/{task}_accuracy",), {}, name,
                 missing=_SENTENCE_EVAL.format(task=task))
           for task, name in (("mr", "MR"), ("cr", "CR"), ("subj", "SUBJ"), ("mpqa", "MPQA"))),
         Panel(("validation/perplexity", "exp(validation/token_nll)"), {},
               "validation perplexity",
               missing="logged when validation is in --config.eval_splits, as by "
               "default")),
        columns=3, x="step",
        summary="SICK r and MSE, MR, CR, SUBJ, MPQA from periodic evaluations, and "
        "validation perplexity, against updates")}))


# --- handwriting: LN paper Figure 5 ------------------------------------------------------


HANDWRITING = _declare(ExperimentSpec(
    "handwriting", CORE_NORMS + SUCCESSORS,
    (Claim("handwriting_ln_speed", "LN reaches a log-likelihood comparable to the "
           "baseline's in fewer updates", f"{LN_PAPER}, Figure 5", "ln", "none"),),
    # Figure 5's claim is about the first updates: 800 of them (0.6 epochs), with
    # validation at 1, 2, 3, 4, 6, ... 631 updates and every 200.
    {"cpu": Setting("configs/handwriting.py:scale=cpu",
                    {"max_steps": "800", "eval_every_steps": "200"}),
     "paper": Setting("configs/handwriting.py", {})},
    metric="validation/nll",
    figures={"ln-fig5": Figure(
        "handwriting",
        "LN paper Figure 5: handwriting generation, negative log-likelihood (nats per line) "
        "against updates on a log scale, held-out and training, with and without LN.",
        (Panel(("test/nll", "validation/nll"), {}, "negative log-likelihood (nats per line)",
               name="held out", lines=(Line(("train/nll",), "train"),)),),
        columns=1, x="step", logx=True,
        summary="held-out and training NLL against updates, log axis")}))


# --- DRAW: LN paper Figure 4 -------------------------------------------------------------


_DRAW_SOURCE = f"{LN_PAPER_PUBLISHED}, Figure 4 (sec. 6.4)"

DRAW = _declare(ExperimentSpec(
    "draw", CORE_NORMS + ("wn", "ln_cell"),
    (Claim("draw_ln_cell_speed", "LN (on the cell) converges about twice as fast as "
           "the baseline", f"{LN_PAPER}, Figure 4", "ln_cell", "none",
           claimed_ratio=0.5, about_convergence=True),
     Claim("draw_ln_cell_vs_wn", "LN (on the cell) converges faster than weight "
           "normalization", f"{LN_PAPER}, Figure 4", "ln_cell", "wn",
           about_convergence=True)),
    # The cpu setting's whole schedule, 18,000 updates: at 4,000 the baseline was
    # still gaining 8 nats a quarter; over the last quarter of 18,000, 2.6% of its
    # run's gain.
    {"cpu": Setting("configs/draw.py:scale=cpu", {"data.source": "derived"}),
     "paper": Setting("configs/draw.py", {})},
    metric="validation/nll_bound",
    published=(
        Published("draw", {"norm": "none"}, "test/nll_bound", 82.36, _DRAW_SOURCE,
                  "test variational bound after 200 epochs (nats)", 200),
        # The paper's DRAW LN is on the cell only: configs/draw.py norm=ln_cell.
        Published("draw", {"norm": "ln_cell"}, "test/nll_bound", 82.09, _DRAW_SOURCE,
                  "test variational bound after 200 epochs (nats)", 200),
        Published("draw", {"norm": "wn"}, "test/nll_bound", None, _DRAW_SOURCE,
                  "curve only")),
    figures={"ln-fig4": Figure(
        "draw",
        "LN paper Figure 4: DRAW on binarized MNIST, the test variational bound (nats) per "
        "epoch for the baseline, WN and LN.",
        (Panel(("test/nll_bound", "test/bound", "test/nll"), {}, "test variational bound (nats)"),),
        columns=1, summary="test bound per epoch")}))


# --- the attentive reader: LN paper Figure 2 ---------------------------------------------


#: The LN paper's gain for the reader's LN-LSTM, and the one it compared it with
#: (Cooijmans et al.'s): Figure 2 shows gain 1.0 well ahead.
_READER_GAIN = "norm_options.ln.scale_init"
_READER_VARIANTS = ({}, {_READER_GAIN: "0.1"})  # {}: the config's gain, 1.0.
_READER_VARIANT_NORMS = (CORE_NORMS + ("bn",), ("ln",))

ATTENTIVE_READER = _declare(ExperimentSpec(
    "attentive_reader", CORE_NORMS + ("bn",),
    (Claim("attentive_reader_ln_speed", "LN trains faster than the LSTM baseline",
           f"{LN_PAPER}, Figure 2", "ln", "none", where={_READER_GAIN: "1.0"}),
     Claim("attentive_reader_ln_vs_bn", "LN trains faster than recurrent BN",
           f"{LN_PAPER}, Figure 2", "ln", "bn", where={_READER_GAIN: "1.0"}),
     Claim("attentive_reader_ln_gain", "LN with gain initialised to 1.0 trains faster "
           "than with 0.1", f"{LN_PAPER}, sec. 6.2 and Figure 2", "1.0", "0.1",
           field=_READER_GAIN, where={"norm": "ln"})),
    {"cpu": Setting("configs/attentive_reader.py:scale=cpu", {},
                    variants=_READER_VARIANTS, variant_norms=_READER_VARIANT_NORMS),
     "paper": Setting("configs/attentive_reader.py", {},
                      variants=_READER_VARIANTS, variant_norms=_READER_VARIANT_NORMS)},
    figures={"ln-fig2": Figure(
        "attentive_reader",
        "LN paper Figure 2: the attentive reader, validation error against updates for "
        "the LSTM, BN-LSTM, BN-everywhere and LN-LSTM.",
        (Panel(("validation/error",), {}, "validation error rate"),),
        columns=1, x="step", summary="validation error against updates")}))


# --- the Transformer: Xiong et al. 2020 and LN's successors ------------------------------


#: Normalizers that normalize each example alone: the Transformer's (BN and BLN are not).
TRANSFORMER_NORMS = ("ln", "rms", "prms", "dyt", "scalenorm", "ln_simple")
#: The Transformer's quality claims compare validation NLL (nats per character); a
#: difference under 0.02 nats (0.03 bits) is below what character-level language
#: models report as a change.
TRANSFORMER_MIN_NATS = 0.02


def _transformer(placement: str, warmup: int) -> dict[str, str]:
  return {"placement": placement, "optimizer.warmup_steps": str(warmup)}


def _transformer_claims(warmup: int) -> tuple[Claim, ...]:
  """The placement claim of Xiong et al. (2020) at a scale's warm-up, and the
  successors' claims where they were made: on a pre-LN Transformer trained with it."""
  xiong = "Xiong et al. 2020, On Layer Normalization in the Transformer Architecture"
  pre = _transformer("pre", warmup)
  m = TRANSFORMER_MIN_NATS

  def matches(norm, kind, text, source):
    return Claim(f"transformer_lm_{norm}_vs_ln", text, source, norm, "ln", kind=kind,
                 where=pre, min_effect=m)

  return (
      # As a speed claim: Xiong et al.'s Figure 3 shows post-LN without warm-up
      # behind from the first updates, and a speed claim needs no converged run.
      Claim("transformer_lm_post_ln_needs_warmup", "Post-LN trains more slowly "
            f"without learning-rate warm-up than with it ({warmup} updates)",
            f"{xiong}, sec. 3.2 and Figure 3", str(warmup), "0",
            field="optimizer.warmup_steps", where={"placement": "post", "norm": "ln"}),
      Claim("transformer_lm_pre_ln_without_warmup", "Pre-LN trains as well without "
            f"warm-up as with it ({warmup} updates)", f"{xiong}, sec. 3.3 and 4", "0",
            str(warmup), kind="matches", field="optimizer.warmup_steps",
            where={"placement": "pre", "norm": "ln"}, min_effect=m),
      matches("rms", "matches", "RMSNorm reaches LN's quality",
              "Zhang & Sennrich 2019, Root Mean Square Layer Normalization, sec. 6"),
      Claim("transformer_lm_rms_step_time", "RMSNorm takes less time per update than LN",
            "Zhang & Sennrich 2019, Root Mean Square Layer Normalization, sec. 6", "rms",
            "ln", kind="step_time", where=pre),
      matches("dyt", "matches", "DyT matches LN's quality",
              "Zhu et al. 2025, Transformers without Normalization, sec. 5"),
      matches("scalenorm", "matches_or_beats", "ScaleNorm matches or beats LN",
              "Nguyen & Salazar 2019, Transformers without Tears, sec. 4"),
      matches("ln_simple", "matches", "LayerNorm-simple (no gain or bias) matches LN",
              "Xu et al. 2019, Understanding and Improving Layer Normalization, sec. 4"))


def _transformer_setting(config: str, warmup: int) -> Setting:
  """Pre-LN at the scale's warm-up with every per-example normalizer; LN in the three
  other placement and warm-up cells of Xiong et al.'s claim; the normalizer-free net."""
  cells = ((_transformer("pre", warmup), TRANSFORMER_NORMS),
           (_transformer("pre", 0), ("ln",)),
           (_transformer("post", warmup), ("ln",)),
           (_transformer("post", 0), ("ln",)),
           (_transformer("none", warmup), ("none",)))
  return Setting(config, {}, variants=tuple(v for v, _ in cells),
                 variant_norms=tuple(n for _, n in cells),
                 claims=_transformer_claims(warmup))


TRANSFORMER_LM = _declare(ExperimentSpec(
    "transformer_lm", ("none",) + TRANSFORMER_NORMS, _transformer_claims(100),
    # 1,000 updates of batch 16 and validation on 1,024 windows every 100 updates
    # (configs/transformer_lm.py says why); the warm-up is the config's.
    {"cpu": _transformer_setting("configs/transformer_lm.py:scale=cpu", 100),
     "paper": _transformer_setting("configs/transformer_lm.py", 4000)},
    metric="validation/nll", reference="ln"))


# --- the registry ------------------------------------------------------------------------


#: Every experiment's spec, in the registry's order, the benchmark's (its report lists
#: them so).
SPECS: tuple[ExperimentSpec, ...] = in_registry_order(_DECLARED, tuple(EXPERIMENTS))

BY_NAME: dict[str, ExperimentSpec] = {s.name: s for s in SPECS}


def figures_of(specs: Sequence[ExperimentSpec]) -> dict[str, Figure]:
  """Every figure of ``specs`` by name; a name two experiments declare is refused."""
  out: dict[str, Figure] = {}
  for spec in specs:
    for name, figure in spec.figures.items():
      if name in out:
        raise ValueError(f"figure {name!r} is declared by {out[name].experiment} and "
                         f"{spec.name}")
      out[name] = figure
  return out


#: Every paper figure by name (``lnorm plot --figure NAME``).
FIGURES: dict[str, Figure] = figures_of(SPECS)
#: Every published result, experiment by experiment.
PUBLISHED: tuple[Published, ...] = tuple(p for s in SPECS for p in s.published)
