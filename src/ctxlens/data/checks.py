"""Argument checks shared by the data generators (the built-in corpus, the periodic sequences)."""

from __future__ import annotations

from ctxlens.core.errors import CtxlensError


def check_int(name: str, value: object, *, minimum: int | None = None) -> None:
    """Raise unless ``value`` is a whole number (not a bool), at least ``minimum`` when given."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise CtxlensError(f"{name} must be a whole number, got {value!r}; pass an integer {name}.")
    if minimum is not None and value < minimum:
        raise CtxlensError(
            f"{name} must be at least {minimum}, got {value}; pass a {name} of {minimum} or more."
        )
