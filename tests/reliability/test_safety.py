"""Issue 10, part 5: nothing in a model directory, config or result file is executed, and
nothing a run or report writes lands outside the directory the user chose."""

import json
import pickle

import pytest

import ctxlens
from ctxlens.cli import main
from ctxlens.core.errors import CtxlensError


class _Boom:
    """Unpickling this runs ``open(marker, 'w')``: proof that a pickle was executed."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def evil_model(tmp_path):
    """(model directory whose own code writes ``marker`` when imported, marker path)."""
    marker = tmp_path / "remote-code-ran"
    model = tmp_path / "custom"
    model.mkdir()
    (model / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (model / "config.json").write_text(json.dumps({
        "model_type": "evil-custom", "architectures": ["EvilModel"],
        "auto_map": {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"}}))
    return model, marker


def test_remote_code_is_not_run_without_the_flag(tmp_path, capsys):
    model, marker = evil_model(tmp_path)
    with pytest.raises(CtxlensError):
        ctxlens.load(str(model))
    assert main(["run", "token-loss", "--model", str(model), "--out", str(tmp_path / "r"), "--no-progress"]) == 2
    assert not marker.exists()


def test_pickled_weights_are_not_executed(tmp_path, capsys):
    from tests.conftest import build_model

    marker = tmp_path / "pickle-ran"
    model = tmp_path / "pickled"
    build_model("llama", vocab_size=257).config.save_pretrained(model)
    (model / "pytorch_model.bin").write_bytes(pickle.dumps({"model.embed_tokens.weight": _Boom(marker)}))
    code = main(["run", "token-loss", "--model", str(model), "--out", str(tmp_path / "r"), "--no-progress"])
    assert not marker.exists()
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("ctxlens: error: ") and "Traceback" not in err


def test_yaml_tags_are_not_constructed(tmp_path, capsys):
    marker = tmp_path / "yaml-ran"
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"experiment: token-loss\nmodels: !!python/object/apply:os.system ['touch {marker}']\n")
    assert main(["run", "--config", str(cfg), "--out", str(tmp_path / "r")]) == 2
    assert not marker.exists()
    assert "not valid YAML" in capsys.readouterr().err


def test_hostile_names_in_results_stay_inside_the_report_folder(tmp_path):
    from ctxlens.report import build_report

    run = tmp_path / "run"
    run.mkdir()
    rows = [{"model": "../../../outside", "experiment": "../../escape", "length": 8, "sample": 0, "nll": 1.0},
            {"model": "/etc/passwd", "experiment": "/abs/escape", "length": 8, "sample": 0, "nll": 2.0}]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    (run / "results.jsonl").write_bytes(data)
    (run / "units.jsonl").write_text(json.dumps({"unit": "u", "rows": 2, "end": len(data)}) + "\n")
    out = tmp_path / "site" / "report.html"
    out.parent.mkdir()
    before = {p for p in tmp_path.rglob("*")}
    build_report([str(run)], str(out))
    created = {p for p in tmp_path.rglob("*")} - before
    assert created and all(out.parent in p.parents for p in created), sorted(map(str, created))


def test_model_spec_and_options_never_become_paths(tmp_path):
    out = tmp_path / "r"
    assert main(["run", "token-loss", "--model", "zoo:random-llama", "--out", str(out), "--no-progress",
                 "--lengths", "8", "--n-samples", "1", "--text-field", "../../x"]) == 0
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == \
        [".ctxlens-lock", "config.yaml", "env.json", "results.jsonl", "units.jsonl"]
