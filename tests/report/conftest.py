"""Fixtures of the report tests: the real run directories in ``data/`` (see make_fixtures.py),
hand-made run directories written through the run store, and one full report built once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"

FINDINGS = [
    {"finding": "ACCS falls with depth", "paper": "the geometry paper, Figure 1",
     "expected": "Spearman(layer, ACCS) < 0",
     "measured": {"spearman": -1.0, "first": 0.82, "last": 0.66}, "status": "reproduced"},
    {"finding": "Lost in the middle", "paper": "the long-sequence paper, Table 2",
     "expected": "mid-depth accuracy lowest",
     "measured": "flat at 0 %", "status": "not reproduced"},
    {"finding": "CE is linear in intrinsic entropy", "paper": "the intrinsic-entropy paper, Figure 1",
     "expected": "R² > 0.9",
     "measured": None, "status": "not measured"},
]


def write_run(path: Path, rows: list[dict], *, config: dict | None = None, env: dict | None = None,
              per_unit: int = 1) -> Path:
    """A run directory holding ``rows`` committed ``per_unit`` at a time (as the runner does)."""
    from ctxlens.runner.store import RunStore

    store = RunStore(path)
    if config is not None:
        store.write_config(config)
    if env is not None:
        store.write_env(env)
    for i in range(0, len(rows), per_unit):
        store.commit(json.dumps({"unit": i}), rows[i:i + per_unit])
    return path


def config_of(experiment: str, models: list[str], **options) -> dict:
    return {"experiment": experiment, "models": models, "options": options, "model_options": {}}


ENV = {"python": "3.11.2", "platform": "Linux", "packages": {"ctxlens": "0.1.0"}, "device": "cpu"}


@pytest.fixture(scope="session")
def full_report(tmp_path_factory):
    """The report of every fixture experiment, built once (strict: a failing figure raises)."""
    from ctxlens.report.build import build_report

    out = tmp_path_factory.mktemp("full") / "report.html"
    return build_report(DATA, out, findings=FINDINGS, strict=True)
