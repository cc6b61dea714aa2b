"""Text from a record (``profile.json``, a run's rows), made safe to print on a terminal."""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with every control character (a terminal escape sequence, a carriage return, a
    bidirectional override) written out as Python escapes it (``\\x1b``), so a record from someone
    else cannot clear the screen, retitle the terminal or reorder what is printed (issue 32, item 10)."""
    return "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in text)
