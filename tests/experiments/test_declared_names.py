"""Issue 46 part 2: the torch-free copy of the declared column names is the declarations'.

The row readers (``ctxlens.row_access``: findings, report) cannot import the experiments (they import
torch), so they read ``ctxlens/core/declared_names.py``, generated from the registry. A declaration
that changes without the file fails here; ``python -m ctxlens.experiments.catalog`` writes it again.
"""

from __future__ import annotations

from ctxlens.core.declared_names import NAMES
from ctxlens.experiments import catalog
from ctxlens.experiments.registry import experiments


def test_the_generated_names_are_the_declarations():
    assert catalog.NAMES_FILE.read_text() == catalog.names_source(), (
        "ctxlens/core/declared_names.py differs from the declarations; run: python -m ctxlens.experiments.catalog")
    assert NAMES == {name: frozenset(exp.declared) for name, exp in experiments().items()}


def test_writing_them_again_changes_nothing(tmp_path):
    copy = tmp_path / "declared_names.py"
    assert catalog.write_names(copy) is True and catalog.write_names(copy) is False
    assert copy.read_text() == catalog.NAMES_FILE.read_text()
