"""One cell of the context-use card (``ctxlens.findings.card``): the quantity, its uncertainty, the
verdict, and the statistics every tested line states."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Line:
    """One cell of the card: ``value`` (a number or None), ``text`` (the paper's quantity), its
    ``uncertainty`` (n, interval, power) and the ``verdict`` in words, the numbers behind them, and
    the statistics every tested line states: ``n`` independent items of kind ``unit`` ("haystacks",
    "texts", "windows", "passkeys", "prompts", "random draws"), the 95% ``interval`` of ``value``
    (always inside ``bounds``, the quantity's range), and ``mde``, the smallest effect that n can
    detect (5% level, 80% power), with ``underpowered`` set when the effect the paper expects is
    smaller than that. A line that prints intervals of further quantities names each one's range in
    ``ranges``, keyed by the label printed before its "95% CI" (the entropy line's "slope").

    Whether the line decided: ``null`` marks a verdict that reports the absence of the paper's effect
    ("no significant drop"); ``effect`` is the effect the test must see (the paper's, stated on the
    line) and ``needs`` the number of items its test needs to see it with 80% power (None: not
    reachable by more items of this design). ``decide`` turns a null whose test could not see the
    effect (``needs`` above ``n``) into "undecided: needs N <unit> (about M minutes ...)"."""

    key: str
    model: str
    value: float | None
    text: str
    uncertainty: str
    verdict: str
    numbers: dict = field(default_factory=dict)
    n: int | None = None
    unit: str = ""
    interval: tuple[float, float] | None = None
    bounds: tuple[float, float] | None = None
    mde: float | None = None
    underpowered: bool = False
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    null: bool = False
    effect: float | None = None
    needs: int | None = None
