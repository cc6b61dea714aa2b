"""The built-in corpus's documents: their records and generators, and how one document is written.

``documents`` / ``annotated_documents`` stream the documents of one split and seed, and
``corpus_text`` joins them into a training text. A document is written chunk by chunk
(``_document``): the introductions of its people, then filler sentences, facts with their
asks scheduled near or far after them, and verbatim copies of earlier filler (the induction
spans), until it reaches its target length with no ask pending. Each document draws from its
own ``random.Random`` seeded with a string, so its bytes never depend on the others.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from ctxlens.core.errors import unknown
from ctxlens.data.checks import check_int
from ctxlens.data.corpus.facts import new_key, question, statement, value_for
from ctxlens.data.corpus.language import filler, introduction, new_world

SPLITS = ("train", "validation", "test")
NEAR_MAX_DISTANCE = 400  # bytes from a near fact's stated value to the start of its answer
FAR_MIN_DISTANCE = 600  # ... and the least such distance for a far fact
MIN_DOCUMENT_BYTES = 500
_SLACK = 300  # room above a document's target length for the events that finish it

# --------------------------------------------------------------------------------------
# Public records
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    """A key-value fact in a document; offsets are byte offsets into its text.

    ``stated_at``: start of the statement sentence; ``value_at``: start of the value in it;
    ``asked_at`` / ``answer_at``: start of the ask and of the answer in it (None if never
    asked); ``kind``: "near", "far" or "unasked".
    """

    key: str
    value: str
    kind: str
    stated_at: int
    value_at: int
    asked_at: int | None = None
    answer_at: int | None = None

    @property
    def distance(self) -> int | None:
        """Bytes from the stated value to the answer, or None if never asked."""
        return None if self.answer_at is None else self.answer_at - self.value_at


@dataclass(frozen=True)
class Span:
    """``text[target:target + length] == text[source:source + length]``, source before target."""

    source: int
    target: int
    length: int


@dataclass(frozen=True)
class Document:
    """One generated document with the structure put into it (for tests and analyses)."""

    text: str
    facts: tuple[Fact, ...]
    spans: tuple[Span, ...]
    people: tuple[str, ...]  # full names, in order of introduction



# --------------------------------------------------------------------------------------
# Public generators
# --------------------------------------------------------------------------------------


def documents(
    seed: int,
    n: int | None,
    *,
    split: str = "train",
    min_bytes: int = 1500,
    max_bytes: int = 6000,
) -> Iterator[str]:
    """The texts of ``n`` corpus documents (``n=None``: endless), each min..max bytes long.

    The splits are disjoint streams: document i of (seed, split) is generated from its own
    string seed, so it never depends on ``n`` or on other splits.
    """
    for doc in annotated_documents(seed, n, split=split, min_bytes=min_bytes,
                                   max_bytes=max_bytes):
        yield doc.text


def annotated_documents(
    seed: int,
    n: int | None,
    *,
    split: str = "train",
    min_bytes: int = 1500,
    max_bytes: int = 6000,
) -> Iterator[Document]:
    """Like ``documents`` but yields ``Document`` records with their facts and spans."""
    check_int("seed", seed)
    if n is not None:
        check_int("n", n, minimum=0)
    if split not in SPLITS:
        raise unknown("built-in corpus split", str(split), SPLITS)
    check_int("min_bytes", min_bytes, minimum=MIN_DOCUMENT_BYTES)
    check_int("max_bytes", max_bytes, minimum=min_bytes + _SLACK)
    indices = itertools.count() if n is None else range(n)
    for index in indices:
        rng = random.Random(f"ctxlens.corpus:{split}:{seed}:{index}")
        yield _document(rng, min_bytes, max_bytes)


def corpus_text(seed: int, n_bytes: int, split: str = "train") -> str:
    """Documents joined by ``"\\n\\n"`` until at least ``n_bytes`` long, cut at ``n_bytes``."""
    check_int("n_bytes", n_bytes, minimum=0)
    parts: list[str] = []
    size = 0
    for doc in documents(seed, None, split=split):
        if size >= n_bytes:
            break
        parts.append(doc)
        size += len(doc) + 2
    return "\n\n".join(parts)[:n_bytes]


# --------------------------------------------------------------------------------------
# Writing one document
# --------------------------------------------------------------------------------------


@dataclass
class _Writer:
    """Appends chunks to a text and remembers which stretches are copyable filler."""

    rng: random.Random
    text: str = ""
    regions: list[list[int]] = field(default_factory=list)  # [start, end) of filler runs

    def add(self, chunk: str, *, copyable: bool = False) -> int:
        """Append ``chunk`` after a separator; return its start offset."""
        extends_run = copyable and bool(self.regions) and self.regions[-1][1] == len(self.text)
        if self.text:
            self.text += "\n" if self.rng.random() < 0.08 else " "
        start = len(self.text)
        self.text += chunk
        if extends_run:
            self.regions[-1][1] = len(self.text)
        elif copyable:
            self.regions.append([start, len(self.text)])
        return start


@dataclass
class _Pending:
    due: int  # emit the ask once the text is at least this long
    key: str
    value: str
    kind: str
    stated_at: int
    value_at: int


_NEAR_GAP = (0, 120)  # filler bytes between a near statement and its ask (before overshoot)
_FAR_GAP = (FAR_MIN_DISTANCE + 100, 3500)
_SPAN_BYTES = (20, 80)
_RECENT_BYTES = 450  # "recent" span sources lie within this many bytes of the copy


def _document(rng: random.Random, min_bytes: int, max_bytes: int) -> Document:
    target = rng.randint(min_bytes, max_bytes - _SLACK)
    world = new_world(rng, rng.randint(2, 4))
    out = _Writer(rng)
    for person in world.people:
        out.add(introduction(person), copyable=True)
    keys: list[str] = []
    pending: list[_Pending] = []
    facts: list[Fact] = []
    spans: list[Span] = []
    while True:
        _emit_due_asks(out, pending, facts)
        if len(out.text) >= target and not pending:
            break
        roll = rng.random()
        if roll < 0.13 and len(out.text) + _NEAR_GAP[1] + 150 < target:
            _state_fact(rng, out, keys, pending, facts, target)
        elif roll < 0.25 and _copy_span(rng, out, spans):
            pass
        else:
            out.add(filler(rng, world), copyable=True)
    facts.sort(key=lambda f: f.stated_at)
    people = tuple(f"{p.first} {p.last}" for p in world.people)
    return Document(out.text, tuple(facts), tuple(spans), people)


def _state_fact(rng: random.Random, out: _Writer, keys: list[str], pending: list[_Pending], facts: list[Fact],
                target: int) -> None:
    """State a new fact and schedule its ask: near (60%), far (25%, if room) or never."""
    key = new_key(rng, keys, numeric=False)
    value = value_for(rng, key)
    stated_at = out.add(statement(key, value))
    value_at = stated_at + len(statement(key, "")) - 1
    end = len(out.text)
    roll = rng.random()
    far_room = target - end - 100
    if roll < 0.6:
        pending.append(_Pending(end + rng.randint(*_NEAR_GAP), key, value, "near", stated_at,
                                value_at))
    elif roll < 0.85 and far_room >= _FAR_GAP[0]:
        gap = rng.randint(_FAR_GAP[0], min(_FAR_GAP[1], far_room))
        pending.append(_Pending(end + gap, key, value, "far", stated_at, value_at))
    else:
        facts.append(Fact(key, value, "unasked", stated_at, value_at))


def _emit_due_asks(out: _Writer, pending: list[_Pending], facts: list[Fact]) -> None:
    due = [p for p in pending if p.due <= len(out.text)]
    for p in sorted(due, key=lambda p: p.due):
        asked_at = out.add(f"{question(p.key)}{p.value}.")
        answer_at = asked_at + len(question(p.key))
        facts.append(Fact(p.key, p.value, p.kind, p.stated_at, p.value_at, asked_at, answer_at))
        pending.remove(p)


def _copy_span(rng: random.Random, out: _Writer, spans: list[Span]) -> bool:
    """Copy 20-80 word-aligned bytes of earlier filler verbatim; False if none fits."""
    recent = rng.random() < 0.6
    horizon = len(out.text) - _RECENT_BYTES if recent else 0
    regions = [(max(s, horizon), e) for s, e in out.regions if e - max(s, horizon) >= 40]
    if not regions:
        return False
    start, end = rng.choice(regions)
    span = _word_span(rng, out.text, start, end)
    if span is None:
        return False
    source, length = span
    target = out.add(out.text[source:source + length])
    spans.append(Span(source, target, length))
    return True


def _word_span(rng: random.Random, text: str, start: int, end: int) -> tuple[int, int] | None:
    """A (source, length) in text[start:end] that starts and ends on word boundaries."""
    starts = [i for i in range(start, end)
              if text[i] not in " \n" and (i == 0 or text[i - 1] in " \n")]
    rng.shuffle(starts)
    for first in starts[:8]:
        want = rng.randint(*_SPAN_BYTES)
        last = min(first + want, end)
        while last > first and last < end and text[last] not in " \n":
            last -= 1
        if _SPAN_BYTES[0] <= last - first <= _SPAN_BYTES[1]:
            return first, last - first
    return None
