"""Issue 46 part 2: readers read rows through their experiment's declaration (``ctxlens.row_access``).

A column a reader reads that its experiment does not declare is one ``CtxlensError`` naming both, at
the read, whether the rows come from a run directory (``ctxlens.results.read_run``) or are handed to
the findings (``ctxlens.findings.verdicts.Rows``); a declared column a row lacks reads as missing.
Rows an older writer made are read in the current layout (``LAYOUTS``) without touching the file.
"""

from __future__ import annotations

import copy
import pickle

import pytest

from ctxlens.core.errors import CtxlensError
from ctxlens.findings.card import compute_card
from ctxlens.findings.verdicts import Rows
from ctxlens.results import load, read_run
from ctxlens.row_access import LAYOUTS, Row, current, declared_row, declared_rows, declares
from tests.report.conftest import config_of, write_run

SUFFIX = {"model": "m", "experiment": "suffix-ppl", "length": 8, "nll": 2.0, "ppl": 7.39}


def test_a_misspelled_key_raises_and_names_the_declared_one():
    row = Rows([SUFFIX]).of("suffix-ppl", "m")[0]
    assert isinstance(row, Row) and row["nll"] == 2.0
    assert row.get("nll_se") is None and "nll_se" not in row  # declared, absent: missing, as in a dict
    for read in (lambda r: r["nl"], lambda r: r.get("nl"), lambda r: "nl" in r):
        with pytest.raises(CtxlensError, match=r"column 'nl' of suffix-ppl rows, which that experiment does not "
                                               r"declare \(did you mean 'nll'"):
            read(row)


def test_a_misspelled_experiment_raises():
    with pytest.raises(CtxlensError, match="No experiment 'suffix-pp' declares row columns .*'suffix-ppl'"):
        Rows([SUFFIX]).of("suffix-pp", "m")


def test_rows_read_from_a_run_directory_refuse_undeclared_names(tmp_path):
    run = write_run(tmp_path / "run", [{**SUFFIX, "seed": 0}], config=config_of("suffix-ppl", ["m"]))
    row = read_run(run).rows[0]
    assert isinstance(row, Row) and row["seed"] == 0
    with pytest.raises(CtxlensError, match="'sed' of suffix-ppl rows"):
        row["sed"]
    assert load(run)["nll"].tolist() == [2.0]  # the frame is built from them as from dicts


def test_a_card_line_reading_an_undeclared_column_is_not_a_silent_gap(monkeypatch):
    """The card turns a row of the wrong type into 'not computed'; a misread column is ctxlens's bug and
    stops the card instead."""
    import ctxlens.findings.lines.loss as loss

    monkeypatch.setattr(loss, "ppl_2l", lambda rows, *a: rows[0]["nll_2l"])
    with pytest.raises(CtxlensError, match="'nll_2l' of suffix-ppl rows"):
        compute_card([SUFFIX], {"m": {"train_length": 8}}, {"m": 8})


def test_rows_of_an_undeclared_experiment_stay_plain_dicts():
    plugin = {"model": "m", "experiment": "my-plugin", "anything": 1}
    assert type(declared_row(plugin)) is dict and declares(plugin, "anything") and not declares(plugin, "other")
    assert declares(declared_row(SUFFIX), "nll_se") and not declares(declared_row(SUFFIX), "train_length")


def test_a_row_copied_or_pickled_keeps_its_declaration():
    row = declared_row(SUFFIX)
    for other in (copy.copy(row), copy.deepcopy(row), pickle.loads(pickle.dumps(row))):
        assert isinstance(other, Row) and other == SUFFIX
        with pytest.raises(CtxlensError):
            other["nl"]
    assert declared_rows([row])[0] is row  # read once


# ------------------------------------------------------------------------------------------- layouts
OLD_PPL = {"model": "m", "experiment": "head-masking", "task": "perplexity", "score": 265.4, "nll": 5.58, "n": 1}
PASSKEY = {"model": "m", "experiment": "head-masking", "task": "passkey", "score": 1.0, "n": 1, "probe": 0}


def test_head_masking_perplexity_rows_of_the_first_layout_read_with_ppl():
    old, passkey = current([OLD_PPL, PASSKEY])
    assert old == {**{k: v for k, v in OLD_PPL.items() if k != "score"}, "ppl": 265.4}
    assert passkey == PASSKEY  # a passkey row's score is a score
    assert current([old]) == [old]  # already current: unchanged
    assert [layout.experiment for layout in LAYOUTS] == ["head-masking"] and LAYOUTS[0].why


def test_a_run_of_the_first_layout_reads_in_the_current_one_and_its_file_is_untouched(tmp_path):
    run = write_run(tmp_path / "run", [OLD_PPL, PASSKEY], config=config_of("head-masking", ["m"]))
    before = (run / "results.jsonl").read_bytes()
    rows = read_run(run).rows
    assert rows[0]["ppl"] == 265.4 and "score" not in rows[0] and rows[1]["score"] == 1.0
    assert (run / "results.jsonl").read_bytes() == before


def test_a_plotter_reading_an_undeclared_column_raises():
    import pandas as pd

    from ctxlens.report.plots._common import col, numeric

    df = pd.DataFrame([{**SUFFIX, "series": "m"}])
    assert col(df, "nll_se").isna().all()  # declared, absent from these rows: missing
    assert col(df, "series").tolist() == ["m"]  # a column the report derived: read as it is
    with pytest.raises(CtxlensError, match="'nl' of suffix-ppl rows"):
        numeric(df, "nl")
    assert col(pd.DataFrame({"x": [1]}), "y").isna().all()  # a table built from rows: no experiment to ask
