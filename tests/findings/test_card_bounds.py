"""Every interval the card prints lies inside its quantity's range, on every line of both committed
reference profiles and of a hand-written model: the ``interval`` a line carries, and every
"CI a to b" its text shows, read back from the printed words (so a line cannot print one interval
and carry another)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from ctxlens.findings.card import card_of_runs, ordered
from ctxlens.results import read_runs
from tests.report.test_card import M, _runs

PROFILE = Path(__file__).resolve().parents[2] / "reference" / "profile"
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?"
PRINTED_CI = re.compile(rf"CI\s+\[?({NUMBER})\s*(?:to|,)\s*({NUMBER})", re.IGNORECASE)


def _cards(tmp_path) -> list:
    lines = [line for col in card_of_runs(read_runs(_runs(tmp_path))).values() for line in col]
    if PROFILE.is_dir():
        lines += [line for col in card_of_runs(read_runs([PROFILE])).values() for line in col]
    return lines


def _inside(lo: float, hi: float, bounds: tuple[float, float]) -> bool:
    eps = 1e-9
    return bounds[0] - eps <= lo <= hi + eps and hi <= bounds[1] + eps


def test_every_line_is_registered_once_in_a_fixed_order():
    keys = [c.key for c in ordered()]
    assert len(keys) == len(set(keys)) and keys[0] == "length"


@pytest.mark.parametrize("source", ["hand-written", "reference"])
def test_every_interval_on_the_card_lies_inside_its_quantitys_range(tmp_path, source):
    if source == "reference" and not PROFILE.is_dir():
        pytest.skip("no committed reference profile")
    lines = ([line for col in card_of_runs(read_runs(_runs(tmp_path))).values() for line in col]
             if source == "hand-written" else
             [line for col in card_of_runs(read_runs([PROFILE])).values() for line in col])
    assert lines
    for line in lines:
        where = f"{line.model} {line.key}: {line.text}; {line.uncertainty}"
        if line.interval is not None:
            assert line.bounds is not None, f"an interval without its quantity's range: {where}"
            lo, hi = line.interval
            assert math.isfinite(lo) and math.isfinite(hi) and lo <= hi, where
            assert _inside(lo, hi, line.bounds), f"interval {line.interval} outside {line.bounds}: {where}"
        if line.value is not None and line.bounds is not None and line.key != "length":
            assert line.bounds[0] - 1e-9 <= line.value <= line.bounds[1] + 1e-9, where
        printed = f"{line.text} {line.uncertainty} {line.verdict}"
        for found in PRINTED_CI.finditer(printed):
            a, b = found.groups()
            bounds = line.ranges.get(_label(printed[:found.start()]), line.bounds)  # a further quantity's range
            assert bounds is not None, f"a printed interval on a line with no stated range: {where}"
            assert _inside(float(a), float(b), bounds), f"printed CI {a} to {b} outside {bounds}: {where}"


def _label(before: str) -> str:
    """The words naming the quantity of the interval printed next: '...; slope 95% ' -> 'slope'."""
    return re.sub(r"\s*95\s*%\s*$", "", before.split(";")[-1]).strip()


def test_a_further_quantitys_interval_is_checked_against_its_own_range():
    from ctxlens.findings.card import Line

    line = Line("x", "m", 0.5, "r = 0.5", "n = 9 windows; r 95% CI 0.2 to 0.7; slope 95% CI -5.9 to -2.7", "",
                n=9, unit="windows", interval=(0.2, 0.7), bounds=(-1.0, 1.0), ranges={"slope": (-9.0, 9.0)})
    found = [(_label(line.uncertainty[:m.start()]), m.groups()) for m in PRINTED_CI.finditer(line.uncertainty)]
    assert found == [("r", ("0.2", "0.7")), ("slope", ("-5.9", "-2.7"))]
    assert not _inside(-5.9, -2.7, line.bounds) and _inside(-5.9, -2.7, line.ranges["slope"])


def test_a_tested_line_states_its_independent_items(tmp_path):
    for line in _cards(tmp_path):
        if line.interval is not None:
            assert line.n and line.unit, f"{line.model} {line.key} has an interval but no n of independent items"
            assert str(line.n) in f"{line.text} {line.uncertainty}", \
                f"{line.model} {line.key}: n = {line.n} {line.unit} not printed"


def test_the_hand_written_model_is_on_the_card(tmp_path):
    assert M in card_of_runs(read_runs(_runs(tmp_path)))
