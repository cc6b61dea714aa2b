"""Issue 34 part 1: the stored rows the report is tested on hold only declared columns of their types.

The report's fixtures (``tests/report/data/NAME/``, made by ``make_fixtures.py`` from each
experiment's smoke options) and the reference profiles (``reference/profile/MODEL/NAME/``) are
checked against the experiments' declarations (``Experiment.columns``), the same check the runner
makes before it commits a unit; a declaration that drops a column those rows carry, or a fixture
made by an older experiment, fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxlens.core.columns import check_rows
from ctxlens.experiments.registry import experiments
from ctxlens.runner.store import read_rows

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted(p for p in (ROOT / "tests" / "report" / "data").iterdir() if (p / "config.yaml").exists())
PROFILES = sorted(p.parent for p in (ROOT / "reference" / "profile").glob("*/*/config.yaml"))


def _experiment(run_dir: Path):
    import yaml

    name = yaml.safe_load((run_dir / "config.yaml").read_text())["experiment"]
    return experiments()[name]


@pytest.mark.parametrize("run_dir", FIXTURES + PROFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_stored_rows_hold_declared_columns_only(run_dir):
    exp = _experiment(run_dir)
    rows = read_rows(run_dir)
    assert rows
    check_rows(exp.name, exp.declared, rows)


def test_every_experiment_has_a_fixture():
    assert {_experiment(p).name for p in FIXTURES} == set(experiments())
