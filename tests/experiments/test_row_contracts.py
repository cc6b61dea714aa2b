"""Issue 34 part 1: every experiment declares its rows' columns; the runner checks every row.

Each registered experiment's smoke options run through the ordinary runner (on the random tiny
llama, or on the experiment's own model), so a column that a declaration misses, or a value of
another type, fails its experiment here: a new experiment is covered by being registered. A
planted bad row (an undeclared column, a wrong type) is refused before anything is committed.
The type rules are checked on values whose JSON type is known by construction.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from ctxlens.core.columns import RUNNER_COLUMNS, Column, check_row, declared
from ctxlens.core.errors import CtxlensError
from ctxlens.experiments.registry import EXPERIMENTS, by_paper, get_experiment
from ctxlens.runner.execute import run

MODEL = "zoo:random-llama"


def _smoke_models(exp) -> list[str]:
    return [MODEL] if exp.loads_model else [exp.smoke.fixture_model or exp.default_models[0]]


@pytest.mark.parametrize("exp", by_paper(), ids=lambda e: e.name)
def test_smoke_rows_carry_only_declared_columns_of_their_types(exp, tmp_path, monkeypatch):
    monkeypatch.setenv("CTXLENS_HOME", str(tmp_path / "home"))
    store = run(exp.name, _smoke_models(exp), tmp_path / "out", dict(exp.smoke.options), progress=False)
    rows = store.rows()  # read back from the file: what the runner checked, as stored
    assert rows
    undeclared = {k for r in rows for k in r} - set(exp.declared)
    assert not undeclared, f"{exp.name} wrote undeclared columns {sorted(undeclared)}"


def test_every_declared_column_is_complete():
    for exp in EXPERIMENTS.as_dict().values():
        assert exp.columns, exp.name
        for c in exp.columns:
            assert c.name and c.meaning, (exp.name, c)
            assert c.name not in {r.name for r in RUNNER_COLUMNS}, f"{exp.name} redeclares the runner's {c.name!r}"


@pytest.mark.parametrize(("extra", "says"), [
    ({"surprise": 1.5}, "column 'surprise' (value 1.5)"),
    ({"nll": "low"}, "'low' in column 'nll', declared float"),
    ({"n_tokens": 3.5}, "3.5 in column 'n_tokens', declared int"),
    ({"bos": 1}, "1 in column 'bos', declared bool"),
])
def test_a_planted_bad_row_is_refused_before_any_commit(extra, says, tmp_path, monkeypatch):
    exp = get_experiment("token-loss")
    bad = dataclasses.replace(exp, run=lambda *a: [{**row, **extra} for row in exp.run(*a)])
    monkeypatch.setattr("ctxlens.runner.execute.get_experiment", lambda name: bad)
    out = tmp_path / "out"
    with pytest.raises(CtxlensError) as err:
        run(exp.name, [MODEL], out, {"source": "random", "lengths": [16], "n_samples": 1}, progress=False)
    assert "'token-loss'" in str(err.value) and says in str(err.value)
    assert not (out / "results.jsonl").exists() or not (out / "results.jsonl").read_text()


# ---------------------------------------------------------------------------------- the type rules
COLUMNS = declared((Column("i", int), Column("f", float), Column("s", str), Column("b", bool), Column("l", list),
                    Column("d", dict), Column("o", int, optional=True)), "t")


@pytest.mark.parametrize("row", [
    {"i": 3}, {"i": np.int64(3)}, {"i": torch.tensor(3)}, {"f": 0.5}, {"f": 2}, {"f": None}, {"f": np.float32(0.5)},
    {"f": torch.tensor(0.5)}, {"f": float("nan")}, {"s": ""}, {"b": True}, {"b": np.bool_(False)}, {"l": [1]},
    {"l": (1, 2)}, {"d": {}}, {"o": None}, {"o": 1}, {"model": "m", "experiment": "t"}, {},
])
def test_values_of_the_declared_type_pass(row):
    check_row("t", COLUMNS, row)


@pytest.mark.parametrize("row", [
    {"i": True}, {"i": 1.0}, {"i": None}, {"i": "3"}, {"i": torch.tensor([1, 2])}, {"f": True}, {"f": "0.5"},
    {"s": None}, {"s": 1}, {"b": 0}, {"b": None}, {"l": "ab"}, {"l": {}}, {"d": []}, {"o": 1.5}, {"x": 1},
])
def test_values_of_another_type_or_undeclared_columns_fail(row):
    with pytest.raises(CtxlensError, match="Experiment 't'"):
        check_row("t", COLUMNS, row)


def test_a_column_declared_twice_differently_is_refused():
    with pytest.raises(CtxlensError, match="'x' twice"):
        declared((Column("x", int), Column("x", float)), "t")
    with pytest.raises(CtxlensError, match="use one of"):
        Column("x", tuple)


def test_a_declaration_without_columns_is_refused_at_registration():
    from ctxlens.experiments.registry import register

    exp = dataclasses.replace(get_experiment("token-loss"), name="no-columns", columns=())
    with pytest.raises(CtxlensError, match="'no-columns' declares no columns"):
        register(exp)
    assert "no-columns" not in EXPERIMENTS.as_dict()
