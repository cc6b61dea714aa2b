"""What the registry says about the experiments, for people: ``ctxlens experiments [--markdown]``
and ``ctxlens run EXPERIMENT --help``; and, for the torch-free row readers, the columns each
experiment declares (``ctxlens.core.declared_names``, written by ``python -m ctxlens.experiments.catalog``).

Everything here is read from the declarations (``ctxlens.experiments.base.Experiment``) and their
``Config`` dataclasses (help text from ``ctxlens.core.options.option``), so the README's table,
the command line's list and the option help agree with the code by construction.
"""

from __future__ import annotations

import dataclasses
import textwrap
import types
import typing
from pathlib import Path

from ctxlens.core.options import option_help
from ctxlens.core.papers import PAPERS, cite
from ctxlens.experiments.base import Experiment
from ctxlens.experiments.registry import by_paper, experiments

MARK_BEGIN = "<!-- begin: ctxlens experiments --markdown -->"
MARK_END = "<!-- end: ctxlens experiments --markdown -->"


def type_name(typ: object) -> str:
    """How an option's type reads on the command line: ``list[int]``, ``float | None``, ``a|b``."""
    origin, args = typing.get_origin(typ), typing.get_args(typ)
    if origin is typing.Literal:
        return "|".join(map(str, args))
    if origin in (types.UnionType, typing.Union):
        return " | ".join("None" if a is type(None) else type_name(a) for a in args)
    if origin in (list, tuple):
        return f"list[{type_name(args[0]) if args else 'str'}]"
    return getattr(typ, "__name__", str(typ))


def default_text(field: dataclasses.Field) -> str:
    """A field's default as one would type it: ``256,512``, ``true``, ``none``; ``required`` if none."""
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) or "(empty)"
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    return str(value)


def options(experiment: Experiment) -> list[dict]:
    """One dict per option of ``experiment``: name (as a flag), type, default and help text."""
    hints = typing.get_type_hints(experiment.Config)
    helps = option_help(experiment.Config)
    return [{"option": f"--{f.name.replace('_', '-')}", "type": type_name(hints[f.name]),
             "default": default_text(f), "help": helps[f.name]} for f in dataclasses.fields(experiment.Config)]


def where(experiment: Experiment) -> str:
    """'How much do contextualized ...? (Section 4)', or the declared section alone for an
    experiment that cites no paper (the core's own analyses)."""
    return cite(experiment.paper, experiment.section) if experiment.paper else experiment.section


def options_help(experiment: Experiment) -> str:
    """The text ``ctxlens run EXPERIMENT --help`` prints after the run command's own flags."""
    rows = options(experiment)
    width = {k: max(len(k), *(len(r[k]) for r in rows)) for k in ("option", "type", "default")}
    lines = [f"{experiment.name}: {experiment.doc}", f"paper: {where(experiment)}", "",
             f"options of {experiment.name} (--name value; lists comma-separated):"]
    for r in rows:
        cells = "  ".join(r[k].ljust(width[k]) for k in ("option", "type", "default"))
        lines.append(f"  {cells}  {r['help']}".rstrip())
    return "\n".join(lines)


def markdown() -> str:
    """The README's experiments table: the papers by id, then one row per experiment."""
    declared = by_paper()
    cited = [p for p in PAPERS if any(e.paper == p for e in declared)]
    lines = [MARK_BEGIN, "", "| paper | title |", "|---|---|"]
    lines += [f"| `{p}` | *{PAPERS[p].title}* |" for p in cited]
    lines += ["", "| experiment | measures | paper | where |", "|---|---|---|---|"]
    for e in declared:
        lines.append(f"| `{e.name}` | {e.doc} | {f'`{e.paper}`' if e.paper else '-'} | {e.section} |")
    return "\n".join([*lines, "", MARK_END])


# ------------------------------------------------------------------- the declared names, generated
NAMES_FILE = Path(__file__).resolve().parents[1] / "core" / "declared_names.py"
NAMES_DOC = '''"""The columns each experiment's rows may carry, for the row readers (generated: do not edit).

Written by ``python -m ctxlens.experiments.catalog`` from the experiments' declarations
(``Experiment.declared``: the runner's columns and the experiment's own); the experiments import
torch, the readers (``ctxlens.row_access``, findings, report) must not, so they read this copy.
``tests/experiments/test_declared_names.py`` fails when it differs from the declarations.
"""
'''


def names_source() -> str:
    """The text of ``ctxlens/core/declared_names.py`` for the registered experiments."""
    lines = [NAMES_DOC, "NAMES: dict[str, frozenset[str]] = {"]
    for name, exp in sorted(experiments().items()):
        quoted = " ".join(f'"{c}",' for c in sorted(exp.declared))
        lines.append(f'    "{name}": frozenset({{')
        lines += textwrap.wrap(quoted, 112, initial_indent=" " * 8, subsequent_indent=" " * 8,
                               break_on_hyphens=False, break_long_words=False)
        lines.append("    }),")
    return "\n".join([*lines, "}", ""])


def write_names(path: Path = NAMES_FILE) -> bool:
    """Write ``names_source()`` to ``path``; whether it changed."""
    text = names_source()
    if path.exists() and path.read_text() == text:
        return False
    path.write_text(text)
    return True


if __name__ == "__main__":
    print(f"{NAMES_FILE}: {'written' if write_names() else 'unchanged'}")
