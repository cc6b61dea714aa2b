"""The five task experiments run end to end through the runner and write tidy, scored rows."""

from __future__ import annotations

import pytest

from ctxlens.experiments.base import make_config
from ctxlens.experiments.registry import get_experiment
from ctxlens.lm import from_model
from ctxlens.runner.execute import run
from ctxlens.runner.store import read_rows
from tests.conftest import build_model

FAST = {"n_samples": 2, "max_new_tokens": 4}


def _run(name: str, tmp_path, **options) -> list[dict]:
    run(name, ["zoo:random-llama"], tmp_path / name, {**FAST, **options}, progress=False)
    return read_rows(tmp_path / name)


def _check_sample_rows(rows: list[dict], length: int) -> None:
    for r in rows:
        assert 0.0 <= r["score"] <= 100.0 and r["budget"] == 4
        assert r["n_tokens"] + r["budget"] <= length and r["fill"] >= 0.99
        assert r["sample_id"].endswith(f"/{r['sample']}") and r["model"] == "zoo:random-llama"


def test_ruler_rows_per_sample_and_a_flag_when_a_task_cannot_fit(tmp_path):
    rows = _run("ruler", tmp_path, tasks="niah_single_1,vt,qa_1,cwe", lengths="1024")
    scored = [r for r in rows if r.get("score") is not None]
    assert sorted((r["task"], r["sample"]) for r in scored) == [(t, i) for t in ("niah_single_1", "qa_1", "vt")
                                                                for i in (0, 1)]
    _check_sample_rows(scored, 1024)
    (cwe,) = [r for r in rows if r["task"] == "cwe"]
    assert cwe["score"] is None and "needs more than 1024 tokens" in cwe["flag"]
    again = _run("ruler", tmp_path, tasks="niah_single_1,vt,qa_1,cwe", lengths="1024")  # resumes: nothing new
    assert len(again) == len(rows)


def test_niah_depth_and_format_record_target_and_realised_depth(tmp_path):
    rows = _run("niah-depth", tmp_path, lengths="768", depths="0,100", haystack="noise")
    assert sorted({r["depth"] for r in rows}) == [0.0, 100.0] and len(rows) == 4
    _check_sample_rows(rows, 768)
    assert all(r["depth_target"] == r["depth"] for r in rows)
    assert all((r["depth_percent"] == 0.0) if r["depth"] == 0 else r["depth_percent"] > 90 for r in rows)
    fmt = _run("niah-format", tmp_path, lengths="768", values="numbers,uuids", depths="50")
    formats = {(h, v) for h in ("essay", "repeat") for v in ("numbers", "uuids")}
    assert {(r["haystack"], r["value"]) for r in fmt} == formats
    _check_sample_rows(fmt, 768)
    _check_planned_tokens("niah-format", fmt, lengths="768", values="numbers,uuids", depths="50")


def test_visible_fraction_and_position_weighted_qa_truncate_on_the_left(tmp_path):
    rows = _run("visible-fraction", tmp_path, tasks="fwe,qa_1", max_length=1024, fractions="0.25,1.0")
    for r in rows:
        expected = round(r["fraction"] * (1024 - 4))
        assert r["visible"] == min(expected, r["n_tokens"])
    assert {(r["task"], r["fraction"]) for r in rows} == {(t, f) for t in ("fwe", "qa_1") for f in (0.25, 1.0)}
    pw = _run("position-weighted-qa", tmp_path, max_length=1024, gammas="0,4", fractions="0.5")
    assert {r["gamma"] for r in pw} == {0.0, 4.0} and all(r["to_end"] > 0 for r in pw)
    _check_planned_tokens("visible-fraction", rows, tasks="fwe,qa_1", max_length=1024, fractions="0.25,1.0")
    _check_planned_tokens("position-weighted-qa", pw, max_length=1024, gammas="0,4", fractions="0.5")


def _check_planned_tokens(name: str, rows: list[dict], **options) -> None:
    """The ``work`` hook's tokens (the plan and the progress meter's total) against the rows: the
    prompts' visible tokens (at most the planned, prompts fill up to their length) and the budgets."""
    from ctxlens.runner.plans import unit_work

    exp = get_experiment(name)
    config = make_config(exp.Config, {**FAST, **options})
    for unit in exp.plan(config):
        mine = [r for r in rows if all(r[k] == v for k, v in unit.items())]
        (work,) = unit_work(exp, config, unit)
        assert work.sequences == len(mine) == config.n_samples
        assert 0.9 * work.prompt_tokens <= sum(r["visible"] for r in mine) <= work.prompt_tokens
        assert work.new_tokens == sum(r["budget"] for r in mine)


@pytest.mark.parametrize("family", ["mamba2", "bamba"])
def test_ssm_and_hybrid_models_run_the_ruler_experiment(family, byte_tok):
    exp = get_experiment("ruler")
    config = make_config(exp.Config, {**FAST, "tasks": "niah_single_1", "lengths": "512", "cache": False})
    lm = from_model(build_model(family, vocab_size=257))
    lm.tokenizer = byte_tok
    rows = exp.run(lm, config, exp.plan(config)[0], {})
    assert len(rows) == 2 and all(0 <= r["score"] <= 100 and r["n_tokens"] + 4 <= 512 for r in rows)


def test_bad_options_are_clear_errors():
    from ctxlens.core.errors import CtxlensError

    with pytest.raises(CtxlensError, match="Did you mean 'niah_single_1'"):
        make_config(get_experiment("ruler").Config, {"tasks": "niah_singel_1"})
    with pytest.raises(CtxlensError, match="backend"):
        make_config(get_experiment("ruler").Config, {"backend": "tgi"})
    with pytest.raises(CtxlensError, match="fractions"):
        make_config(get_experiment("visible-fraction").Config, {"fractions": "0,0.5"})


def test_visible_ids_keep_the_last_tokens_and_a_leading_bos():
    from ctxlens.probes.tasks import visible_ids

    ids = [1, 10, 11, 12, 13, 14]
    assert visible_ids(ids, 3, keep=1) == [1, 13, 14]
    assert visible_ids(ids, 3, keep=0) == [12, 13, 14]
    assert visible_ids(ids, 10, keep=1) == ids
