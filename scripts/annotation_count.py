"""Count the boundaries mypy can check: parameters named ``lm`` with an annotation, and functions
lacking full annotations (a parameter other than a leading self/cls without one, or no return type;
an ``__init__`` with annotated parameters counts as full), per package of ``src/ctxlens``.

    python scripts/annotation_count.py            # the issue 46 figures
    python scripts/annotation_count.py --where    # also where an lm parameter lacks its annotation
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ctxlens"


def _params(args: ast.arguments) -> list[ast.arg]:
    return [*args.posonlyargs, *args.args, *args.kwonlyargs, *(a for a in (args.vararg, args.kwarg) if a)]


def _full(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    params = _params(node.args)
    positional = [*node.args.posonlyargs, *node.args.args]
    bound = positional[0] if positional and positional[0].arg in ("self", "cls") else None
    typed = [p for p in params if p is not bound]
    if not all(p.annotation is not None for p in typed):
        return False
    return node.returns is not None or (node.name == "__init__" and any(p.annotation for p in typed))


def main() -> None:
    lm, lm_typed, missing = 0, 0, []
    lacking: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        package = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            for p in _params(node.args):
                if p.arg == "lm":
                    lm += 1
                    lm_typed += p.annotation is not None
                    if p.annotation is None:
                        missing.append(f"{rel}:{node.lineno}")
            if not isinstance(node, ast.Lambda):
                total[package] += 1
                lacking[package] += not _full(node)
    print(f"parameters named lm: {lm_typed} annotated of {lm}")
    print(f"functions lacking full annotations: {sum(lacking.values())} of {sum(total.values())}")
    for package in sorted(total):
        print(f"  {package:14} {lacking[package]:4} / {total[package]}")
    if "--where" in sys.argv:
        print("\n".join(missing))


if __name__ == "__main__":
    main()
