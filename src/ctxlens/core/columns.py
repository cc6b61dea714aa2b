"""Typed row contracts: the columns an experiment's rows carry (name, type, unit, meaning).

Each experiment declares its columns (``Experiment.columns``: its plan's unit coordinates and
every column its ``run`` writes); the runner adds ``RUNNER_COLUMNS``. The runner checks every row
of every unit before it commits it (``check_row``): a column nobody declared, or a value of
another type, is a programming error in ctxlens, raised as one ``CtxlensError`` naming the
experiment, the column and the value. Torch-free, so the row readers (findings, report) and the
tests can read the same declarations.

Types are the JSON types a row stores: ``int``, ``float``, ``str``, ``bool``, ``list``, ``dict``;
``optional`` also allows None. A ``float`` column takes an int (a JSON number with no fraction, e.g.
a count in a ``value`` column) and None: a run file stores every non-finite float as null
(``ctxlens.runner.store``), so None is how a float column says "not a number" (a fit that could not
be made, a loss over no tokens). Numpy and torch scalars count as the Python value they hold
(``RunStore`` writes them so). A declared column may be absent from a row: rows of several kinds
(``kind="head"`` / ``"prompt"``, fit rows beside measured rows) share one declaration.

Values: a number column's range is its ``low`` .. ``high`` when given, else its unit's
(``UNIT_RANGES``: a "fraction" is 0..1, a "percent" 0..100, a "cosine" or "rho" -1..1, a "p" 0..1,
counts, indices, tokens, bits and seconds are >= 0, a "rank" >= 1), so a unit is a claim the runner checks:
a column whose values are not fractions must not say "fraction". A str column may list its
``choices``. ``check_row`` refuses a value outside them with one sentence naming the experiment, the
column, the value and the declared range; a float within 1e-6 (relative) of a bound passes (float32
rounding), and a non-finite float is not checked (it is stored as null). ``when`` says when rows
carry a column only under some condition (an option given, a unit flagged); ``unwritten`` lists the
declared columns without one that none of a run's rows carries (the report fixtures' check).
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ctxlens.core.errors import CtxlensError

TYPES = (int, float, str, bool, list, dict)


UNIT_RANGES: dict[str, tuple[float | None, float | None]] = {  # unit -> (low, high) its numbers lie in
    "fraction": (0.0, 1.0),
    "percent": (0.0, 100.0),
    "cosine": (-1.0, 1.0),
    "rho": (-1.0, 1.0),
    "p": (0.0, 1.0),
    "count": (0, None),
    "index": (0, None),
    "tokens": (0, None),
    "bits": (0, None),
    "bits/token": (0, None),
    "s": (0, None),
    "rank": (1, None),
    "pair index": (0, None),
}
TOLERANCE = 1e-6  # relative slack of a float's bounds (a cosine of 1 + 1e-7 from float32 arithmetic passes)


@dataclass(frozen=True)
class Column:
    """One column of an experiment's rows: ``type`` one of ``TYPES``; ``unit`` what its numbers count
    ("tokens", "nats", "fraction", "count", "index", ...; "" for none); ``meaning`` one line; ``low`` / ``high``
    the range of a number column (each None: the unit's side, ``UNIT_RANGES``, else open); ``choices`` a
    str column's allowed values (empty: any text); ``when`` the condition under which rows carry it, for a
    column some runs never write ("" : some row of every run does)."""

    name: str
    type: type
    unit: str = ""
    meaning: str = ""
    optional: bool = False  # None allowed (a value not defined for this row; always allowed for a float)
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    when: str = ""

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise CtxlensError(f"Column {self.name!r} is declared with type {self.type!r}; use one of "
                               f"{', '.join(t.__name__ for t in TYPES)} (optional=True allows None).")
        if self.choices and self.type is not str:
            raise CtxlensError(f"Column {self.name!r} lists choices but is a {self.type.__name__} column; choices "
                               "are for str columns (give a number column low= and high=).")
        if (self.low is not None or self.high is not None) and self.type not in (int, float):
            raise CtxlensError(f"Column {self.name!r} has a range but is a {self.type.__name__} column; low= and "
                               "high= are for int and float columns.")
        low, high = self.bounds
        if low is not None and high is not None and low > high:
            raise CtxlensError(f"Column {self.name!r} is declared with low {low} above high {high}; swap them.")

    @functools.cached_property  # read per value of every row checked; a frozen Column's bounds never change
    def bounds(self) -> tuple[float | None, float | None]:
        """(low, high) of a number column: the declared ones, else its unit's (None: open); (None, None)
        for other types."""
        if self.type not in (int, float):
            return None, None
        unit_low, unit_high = UNIT_RANGES.get(self.unit, (None, None))
        return (unit_low if self.low is None else self.low), (unit_high if self.high is None else self.high)

    def allowed(self) -> str:
        """The declared range in words: "0 to 1", ">= 0", "one of 'a', 'b'"; "" when any value of its type is."""
        if self.choices:
            return "one of " + ", ".join(map(repr, self.choices))
        low, high = self.bounds
        if low is not None and high is not None:
            return f"{low:g} to {high:g}"
        return f">= {low:g}" if low is not None else f"<= {high:g}" if high is not None else ""

    def admits(self, value: object) -> bool:
        """Whether ``value`` (of the column's type, not None) lies in the declared range or choices."""
        if self.choices:
            return value in self.choices
        low, high = self.bounds
        if low is None and high is None:
            return True
        number = float(value if type(value) in (int, float) or isinstance(value, numbers.Real)  # type: ignore[arg-type]
                       else _item(value))
        if not math.isfinite(number):
            return True  # stored as null: "not a number"
        slack = (lambda bound: TOLERANCE * max(1.0, abs(bound))) if self.type is float else (lambda bound: 0.0)
        return ((low is None or number >= low - slack(low))
                and (high is None or number <= high + slack(high)))


def _is_int(v: object) -> bool:
    if type(v) is int:  # JSON's: the common case, ahead of the abstract checks
        return True
    return (isinstance(v, numbers.Integral) and not isinstance(v, bool)) or _scalar(v, int)


def _is_float(v: object) -> bool:
    if type(v) in (float, int):
        return True
    return (isinstance(v, numbers.Real) and not isinstance(v, bool)) or _scalar(v, float)


def _scalar(v: object, kind: type) -> bool:
    """A numpy/torch one-element value whose ``item()`` is a ``kind`` (an int for floats too)."""
    if kind is bool:
        return isinstance(_item(v), bool)
    value = _item(v)
    return isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)


def _item(v: object) -> object:
    """``v.item()`` of a numpy/torch value (None when it has none, or more than one element)."""
    item = getattr(v, "item", None)
    if not callable(item):
        return None
    try:
        return item()
    except (TypeError, ValueError, RuntimeError):
        return None


_ACCEPTS: dict[type, Callable[[object], bool]] = {
    int: _is_int,
    float: _is_float,
    str: lambda v: isinstance(v, str),
    bool: lambda v: isinstance(v, bool) or _scalar(v, bool),
    list: lambda v: isinstance(v, (list, tuple)),
    dict: lambda v: isinstance(v, dict),
}

RUNNER_COLUMNS = (
    Column("model", str, "", "the model spec the row was measured on (or the experiment's own model)"),
    Column("experiment", str, "", "the experiment's registered name"),
    Column("rope_changed", dict, "", "the RoPE parameters --rope-theta / --rope-scaling set, by layer type "
                                     "or 'all' (only when given)", when="--rope-theta or --rope-scaling is given"),
)


def declared(columns: Iterable[Column], experiment: str = "") -> dict[str, Column]:
    """name -> Column of ``RUNNER_COLUMNS`` and ``columns``; a name declared twice differently is refused."""
    out: dict[str, Column] = {}
    for column in (*RUNNER_COLUMNS, *columns):
        if out.get(column.name, column) != column:
            raise CtxlensError(f"Experiment {experiment!r} declares column {column.name!r} twice, differently; "
                               "declare it once.")
        out[column.name] = column
    return out


def check_row(experiment: str, columns: Mapping[str, Column], row: Mapping) -> None:
    """Raise if ``row`` has a column ``columns`` does not declare, a value of another type, or one
    outside the column's declared range or choices."""
    for name, value in row.items():
        column = columns.get(name)
        if column is None:
            raise CtxlensError(f"Experiment {experiment!r} wrote column {name!r} (value {_short(value)}), which "
                               "its declaration does not list; add it to the experiment's columns=(...).")
        if value is None:
            if column.optional or column.type is float:
                continue
        elif _ACCEPTS[column.type](value):
            if column.admits(value):
                continue
            unit = f"{column.unit}: " if column.unit else ""
            raise CtxlensError(f"Experiment {experiment!r} wrote {_short(value)} in column {name!r}, declared "
                               f"{column.allowed()} ({unit}{column.meaning or 'no meaning given'}); fix the value or "
                               "the declaration.")
        raise CtxlensError(f"Experiment {experiment!r} wrote {_short(value)} in column {name!r}, declared "
                           f"{column.type.__name__}{' or None' if column.optional else ''}; fix the value or "
                           "the declaration.")


def check_rows(experiment: str, columns: Mapping[str, Column], rows: Iterable[Mapping]) -> None:
    """``check_row`` on every row."""
    for row in rows:
        check_row(experiment, columns, row)


def unwritten(columns: Mapping[str, Column], rows: Iterable[Mapping]) -> list[str]:
    """The declared columns with no ``when`` that none of ``rows`` carries (a run's rows should carry
    each on some row: a declaration that lists more than its experiment writes, or rows an older
    writer made, show here)."""
    seen = {name for row in rows for name in row}
    return sorted(name for name, column in columns.items() if not column.when and name not in seen)


def _short(value: object, n: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."
