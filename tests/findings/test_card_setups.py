"""Issue 45, item 2: the card prints per line what it was measured with when a model's parts differ.

A committed real profile (Gemma-3-270M on natural text: every part records its provenance) is copied
and one record changed as a resume on another setup leaves it: a part redone with ``--dtype bfloat16``,
or a run of the needle grid made under another torch. Before this, the card printed the same lines
(one setup, one fingerprint) whatever the parts were measured with."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ctxlens.findings.card import card_of_runs
from ctxlens.results import part_setups, read_runs

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "reference" / "profile-gemma-sotu"
MODEL = "ref:gemma3-270m"


@pytest.fixture
def copy(tmp_path) -> Path:
    out = tmp_path / "profile"
    shutil.copytree(PROFILE, out, ignore=shutil.ignore_patterns("report*"))
    return out


def _lines(where: Path) -> dict:
    return {line.key: line for line in card_of_runs(read_runs(where))[MODEL]}


def test_the_committed_profile_measured_every_part_alike(copy):
    setups = part_setups(read_runs(copy))[MODEL]
    assert {s["dtype"] for s in setups.values()} == {"float32"} and len({s["weights"] for s in setups.values()}) == 1
    assert not any("measured with" in line.uncertainty for line in _lines(copy).values())


def test_a_part_redone_with_another_dtype_is_named_on_its_lines(copy):
    record = json.loads((copy / "profile.json").read_text())
    for part in record["models"][MODEL]["parts"]:
        if part["experiment"] == "suffix-ppl":
            part["provenance"]["dtype"] = "bfloat16"  # what --redo suffix-ppl --dtype bfloat16 records
    (copy / "profile.json").write_text(json.dumps(record))
    lines = _lines(copy)
    assert lines["ppl_2l"].uncertainty.endswith("measured with dtype bfloat16")
    assert lines["ppl_2l"].numbers["measured_with"] == {"dtype": "bfloat16"}
    for key in ("loss_fit", "usable_context", "accs_depth", "positional_heads", "effective_length", "middle_dip"):
        assert lines[key].uncertainty.endswith("measured with dtype float32"), key
    assert "the parts differ in dtype (dtype bfloat16 + float32)" in lines["weights"].verdict
    assert "measured with" not in lines["masking_effect"].text + lines["masking_effect"].uncertainty  # not measured


def test_two_runs_of_one_part_under_two_setups_are_both_named(copy):
    (copy / "profile.json").unlink()  # plain runs: what each run's env.json and config.yaml record
    env_file = copy / "ref-gemma3-270m" / "niah-depth+2" / "env.json"
    env = json.loads(env_file.read_text())
    env["packages"]["torch"] = "2.99.0"
    env_file.write_text(json.dumps(env))
    lines = _lines(copy)
    for key in ("retrieval_2l", "middle_dip"):
        assert lines[key].uncertainty.endswith("measured with torch 2.13.0+cpu + 2.99.0"), key
    assert lines["loss_fit"].uncertainty.endswith("measured with torch 2.13.0+cpu")
    assert "the parts differ in torch" in lines["weights"].verdict


def test_every_fingerprint_the_runs_record_is_shown(copy):
    config_file = copy / "ref-gemma3-270m" / "ruler" / "config.yaml"
    text = config_file.read_text()
    (old,) = {line.split(": ")[1] for line in text.splitlines() if line.startswith(f"  {MODEL}: full-")}
    config_file.write_text(text.replace(old, "full-" + "0" * 32))  # a run over another conversion
    weights = _lines(copy)["weights"]
    assert f"ctxlens fingerprints full-{'0' * 32} + {old} (its runs record 2" in weights.uncertainty
