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
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ctxlens.core.errors import CtxlensError

TYPES = (int, float, str, bool, list, dict)


@dataclass(frozen=True)
class Column:
    """One column of an experiment's rows: ``type`` one of ``TYPES``; ``unit`` what its numbers count
    ("tokens", "nats", "fraction", "rho", ...; "" for none); ``meaning`` one line."""

    name: str
    type: type
    unit: str = ""
    meaning: str = ""
    optional: bool = False  # None allowed (a value not defined for this row; always allowed for a float)

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise CtxlensError(f"Column {self.name!r} is declared with type {self.type!r}; use one of "
                               f"{', '.join(t.__name__ for t in TYPES)} (optional=True allows None).")


def _is_int(v: object) -> bool:
    return (isinstance(v, numbers.Integral) and not isinstance(v, bool)) or _scalar(v, int)


def _is_float(v: object) -> bool:
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
                                     "or 'all' (only when given)"),
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
    """Raise if ``row`` has a column ``columns`` does not declare, or a value of another type."""
    for name, value in row.items():
        column = columns.get(name)
        if column is None:
            raise CtxlensError(f"Experiment {experiment!r} wrote column {name!r} (value {_short(value)}), which "
                               "its declaration does not list; add it to the experiment's columns=(...).")
        if value is None:
            if column.optional or column.type is float:
                continue
        elif _ACCEPTS[column.type](value):
            continue
        raise CtxlensError(f"Experiment {experiment!r} wrote {_short(value)} in column {name!r}, declared "
                           f"{column.type.__name__}{' or None' if column.optional else ''}; fix the value or "
                           "the declaration.")


def check_rows(experiment: str, columns: Mapping[str, Column], rows: Iterable[Mapping]) -> None:
    """``check_row`` on every row."""
    for row in rows:
        check_row(experiment, columns, row)


def _short(value: object, n: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."
