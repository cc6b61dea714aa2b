"""Print the coverage table of docs/models.md (markdown) from ``ctxlens models --all --json FILE``.

The table lists every decoder-only text type of transformers' causal-LM mapping with the result
of each analysis' independent check (``ctxlens.lm.coverage``), the counts per analysis, the
failures with their reasons and the out-of-scope types by category.

    ctxlens models --all --json coverage.json && python scripts/coverage_table.py coverage.json
    python scripts/coverage_table.py --summary coverage.json   # docs/models.md's section
    python scripts/coverage_table.py            # runs the checks itself (about two minutes)
"""

from __future__ import annotations

import argparse
import json

from ctxlens.lm import coverage


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("json", nargs="?", help="result of `ctxlens models --all --json FILE` (default: run now)")
    p.add_argument("--summary", action="store_true", help="leave out the one-row-per-type table (as in docs/models.md)")
    args = p.parse_args()
    result = json.loads(open(args.json).read()) if args.json else coverage.run()
    print(coverage.render(result, markdown=True, per_type=not args.summary).strip())


if __name__ == "__main__":
    main()
