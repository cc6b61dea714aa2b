"""Exact-length fitting and depth placement for the RULER-style tasks.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4, Tables 1-4)
reads accuracy per context length and needle depth, so both must be what they claim to be.
Two pieces do that here:

* ``Stream``: a haystack as a sequence of units (lines, sentences, documents) joined by one
  separator. A prompt takes whole units only (RULER and lm-eval end on whole items): the
  longest prefix that fits with its last units exchanged for the later ones that fill the gap best
  (``Stream.pick``, a subset sum), then, if
  more than half a percent of the length is still free, extra separator characters spread
  between the units (``pad_separators``). Cumulative token counts give the first estimate
  without tokenising the prompt.
* ``fit_knob``: the largest integer knob (haystack tokens, padding, distinct words) whose
  exact prompt count stays within the target. It gallops from the estimate and bisects, calls
  the exact counter O(log error) times, only returns a knob it has checked, and always stops.

``place`` puts needles at the unit boundary nearest to a target depth measured in tokens.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ctxlens.tasks.tokens import Encoder


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


WINDOW = 64  # units read past the longest fitting prefix, to close the gap it leaves
TAIL = 16  # last units of that prefix that may give way to window units


@dataclass(frozen=True)
class Pick:
    """Whole haystack units chosen to fill a token budget, and the padding that closes the rest."""

    units: tuple[str, ...]
    costs: tuple[int, ...]  # estimated tokens of each unit (costed as the piece it is inside a join)
    pad: int = 0  # extra characters spread over the boundaries (``pad_separators``)
    pad_char: str = ""  # which: "" the separator's last character (a blank line), or " "

    @property
    def cost(self) -> int:
        return sum(self.costs)

    def padded(self, pad: int, char: str = "") -> Pick:
        return Pick(self.units, self.costs, pad, char)


@dataclass
class Stream:
    """Haystack units from ``source`` (an iterator), joined by ``sep``, counted in tokens.

    ``units[i]`` is a unit's text without separators; ``cum_tokens[i]`` counts the tokens of the
    first ``i`` units (each unit costed as the piece it is inside a join, e.g. ``unit + "\n"``:
    an estimate, exact up to the context's two ends). A pick is whole units only: RULER's noise
    haystack is whole five-sentence lines, never a line's first sentences. ``keep_head``: the
    first half of a pick stays the stream's start even when it is short (running text, as RULER's
    essays).
    ``dress``: how a unit appears in the prompt, for costing (e.g. with a document number).
    """

    source: Iterator[str]
    sep: str
    encoder: Encoder
    keep_head: bool = False
    dress: Callable[[str], str] | None = None
    units: list[str] = field(default_factory=list)
    cum_tokens: list[int] = field(default_factory=lambda: [0])
    exhausted: bool = False

    def extend_to(self, tokens: int, units: int = 0) -> None:
        """Read units until the stream holds more than ``tokens`` estimated tokens and at least
        ``units`` units (or runs dry)."""
        while (self.cum_tokens[-1] <= tokens or len(self.units) < units) and not self.exhausted:
            batch = []
            have = len(self.units)
            per_unit = self.cum_tokens[-1] / have if have else 0
            want = int((tokens - self.cum_tokens[-1]) / per_unit) + 8 if per_unit else 32
            for _ in range(min(max(want, units - have, 8), 1024)):
                unit = next(self.source, None)
                if unit is None:
                    self.exhausted = True
                    break
                batch.append(unit)
            dressed = batch if self.dress is None else [self.dress(u) for u in batch]
            costs = self.encoder.costs(self.encoder.normalize(join(dressed, self.sep, inner=True)))
            for unit, cost in zip(batch, costs):
                self.units.append(unit)
                self.cum_tokens.append(self.cum_tokens[-1] + cost)

    def cost(self, i: int) -> int:
        return self.cum_tokens[i + 1] - self.cum_tokens[i]

    def prefix(self, k: int) -> Pick:
        """The first ``k`` units."""
        self.extend_to(0, k)
        k = min(k, len(self.units))
        return Pick(tuple(self.units[:k]), tuple(self.cost(i) for i in range(k)))

    def pick(self, tokens: int) -> Pick:
        """Whole units costing about ``tokens`` at most (never a cut unit).

        The longest prefix of the stream that fits, whose last ``TAIL`` units may give way to any
        subset of the next ``WINDOW`` units (stream order kept) that fills the rest best (mixing
        unit sizes).
        """
        self.extend_to(tokens)
        k = min(max(bisect.bisect_right(self.cum_tokens, tokens) - 1, 0), len(self.units))
        self.extend_to(0, k + WINDOW)
        fixed = max(k - TAIL, k // 2 if self.keep_head else 0)
        pool = list(range(fixed, min(k + WINDOW, len(self.units))))
        taken = best_subset([self.cost(j) for j in pool], tokens - self.cum_tokens[fixed])
        chosen = list(range(fixed)) + [pool[t] for t in taken]
        return Pick(tuple(self.units[i] for i in chosen), tuple(self.cost(i) for i in chosen))


def best_subset(costs: list[int], budget: int) -> list[int]:
    """Indices (ascending) of a subset of ``costs`` with the largest sum <= ``budget``, earlier
    items preferred among equal sums (subset sum over a bitset of reachable sums)."""
    if budget <= 0:
        return []
    mask = (1 << (budget + 1)) - 1
    reach = [1]  # reach[i]: sums reachable with the first i items, as bits
    for c in costs:
        reach.append((reach[-1] | (reach[-1] << c)) & mask)
    total = reach[-1].bit_length() - 1
    out = []
    for i in range(len(costs) - 1, -1, -1):
        if not (reach[i] >> total) & 1:  # not reachable without item i: take it
            out.append(i)
            total -= costs[i]
    return out[::-1]


def pad_separators(items: list[str], sep: str, pad: int, char: str = "") -> list[str]:
    """``items`` with ``pad`` extra characters spread evenly over the boundaries between them: the
    separator's last one by default (a blank line between lines, two spaces after a sentence),
    or ``char`` (spaces before a line's newline, for tokenizers that merge blank lines)."""
    n = len(items) - 1
    if pad <= 0 or n <= 0:
        return list(items)
    out = list(items)
    for b in range(n):
        extra = (b + 1) * pad // n - b * pad // n
        out[b] += (char or sep[-1]) * extra
    return out


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
