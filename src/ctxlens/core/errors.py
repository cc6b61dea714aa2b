"""One exception type for every problem a user can fix.

The CLI prints ``CtxlensError`` messages as a single sentence and exits non-zero; anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class CtxlensError(Exception):
    """A problem with the user's input, model or environment, stated with its fix.

    The message is one line whatever it quotes: a control character from a user's value (a
    newline in an option) is shown escaped, as ``repr`` would write it."""

    def __init__(self, message: object = "", *args: object):
        super().__init__(printable(str(message)), *args)


def printable(text: str) -> str:
    """``text`` with every non-printable character (newline, tab, NUL, ...) written as its escape."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


ECHO = 80  # most characters of a user's value an error message repeats


def clip(value: object, limit: int = ECHO) -> str:
    """``repr(value)`` cut to ``limit`` characters, marked when cut: for echoing input in errors."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def suggest(name: str, choices: Iterable[str]) -> str:
    """Return ' Did you mean X?' for the closest choice, or '' when nothing is close."""
    if len(name) > 4 * ECHO:  # nothing registered is that long, and matching it would cost seconds
        return ""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f" Did you mean '{close[0]}'?" if close else ""


def unknown(kind: str, name: str, choices: Iterable[str]) -> CtxlensError:
    """Error for an unknown registry name, with the closest match and the full list."""
    choices = sorted(choices)
    return CtxlensError(
        f"Unknown {kind} {clip(name)}.{suggest(name, choices)} Choose one of: {', '.join(choices)}."
    )
