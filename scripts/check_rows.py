"""Check committed rows against their experiments' declarations: columns, types, ranges and choices.

Every run directory under the given folders (``ctxlens.results.run_dirs``: a run, a folder of runs,
or a profile) is read as the readers read it (``ctxlens.results.read_run``: archived rows too, rows
of an older layout brought to the current one, ``ctxlens.row_access.LAYOUTS``), or with
``--as-stored`` exactly as its files hold them, and each row is checked as the runner checks a row
before it commits it (``ctxlens.core.columns.check_row``). Prints one line per (folder, experiment,
column) with the number of rows that break the declaration and the first one's sentence; exits 1
when any does. Issue 46 part 2 found the three wrong declarations this way.

    python scripts/check_rows.py reference/profile reference/profile-t reference/profile-gemma
    python scripts/check_rows.py reference/profile --as-stored     # before the layouts are applied
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from ctxlens.core.columns import check_row
from ctxlens.core.errors import CtxlensError
from ctxlens.experiments.registry import experiments
from ctxlens.results import read_run, run_dirs
from ctxlens.runner.store import read_rows


def problems(roots: list[str], as_stored: bool = False) -> dict[tuple[str, str, str], tuple[int, str]]:
    """{(root, experiment, column): (rows breaking it, the first one's sentence)}."""
    declared = experiments()
    counts: Counter = Counter()
    first: dict[tuple[str, str, str], str] = {}
    for root in roots:
        for run in run_dirs(root):
            rows = read_rows(run) if as_stored else read_run(run).rows
            for row in rows:
                exp = declared.get(str(dict(row).get("experiment")))
                if exp is None:
                    key = (root, str(dict(row).get("experiment")), "-")
                    counts[key] += 1
                    first.setdefault(key, f"{Path(run)}: no experiment of that name is registered")
                    continue
                try:
                    check_row(exp.name, exp.declared, dict(row))
                except CtxlensError as err:
                    text = str(err)
                    column = text.split(" in column ", 1)[1].split(",", 1)[0] if " in column " in text else "-"
                    key = (root, exp.name, column)
                    counts[key] += 1
                    first.setdefault(key, f"{Path(run)}: {text}")
    return {k: (n, first[k]) for k, n in sorted(counts.items())}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="run directories, folders of them, or profiles")
    p.add_argument("--as-stored", action="store_true", help="check the rows as their files hold them (no layouts)")
    args = p.parse_args(argv)
    found = problems(args.runs, args.as_stored)
    for (root, experiment, column), (n, sentence) in found.items():
        print(f"{root}  {experiment}  {column}: {n} row{'s' if n != 1 else ''}; first: {sentence}")
    if not found:
        print(f"every row of {', '.join(args.runs)} holds what its declaration says")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
