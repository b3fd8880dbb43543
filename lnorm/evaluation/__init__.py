"""Evaluations of trained models and of normalizers themselves that several
experiments share: BLN's inference-statistics search, trivial baselines, and the LN
paper's Table 1 measured. (An evaluation one experiment alone uses lives in its
folder: the caption retrieval of order-embeddings, the sentence probes of
skip-thoughts.)

May import the library below it (``data``, ``normalization``, ``training``), never the
commands; experiments import it.
"""
