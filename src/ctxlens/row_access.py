"""How readers read committed rows: in their experiment's current layout, through an accessor that
refuses a column the experiment does not declare. Torch-free (the row readers' layer).

**Layouts.** When an experiment's writer changes what a column holds, rows committed before the
change are read through the change (``LAYOUTS``): each ``Layout`` names the experiment, the layout
it produces, why, how a row of the older layout is told apart (a run directory records no layout
version, so each test reads the row itself and holds on older rows only) and how it is brought to
the new one. ``current(rows)`` applies them in order; ``ctxlens.results.read_run`` reads every run
so, so the card, the findings, the report and ``ctxlens.results.load`` see one layout, and a
committed file is never rewritten. A layout's ``version`` is the rows' schema version
(``row_version``), as ``ctxlens.core.schema`` numbers the versions of the other files ctxlens writes.

**The accessor.** ``declared_rows(rows)`` gives each row of a known experiment as a ``Row``: a
dict whose ``row["name"]``, ``row.get("name")`` and ``"name" in row`` raise one ``CtxlensError``
when ``name`` is not a column its experiment declares (``ctxlens.core.declared_names``, generated
from the declarations), naming the experiment, the column and the nearest declared names: a
misspelled key fails where it is read instead of reading as missing. A declared column a row lacks
reads as missing, as in a dict. ``ctxlens.results.read_run`` and ``ctxlens.findings.verdicts.Rows``
give rows so; rows of an experiment no declaration names (a plug-in's) stay plain dicts.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ctxlens.core.declared_names import NAMES
from ctxlens.core.errors import CtxlensError


# ------------------------------------------------------------------------------------------ layouts
@dataclass(frozen=True)
class Layout:
    """One change of an experiment's rows: ``old(row)`` holds on a row written before it, ``upgrade(row)``
    returns that row as written after it (a new dict)."""

    experiment: str
    version: int  # the layout this change makes (the first layout is 1)
    since: str  # the date the writer changed
    why: str
    old: Callable[[Mapping], bool]
    upgrade: Callable[[Mapping], dict]


def _masking_score_is_ppl(row: Mapping) -> bool:
    return row.get("task") == "perplexity" and "score" in row and "ppl" not in row


def _masking_ppl(row: Mapping) -> dict:
    out = {k: v for k, v in row.items() if k != "score"}
    out["ppl"] = row["score"]
    return out


LAYOUTS: tuple[Layout, ...] = (
    Layout("head-masking", 2, "2026-11-28",
           "perplexity rows held the perplexity exp(nll) in 'score', declared a fraction (1 when a passkey "
           "was retrieved, else 0); they now hold it in 'ppl' and 'score' is a passkey row's alone",
           _masking_score_is_ppl, _masking_ppl),
)


def row_version(experiment: str) -> int:
    """The schema version of ``experiment``'s rows, numbered as ``ctxlens.core.schema`` numbers its files'
    versions: that of its latest layout, 1 while its rows never changed."""
    return max((layout.version for layout in LAYOUTS if layout.experiment == experiment), default=1)


def current(rows: Iterable[Mapping]) -> list[dict]:
    """``rows`` in their experiments' current layouts (``LAYOUTS``, oldest first); rows already
    current are returned as they are."""
    by_experiment: dict[str, list[Layout]] = {}
    for layout in sorted(LAYOUTS, key=lambda x: x.version):
        by_experiment.setdefault(layout.experiment, []).append(layout)
    out = []
    for row in rows:
        for layout in by_experiment.get(str(row.get("experiment")), ()):
            if layout.old(row):
                row = layout.upgrade(row)
        out.append(row if isinstance(row, dict) else dict(row))
    return out


# ----------------------------------------------------------------------------------------- accessor
def declared_names(experiment: str) -> frozenset[str]:
    """The columns ``experiment``'s rows may carry; an experiment no declaration names is refused with
    the nearest names (a misspelled experiment in a reader)."""
    names = NAMES.get(experiment)
    if names is None:
        near = difflib.get_close_matches(str(experiment), NAMES, n=3)
        raise CtxlensError(f"No experiment {experiment!r} declares row columns"
                           + (f" (did you mean {', '.join(map(repr, near))}?)" if near else "")
                           + "; read the rows of a registered experiment.")
    return names


class Row(dict[str, Any]):
    """A committed row of a declared experiment: a dict that refuses to read an undeclared column."""

    __slots__ = ("experiment", "names")

    def __init__(self, row: Mapping | None = None, experiment: str = "", names: frozenset[str] = frozenset()) -> None:
        super().__init__(row or {})
        self.experiment, self.names = experiment, names

    def _declared(self, name: object) -> None:
        if name not in self.names:
            near = difflib.get_close_matches(str(name), self.names, n=3)
            raise CtxlensError(f"A reader read column {name!r} of {self.experiment} rows, which that experiment does "
                               "not declare" + (f" (did you mean {', '.join(map(repr, near))}?)" if near else "")
                               + "; read a declared column, or declare it in the experiment's columns=(...).")

    def __getitem__(self, name: str) -> Any:  # a row's values are JSON's
        self._declared(name)
        return super().__getitem__(name)

    def get(self, name: str, default: Any = None) -> Any:
        self._declared(name)
        return super().get(name, default)

    def __contains__(self, name: object) -> bool:
        self._declared(name)
        return super().__contains__(name)

    def __reduce__(self) -> tuple[type[Row], tuple[dict[str, Any], str, frozenset[str]]]:
        # copy and pickle keep the declaration
        return (Row, (dict(self), self.experiment, self.names))


def declares(row: Mapping, name: str) -> bool:
    """Whether ``row``'s experiment declares column ``name`` (for a reader that scans the rows of several
    experiments for one column); for a plain dict, whether it holds it."""
    return name in row.names if isinstance(row, Row) else name in row


def declared_row(row: Mapping) -> Mapping:
    """``row`` as a ``Row`` when its experiment declares columns; as it is otherwise (or when it is one)."""
    if isinstance(row, Row):
        return row
    experiment = dict.get(row, "experiment") if isinstance(row, dict) else row.get("experiment")
    if not isinstance(experiment, str) or experiment not in NAMES:
        return row
    return Row(row, experiment, NAMES[experiment])


def declared_rows(rows: Iterable[Mapping]) -> list:
    """``declared_row`` of each row."""
    return [declared_row(r) for r in rows]
