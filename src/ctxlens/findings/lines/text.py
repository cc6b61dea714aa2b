"""The card's text line: which text the lines that read text read (issue 44, part 4).

The papers read natural text (OpenWebText and PG-19 in the geometry and entropy papers, LongBench in the
rope-distance paper); a loss curve, an ACCS trend or an entropy slope measured on ctxlens's synthetic
corpus describes that corpus as much as the model. The line names each source its parts' rows record
(``source`` column), what it is (``ctxlens.core.texts.describe``: the natural text with its release and
manifest digest, or the synthetic corpus), and which parts read it.
"""

from __future__ import annotations

from ctxlens.core.texts import describe, natural
from ctxlens.findings.card import Context, Line, card_line


@card_line("text", "which text the text-reading lines read", "each part's rows (their source column)",
           "natural text, as the papers read (OpenWebText, PG-19, LongBench)", order=0.7)
def text(ctx: Context) -> Line:
    parts = {"loss-vs-length": ctx.of("loss-vs-length"), "suffix-ppl": ctx.of("suffix-ppl"),
             "accs-layers": ctx.of("accs-layers"), "accs-boundary": ctx.of("accs-boundary"),
             "positional-heads": ctx.of("positional-heads"), "head-masking": ctx.of("head-masking"),
             "intrinsic-entropy": ctx.of("intrinsic-entropy")}
    return text_line(ctx.model, {p: [r for r in rows if r.get("source")] for p, rows in parts.items()})


TEXT_PARTS = ("loss-vs-length", "suffix-ppl", "accs-layers", "accs-boundary", "positional-heads", "head-masking",
              "intrinsic-entropy")  # the card's parts that read windows of a text source


def text_line(model: str, rows: dict[str, list[dict]]) -> Line:
    """Per source, what it is and the parts whose rows read it; the verdict says whether every text
    line read natural text."""
    read: dict[str, list[str]] = {}
    for part, found in rows.items():
        for spec in dict.fromkeys(str(r["source"]) for r in found):
            read.setdefault(spec, []).append(part)
    if not read:
        return Line("text", model, None, "no text-reading part ran", "", "", {})
    described: dict[str, list[str]] = {}  # what a source is -> the parts that read it (a corpus's splits together)
    for spec, parts in read.items():
        described.setdefault(describe(spec), []).extend(p for p in parts if p not in described.get(describe(spec), []))
    shown = "; ".join(f"{what}: {', '.join(parts)}" for what, parts in described.items())
    kinds = {natural(spec) for spec in read}
    verdict = ("natural text" if kinds == {True} else
               "not natural text: the lines describe the synthetic corpus as much as the model" if kinds == {False}
               else "partly natural text: see which parts read which source" if True in kinds
               else "the user's own text")
    return Line("text", model, None, shown, "", verdict, {"sources": read})
