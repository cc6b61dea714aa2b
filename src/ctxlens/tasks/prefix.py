"""Which prompt prefixes to prefill once, found from token ids alone, and a bounded store of their caches.

The depth sweeps of the long-sequence paper ("How Well Can a Long Sequence Model Model Long
Sequences?", Section 4, Tables 2-3) ask the same haystack with the needle at 11 depths, so the
prompts of a sweep form a trie: they share their ids up to where a needle (or anything else)
first differs. Nothing here knows how a haystack is built; it compares token ids.

* ``shared_lengths``: for each prompt, the longest prefix it has in common with another prompt
  of the same call (neighbours in sorted order), i.e. the trie node where it branches off;
* ``PrefixStore``: caches of such prefixes, kept across calls (the units of one model), so the
  next depth finds the previous depth's prefix: used as it is when it is a prefix of the new
  prompt, or cut back to the common part when the cache keeps every past token
  (``ctxlens.lm.prefix_cache.croppable``). The newest entry is always kept; older ones while
  all together fit ``max_bytes``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ctxlens.lm.prefix_cache import croppable, nbytes

if TYPE_CHECKING:
    from transformers import Cache  # checked as Any (pyproject)


def common_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two id sequences."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if differ.size else n


def shared_lengths(prompts: Sequence[Sequence[int]]) -> list[int]:
    """Per prompt, the longest prefix it shares with any other prompt (0 for a lone prompt), at
    most its length minus one (its last token must run to give the first logits). In sorted order
    a prompt's longest common prefix with any other is the one with a neighbour."""
    order = sorted(range(len(prompts)), key=lambda i: tuple(prompts[i]))
    out = [0] * len(prompts)
    for a, b in zip(order, order[1:]):
        n = common_length(prompts[a], prompts[b])
        out[a], out[b] = max(out[a], n), max(out[b], n)
    return [min(n, max(len(p) - 1, 0)) for n, p in zip(out, prompts)]


class PrefixStore:
    """Caches of prefixes (``key``: the ids a cache covers), least recently used first."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.entries: list[tuple[tuple[int, ...], object, bool, int]] = []  # (key, cache, croppable, bytes)

    def best(self, ids: Sequence[int]) -> tuple[int, object, int]:
        """(n, cache, its length): the stored cache usable for the longest prefix ``ids[:n]`` of
        ``ids`` (cut to n tokens when it covers more); (0, None, 0) when none is."""
        found: tuple[int, object, int] = (0, None, 0)
        pick = -1
        for j, (key, cache, cut_ok, _) in enumerate(self.entries):
            n = common_length(key, ids)
            if n > found[0] and (n == len(key) or cut_ok):
                found, pick = (n, cache, len(key)), j
        if pick >= 0:
            self.entries.append(self.entries.pop(pick))
        return found

    def add(self, key: Sequence[int], cache: Cache) -> None:
        self.entries.append((tuple(key), cache, croppable(cache), nbytes(cache)))
        while len(self.entries) > 1 and sum(e[3] for e in self.entries) > self.max_bytes:
            self.entries.pop(0)
