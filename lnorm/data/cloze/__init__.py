"""Cloze question answering with anonymised entities (the attentive reader's data).

An example is a passage, a question with one ``@placeholder`` and an answer among its
candidates, all entities anonymised as ``@entity0``, ``@entity1``, ... per example
(:mod:`.example`); every source ends in the same arrays (:mod:`.dataset`).

Sources (``data.source``):

* ``files``: the CNN / Daily Mail corpus of Hermann et al. (2015), one
  ``.question`` file per example (:mod:`.cnn`); candidates: the passage's entities.
* ``cbt``: the Children's Book Test of Hill et al. (2016), ``cbtest_<T>_*.txt``
  (:mod:`.cbt`); candidates: the 10 listed words.
* ``cbt_books``: a CBT-style task built from a folder of tokenised books
  (:mod:`.books`), written out in the CBT format and read back by the CBT reader.
* ``cloze_books``: the smaller task with 4-sentence passages built from the same
  books (:mod:`.books`).
* ``synthetic``: cue-word questions for smoke runs only (:mod:`.synthetic`).

The modules import in one direction: example <- dataset <- cnn, cbt <- books.
"""

from __future__ import annotations

from lnorm.data.cloze import books
from lnorm.data.cloze import cbt
from lnorm.data.cloze import cnn
from lnorm.data.cloze import synthetic
from lnorm.data.cloze.dataset import NAME
from lnorm.data.cloze.example import ENTITY_OFFSET, PLACEHOLDER, PLACEHOLDER_ID

SOURCES = {"files": cnn.load, "cbt": cbt.load, "cbt_books": books.load_cbt_books,
           "cloze_books": books.load_cloze_books, "synthetic": synthetic.load}
# 'auto' never swaps one corpus for a different task: cbt and the tasks built from
# books are asked for by name.
AUTO = ("files",)

__all__ = ["AUTO", "ENTITY_OFFSET", "NAME", "PLACEHOLDER", "PLACEHOLDER_ID", "SOURCES"]
