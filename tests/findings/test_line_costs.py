"""What each card line cost (issue 33, part 6): the parts a line reads, from the profile's record, a
part read by k lines charged 1/k to each. Truth: the record written here, divided by hand."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

from ctxlens.findings.card import line_costs
from ctxlens.results import profile_costs


def _runs(tmp_path, parts):
    (tmp_path / "profile.json").write_text(json.dumps({"models": {"m": {"label": "m", "parts": parts}}}))
    return [SimpleNamespace(path=tmp_path / "m" / p.get("name", "x")) for p in parts]


def _part(experiment, seconds, tokens, status="done"):
    return {"name": experiment, "experiment": experiment, "spent_s": seconds, "tokens": tokens, "status": status}


def test_a_part_read_by_two_lines_is_split_and_the_lines_sum_to_the_parts(tmp_path):
    parts = [_part("niah-depth", 120.0, 1000), _part("ruler", 30.0, 400), _part("loss-vs-length", 60.0, 300),
             _part("accs-layers", 50.0, 700, status="failed"),  # a failed part's time was spent too
             _part("suffix-ppl", 99.0, 99, status="planned"),  # never ran: no cost
             _part("rope-dims", 40.0, 10)]  # read by no line
    costs = profile_costs(_runs(tmp_path, parts))
    assert costs == {"m": {"niah-depth": {"seconds": 120.0, "tokens": 1000}, "ruler": {"seconds": 30.0, "tokens": 400},
                           "loss-vs-length": {"seconds": 60.0, "tokens": 300},
                           "accs-layers": {"seconds": 50.0, "tokens": 700},
                           "rope-dims": {"seconds": 40.0, "tokens": 10}}}
    lines = line_costs(costs["m"])
    assert lines["retrieval_2l"]["seconds"] == lines["middle_dip"]["seconds"] == 60.0  # the needle grid, halved
    assert lines["retrieval_2l"]["tokens"] == 500 and lines["retrieval_2l"]["shared"] == ["niah-depth"]
    assert lines["effective_length"] == {"seconds": 30.0, "tokens": 400, "parts": ["ruler"], "shared": []}
    assert lines["loss_fit"]["seconds"] == lines["usable_context"]["seconds"] == 30.0
    assert lines["accs_depth"]["seconds"] == 50.0
    assert "ppl_2l" not in lines and "length" not in lines
    assert math.isclose(sum(c["seconds"] for c in lines.values()), 120 + 30 + 60 + 50)  # rope-dims: no line


def test_values_that_are_not_costs_are_left_out(tmp_path):
    parts = [_part("niah-depth", "12", 5), _part("ruler", float("nan"), 5), _part("suffix-ppl", -1.0, 5),
             _part("accs-layers", 10.0, True), _part("loss-vs-length", 6.0, 60)]
    runs = _runs(tmp_path, parts)
    assert profile_costs(runs) == {"m": {"loss-vs-length": {"seconds": 6.0, "tokens": 60}}}
    (tmp_path / "profile.json").write_text("[1, 2]")  # not a record: no costs, no error
    assert profile_costs(runs) == {}
