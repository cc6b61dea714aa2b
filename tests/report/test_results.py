"""ctxlens.results: committed rows as a DataFrame, config and env, without modifying anything."""

import json

import pandas as pd
import pytest

from ctxlens.core.errors import CtxlensError
from ctxlens.results import load, read_run, run_dirs
from tests.report.conftest import DATA, ENV, config_of, write_run


def _rows(model, n):
    return [{"model": model, "experiment": "token-loss", "length": 16 * (i + 1), "sample": 0, "nll": float(i)}
            for i in range(n)]


def test_load_reads_committed_rows_only_and_changes_nothing(tmp_path):
    run = write_run(tmp_path / "r", _rows("a", 3), config=config_of("token-loss", ["a"]), env=ENV)
    with open(run / "results.jsonl", "a") as f:  # a unit in flight: rows written, not committed
        f.write(json.dumps({"model": "a", "experiment": "token-loss", "length": 999, "nll": 9.0}) + "\n")
        f.write('{"model": "a", "length": 99')  # and one cut off mid-line
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    df = load(run)
    assert list(df["length"]) == [16, 32, 48] and list(df["nll"]) == [0.0, 1.0, 2.0]
    assert set(df["run_dir"]) == {str(run)}
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    r = read_run(run)
    assert r.config["models"] == ["a"] and r.env["device"] == "cpu" and r.uncommitted == 2


def test_load_stacks_several_runs_and_folders_of_runs(tmp_path):
    a = write_run(tmp_path / "runs" / "a", _rows("a", 2), config=config_of("token-loss", ["a"]))
    b = write_run(tmp_path / "runs" / "b", _rows("b", 3), config=config_of("token-loss", ["b"]))
    both = load([a, b])
    assert list(both["model"]) == ["a", "a", "b", "b", "b"]
    pd.testing.assert_frame_equal(load(tmp_path / "runs"), both)  # the folder stands for its runs, in name order
    assert run_dirs(tmp_path / "runs") == [a, b]


def test_fixture_rows_load_with_their_columns():
    df = load(DATA / "accs-layers")
    raw = [json.loads(line) for line in (DATA / "accs-layers" / "results.jsonl").read_text().splitlines()]
    assert len(df) == len(raw)
    pooled = df["level"].isna()  # the per-sample rows (level "window" / "pair") carry no pooled accs
    assert df.loc[pooled, "accs"].tolist() == [r["accs"] for r in raw if "level" not in r]
    assert {"model", "experiment", "layer", "length", "self_sim", "anisotropy"} <= set(df.columns)


def test_bad_paths_are_one_sentence_errors(tmp_path):
    with pytest.raises(CtxlensError, match="not a directory"):
        load(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CtxlensError, match="holds no ctxlens run"):
        load(tmp_path / "empty")
