"""Exact-length fitting and depth placement for the RULER-style tasks.

The long-sequence paper ("How Well Can a Long Sequence Model Model Long Sequences?", Section 4, Tables 1-4)
reads accuracy per context length and needle depth, so both must be what they claim to be.
Two pieces do that here:

* ``Stream``: a haystack as a sequence of units (lines, sentences, documents) joined by one
  separator. A prompt takes whole units only (RULER and lm-eval end on whole items): the
  longest prefix that fits, then shorter units that close the gap (``Stream.pick``), then, if
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
MAX_SWAPS = 32  # exchanges of a prefix unit for a longer window unit, per pick


@dataclass(frozen=True)
class Pick:
    """Whole haystack units chosen to fill a token budget, and the padding that closes the rest."""

    units: tuple[str, ...]
    costs: tuple[int, ...]  # estimated tokens of each unit (costed as the piece it is inside a join)
    pad: int = 0  # extra separator characters spread over the boundaries (``pad_separators``)

    @property
    def cost(self) -> int:
        return sum(self.costs)

    def padded(self, pad: int) -> Pick:
        return Pick(self.units, self.costs, pad)


@dataclass
class Stream:
    """Haystack units from ``source`` (an iterator), joined by ``sep``, counted in tokens.

    ``units[i]`` is a unit's text without separators; ``cum_tokens[i]`` counts the tokens of the
    first ``i`` units (each unit costed as the piece it is inside a join, e.g. ``unit + "\n"``:
    an estimate, exact up to the context's two ends). ``short`` holds whole items smaller than a
    unit (the noise line's leading sentences) that may close the last gap. ``keep_head``: the
    first half of a pick stays the stream's start (running text, as RULER's essays); otherwise
    any picked unit may be exchanged (independent units: distractor needles and documents).
    ``dress``: how a unit appears in the prompt, for costing (e.g. with a document number).
    """

    source: Iterator[str]
    sep: str
    encoder: Encoder
    short: tuple[str, ...] = ()
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

        The longest prefix of the stream that fits, then units of the next ``WINDOW`` that still
        fit (in order; the others are skipped), then exchanges of a prefix unit for a longer
        window unit while the gap allows (mixing unit sizes), then the longest ``short`` item
        that fits.
        """
        self.extend_to(tokens)
        k = max(bisect.bisect_right(self.cum_tokens, tokens) - 1, 0)
        k = min(k, len(self.units))
        self.extend_to(0, k + WINDOW)
        chosen = list(range(k))
        left = tokens - self.cum_tokens[k]
        rest = []
        for j in range(k, min(k + WINDOW, len(self.units))):
            if self.cost(j) <= left:
                chosen.append(j)
                left -= self.cost(j)
            else:
                rest.append(j)
        left = self._swap(chosen, rest, left)
        chosen.sort()  # stream order
        units = [self.units[i] for i in chosen]
        costs = [self.cost(i) for i in chosen]
        if self.short:
            short = self.encoder.costs(self.encoder.normalize(join(list(self.short), self.sep, inner=True)))
            fitting = [(c, s) for s, c in zip(self.short, short) if c <= left]
            if fitting:
                c, s = max(fitting)
                units.append(s)
                costs.append(c)
        return Pick(tuple(units), tuple(costs))

    def _swap(self, chosen: list[int], rest: list[int], left: int) -> int:
        """Exchange chosen units for longer unused ones (largest gain within ``left`` first), the
        first half kept when ``keep_head``."""
        first = len(chosen) // 2 if self.keep_head else 0
        for _ in range(MAX_SWAPS):
            if left <= 0 or not rest or not chosen:
                break
            by_cost = {self.cost(chosen[n]): n for n in range(first, len(chosen))}  # one of each cost
            best = None
            for r, j in enumerate(rest):
                for c, n in by_cost.items():
                    gain = self.cost(j) - c
                    if 0 < gain <= left and (best is None or gain > best[0]):
                        best = (gain, n, r)
            if best is None:
                break
            gain, n, r = best
            chosen[n], rest[r] = rest[r], chosen[n]
            left -= gain
        return left


def pad_separators(items: list[str], sep: str, pad: int) -> list[str]:
    """``items`` with ``pad`` extra copies of the separator's last character spread evenly over the
    boundaries between them (a blank line between lines, two spaces after a sentence)."""
    n = len(items) - 1
    if pad <= 0 or n <= 0:
        return list(items)
    out = list(items)
    for b in range(n):
        extra = (b + 1) * pad // n - b * pad // n
        out[b] += sep[-1] * extra
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
