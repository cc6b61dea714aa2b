"""The papers' headline findings over any run directories: a thin wrapper over ``ctxlens.findings``.

Measure with ``ctxlens run`` (or ``ctxlens demo``, which also runs the untrained controls), then
check the findings on the rows; the criteria and the verdicts are those of ``ctxlens.findings``
alone. The JSON written to ``--out`` opens a report: ``ctxlens report RUN ... --findings OUT``.

    python scripts/findings.py runs/ --out findings.json                          # every model the runs hold
    python scripts/findings.py runs/ --model rope=path/to/checkpoint --control rope=runs/untrained-rope
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ctxlens.findings import ZOO_NAMES, compute_findings


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    bad = [i for i in items if "=" not in i]
    if bad:
        raise SystemExit(f"{flag} takes NAME=SPEC (e.g. rope=zoo:rope), got {bad[0]!r}")
    return dict(i.split("=", 1) for i in items)


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="run directories, or folders of them")
    p.add_argument("--out", default=None, help="JSON file to write (a findings list for `ctxlens report --findings`)")
    p.add_argument("--model", action="append", default=[], metavar="NAME=SPEC",
                   help="model spec the rows hold for zoo name NAME (then zoo:NAME for the other zoo names: "
                        f"{', '.join(ZOO_NAMES)}); default: every model the runs hold, by its recorded kind")
    p.add_argument("--control", action="append", default=[], metavar="NAME=SPEC",
                   help="model spec of NAME's untrained copy (the findings' untrained control)")
    p.add_argument("--train-length", type=int, default=None, help="default: what the rows record")
    a = p.parse_args(argv)
    models = {**{n: f"zoo:{n}" for n in ZOO_NAMES}, **_pairs(a.model, "--model")} if a.model else None
    table = compute_findings(a.runs, models=models, controls=_pairs(a.control, "--control"),
                             train_length=a.train_length)
    for f in table:
        print(f"{f['status']:<15} {f['finding']}")
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps({"findings": table, "models": models}, indent=1) + "\n")
    return table


if __name__ == "__main__":
    main()
