"""HTML building blocks that escape by default.

Every string that reaches the page goes through ``el``/``text``, which escape it
(``html.escape`` with quotes) unless it is a ``Raw`` fragment this package built itself. Result
files hold text from models and datasets (generations, prompts, model names, flags): none of it
is ever wrapped in ``Raw``, so none of it can become markup or script. The page also carries a
Content-Security-Policy that allows no script and no external resource at all.
"""

from __future__ import annotations

import html
import math
import numbers
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

# The page needs nothing but its own inline style and data: images.
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


class Raw(str):
    """A fragment of markup built by this package (already safe); never wrap external text."""


# control characters (other than tab and newline) shown as their Unicode control pictures
_CONTROL = {c: 0x2400 + c for c in (*range(0x00, 0x09), *range(0x0B, 0x20))} | {0x7F: 0x2421}


def text(value: object) -> Raw:
    """Escaped text of any value (numbers formatted, None shown as an em dash)."""
    return Raw(html.escape(fmt(value).translate(_CONTROL), quote=True))


def fmt(value: object, digits: int = 4) -> str:
    """A compact human form of a cell value."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        v = float(value)
        if math.isnan(v):
            return "—"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v.is_integer() and abs(v) < 1e15:  # integer columns that pandas made float (NaN elsewhere)
            return str(int(v))
        if abs(v) >= 1e5 or abs(v) < 1e-3:
            return f"{v:.{digits - 1}e}"
        return f"{v:.{digits}g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v, digits) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fmt(v, digits)}" for k, v in value.items()) + "}"
    return str(value)


_NAME = re.compile(r"^[a-z][a-z0-9-]*$")


def el(tag: str, *children: object, **attrs: object) -> Raw:
    """``<tag attrs>children</tag>``: children that are not ``Raw`` are escaped, attribute values
    always are. ``class_`` gives ``class``; a None attribute is left out."""
    if not _NAME.match(tag):
        raise ValueError(f"bad tag {tag!r}")
    parts = [tag]
    for key, value in attrs.items():
        if value is None:
            continue
        name = key.rstrip("_").replace("_", "-")
        if not _NAME.match(name) or name.startswith("on"):
            raise ValueError(f"bad attribute {name!r}")
        parts.append(f'{name}="{html.escape(str(value), quote=True)}"')
    inner = "".join(c if isinstance(c, Raw) else text(c) for c in _flatten(children))
    return Raw(f"<{' '.join(parts)}>{inner}</{tag}>")


def join(items: Iterable[object]) -> Raw:
    return Raw("".join(c if isinstance(c, Raw) else text(c) for c in _flatten(items)))


def _flatten(items: Iterable[object]) -> Iterator[object]:
    for c in items:
        if c is None:
            continue
        if isinstance(c, (list, tuple, Iterator)):
            yield from _flatten(c)
        else:
            yield c


def table(df: pd.DataFrame, *, caption: str | None = None, max_rows: int | None = None, class_: str = "data") -> Raw:
    """A DataFrame as an escaped HTML table (every cell and header escaped)."""
    shown = df if max_rows is None else df.head(max_rows)
    head = el("tr", [el("th", str(c)) for c in shown.columns])
    body = [el("tr", [el("td", text(v), class_="num" if _is_number(v) else None) for v in row])
            for row in shown.itertuples(index=False, name=None)]
    note = None
    if max_rows is not None and len(df) > max_rows:
        note = el("p", f"First {max_rows} of {len(df)} rows shown.", class_="note")
    cap = el("caption", caption) if caption else None
    return join([el("div", el("table", cap, el("thead", head), el("tbody", body), class_=class_), class_="scroll"),
                 note])


def kv_table(items: Mapping[str, object], class_: str = "kv") -> Raw:
    """Key/value pairs as a two-column table (nested dicts flattened with dots)."""
    flat = dict(_flatten_dict(items))
    rows = [el("tr", el("th", k), el("td", fmt(v))) for k, v in flat.items()]
    return el("table", el("tbody", rows), class_=class_)


def _flatten_dict(d: Mapping[str, object], prefix: str = "") -> Iterator[tuple[str, object]]:
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            yield from _flatten_dict(v, key + ".")
        else:
            yield key, v


def _is_number(v: object) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, bool)


def anchor(name: str) -> str:
    """A safe fragment id for a name."""
    return "x-" + re.sub(r"[^a-z0-9-]+", "-", str(name).lower()).strip("-")
