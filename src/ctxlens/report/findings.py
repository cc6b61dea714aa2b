"""The findings table that opens a report: each headline finding, the pattern expected, the
numbers measured and whether the finding was reproduced.

Findings are data, given as a list of dicts or a JSON file (a list, or ``{"findings": [...]}``);
a ``findings.json`` inside a run directory (or the folder of run directories) is read too. Each
finding needs ``finding``, ``paper``, ``expected``, ``measured`` and ``status``, one of
``reproduced``, ``not reproduced``, ``undecided``, ``not measured`` or ``not applicable``; any
other keys are shown as extra columns. ``measured`` may be text, a number, a list or a mapping of names to numbers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeAlias

from ctxlens.core import files, yaml_safe
from ctxlens.core.errors import CtxlensError
from ctxlens.report.html import Raw, el, fmt, join

FILE = "findings.json"
COLUMNS = ("finding", "paper", "expected", "measured", "status")
STATUSES = ("reproduced", "not reproduced", "undecided", "not measured", "not applicable")
Finding: TypeAlias = dict[str, Any]  # one finding: JSON data (a file, or ``ctxlens.findings.compute_findings``)
FindingsSource: TypeAlias = "list[Finding] | str | os.PathLike[str]"  # the findings, or a JSON file of them


def read_findings(source: object) -> list[Finding]:
    """Findings from a path to a JSON file or from a list of dicts, checked."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            data = json.loads(files.read_input(path, yaml_safe.MAX_CHARS, "Findings file",
                                               "pass the findings JSON file ctxlens wrote").decode("utf-8"))
        except FileNotFoundError:
            raise CtxlensError(f"Findings file '{path}' does not exist; check the path.") from None
        except ValueError as err:
            raise CtxlensError(f"Findings file '{path}' is not valid JSON ({err}); fix its syntax.") from None
        if isinstance(data, dict) and "findings" in data:
            data = data["findings"]
        return check(data, str(path))
    return check(source, "findings")


def check(findings: object, where: str = "findings") -> list[Finding]:
    if not isinstance(findings, list) or not all(isinstance(f, dict) for f in findings):
        raise CtxlensError(f"{where} must be a list of objects with keys {', '.join(COLUMNS)}.")
    out = []
    for i, f in enumerate(findings):
        missing = [c for c in COLUMNS if c not in f]
        if missing:
            raise CtxlensError(f"Finding {i + 1} in {where} lacks {', '.join(missing)}; give every finding "
                               f"{', '.join(COLUMNS)}.")
        status = str(f["status"]).strip().lower().replace("_", " ")
        if status not in STATUSES:
            raise CtxlensError(f"Finding {i + 1} in {where} has status '{f['status']}'; use one of "
                               f"{', '.join(STATUSES)}.")
        out.append({**f, "status": status})
    return out


def discover(run_paths: Iterable[Path]) -> list[Path]:
    """``findings.json`` files in the given run directories and their parent folders."""
    found: list[Path] = []
    for p in run_paths:
        for candidate in (p / FILE, p.parent / FILE):
            if candidate.is_file() and candidate.resolve() not in {f.resolve() for f in found}:
                found.append(candidate)
    return found


def _measured(value: object) -> Raw:
    if isinstance(value, dict):
        return el("ul", [el("li", el("b", str(k)), ": ", fmt(v)) for k, v in value.items()], class_="measured")
    return el("span", fmt(value))


def findings_table(findings: list[Finding]) -> Raw:
    """The findings as an HTML table; every value escaped."""
    extra = list(dict.fromkeys(k for f in findings for k in f if k not in COLUMNS))
    head = el("tr", [el("th", c) for c in (*COLUMNS, *extra)])
    rows = []
    for f in findings:
        cells = [el("td", fmt(f["finding"])), el("td", fmt(f["paper"])), el("td", fmt(f["expected"])),
                 el("td", _measured(f["measured"])),
                 el("td", el("span", f["status"], class_="status " + f["status"].replace(" ", "-")))]
        cells += [el("td", fmt(f.get(k))) for k in extra]
        rows.append(el("tr", cells))
    counts = {s: sum(f["status"] == s for f in findings) for s in STATUSES}
    summary = el("p", ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no findings", class_="note")
    return join([summary, el("div", el("table", el("thead", head), el("tbody", rows), class_="data findings"),
                             class_="scroll")])
