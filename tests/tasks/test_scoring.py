"""RULER's scoring (``scripts/eval``): post-processing, ``all`` / ``part`` matching, summaries."""

from __future__ import annotations

import pytest

from ctxlens.core.errors import CtxlensError
from ctxlens.tasks.scoring import effective_length, optimal_length, postprocess, score


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


def test_effective_length_is_the_last_length_before_the_mean_drops_below_threshold():
    rows = _rows({1024: {"a": [100, 100], "b": [80]}, 2048: {"a": [90], "b": [82]}, 4096: {"a": [100], "b": [50]},
                  8192: {"a": [100], "b": [100]}})
    # task means: 1024 -> (100 + 80) / 2 = 90; 2048 -> 86; 4096 -> 75 (drop); 8192 -> 100 (after a drop)
    assert effective_length(rows) == {("m",): 2048}
    assert effective_length(rows, threshold=95) == {("m",): None}
    assert effective_length(rows + [{"model": "m", "length": 4096, "task": "b", "score": None}]) == {("m",): 2048}


def test_optimal_length_is_the_best_mean_visible_context():
    rows = [{"model": "m", "task": "qa_1", "visible": v, "score": s}
            for v, s in ((100, 20), (100, 40), (200, 70), (300, 50), (400, 70))]
    assert optimal_length(rows) == {("m", "qa_1"): 200}
