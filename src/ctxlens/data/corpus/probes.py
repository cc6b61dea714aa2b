"""The built-in corpus's single-needle retrieval probes, in the corpus's own wording.

``retrieval_probes`` builds the needle-in-a-haystack prompts of "How Well Can a Long Sequence
Model Model Long Sequences?" (Section 4; RULER's single needle) from corpus-like text: one
numeric fact stated a chosen number of bytes before the end of the prompt, distractor facts
with other keys around it, and the prompt ending in the fact's question. Each probe draws from
its own string-seeded ``random.Random``, so probe i is the same at every distance.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ctxlens.core.errors import CtxlensError
from ctxlens.data.checks import check_int
from ctxlens.data.corpus.facts import MIN_PROBE_DISTANCE, new_key, question, statement, value_for
from ctxlens.data.corpus.language import SHORT, World, filler, introduction, new_world

PROBE_DISTANCE_TOLERANCE = 12  # a probe's fact sits at most this many bytes short of the request


@dataclass(frozen=True)
class RetrievalProbe:
    """A prompt that ends in ``question(key)``; the model should continue with ``answer``.

    The fact ``statement(key, answer)`` starts exactly ``distance_bytes`` bytes before the end
    of ``prompt`` (which is ``total_bytes`` long and holds that statement once).
    """

    prompt: str
    answer: str
    key: str
    distance_bytes: int


def retrieval_probes(
    seed: int, n: int, *, distance_bytes: int, total_bytes: int
) -> list[RetrievalProbe]:
    """``n`` single-needle retrieval prompts (paper 002, RULER NIAH, in the corpus's format).

    Each prompt is ``total_bytes`` of corpus-like text (cut on the left like a window of the
    corpus) holding one fact ``statement(key, answer)`` that starts ``distance_bytes`` bytes
    before the end (at most ``PROBE_DISTANCE_TOLERANCE`` bytes fewer, as sentences are whole),
    distractor facts with other keys before and after it, and ending in ``question(key)``.
    Answers are 4-digit numbers (greedy chance of an exact match about 1e-4). Probe i's key,
    answer and people depend on (seed, i) only, not on the distances, so sweeps are paired.
    """
    check_int("seed", seed)
    check_int("n", n, minimum=0)
    check_int("total_bytes", total_bytes, minimum=1)
    check_int("distance_bytes", distance_bytes, minimum=MIN_PROBE_DISTANCE)
    if distance_bytes > total_bytes:
        raise CtxlensError(
            f"distance_bytes={distance_bytes} is more than total_bytes={total_bytes}; the fact "
            "must sit inside the prompt, so pass a smaller distance or a longer prompt."
        )
    return [
        _probe(random.Random(f"ctxlens.corpus:probe:{seed}:{i}"), distance_bytes, total_bytes)
        for i in range(n)
    ]


# --------------------------------------------------------------------------------------
# Building one probe
# --------------------------------------------------------------------------------------


def _probe(rng: random.Random, distance: int, total: int) -> RetrievalProbe:
    world = new_world(rng, rng.randint(2, 4))
    keys: list[str] = []
    key = new_key(rng, keys, numeric=True)
    answer = value_for(rng, key)
    fact, ask = statement(key, answer), question(key)
    shortest = len(fact) + 1 + len(ask)  # <= MIN_PROBE_DISTANCE <= distance
    middle = _fill(rng, world, keys, distance - shortest - 1)
    tail = " ".join(part for part in (fact, middle, ask) if part)
    head = _left_cut(rng, world, keys, total - len(tail))
    return RetrievalProbe(head + tail, answer, key, len(tail))


def _fill(rng: random.Random, world: World, keys: list[str], budget: int) -> str:
    """Whole chunks joined by spaces, at most ``budget`` bytes, within 12 bytes of it."""
    parts: list[str] = []
    used = -1
    while True:
        room = budget - used - 1
        chunk = _fitting_chunk(rng, world, keys, room)
        if chunk is None:
            return " ".join(parts)
        parts.append(chunk)
        used += len(chunk) + 1


def _fitting_chunk(rng: random.Random, world: World, keys: list[str], room: int) -> str | None:
    """A filler sentence or distractor fact of at most ``room`` bytes, or None if none fits."""
    if room < min(len(s) for s in SHORT):
        return None
    for _ in range(20):
        chunk = _distractor(rng, keys) if rng.random() < 0.1 else filler(rng, world)
        if len(chunk) <= room:
            return chunk
    fits = [s for s in SHORT if len(s) <= room]
    return rng.choice(fits)


def _distractor(rng: random.Random, keys: list[str]) -> str:
    """A fact with a new numeric key (never the probe's), stated and never asked."""
    key = new_key(rng, keys, numeric=True)
    return statement(key, value_for(rng, key))


def _left_cut(rng: random.Random, world: World, keys: list[str], size: int) -> str:
    """The last ``size`` bytes of fresh corpus-like text ending in a separator ('' if 0)."""
    if size <= 0:
        return ""
    parts = [introduction(p) for p in world.people]
    length = sum(len(p) + 1 for p in parts)
    while length < size:
        chunk = _distractor(rng, keys) if rng.random() < 0.1 else filler(rng, world)
        parts.append(chunk)
        length += len(chunk) + 1
    return (" ".join(parts) + " ")[-size:]
