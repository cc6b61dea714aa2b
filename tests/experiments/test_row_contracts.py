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


# ---------------------------------------------------------------------- ranges and allowed values (issue 46)
RANGED = declared((Column("frac", float, "fraction"), Column("pct", float, "percent"), Column("cos", float, "cosine"),
                   Column("k", int, "count"), Column("r", int, "rank"), Column("acc", float, "cosine", low=-2, high=2),
                   Column("lp", float, "nats", high=0.0), Column("ppl", float, "", low=1.0),
                   Column("cond", str, "", choices=("none", "top")), Column("free", float, "nats")), "t")


@pytest.mark.parametrize("row", [
    {"frac": 0.0}, {"frac": 1.0}, {"frac": 1 + 1e-7}, {"frac": np.float32(0.5)}, {"frac": torch.tensor(1.0)},
    {"frac": None}, {"frac": float("nan")}, {"pct": 100}, {"cos": -1.0}, {"k": 0}, {"r": 1}, {"acc": -1.5},
    {"lp": -3.2}, {"ppl": 1.0}, {"cond": "top"}, {"free": -1e9},
])
def test_values_in_the_declared_range_pass(row):
    check_row("t", RANGED, row)


@pytest.mark.parametrize(("row", "says"), [
    ({"frac": 265.3}, "wrote 265.3 in column 'frac', declared 0 to 1 (fraction: "),
    ({"frac": -0.01}, "declared 0 to 1"),
    ({"frac": np.float64(1.5)}, "declared 0 to 1"),
    ({"pct": 100.5}, "declared 0 to 100 (percent"),
    ({"cos": 1.01}, "declared -1 to 1"),
    ({"k": -1}, "declared >= 0 (count"),
    ({"r": 0}, "declared >= 1 (rank"),
    ({"acc": 2.5}, "declared -2 to 2"),
    ({"lp": 0.5}, "declared <= 0 (nats"),
    ({"ppl": 0.5}, "declared >= 1"),
    ({"cond": "ppl"}, "wrote 'ppl' in column 'cond', declared one of 'none', 'top'"),
])
def test_a_value_outside_the_declared_range_is_one_sentence(row, says):
    with pytest.raises(CtxlensError) as err:
        check_row("t", RANGED, row)
    text = str(err.value)
    assert text.startswith("Experiment 't' wrote ") and says in text
    assert text.endswith("fix the value or the declaration.")
    assert "\n" not in text


def test_a_planted_out_of_range_value_is_refused_before_any_commit(tmp_path, monkeypatch):
    exp = get_experiment("token-loss")
    bad = dataclasses.replace(exp, run=lambda *a: [{**row, "nll": -0.5} for row in exp.run(*a)])
    monkeypatch.setattr("ctxlens.runner.execute.get_experiment", lambda name: bad)
    out = tmp_path / "out"
    with pytest.raises(CtxlensError, match="'token-loss' wrote -0.5 in column 'nll', declared >= 0"):
        run(exp.name, [MODEL], out, {"source": "random", "lengths": [16], "n_samples": 1}, progress=False)
    assert not (out / "results.jsonl").exists() or not (out / "results.jsonl").read_text()


@pytest.mark.parametrize(("column", "says"), [
    (lambda: Column("x", int, choices=("a",)), "choices are for str columns"),
    (lambda: Column("x", str, low=0), "low= and high= are for int and float columns"),
    (lambda: Column("x", float, low=2, high=1), "low 2 above high 1"),
])
def test_a_range_that_cannot_hold_is_refused_at_declaration(column, says):
    with pytest.raises(CtxlensError, match=says):
        column()


def test_every_declared_range_is_consistent_with_its_unit():
    """A column that claims a bounded unit keeps its range inside the unit's (a "fraction" is 0..1; an
    explicit range that widens it must change the unit, as accs = self_sim - anisotropy does not: it
    declares -2..2 on purpose and is the one exception)."""
    from ctxlens.core.columns import UNIT_RANGES

    wider = []
    for exp in EXPERIMENTS.as_dict().values():
        for c in exp.declared.values():
            if c.type not in (int, float):
                continue  # a list of pair indices: its unit names what its items count
            lo, hi = UNIT_RANGES.get(c.unit, (None, None))
            low, high = c.bounds
            if (lo is not None and (low is None or low < lo)) or (hi is not None and (high is None or high > hi)):
                wider.append((exp.name, c.name))
    assert {name for _, name in wider} <= {"accs"}, wider


def test_unwritten_names_the_declared_columns_no_row_carries():
    """The rule the report fixtures are checked by (tests/report/test_fixture_columns.py): a column
    without ``when`` must be on some row; one with ``when`` may be on none."""
    from ctxlens.core.columns import unwritten

    columns = {c.name: c for c in (Column("a", int), Column("b", int, when="an option is given"), Column("c", int))}
    assert unwritten(columns, [{"a": 1}, {"a": 2, "b": 3}]) == ["c"]
    assert unwritten(columns, [{"a": 1}, {"c": 2}]) == []
