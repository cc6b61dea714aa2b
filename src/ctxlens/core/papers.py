"""The four papers ctxlens implements, by short id. Rows, docs and the report cite them by id.

``PAPERS["geometry"].title`` is the paper's title; ``cite("geometry", "Section 4")`` gives the
form docstrings and report captions use: 'How much do contextualized ... (Section 4)'.
The source texts are the project's seed documents (``../shared/seeds/000..003``); ``seed``
records which one, for readers who hold them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxlens.core.registry import Registry


@dataclass(frozen=True)
class Paper:
    id: str
    title: str
    side: str  # which side of context use it measures (DESIGN.md)
    seed: str  # the seed document's number


PAPERS: Registry[Paper] = Registry("paper")
for _p in (
    Paper("geometry", "How much do contextualized representations encode long-range context?",
          "representational", "000"),
    Paper("intrinsic-entropy", "Intrinsic Entropy of Context Length Scaling in LLMs", "intrinsic", "001"),
    Paper("long-sequence", "How Well Can a Long Sequence Model Model Long Sequences?", "extrinsic", "002"),
    Paper("rope-distance", "On the token distance modeling ability of higher RoPE attention dimension",
          "mechanistic", "003"),
):
    PAPERS.add(_p.id, _p)


def cite(paper: str, where: str = "") -> str:
    """'Title (where)' for paper id ``paper``; an unknown id gets the registry's suggestion."""
    title = PAPERS[paper].title
    return f"{title} ({where})" if where else title
