"""Every experiment lnorm runs, by name: the one list adding an experiment touches.

Each name is a config (``configs/<name>.py``) and a package of its own
(``experiments/<name>/``) that holds everything that is the experiment's: its
``task`` module, which defines ``Task`` (its data, model and loss), and its ``spec``
module, which declares ``SPEC`` (its facts: the benchmark's normalizers, settings and
claims, the published numbers, the figures, what the GPU check measures). Training
loads a task from here, the analysis reads the specs in this list's order, and the GPU
check measures every experiment listed. The module holds names only: it imports
nothing, so that the analysis may read it without the harness, and the library
imports an experiment only through it, by name, when a run or a report asks for it.
"""

#: experiment name -> its package, imported only when the experiment is asked for, so
#: that adding one costs the others nothing. In the benchmark's order: its suite and
#: report list the experiments so.
EXPERIMENTS: dict[str, str] = {
    "perm_mnist": "experiments.perm_mnist",
    "order_embeddings": "experiments.order_embeddings",
    "bln_imdb": "experiments.bln_imdb",
    "bln_cifar": "experiments.bln_cifar",
    "skip_thoughts": "experiments.skip_thoughts",
    "handwriting": "experiments.handwriting",
    "draw": "experiments.draw",
    "attentive_reader": "experiments.attentive_reader",
    "transformer_lm": "experiments.transformer_lm",
}


def module(name: str, part: str) -> str:
  """The dotted name of a registered experiment's module ``part`` (``task``, ``spec``)."""
  return f"{EXPERIMENTS[name]}.{part}"
