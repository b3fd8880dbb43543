"""Every experiment lnorm runs, by name: the one list adding an experiment touches.

Each name is a config (``configs/<name>.py``), a task (the module named beside it,
which defines ``Task``) and a spec of the benchmark's facts
(``lnorm.analysis.specs``). Training loads a task from here, the analysis orders its
specs as this list does, and the GPU check measures every experiment listed. The
module holds names only: it imports nothing, so that the analysis may read it without
the harness.
"""

#: experiment name -> the module defining its ``Task``, imported only when the
#: experiment runs, so that adding one costs the others nothing. In the benchmark's
#: order: its suite and report list the experiments so.
EXPERIMENTS: dict[str, str] = {
    "perm_mnist": "experiments.perm_mnist.task",
    "order_embeddings": "experiments.order_embeddings.task",
    "bln_imdb": "experiments.bln_imdb.task",
    "bln_cifar": "experiments.bln_cifar.task",
    "skip_thoughts": "experiments.skip_thoughts.task",
    "handwriting": "experiments.handwriting.task",
    "draw": "experiments.draw.task",
    "attentive_reader": "experiments.attentive_reader.task",
    "transformer_lm": "experiments.transformer_lm.task",
}
