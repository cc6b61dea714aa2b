"""RULER's scoring (``scripts/eval``): post-processing, ``all`` / ``part`` matching, summaries."""

from __future__ import annotations

import pytest

from ctxlens.core.errors import CtxlensError
from ctxlens.tasks.scoring import (
    effective_length,
    length_means,
    optimal_length,
    postprocess,
    score,
    sustained_length,
)


def test_postprocess_strips_and_turns_control_characters_into_newlines():
    assert postprocess("  1234\t567\x00end \n") == "1234\n567\nend"


def test_all_is_the_fraction_of_references_found_ignoring_case():
    assert score("The numbers are 111 and 333.", ["111", "222", "333", "444"], "all") == 50.0
    assert score("ABC-def", ["abc-DEF"], "all") == 100.0
    assert score("", ["x"], "all") == 0.0


def test_part_is_any_reference_found():
    assert score("Paris, France", ["London", "paris"], "part") == 100.0
    assert score("Berlin", ["London", "Paris"], "part") == 0.0


def test_bad_metric_and_empty_references_are_errors():
    with pytest.raises(CtxlensError, match="Unknown metric"):
        score("a", ["a"], "exact")
    with pytest.raises(CtxlensError, match="no references"):
        score("a", [], "all")


def _rows(curve: dict[int, dict[str, list[float]]], model: str = "m") -> list[dict]:
    return [{"model": model, "length": L, "task": t, "score": s}
            for L, per_task in curve.items() for t, scores in per_task.items() for s in scores]


def _curve(model: str, means: dict[int, float]) -> list[dict]:
    """One task, one sample per length: the per-length mean is the given score."""
    return [{"model": model, "length": L, "task": "t", "score": v} for L, v in means.items()]


def test_effective_length_is_rulers_largest_length_whose_mean_exceeds_the_threshold():
    # the case: 95 / 80 / 90 / 60 at 1K / 2K / 4K / 8K. RULER: 4K (90 > 85.6, 2K's dip
    # does not matter); sustained: 1K (2K is the first at or below the threshold)
    rows = _curve("m", {1024: 95, 2048: 80, 4096: 90, 8192: 60})
    assert effective_length(rows) == {("m",): 4096}
    assert sustained_length(rows) == {("m",): 1024}
    assert effective_length(rows, threshold=95) == {("m",): None}  # a tie is not "exceeds"
    assert sustained_length(rows, threshold=95) == {("m",): None}
    assert effective_length(rows, threshold=94.9) == {("m",): 1024}


def test_a_tie_with_the_threshold_does_not_pass():
    rows = _curve("m", {1024: 85.6, 2048: 90})
    assert effective_length(rows) == {("m",): 2048}
    assert sustained_length(rows) == {("m",): None}


def test_the_mean_weighs_tasks_not_samples():
    # 1024: task a [100, 100] and task b [80] -> (100 + 80) / 2 = 90, not 280 / 3; 2048: (90 + 82) / 2 = 86
    rows = [{"model": "m", "length": L, "task": t, "score": v} for L, t, v in
            ((1024, "a", 100), (1024, "a", 100), (1024, "b", 80), (2048, "a", 90), (2048, "b", 82),
             (4096, "a", 100), (4096, "b", 50))]
    means = {m["length"]: m["score"] for m in length_means(rows)}
    assert means == {1024: 90.0, 2048: 86.0, 4096: 75.0}
    assert effective_length(rows) == {("m",): 2048} == sustained_length(rows)


def test_a_task_that_does_not_fit_a_length_is_missing_there_not_dropped():
    # b does not fit at 2048 (flagged row, no score): 2048 has no mean over {a, b}, so it neither
    # passes nor lets a's 100 stand for the length; 4096 still counts for RULER
    rows = [{"model": "m", "length": L, "task": t, "score": v} for L, t, v in
            ((1024, "a", 90), (1024, "b", 90), (2048, "a", 100), (4096, "a", 90), (4096, "b", 88))]
    rows.append({"model": "m", "length": 2048, "task": "b", "score": None, "flag": "does not fit"})
    by_length = {m["length"]: m for m in length_means(rows)}
    assert by_length[2048]["score"] is None and by_length[2048]["missing"] == "b"
    assert by_length[2048]["scored_mean"] == 100 and by_length[2048]["n_tasks"] == 2
    assert by_length[4096]["score"] == 89.0 and by_length[4096]["missing"] is None
    assert effective_length(rows) == {("m",): 4096}
    assert sustained_length(rows) == {("m",): 1024}
    assert effective_length([r for r in rows if r["length"] == 2048]) == {("m",): None}


def test_several_models_each_get_their_own_length():
    rows = _curve("m", {1024: 95, 2048: 80, 4096: 90}) + _curve("n", {1024: 50, 2048: 99}) + _curve("o", {1024: 10})
    assert effective_length(rows) == {("m",): 4096, ("n",): 2048, ("o",): None}
    assert sustained_length(rows) == {("m",): 1024, ("n",): None, ("o",): None}


def test_optimal_length_is_the_best_mean_visible_context():
    rows = [{"model": "m", "task": "qa_1", "visible": v, "score": s}
            for v, s in ((100, 20), (100, 40), (200, 70), (300, 50), (400, 70))]
    assert optimal_length(rows) == {("m", "qa_1"): 200}
