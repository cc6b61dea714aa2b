"""Feedback inside a long unit of work: a token meter and a per-sample checkpoint, both optional.

The runner (``ctxlens.runner.meter``) opens one ``Meter`` per unit and counts the tokens every
model forward runs (hooks on the input embedding and on each decoder layer, so every experiment
that runs the model is covered without code of its own, and a long prefill moves layer by
layer). While a unit runs longer than ``QUIET`` seconds, the meter writes a line every ``EVERY``
seconds: tokens done of the unit's planned tokens (the experiment's ``work`` hook), tokens per
second and the time left at that pace; training loops report steps instead (``at``). Updates
are rate-limited to a clock read per call, so the inner loops do not slow down, and nothing here
touches a row.

The checkpoint is how an experiment keeps finished samples of a unit that may be interrupted:
``saved()`` gives what an earlier, interrupted attempt of the same unit (same model weights and
options) stored, and ``save(key, value)`` stores one more, durably, before the next sample
starts. Without a runner (a probe called from Python) both are no-ops.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

QUIET = 3.0  # seconds a unit runs before its first progress line
EVERY = 5.0  # seconds between progress lines

clock: Callable[[], float] = time.monotonic  # replaced in tests by a fake clock


class Meter:
    """Tokens done in one unit; writes ``label: done / total tokens, rate, ETA`` lines to ``write``
    at most every ``every`` seconds, the first once the unit has run ``quiet`` seconds."""

    def __init__(self, label: str, total: int | None, write: Callable[[str], None], quiet: float = QUIET,
                 every: float = EVERY):
        self.label, self.total, self.write, self.every = label, total, write, every
        self.done: float = 0
        self.lines, self.what = 0, "tokens"
        self.start = clock()
        self.next = self.start + quiet

    def add(self, tokens: float) -> None:
        self.done += tokens
        self._tick()

    def at(self, done: int, total: int | None, what: str) -> None:
        """Count in other units than tokens (``what``: 'training steps'), ``done`` of ``total`` so far."""
        self.done, self.total, self.what = done, total, what
        self._tick()

    def _tick(self) -> None:
        now = clock()
        if now >= self.next:
            self.next = now + self.every
            self.lines += 1
            self.write(self.line(now))

    def skip(self, tokens: int) -> None:
        """Take ``tokens`` off the planned total: work an interrupted attempt already did."""
        if self.total is not None:
            self.total = max(self.total - tokens, 0)

    def line(self, now: float) -> str:
        seconds = max(now - self.start, 1e-9)
        rate = self.done / seconds
        text, what = f"  {self.label}: {self.done:,.0f}", self.what
        if self.total and self.done <= self.total:
            text += f" / {self.total:,} {what} ({100 * self.done / self.total:.0f}%)"
            left = f", about {duration((self.total - self.done) / rate)} left" if rate > 0 else ""
        else:
            text += f" {what}" + (f" (planned {self.total:,})" if self.total else "")
            left = ""
        pace = f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"
        return f"{text}, {pace} {what.split()[-1]}/s{left}, {duration(seconds)} so far"


def duration(seconds: float) -> str:
    """'45 s', '12 min', '3.4 h'."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class Checkpoint(Protocol):
    """Finished samples of the unit in flight, kept across an interrupt (``runner.partial``)."""

    def saved(self) -> dict[str, str]: ...

    def save(self, key: str, value: str) -> None: ...


_METER: ContextVar[Meter | None] = ContextVar("ctxlens_meter", default=None)
_CHECKPOINT: ContextVar[Checkpoint | None] = ContextVar("ctxlens_checkpoint", default=None)


@contextmanager
def unit(meter: Meter | None, checkpoint: Checkpoint | None = None) -> Iterator[None]:
    """Make ``meter`` and ``checkpoint`` the current unit's while the block runs."""
    m, c = _METER.set(meter), _CHECKPOINT.set(checkpoint)
    try:
        yield
    finally:
        _METER.reset(m)
        _CHECKPOINT.reset(c)


def advance(tokens: float) -> None:
    """Count ``tokens`` processed by the current unit (nothing when no meter is open)."""
    meter = _METER.get()
    if meter is not None:
        meter.add(tokens)


def skip(tokens: int) -> None:
    """Tell the current unit's meter that ``tokens`` of its plan were done by an earlier attempt."""
    meter = _METER.get()
    if meter is not None:
        meter.skip(tokens)


def at(done: int, total: int | None, what: str) -> None:
    """Report ``done`` of ``total`` ``what`` (a loop that is not counted in tokens: 'training steps')."""
    meter = _METER.get()
    if meter is not None:
        meter.at(done, total, what)


def saved() -> dict[str, str]:
    """What the current unit's checkpoint holds (key -> value); empty without one."""
    checkpoint = _CHECKPOINT.get()
    return checkpoint.saved() if checkpoint is not None else {}


def save(key: str, value: str) -> None:
    """Keep ``value`` under ``key`` for a resumed attempt of the current unit (no-op without one)."""
    checkpoint = _CHECKPOINT.get()
    if checkpoint is not None:
        checkpoint.save(key, value)
