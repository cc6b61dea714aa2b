"""Issue 34 part 1, issue 46 part 2: the row readers read declared columns only.

Statically: every column name a findings module (``ctxlens/findings/*.py``), a card line
(``ctxlens/findings/lines/*.py``) or a plotter (``ctxlens/report/plots/*.py``) reads from rows --
``r["col"]``, ``r.get("col")``, ``"col" in r``, ``df["col"]``, ``col(df, "col")``, ``numeric(df, "col")``
on a row-like name -- is found with ``ast`` and must be declared (``Experiment.columns``) by an
experiment that module reads: the names in its ``ctx.of("...")`` / ``rows.of("...")`` calls (lines,
findings), its ``@plotter("...")`` decorators (plots), or, for a findings module whose functions are
handed rows by their callers, its entry in ``READS``. The runner's columns (model, experiment, ...)
are every experiment's. ``EXCEPTIONS`` lists the names such reads take that are not row columns,
each with its reason; an exception nothing reads any more fails too, so the list stays true.

At run time (``ctxlens.row_access``): a reader that reads a column its experiment does not declare
gets one ``CtxlensError`` naming both, whether it reads a run directory or is handed rows.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ctxlens.core.columns import RUNNER_COLUMNS
from ctxlens.experiments.registry import experiments

SRC = Path(__file__).resolve().parents[1] / "src" / "ctxlens"
MODULES = sorted([*(SRC / "findings").glob("*.py"), *(SRC / "findings" / "lines").glob("[!_]*.py"),
                  *(SRC / "report" / "plots").glob("[!_]*.py")])
# findings module -> the experiments whose rows its functions are handed (they name none themselves)
TRAIN_LENGTH_READERS = ("positional-heads", "head-masking")  # train_length, read where declared (row_access.declares)
READS: dict[str, tuple[str, ...]] = {
    "findings/__init__": TRAIN_LENGTH_READERS,
    "findings/accs": ("accs-layers", "accs-boundary"),
    "findings/card": TRAIN_LENGTH_READERS,
    "findings/intrinsic_entropy": ("optimal-context", "parity-dimension"),
    "findings/masking": ("head-masking",),
    "findings/positional": ("positional-heads",),
}
ROW_NAMES = {"r", "row", "rows", "df", "d", "sub", "data", "first", "mine"}  # names that hold rows or a frame of rows
COLUMN_HELPERS = {"col", "numeric", "mean_sem", "varying"}  # report.plots._common: (df, column names...)

# module -> {name: why a read of it is not a read of a declared column}
SERIES = "the report's label of a run's model (ctxlens.report.build adds it to every frame)"
EXCEPTIONS: dict[str, dict[str, str]] = {
    "findings/__init__": {"note": "a key of the findings table's own rows (compute_findings), not of result rows"},
    "report/plots/rope": {"value": "derived here: the value drawn, a passkey row's score in percent or a perplexity "
                                   "row's ppl"},
    "report/plots/geometry": {"series": SERIES,
                              "rank": "derived here: the geometric mean of rank_low and rank_high",
                              "rank_bin": "derived here: rank_low binned for the table"},
    "report/plots/scaling": {"series": SERIES, "optimum": "derived here: whether a row is its series' best"},
    "report/plots/tasks": {"series": SERIES,
                           "effective_length": "a column of the effective-length table built here from scores",
                           "scored_mean": "a column of ctxlens.tasks.scoring.length_means' output",
                           "format": "derived here: haystack-key-value of niah-format rows"},
}


def _reads(tree: ast.AST) -> set[str]:
    """Column names read from row-like names, and passed to the column helpers."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in ROW_NAMES:
            keys = node.slice.elts if isinstance(node.slice, ast.List) else [node.slice]
            out |= {k.value for k in keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        elif isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr == "get" and isinstance(f.value, ast.Name)
                    and f.value.id in ROW_NAMES and node.args and isinstance(node.args[0], ast.Constant)):
                out.add(node.args[0].value)
            elif isinstance(f, ast.Name) and f.id in COLUMN_HELPERS:
                out |= {a.value for a in node.args[1:] if isinstance(a, ast.Constant) and isinstance(a.value, str)}
        elif (isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant)
              and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))
              and isinstance(node.comparators[0], ast.Name) and node.comparators[0].id in ROW_NAMES):
            out.add(node.left.value)  # "col" in r
    return {n for n in out if isinstance(n, str)}


def _experiments_read(tree: ast.AST) -> set[str]:
    """Experiment names in ``ctx.of("x")`` / ``rows.of("x", ...)`` calls and ``@plotter("x")`` decorators."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr == "of") or (isinstance(f, ast.Name) and f.id == "plotter"):
                out.add(node.args[0].value)
    return out


def _module_id(path: Path) -> str:
    return str(path.relative_to(SRC).with_suffix(""))


@pytest.mark.parametrize("path", MODULES, ids=_module_id)
def test_readers_read_declared_columns(path):
    tree = ast.parse(path.read_text())
    names = _experiments_read(tree) | set(READS.get(_module_id(path), ()))
    declared = experiments()
    assert names <= set(declared), f"{_module_id(path)} reads unknown experiments {sorted(names - set(declared))}"
    columns = set().union({c.name for c in RUNNER_COLUMNS}, *(declared[n].declared for n in names))
    allowed = EXCEPTIONS.get(_module_id(path), {})
    reads = _reads(tree)
    undeclared = reads - columns - set(allowed)
    assert not undeclared, (f"{_module_id(path)} reads {sorted(undeclared)}, which no experiment it reads "
                            f"({sorted(names)}) declares")
    stale = set(allowed) - reads
    assert not stale, f"EXCEPTIONS of {_module_id(path)} lists {sorted(stale)}, which it no longer reads"


def test_every_findings_module_that_reads_rows_names_their_experiments():
    """A findings module handed rows by its callers says whose in ``READS`` (else the check above would
    allow only the runner's columns and fail with the names it reads)."""
    for path in sorted((SRC / "findings").glob("*.py")):
        tree = ast.parse(path.read_text())
        own = _reads(tree) - {c.name for c in RUNNER_COLUMNS} - set(EXCEPTIONS.get(_module_id(path), {}))
        if own and not _experiments_read(tree):
            assert _module_id(path) in READS, f"{_module_id(path)} reads {sorted(own)}: name its experiments in READS"
    assert set(READS) <= {_module_id(p) for p in MODULES}, "READS names a module that is gone"
