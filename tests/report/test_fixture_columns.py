"""The stored rows the report is tested on hold what their experiment's declaration says, so the
fixtures cannot go stale (issue 34 part 1; issue 46 part 2).

The report's fixtures (``tests/report/data/NAME/``, made by ``make_fixtures.py`` from real runs of
each experiment's smoke options) are checked against the declarations (``Experiment.columns``):

- every row holds declared columns only, of their types, in their declared ranges and choices (the
  check the runner makes before it commits a unit);
- every declared column without a ``when`` is carried by some row: a declaration that gains a
  column, or a fixture made by an older writer, fails here until the fixture is made again;
- the fixture was made with the experiment's current smoke options.

The committed reference profiles (``reference/PROFILE/MODEL/PART/``) are checked as the readers read
them (``ctxlens.results.read_run``: rows of an older layout read through ``ctxlens.row_access.LAYOUTS``):
declared columns of their types, in range. ``test_a_fixture_is_what_its_writer_writes_today`` (slow) makes
each fixture again and compares its columns and row count with the committed one.
To make them again: ``python tests/report/make_fixtures.py [NAME ...]``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ctxlens.core.columns import check_rows, unwritten
from ctxlens.core.options import make_config
from ctxlens.experiments.registry import experiments
from ctxlens.results import read_run
from ctxlens.runner.store import read_rows

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted(p for p in (ROOT / "tests" / "report" / "data").iterdir() if (p / "config.yaml").exists())
PROFILES = sorted(p.parent for p in (ROOT / "reference").glob("*/*/*/config.yaml") if ".superseded" not in p.parts)
REMAKE = "make it again: python tests/report/make_fixtures.py"


def _config(run_dir: Path) -> dict:
    import yaml

    return yaml.safe_load((run_dir / "config.yaml").read_text())


def _experiment(run_dir: Path):
    return experiments()[_config(run_dir)["experiment"]]


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("run_dir", FIXTURES, ids=_id)
def test_a_fixture_holds_every_declared_column_in_range(run_dir):
    exp = _experiment(run_dir)
    rows = read_rows(run_dir)  # as stored: a fixture is in its experiment's current layout
    assert rows
    check_rows(exp.name, exp.declared, rows)
    missing = unwritten(exp.declared, rows)
    assert not missing, (f"the {exp.name} fixture lacks columns its declaration lists: {missing}; {REMAKE} "
                         f"{exp.name} (or give the column a when=... if some runs never write it)")


@pytest.mark.parametrize("run_dir", FIXTURES, ids=_id)
def test_a_fixture_is_made_with_the_current_smoke_options(run_dir):
    exp, config = _experiment(run_dir), _config(run_dir)
    made, smoke = make_config(exp.Config, config["options"]), make_config(exp.Config, exp.smoke.options)
    assert dataclasses.asdict(made) == dataclasses.asdict(smoke), f"{REMAKE} {exp.name}"
    models = [exp.smoke.fixture_model] if exp.smoke.fixture_model else ["zoo:random-llama", "other-llama"]
    assert config["models"] == models, f"{REMAKE} {exp.name}"


@pytest.mark.parametrize("run_dir", PROFILES, ids=_id)
def test_reference_rows_read_as_declared(run_dir):
    exp = _experiment(run_dir)
    rows = read_run(run_dir).rows
    assert rows
    check_rows(exp.name, exp.declared, rows)


def test_every_experiment_has_a_fixture():
    assert {_experiment(p).name for p in FIXTURES} == set(experiments())


@pytest.mark.slow
@pytest.mark.parametrize("run_dir", FIXTURES, ids=_id)
def test_a_fixture_is_what_its_writer_writes_today(run_dir, tmp_path, monkeypatch):
    import tests.report.make_fixtures as make

    monkeypatch.setattr(make, "HERE", tmp_path)
    monkeypatch.setenv("CTXLENS_HOME", str(tmp_path / "home"))  # make.main sets both; restored after
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    exp = _experiment(run_dir)
    make.main([exp.name])
    fresh, stored = read_rows(tmp_path / exp.name), read_rows(run_dir)
    assert sorted({k for r in fresh for k in r}) == sorted({k for r in stored for k in r}), f"{REMAKE} {exp.name}"
    assert len(fresh) == len(stored), f"{REMAKE} {exp.name}"
