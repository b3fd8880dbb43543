"""Which training code made a claim's records: the commit each member's config.json
names (``lnorm.training.environment.code_revision``), and one line when they differ.

Members trained by different code may differ for that reason alone (a refactor that
reorders a sum changes the last bits, and a chaotic run amplifies them), so the
benchmark report says, claim by claim, when its members do not all come from one
clean commit. It is a line beside the verdict, not a change of it.
"""

from __future__ import annotations

import collections
from typing import Any, Sequence

from lnorm.analysis.runs import Run, read_config

#: How a commit is shown.
SHORT = 10
NO_COMMIT = "no commit recorded"


def code_of(record: dict[str, Any]) -> list[str]:
  """The code a record was trained by, one label per stretch of the run: the commit
  (shortened, ``+changes`` when lnorm/, experiments/ or configs/ differed from it),
  NO_COMMIT for a record without one (made before records named it, or by an
  installed package); stretches before a resume by other code first."""
  labels = []
  for code in list(record.get("code_before_resume", [])) + [record.get("code")]:
    if not code or not code.get("commit"):
      labels.append(NO_COMMIT)
    else:
      labels.append(code["commit"][:SHORT] + ("+changes" if code.get("dirty") else ""))
  return list(dict.fromkeys(labels))


def training_code_note(runs: Sequence[Run]) -> str:
  """A line for the report when ``runs`` (a claim's members) do not all come from
  one clean commit; "" when they do."""
  members = {r.path: code_of(read_config(r.path)) for r in runs}
  if not members:
    return ""
  counts = collections.Counter(label for labels in members.values() for label in labels)
  mixed = sum(len(labels) > 1 for labels in members.values())
  if len(counts) == 1:
    (label,) = counts
    if label == NO_COMMIT:
      return ""  # Said once for the whole report: :func:`without_commit`.
    if label.endswith("+changes"):
      return (f"training code: all {len(members)} members at {label[:SHORT]} with "
              "uncommitted changes in lnorm/, experiments/ or configs/: not known to be "
              "the same code")
    return ""
  parts = [f"{n} at {label}" if label != NO_COMMIT else f"{n} with {label}"
           for label, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
  resumed = f"; {mixed} resumed under other code" if mixed else ""
  return (f"training code differs between the {len(members)} members: "
          + ", ".join(parts) + resumed)


def without_commit(paths: Sequence[str]) -> int:
  """How many of the records at ``paths`` name no commit for some stretch of their
  run: the report says it once, above the claims, rather than under each."""
  return sum(NO_COMMIT in code_of(read_config(p)) for p in paths)
