"""The committed reference profiles: SmolLM2-135M and Gemma-3-270M at L = 1024 (``reference/profile``,
made by ``ctxlens profile ref:smollm2-135m ref:gemma3-270m --length 1024``) and SmolLM2-135M at its
training length (``reference/profile-t``, L = 8192) and Gemma-3-270M as far as a CPU session goes
(``reference/profile-gemma``, L = 4096) and SmolLM2-135M at L = 1024 on natural text
(``reference/profile-sotu``): their rows read back, the cards in the docs are those
rows' card (``ctxlens card``: the README holds profile-sotu's, ``docs/reference-profiles.md`` the others'), and their
reports open in Chromium with the card first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxlens.cli import main
from ctxlens.findings.card import questions
from ctxlens.results import read_runs, run_dirs
from tests.report._browser import Browser, find_chromium

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"  # the front door: the first profile's card (profile-sotu)
PROFILES_DOC = ROOT / "docs" / "reference-profiles.md"  # the other cards and the side-by-side table
PROFILES = {  # directory -> (its models, the marker around its cards, the file that holds them)
    "profile": (("ref:smollm2-135m", "ref:gemma3-270m"), "reference-cards", PROFILES_DOC),
    "profile-t": (("ref:smollm2-135m",), "reference-cards-t", PROFILES_DOC),
    "profile-gemma": (("ref:gemma3-270m",), "reference-cards-gemma", PROFILES_DOC),
    "profile-sotu": (("ref:smollm2-135m",), "reference-cards-sotu", README),
    "profile-gemma-sotu": (("ref:gemma3-270m",), "reference-cards-gemma-sotu", PROFILES_DOC),
}
CHROMIUM = find_chromium()


@pytest.fixture(params=sorted(PROFILES))
def profile(request):
    """(the profile's directory, its models, the begin and end markers of its cards, the file holding them)."""
    models, marker, doc = PROFILES[request.param]
    return ROOT / "reference" / request.param, models, (f"<!-- {marker}:begin -->", f"<!-- {marker}:end -->"), doc


def test_the_profile_record_names_its_models_and_every_part_ended(profile):
    PROFILE, MODELS, _, _ = profile
    record = json.loads((PROFILE / "profile.json").read_text())
    assert set(record["models"]) == set(MODELS)
    for spec, state in record["models"].items():
        assert {p["status"] for p in state["parts"]} <= {"done", "left out"}, spec
        done = {p["name"] for p in state["parts"] if p["status"] == "done"}
        assert {d.name for d in run_dirs(PROFILE / state["label"])} == done, spec
    runs = read_runs(PROFILE)
    assert {r["model"] for run in runs for r in run.rows} == set(MODELS)
    lengths = {spec: state["size"]["length"] for spec, state in record["models"].items()}  # L, set or planned
    assert all(run.config["meta"]["profile_length"] == lengths[run.rows[0]["model"]] for run in runs)
    if "length" in record:  # --length L
        assert set(lengths.values()) == {record["length"]}


def test_the_docs_cards_are_the_card_of_the_committed_rows(profile, capsys):
    PROFILE, _, (BEGIN, END), DOC = profile
    text = DOC.read_text()
    assert text.count(BEGIN) == text.count(END) == 1
    others = [p for p in (README, PROFILES_DOC) if p != DOC]
    assert all(BEGIN not in p.read_text() for p in others), f"{BEGIN} belongs in {DOC.name} only"
    block = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip()
    assert main(["card", str(PROFILE)]) == 0
    assert block == capsys.readouterr().out.strip(), (f"{DOC.relative_to(ROOT)} cards are stale: paste "
                                                      f"`ctxlens card reference/{PROFILE.name}`")


REPORTS = ("profile-t", "profile-gemma")  # committed reports; those of profile, profile-sotu and profile-gemma-sotu are
# not committed (the tracked tree's 30 MiB budget, tests/test_repository_size.py): `ctxlens report reference/DIR`
# writes them


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("name", REPORTS)
def test_the_committed_report_opens_in_chromium_with_its_card_first(name, tmp_path):
    PROFILE, MODELS = ROOT / "reference" / name, PROFILES[name][0]
    with Browser(CHROMIUM, tmp_path / "browser") as browser:
        page = browser.open(PROFILE / "report.html")
        assert page.errors() == []
        assert page.evaluate("document.querySelector('section').id") == "card"
        heads = json.loads(page.evaluate("JSON.stringify([...document.querySelectorAll('#card thead th')]"
                                         ".map(t => t.textContent))"))
        assert all(any(m in h for h in heads) for m in MODELS)
        assert int(page.evaluate("document.querySelectorAll('#card tbody tr').length")) == len(questions())
        images = json.loads(page.evaluate("JSON.stringify([...document.querySelectorAll('img')]"
                                          ".map(i => i.complete && i.naturalWidth > 0))"))
        assert images and all(images)
        assert all(url.startswith(("file:", "data:")) for url in page.requests())


def test_the_docs_side_by_side_is_the_committed_rows(capsys):
    """Issue 44, part 5: the table (in ``docs/reference-profiles.md``) of both models' text lines on the synthetic
    corpus and on natural text is what ``reference/side_by_side.py`` computes from the committed profiles."""
    import runpy

    text = PROFILES_DOC.read_text()
    begin, end = "<!-- side-by-side:begin -->", "<!-- side-by-side:end -->"
    assert text.count(begin) == text.count(end) == 1
    block = text[text.index(begin) + len(begin):text.index(end)].strip()
    table = runpy.run_path(str(ROOT / "reference" / "side_by_side.py"))["table"]()
    assert block == table.strip(), ("docs/reference-profiles.md side-by-side is stale: paste "
                                    "`python reference/side_by_side.py`")
