"""A card line with no rows says why, from the profile's record: the part the model cannot run, or
the part the budget left out (issue 33, part 5); a run outside a profile says only that rows are
missing, and a foreign record is data, never more than words on the card."""

from __future__ import annotations

import json

from ctxlens.findings.card import card_of_runs
from ctxlens.results import read_runs
from tests.report.conftest import ENV, config_of, write_run
from tests.report.test_card import INFO, M, _rows


def _profile(tmp_path, record: dict | str, name: str = "prof"):
    root = tmp_path / name
    exp = "loss-vs-length"
    config = config_of(exp, [M])
    config["model_info"] = {M: INFO}
    write_run(root / "hub-tiny-rope" / exp, [{"model": M, "experiment": exp, **r} for r in _rows()[exp]],
              config=config, env=ENV)
    (root / "profile.json").write_text(record if isinstance(record, str) else json.dumps(record))
    return root


def test_lines_say_which_part_the_budget_left_out_and_which_the_model_cannot_run(tmp_path):
    record = {"models": {M: {"left_out": {"ruler": "the budget cannot afford it even at its smallest size"},
                             "skipped": {"head-masking": "its attention heads cannot be masked"}}}}
    card = {line.key: line for line in card_of_runs(read_runs([_profile(tmp_path, record)]))[M]}
    assert card["effective_length"].text == ("not measured: the ruler part left out by the budget (the budget cannot "
                                             "afford it even at its smallest size); a larger --budget buys it")
    assert card["masking_effect"].text == "not measured: the head-masking part not run: its attention heads cannot " \
                                          "be masked"
    assert card["ppl_2l"].text.startswith("not measured: no suffix-ppl rows")  # not in the record: rows missing
    assert card["loss_fit"].value is not None  # a line with rows is untouched


def test_a_foreign_or_broken_record_changes_nothing_but_words(tmp_path):
    for i, record in enumerate(("[1, 2]", "{not json", json.dumps({"models": {M: {"left_out": ["ruler"]}}}),
                   json.dumps({"models": {M: {"left_out": {"ruler": "<script>x</script>" * 100}}}}))):
        root = _profile(tmp_path, record, f"prof{i}")
        card = {line.key: line for line in card_of_runs(read_runs([root]))[M]}
        assert card["loss_fit"].value is not None
        assert len(card["effective_length"].text) < 600  # the record's reason kept to 400 characters
