"""The four papers ctxlens implements, by short id: the one table every layer cites them from (no torch).

The key is the short id (``geometry``, ``intrinsic-entropy``, ``long-sequence``, ``rope-distance``):
experiment declarations, ``ctxlens experiments``, the README and the report name papers by it,
and it says which paper it is without the seed documents at hand. The seed document's number
(``../shared/seeds/000..003``) is a field, ``seed``, for readers who hold them; no result or
config file records a paper by either key (rows and the card carry the cited text).

    PAPERS["geometry"].title           # the paper's title
    cite("geometry", "Section 4")      # 'How much do contextualized ... (Section 4)': docstrings, --help
    named("geometry", "Section 4")     # 'the geometry paper, How much do ..., Section 4': findings, card
    heading("rope-distance")           # 'On the token distance ... dimension.': report captions

``RULER_TASKS`` are the 13 tasks of RULER, the long-sequence paper's benchmark (Table 1): the
task registry (``ctxlens.tasks``) and the card's effective-length line read them from here.
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
    name: str  # what prose calls it: "the {name} paper" (the id, RoPE capitalised)


PAPERS: Registry[Paper] = Registry("paper")
for _p in (
    Paper("geometry", "How much do contextualized representations encode long-range context?",
          "representational", "000", "geometry"),
    Paper("intrinsic-entropy", "Intrinsic Entropy of Context Length Scaling in LLMs", "intrinsic", "001",
          "intrinsic-entropy"),
    Paper("long-sequence", "How Well Can a Long Sequence Model Model Long Sequences?", "extrinsic", "002",
          "long-sequence"),
    Paper("rope-distance", "On the token distance modeling ability of higher RoPE attention dimension",
          "mechanistic", "003", "RoPE-distance"),
):
    PAPERS.add(_p.id, _p)

RULER_TASKS = (
    "niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2", "niah_multikey_3",
    "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa_1", "qa_2",
)


def cite(paper: str, where: str = "") -> str:
    """'Title (where)' for paper id ``paper``; an unknown id gets the registry's suggestion."""
    title = PAPERS[paper].title
    return f"{title} ({where})" if where else title


def named(paper: str, where: str = "") -> str:
    """'the geometry paper, Title, where': how findings and card lines cite paper id ``paper``."""
    p = PAPERS[paper]
    return f"the {p.name} paper, {p.title}" + (f", {where}" if where else "")


def heading(paper: str) -> str:
    """The title of paper id ``paper`` as a caption's first sentence: a full stop unless it ends in '?'."""
    title = PAPERS[paper].title
    return title if title.endswith(("?", ".")) else f"{title}."
