"""Issue 24 parts 3, 4 and 7: whatever a row holds, the report is written, escaped and bounded, and
it never writes through a link."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from ctxlens.cli import main
from ctxlens.runner import RunStore

FIXTURE = Path(__file__).parents[1] / "report" / "data" / "token-loss"


def run_with(tmp_path: Path, **changes) -> Path:
    """The token-loss report fixture plus one committed row with ``changes``."""
    out = tmp_path / "run"
    shutil.copytree(FIXTURE, out)
    row = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    store = RunStore(out)
    store.commit("extra", [{**row, **changes}])
    store.close()
    return out


def test_lone_surrogates_render_as_replacement_characters(tmp_path, capsys):
    run = run_with(tmp_path, model="bad\ud800name", flag="\udcff<script>")
    page = tmp_path / "r.html"
    assert main(["report", str(run), "--out", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert "bad\ufffdname" in html and "<script>" not in html


def test_a_huge_model_name_is_shortened_in_figures_and_tables(tmp_path, capsys):
    name = "m" * 1_000_000
    run = run_with(tmp_path, model=name)
    page = tmp_path / "r.html"
    start = time.perf_counter()
    assert main(["report", str(run), "--out", str(page)]) == 0
    assert time.perf_counter() - start < 120  # was 400 s and 1.4 GB, drawing the name in a legend
    assert page.stat().st_size < 5_000_000
    for csv in (tmp_path / "r-figures").glob("*.csv"):
        assert "m" * 100 not in csv.read_text()


@pytest.mark.parametrize("planted", ["r-figures", "r.html"])
def test_report_outputs_are_never_written_through_a_link(planted, tmp_path, capsys):
    run = run_with(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.html").write_text("mine")
    (tmp_path / planted).symlink_to(elsewhere if planted.endswith("figures") else elsewhere / "keep.html")
    assert main(["report", str(run), "--out", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ctxlens: error:") and "link" in err
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.html"]
    assert (elsewhere / "keep.html").read_text() == "mine"
