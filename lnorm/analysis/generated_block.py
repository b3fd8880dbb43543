"""A generated block of a Markdown page: the text between two marker comments, which a
command (``lnorm benchmark --update``, ``lnorm gpu-report --update``) rewrites while the
prose around it stays the author's."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class GeneratedBlock:
  begin: str  # The opening marker line, e.g. "<!-- lnorm benchmark: begin ... -->".
  end: str

  def _span(self, text: str) -> tuple[int, int] | None:
    begin, end = text.find(self.begin), text.find(self.end)
    return None if begin < 0 or end < begin else (begin, end)

  def read(self, text: str) -> str | None:
    """What the page shows between the markers; None without them."""
    span = self._span(text)
    return None if span is None else text[span[0] + len(self.begin):span[1]].lstrip("\n")

  def replace(self, text: str, block: str, *, add_after_title: bool = False) -> str:
    """``text`` with the block between the markers replaced by ``block``. A page without
    the markers gets them after its title line when ``add_after_title``, else is refused
    (ValueError), since where the block goes is then the author's choice."""
    span = self._span(text)
    if span is None:
      if not add_after_title:
        raise ValueError(f"The page has no markers: add the two lines\n{self.begin}\n"
                         f"{self.end}\nwhere the generated text goes.")
      title, newline, rest = text.partition("\n")
      return f"{title}{newline}\n{self.begin}\n{block}{self.end}\n{rest}"
    return text[:span[0] + len(self.begin)] + "\n" + block + text[span[1]:]
