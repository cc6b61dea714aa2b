"""Exact-length fitting and depth placement for the RULER-style tasks.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4, Tables 1-4)
reads accuracy per context length and needle depth, so both must be what they claim to be.
Two pieces do that here:

* ``Stream``: a haystack as a sequence of units (lines, sentences, documents) joined by one
  separator, cut after a whole number of *words* (the last unit may be partial, as RULER's essay
  haystack ends mid-sentence). Its cumulative word and token counts give the first estimate of
  how many words fit, without tokenising the prompt.
* ``fit_knob``: the largest integer knob (words of haystack, distinct words, documents) whose
  exact prompt count stays within the target. It gallops from the estimate and bisects, calls
  the exact counter O(log error) times, only returns a knob it has checked, and always stops.

``place`` puts needles at the unit boundary nearest to a target depth measured in tokens.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ctxlens.tasks.tokens import Encoder

_WORD_END = re.compile(r"\S+")


def fit_knob(count: Callable[[int], int], target: int, start: int, lo: int, hi: int) -> tuple[int, int] | None:
    """(n, count(n)) with lo <= n <= hi and count(n) <= target, n as large as a monotone count allows.

    Starts at ``start`` (an estimate), gallops to bracket the boundary, then bisects. Returns
    None when even ``count(lo)`` exceeds ``target``.
    """
    seen: dict[int, int] = {}

    def fits(n: int) -> bool:
        if n not in seen:
            seen[n] = count(n)
        return seen[n] <= target

    n = min(max(start, lo), hi)
    bad: int | None = None
    if fits(n):
        good, step = n, 1
        while good < hi:
            cand = min(good + step, hi)
            if not fits(cand):
                bad = cand
                break
            good, step = cand, step * 2
    else:
        bad, step = n, 1
        while True:
            cand = bad - step
            if cand <= lo:
                if not fits(lo):
                    return None
                good = lo
                break
            if fits(cand):
                good = cand
                break
            bad, step = cand, step * 2
    while bad is not None and bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good, seen[good]


def refine(exact: Callable[[int], int], target: int, guess: int, lo: int, hi: int,
           mode: str) -> tuple[int, int] | None:
    """Fit the exact count from a good ``guess`` of the cheap estimate.

    In ``pieces`` mode the estimate differs from the exact count only at a few piece boundaries,
    so the guess is only checked and lowered if needed (usually one exact count); in ``full``
    mode the estimate can be far off and the search goes both ways.
    """
    guess = min(max(guess, lo), hi)
    return fit_knob(exact, target, guess, lo, guess if mode == "pieces" else hi)


@dataclass
class Stream:
    """Haystack units from ``source`` (an iterator), joined by ``sep``, counted in words and tokens.

    ``units[i]`` is a unit's text without separators; ``cum_words[i]`` / ``cum_tokens[i]`` count
    the words / tokens of the first ``i`` units (each unit costed as the piece it is inside a
    join, e.g. ``unit + "\n"``: an estimate, exact up to the context's two ends).
    """

    source: Iterator[str]
    sep: str
    encoder: Encoder
    units: list[str] = field(default_factory=list)
    ends: list[list[int]] = field(default_factory=list)  # character end of each word of each unit
    cum_words: list[int] = field(default_factory=lambda: [0])
    cum_tokens: list[int] = field(default_factory=lambda: [0])
    exhausted: bool = False

    def extend_to(self, tokens: int) -> None:
        """Read units until the stream holds more than ``tokens`` estimated tokens (or runs dry)."""
        while self.cum_tokens[-1] <= tokens and not self.exhausted:
            batch = []
            have = len(self.units)
            per_unit = self.cum_tokens[-1] / have if have else 0
            want = int((tokens - self.cum_tokens[-1]) / per_unit) + 8 if per_unit else 32
            for _ in range(min(max(want, 8), 1024)):
                unit = next(self.source, None)
                if unit is None:
                    self.exhausted = True
                    break
                batch.append(unit)
            costs = self.encoder.costs(join(batch, self.sep, inner=True))
            for unit, cost in zip(batch, costs):
                ends = [m.end() for m in _WORD_END.finditer(unit)]
                self.units.append(unit)
                self.ends.append(ends)
                self.cum_words.append(self.cum_words[-1] + len(ends))
                self.cum_tokens.append(self.cum_tokens[-1] + cost)

    @property
    def total_words(self) -> int:
        return self.cum_words[-1]

    def words_for(self, tokens: int) -> int:
        """Estimated number of words that cost at most ``tokens`` (pro rata inside the last unit)."""
        self.extend_to(tokens)
        k = max(bisect.bisect_right(self.cum_tokens, tokens) - 1, 0)
        if k >= len(self.units):
            return self.cum_words[k]
        unit_tokens = self.cum_tokens[k + 1] - self.cum_tokens[k]
        unit_words = self.cum_words[k + 1] - self.cum_words[k]
        return self.cum_words[k] + int((tokens - self.cum_tokens[k]) / max(1, unit_tokens) * unit_words)

    def cost_of(self, words: int) -> int:
        """Estimated tokens of the first ``words`` words (whole units plus the partial one)."""
        k, partial = self._locate(words)
        return self.cum_tokens[k] + (self.encoder.cost(self.sep + partial) if partial else 0)

    def cut(self, words: int) -> tuple[list[str], str]:
        """The first ``words`` words: (whole units, text of the partial unit or '')."""
        k, partial = self._locate(words)
        return self.units[:k], partial

    def _locate(self, words: int) -> tuple[int, str]:
        """(number of whole units, partial unit text) of the first ``words`` words."""
        k = min(bisect.bisect_right(self.cum_words, words) - 1, len(self.units))
        rest = words - self.cum_words[k]
        if rest > 0 and k < len(self.units):
            return k, self.units[k][: self.ends[k][rest - 1]]
        return k, ""


def join(items: list[str], sep: str, inner: bool = False) -> list[str]:
    """Pieces of ``sep.join(items)``, one per item, with boundaries already normalized.

    A newline separator ends a piece, a space separator starts one (``tokens.normalize``).
    ``inner``: the items sit inside a longer join (every item gets its separator).
    """
    if not items:
        return []
    if sep.startswith("\n"):
        return [item + sep for item in items] if inner else [item + sep for item in items[:-1]] + [items[-1]]
    return [sep + item for item in items] if inner else [items[0]] + [sep + item for item in items[1:]]


def place(boundary_tokens: list[int], depth_percent: float) -> int:
    """Index of the boundary nearest to ``depth_percent`` of the haystack (lower index on ties).

    ``boundary_tokens[j]`` is the token offset of boundary j (0 = before everything, last = end).
    """
    total = boundary_tokens[-1]
    target = depth_percent / 100.0 * total
    j = bisect.bisect_left(boundary_tokens, target)
    if j == len(boundary_tokens):
        return j - 1
    if j > 0 and target - boundary_tokens[j - 1] <= boundary_tokens[j] - target:
        return j - 1
    return j
