"""No half-made run directory (issue 22 part 8).

A run whose model fails to load (or cannot do the analysis, or fails its first unit) writes
nothing: no directory where there was none, and an existing run directory keeps every file's
bytes, inode and modification time (config.yaml is not even rewritten, and a resume that adds a
failing --model does not list it). The existing directory carries an interrupted unit's partial
row, so merely opening it for writing (which repairs it) would show. In a two-model run whose
second model fails, the first model's committed rows stay and config.yaml lists only the first.
"""

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from ctxlens.cli import main
from ctxlens.core.errors import CtxlensError
from ctxlens.runner import read_rows
from ctxlens.runner.execute import run
from tests.conftest import build_model

GOOD = "zoo:random-llama"
TOKEN_LOSS = ("token-loss", {"lengths": [16], "n_samples": 2})
ROPE_DIMS = ("rope-dims", {"source": "random", "lengths": [32], "n_samples": 1, "n_pairs": 20})


def _argv(experiment: str, options: dict) -> list[str]:
    args = ["run", experiment, "--no-progress"]
    for key, value in options.items():
        args += [f"--{key.replace('_', '-')}", ",".join(map(str, value)) if isinstance(value, list) else str(value)]
    return args


def _no_weights(tmp: Path) -> str:
    build_model("llama").config.save_pretrained(tmp / "no-weights")
    return str(tmp / "no-weights")


def _config_json(model_type: str):
    def make(tmp: Path) -> str:
        (tmp / model_type).mkdir()
        (tmp / model_type / "config.json").write_text(json.dumps({"model_type": model_type}))
        return str(tmp / model_type)
    return make


def _not_gguf(tmp: Path) -> str:
    (tmp / "model.gguf").write_bytes(b"this is not a GGUF file\n" * 8)
    return str(tmp / "model.gguf")


def _saved(family: str, **overrides):
    def make(tmp: Path) -> str:
        build_model(family, **overrides).save_pretrained(tmp / family)
        return str(tmp / family)
    return make


# name: (experiment and options, shared with the existing run; makes the bad model spec in a folder)
BAD = {
    "missing path": (TOKEN_LOSS, lambda tmp: str(tmp / "no-such-model")),
    "unknown zoo model": (TOKEN_LOSS, lambda tmp: "zoo:rpoe"),
    "unknown model type": (TOKEN_LOSS, _config_json("no_such_type")),
    "not a causal LM": (TOKEN_LOSS, _config_json("t5")),
    "config without weights": (TOKEN_LOSS, _no_weights),
    "GGUF that is not a GGUF": (TOKEN_LOSS, _not_gguf),
    "first unit fails": (TOKEN_LOSS, _saved("llama", max_position_embeddings=8)),  # 16 tokens > 8 positions
    "cannot do the analysis": (ROPE_DIMS, _saved("mamba")),  # rope-dims needs RoPE
}


def _snapshot(root: Path) -> dict:
    """Every path under ``root`` (hidden ones too) -> (bytes, inode, mtime) or None for folders."""
    out = {}
    for path in sorted(root.rglob("*")):
        st = path.stat()
        out[str(path.relative_to(root))] = (path.read_bytes(), st.st_ino, st.st_mtime_ns) if path.is_file() else None
    return out


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """experiment -> a finished run of GOOD with that experiment's options, with a partial row after
    its last commit, as a killed run leaves it."""
    runs = {}
    for experiment, options in (TOKEN_LOSS, ROPE_DIMS):
        out = tmp_path_factory.mktemp("finished") / experiment
        run(experiment, [GOOD], out, options, progress=False)
        with open(out / "results.jsonl", "ab") as f:
            f.write(b'{"model":"half a ro')
        runs[experiment] = out
    return runs


def _config(out: Path) -> dict:
    return yaml.safe_load((out / "config.yaml").read_text())


def _existing(finished, experiment: str, tmp: Path) -> Path:
    out = tmp / "existing"
    shutil.copytree(finished[experiment], out)
    return out


@pytest.mark.parametrize("case", sorted(BAD))
def test_cli_failure_writes_nothing(case, finished, tmp_path, capsys):
    (experiment, options), make = BAD[case]
    bad = make(tmp_path)
    existing = _existing(finished, experiment, tmp_path)
    before = _snapshot(existing)
    fresh = tmp_path / "new" / "run"
    for models, out in (([bad], fresh), ([GOOD, bad], existing), ([bad], existing)):
        capsys.readouterr()
        argv = [*_argv(experiment, options), *(a for m in models for a in ("--model", m)), "--out", str(out)]
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("ctxlens: error: ") and "\n" not in err and "Traceback" not in err, err
    assert not (tmp_path / "new").exists()
    assert _snapshot(existing) == before


@pytest.mark.parametrize("case", sorted(BAD))
def test_api_failure_writes_nothing(case, finished, tmp_path):
    (experiment, options), make = BAD[case]
    bad = make(tmp_path)
    existing = _existing(finished, experiment, tmp_path)
    before = _snapshot(existing)
    with pytest.raises(CtxlensError):
        run(experiment, [bad], tmp_path / "fresh", options, progress=False)
    assert not (tmp_path / "fresh").exists()
    with pytest.raises(CtxlensError):
        run(experiment, [GOOD, bad], existing, options, progress=False)
    assert _snapshot(existing) == before


def test_second_model_failing_keeps_the_first_models_rows_and_a_coherent_config(tmp_path):
    experiment, options = TOKEN_LOSS
    run(experiment, [GOOD], tmp_path / "alone", options, progress=False)
    out = tmp_path / "two"
    with pytest.raises(CtxlensError):
        run(experiment, [GOOD, str(tmp_path / "no-such-model")], out, options, progress=False)
    assert read_rows(out) == read_rows(tmp_path / "alone")  # the first model's rows, committed
    assert _config(out)["models"] == [GOOD]  # the failed model is not recorded
    committed = (out / "results.jsonl").read_bytes()

    second = _saved("llama")(tmp_path)  # the same command, once the second model loads, adds it
    run(experiment, [GOOD, second], out, options, progress=False)
    assert _config(out)["models"] == [GOOD, second]
    assert (out / "results.jsonl").read_bytes().startswith(committed)
    rows = read_rows(out)
    assert [r["model"] for r in rows] == [GOOD] * 2 + [second] * 2

    run(experiment, [second], out, options, progress=False)  # a resume naming fewer models keeps the list
    assert _config(out)["models"] == [GOOD, second] and read_rows(out) == rows


def test_a_different_run_in_out_is_refused_before_loading(tmp_path, monkeypatch):
    experiment, options = TOKEN_LOSS
    out = tmp_path / "run"
    run(experiment, [GOOD], out, options, progress=False)
    before = _snapshot(out)

    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("ctxlens.lm.loading.load", no_loading)
    with pytest.raises(CtxlensError, match="different configuration"):
        run(experiment, [GOOD, "zoo:other"], out, {**options, "n_samples": 3}, progress=False)
    assert _snapshot(out) == before


def test_out_that_is_a_file_is_one_clear_error(tmp_path):
    (tmp_path / "file").write_text("mine")
    with pytest.raises(CtxlensError, match="is a file, not a directory"):
        run("token-loss", [GOOD], tmp_path / "file", TOKEN_LOSS[1], progress=False)
    assert (tmp_path / "file").read_text() == "mine"


def test_snapshot_sees_a_rewrite_with_the_same_bytes(tmp_path):
    """The byte-identity checks above would catch config.yaml rewritten with equal content."""
    (tmp_path / "a").write_text("x")
    before = _snapshot(tmp_path)
    tmp = tmp_path / ".a.tmp"
    tmp.write_text("x")
    os.replace(tmp, tmp_path / "a")  # how RunStore writes config.yaml
    assert _snapshot(tmp_path) != before
