"""Evaluations of trained models and of normalizers themselves: linear probes of
sentence vectors (SentEval, Kiros et al.), caption retrieval, BLN's inference-statistics
search, and the LN paper's Table 1 measured.

May import the library below it (``data``, ``normalization``, ``training``), never the
commands; experiments import it.
"""
