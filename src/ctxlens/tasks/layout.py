"""Lay needles into a haystack stream at token depths, and fit the whole prompt to the length.

Shared by the needle tasks, variable tracking and document QA (the long-sequence paper, "How Well Can a Long
Sequence Model Model Long Sequences?", Section 4 and Tables 2-4: needle depth and haystack
format). A prompt is ``before + context + after`` where the context is whole units of a haystack
``Stream`` (``Stream.pick``) with inserts (needles, chain lines, documents) placed as RULER
places them: before a uniformly drawn line in line haystacks (noise, needles), or at the unit
boundary nearest a target depth, measured in tokens of the haystack (essays, documents, and any
haystack when depths are asked for).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass

from ctxlens.core.texts import NATURAL
from ctxlens.tasks.base import Draft, Mark, Setup, count, too_short
from ctxlens.tasks.fit import Pick, Stream, fit_knob, join, pad_separators, place


def shared_stream(setup: Setup, kind: str) -> Stream:
    """The batch's ``noise`` or ``essay`` haystack stream, built once and shared by its samples."""
    from ctxlens.tasks import haystack as hay

    key: str | tuple[str, str]  # the key in ``setup.shared``
    if kind == "noise":
        key, make = "noise", lambda: Stream(hay.noise_lines(), "\n", setup.encoder)
    else:
        source = setup.option("haystack_source") or NATURAL  # RULER's essays are natural prose
        key = ("essay", source)
        make = lambda: Stream(hay.essay_sentences(source), " ", setup.encoder, keep_head=True)  # noqa: E731
    if key not in setup.shared:
        setup.shared[key] = make()
    return setup.shared[key]


@dataclass(frozen=True)
class Insert:
    text: str
    depth: float | None  # target depth in percent of the haystack's tokens (None: placed by ``line``)
    kind: str = "needle"
    answer: bool = True
    line: float | None = None  # RULER's rule for line haystacks: a uniform draw in [0, 1) picks the line
    shuffled: tuple[int, int] | None = None  # (seed, j): item j of a list shuffled by random.Random(seed) (RULER QA)


def shuffled_positions(n: int, inserts: list[Insert]) -> dict[int, int]:
    """Insert index -> its position among all ``n + k`` items, for the ``k`` ``shuffled`` inserts.

    RULER's QA (``scripts/data/synthetic/qa.py``) lists the question's documents first (item j for
    ``shuffled=(seed, j)``), then the distractors, and shuffles the whole list with
    ``random.Random(seed).shuffle``: the same permutation for every sample of a length, so item j
    lands at the position p with ``perm[p] == j``."""
    chosen = {i: ins.shuffled for i, ins in enumerate(inserts) if ins.shuffled is not None}  # i -> (seed, j)
    if not chosen:
        return {}
    perm = list(range(n + len(chosen)))
    random.Random(next(iter(chosen.values()))[0]).shuffle(perm)
    return {i: perm.index(j) for i, (_, j) in chosen.items()}


def slots(bounds: list[int], inserts: list[Insert]) -> list[int]:
    """The boundary (0 = before the first item) each insert goes to.

    ``line`` inserts: before a uniformly drawn item, distinct as RULER's ``random.sample(range(n),
    k)`` (the sorted draws u_1 <= ... <= u_k go to floor(u_i (n - k + 1)) + i - 1, never after the
    last item); ``shuffled`` inserts: where RULER's fixed-seed shuffle puts them
    (``shuffled_positions``); ``depth`` inserts: the boundary nearest their depth in tokens (``place``).
    """
    n = len(bounds) - 1
    at = shuffled_positions(n, inserts)
    fixed = {i: p - sum(q < p for q in at.values()) for i, p in at.items()}  # the distractors before position p
    drawn = sorted((ins.line, i) for i, ins in enumerate(inserts) if ins.line is not None)
    out = [0] * len(inserts)
    room = n - len(drawn) + 1
    for rank, (u, i) in enumerate(drawn):
        out[i] = int(u * room) + rank if room > 0 else int(u * max(n, 1))
    for i, ins in enumerate(inserts):
        if i in fixed:
            out[i] = fixed[i]
        elif ins.line is None:
            out[i] = place(bounds, ins.depth if ins.depth is not None else 0.0)
    return out


def stream_draft(stream: Stream, pick: Pick, before: list[str], after: list[str], inserts: list[Insert],
                 wrap: Callable[[list[str]], list[tuple[str, ...]]] | None = None) -> Draft:
    """The draft with the picked haystack units and ``inserts`` at their lines or depths.

    ``wrap`` may rewrite the context items (e.g. number QA documents) before they are joined,
    each as one or more pieces (a label and a text that is then cached on its own); the pick's
    padding is spread over the boundaries.
    """
    items = list(pick.units)
    bounds = list(itertools.accumulate(pick.costs, initial=0))
    within = shuffled_positions(len(items), inserts)  # inserts sharing a boundary keep their shuffled order
    ranked = sorted((slot, within.get(i, 0), i) for i, slot in enumerate(slots(bounds, inserts)))
    order = [(slot, i) for slot, _, i in ranked]
    merged: list[str] = []
    where: dict[int, int] = {}
    s = 0
    for j in range(len(items) + 1):
        while s < len(order) and order[s][0] == j:
            where[order[s][1]] = len(merged)
            merged.append(inserts[order[s][1]].text)
            s += 1
        if j < len(items):
            merged.append(items[j])
    parts: list[tuple[str, ...]] = [(m,) for m in merged] if wrap is None else wrap(merged)
    context, firsts = join_parts(parts, stream.sep, pick.pad, pick.pad_char)
    a = len(before)
    marks = [Mark(a + firsts[where[i]], ins.kind, ins.depth, ins.answer, len(parts[where[i]]))
             for i, ins in enumerate(inserts)]
    return Draft([*before, *context, *after], (a, a + len(context)), marks)


def join_parts(items: list[tuple[str, ...]], sep: str, pad: int, char: str = "") -> tuple[list[str], list[int]]:
    """Pieces of the items joined by ``sep`` (padded, ``pad_separators``), and each item's first piece.

    The separator goes to the end of an item's last piece (newline separators) or to the start of
    its first piece (space separators), as ``join`` does for one-piece items.
    """
    glued = join(pad_separators(["\x00".join(parts) for parts in items], sep, pad, char), sep)
    pieces: list[str] = []
    firsts = []
    for text in glued:
        firsts.append(len(pieces))
        pieces.extend(text.split("\x00"))
    return pieces, firsts


PAD_ABOVE = 0.005  # pad only when whole units leave more than this share of the length free


def fit_stream(setup: Setup, stream: Stream, make: Callable[[Pick], Draft], answer_prefix: str) -> tuple[Draft, Pick]:
    """The draft with the most whole haystack units whose prompt fits ``setup.target``; (draft, pick).

    The knob is the token budget of ``Stream.pick``; when the best pick still leaves more than
    ``PAD_ABOVE`` of the length free, the most separator padding that fits closes the gap.
    """
    target = setup.target
    empty = count(setup, make(stream.prefix(0)), answer_prefix)
    if empty > target:
        raise too_short(setup, empty + setup.budget)
    picks: dict[int, tuple[Pick, Draft]] = {}

    def exact(tokens: int) -> int:
        if tokens not in picks:
            pick = stream.pick(tokens)
            picks[tokens] = pick, make(pick)
        return count(setup, picks[tokens][1], answer_prefix)

    room = target - empty
    hi = 2 * room if setup.encoder.mode == "pieces" else 4 * room  # the estimate may be off either way
    close = max(1, setup.length // 1000)  # a fit this close to the target is kept as it is
    guess, found = room, None
    for _ in range(3):  # the estimate misses what ``make`` adds per unit (document numbers): rescale it
        got = exact(guess)
        if got <= target and target - got <= close:
            found = guess, got
            break
        scale = (got - empty) / max(1, picks[guess][0].cost)
        new = min(hi, int(room / scale)) if scale > 0 else guess
        if new == guess:
            break
        guess = new
    if found is None:
        found = fit_knob(exact, target, guess, 0, hi)
    assert found is not None  # pick(0) is make(prefix(0)), which fits
    pick = picks[found[0]][0]
    if target - found[1] > int(PAD_ABOVE * setup.length):
        pick, draft = _pad(setup, stream, make, answer_prefix, pick, found[1])
    else:
        draft = picks[found[0]][1]
    return draft, pick


def _pad(setup: Setup, stream: Stream, make: Callable[[Pick], Draft], answer_prefix: str, pick: Pick,
         got: int) -> tuple[Pick, Draft]:
    """``pick`` with the least padding that brings the gap under ``PAD_ABOVE`` (or the most that
    fits): blank lines first, else spaces where the tokenizer merges blank lines; none if neither
    adds a token."""
    target, allowed = setup.target, int(PAD_ABOVE * setup.length)
    gap = target - got
    best = (got, pick, make(pick))
    for char in dict.fromkeys((stream.sep[-1], " ")):
        drafts: dict[int, Draft] = {}

        def padded(pad: int, char: str = char, drafts: dict[int, Draft] = drafts) -> int:
            if pad not in drafts:
                drafts[pad] = make(pick.padded(pad, char))
            return count(setup, drafts[pad], answer_prefix)

        pad = gap - allowed  # one token per character, as with bytes
        n = padded(pad)
        if not target - allowed <= n <= target:
            pad, n = fit_knob(padded, target, pad, 0, gap) or (0, got)
        if n > best[0]:
            best = (n, pick.padded(pad, char), drafts[pad])
        if n >= target - allowed:
            break
    return best[1], best[2]
