"""Everything a reader should not miss, gathered from the run directories and their rows.

- rows with a ``flag`` (skipped samples, truncations, cut-off needles, non-finite losses, ...);
- metric cells with no value (the runner stores NaN and inf as null) or a non-finite number;
- runs with lines written after their last committed unit (in flight, or cut off by a crash);
- runs with no committed rows, or without config.yaml / env.json, or with unreadable ones;
- figures that could not be drawn.
"""

from __future__ import annotations

import math
import numbers
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TypedDict

from ctxlens.core.units import Row
from ctxlens.results import Run
from ctxlens.row_access import declares

WHERE = ("stage", "task", "condition", "measure", "kind", "quantity", "transform", "ablation", "length", "depth",
         "fraction", "gamma", "theta", "boundary", "layer", "head", "sample")
N_EXAMPLES = 3


class ReportWarning(TypedDict):
    """One line of the report's warnings table."""

    run: str  # the run's name ("" for a warning of the whole report)
    experiment: str | None
    model: str | None
    kind: str
    count: int
    detail: str
    examples: str  # where the first rows are ("; "-separated)


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, numbers.Real) and not isinstance(v, bool) and not math.isfinite(float(v)))


def _where(row: Row) -> str:
    return ", ".join(f"{k}={row[k]}" for k in WHERE if declares(row, k) and row.get(k) is not None)


def run_warnings(run: Run) -> list[ReportWarning]:
    out: list[ReportWarning] = []

    def add(kind: str, detail: str) -> None:
        out.append({"run": run.name, "experiment": None, "model": None, "kind": kind, "count": 1, "detail": detail,
                    "examples": ""})

    if not run.rows:
        add("no rows", "the run has no committed rows yet")
    if run.uncommitted:
        add("uncommitted", f"{run.uncommitted} result line(s) after the last committed unit (a unit in flight or "
                           "cut off by a crash) are not shown")
    if run.config is None:
        add("no config", "config.yaml is missing")
    if run.env is None:
        add("no environment", "env.json is missing")
    for p in run.problems:
        add("unreadable file", p)
    return out


def row_warnings(run: Run, metrics_of: Callable[[str | None], Sequence[str] | None]) -> list[ReportWarning]:
    """Flags and missing metric values of a run's rows, grouped; ``metrics_of(experiment)`` gives
    the metric columns of an experiment (None: every column that holds a number somewhere)."""
    groups: dict[tuple[str | None, str | None, str, str], list[Row]] = defaultdict(list)
    numeric_cols: dict[str | None, set[str]] = defaultdict(set)  # experiment (None: a row names none) -> columns
    for row in run.rows:
        for k, v in row.items():
            if isinstance(v, numbers.Real) and not isinstance(v, bool):
                numeric_cols[row.get("experiment")].add(k)
    for row in run.rows:
        exp = row.get("experiment")
        if declares(row, "flag") and row.get("flag") is not None:  # the flag says why its values may be missing
            groups[(exp, row.get("model"), "flag", str(row["flag"]))].append(row)
            continue
        metrics = metrics_of(exp)
        cols = numeric_cols[exp] if metrics is None else [m for m in metrics if m in row]
        for c in cols:
            if c in row and _missing(row[c]):
                groups[(exp, row.get("model"), "missing value", c)].append(row)
    out: list[ReportWarning] = []
    for (exp, model, kind, what), rows in groups.items():
        detail = what if kind == "flag" else \
            f"no finite value for '{what}' (stored as null: non-finite or not measured)"
        out.append({"run": run.name, "experiment": exp, "model": model, "kind": kind, "count": len(rows),
                    "detail": detail, "examples": "; ".join(_where(r) for r in rows[:N_EXAMPLES])})
    return out
