"""Lay needles into a haystack stream at token depths, and fit the whole prompt to the length.

Shared by the needle tasks, variable tracking and document QA (the long-sequence paper, "How Well Can a Long
Sequence Model Model Long Sequences?", Section 4 and Tables 2-4: needle depth and haystack
format). A prompt is ``before + context + after`` where the context is the first W words of a
haystack ``Stream`` with inserts (needles, chain lines, documents) placed at the unit boundary
nearest to each insert's target depth, measured in tokens of the haystack.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ctxlens.tasks.base import Draft, Mark, Setup, count, too_short
from ctxlens.tasks.fit import Stream, fit_knob, join, place, refine


def shared_stream(setup: Setup, kind: str) -> Stream:
    """The batch's ``noise`` or ``essay`` haystack stream, built once and shared by its samples."""
    from ctxlens.tasks import haystack as hay

    if kind == "noise":
        key, make = "noise", lambda: Stream(hay.noise_lines(), "\n", setup.encoder)
    else:
        source = setup.option("haystack_source") or "builtin"
        key, make = ("essay", source), lambda: Stream(hay.essay_sentences(source), " ", setup.encoder)
    if key not in setup.shared:
        setup.shared[key] = make()
    return setup.shared[key]


@dataclass(frozen=True)
class Insert:
    text: str
    depth: float  # target depth in percent of the haystack's tokens
    kind: str = "needle"
    answer: bool = True


def stream_draft(stream: Stream, words: int, before: list[str], after: list[str], inserts: list[Insert],
                 wrap: Callable[[list[str]], list[str]] | None = None) -> Draft:
    """The draft with the first ``words`` haystack words and ``inserts`` at their depths.

    An insert goes to the unit boundary nearest its depth. When the words end inside a unit,
    the cut-off unit is last; in line haystacks an insert may follow it (a newline still
    separates them), in prose it stays after every insert (depth 100 is then less than one
    sentence from the end).

    ``wrap`` may rewrite the context items (e.g. number QA documents) before they are joined.
    """
    units, partial = stream.cut(words)
    items = units + ([partial] if partial else [])
    # inserts go to boundaries between units; after a cut-off last unit only in line haystacks
    # (a newline still separates them), never in prose (it would follow a broken sentence)
    n_slots = len(items) if "\n" in stream.sep else len(units)
    bounds = stream.cum_tokens[: len(units) + 1]
    if n_slots > len(units):
        bounds = [*bounds, bounds[-1] + stream.encoder.cost(stream.sep + partial)]
    slots = sorted(((place(bounds, ins.depth), i) for i, ins in enumerate(inserts)))
    merged: list[str] = []
    where: dict[int, int] = {}
    s = 0
    for j in range(len(items) + 1):
        while s < len(slots) and slots[s][0] == j:
            where[slots[s][1]] = len(merged)
            merged.append(inserts[slots[s][1]].text)
            s += 1
        if j < len(items):
            merged.append(items[j])
    if wrap is not None:
        merged = wrap(merged)
    pieces = [*before, *join(merged, stream.sep), *after]
    a = len(before)
    marks = [Mark(a + where[i], ins.kind, ins.depth, ins.answer) for i, ins in enumerate(inserts)]
    return Draft(pieces, (a, a + len(merged)), marks)


def fit_stream(setup: Setup, stream: Stream, make: Callable[[int], Draft], answer_prefix: str) -> tuple[Draft, int]:
    """The draft with the most haystack words whose prompt fits ``setup.target``; (draft, words)."""
    target = setup.target
    empty = count(setup, make(0), answer_prefix)
    if empty > target:
        raise too_short(setup, empty + setup.budget)
    stream.extend_to(target)
    # first on the cheap estimate (cached unit costs), then exactly from there: few exact counts
    rough = fit_knob(lambda w: empty + stream.cost_of(w), target, stream.words_for(target - empty), 0,
                     stream.total_words)
    drafts: dict[int, Draft] = {}

    def exact(w: int) -> int:
        drafts[w] = drafts.get(w) or make(w)
        return count(setup, drafts[w], answer_prefix)

    mode = setup.encoder.mode
    found = refine(exact, target, rough[0] if rough else 0, 0, stream.total_words, mode)
    while found is not None and found[0] == stream.total_words and not stream.exhausted:
        stream.extend_to(2 * stream.cum_tokens[-1])  # the estimate was short (full-encoding mode)
        found = fit_knob(exact, target, found[0], 0, stream.total_words)
    assert found is not None  # make(0) fits
    words, _ = found
    return drafts[words], words
