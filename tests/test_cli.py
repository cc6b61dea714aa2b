"""The command line: run, resume, several models, --config, and one-sentence errors."""

import subprocess
import sys

import pytest
import torch
import yaml

import ctxlens
from ctxlens.cli import main
from ctxlens.data.sources import open_source
from ctxlens.data.windows import token_windows
from ctxlens.runner import read_rows

ARGS = ["--lengths", "16,32", "--n-samples", "2", "--no-progress"]


def _run(out, *extra, model="zoo:random-llama"):
    return main(["run", "token-loss", "--model", model, "--out", str(out), *ARGS, *extra])


def test_run_writes_config_env_and_correct_rows(tmp_path):
    assert _run(tmp_path / "r") == 0
    rows = read_rows(tmp_path / "r")
    assert [(r["length"], r["sample"]) for r in rows] == [(16, 0), (16, 1), (32, 0), (32, 1)]
    assert all(r["model"] == "zoo:random-llama" and r["experiment"] == "token-loss" for r in rows)
    cfg = yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())
    assert cfg["experiment"] == "token-loss" and cfg["options"]["lengths"] == [16, 32]  # stored parsed
    assert "torch" in (tmp_path / "r" / "env.json").read_text()
    # independent truth: naive cross-entropy from full logits of the same windows
    lm = ctxlens.load("zoo:random-llama")
    ids = token_windows(open_source("random"), None, 32, 2, seed=0, vocab_size=lm.vocab_size)
    with torch.no_grad():
        logits = lm.model(ids).logits
    nll = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    for r in rows[2:]:
        assert r["nll"] == pytest.approx(float(nll[r["sample"]].mean()), rel=1e-5)


def test_rerun_skips_finished_units_without_loading(tmp_path, monkeypatch):
    assert _run(tmp_path / "r") == 0
    before = (tmp_path / "r" / "results.jsonl").read_bytes()

    def no_load(*a, **k):
        raise AssertionError("a finished run must not load the model again")

    monkeypatch.setattr("ctxlens.lm.loading.load", no_load)
    assert _run(tmp_path / "r") == 0
    assert (tmp_path / "r" / "results.jsonl").read_bytes() == before


def test_several_models_into_one_run(tmp_path):
    from tests.conftest import build_model

    build_model("mamba", vocab_size=257).save_pretrained(tmp_path / "mamba")
    code = main(["run", "token-loss", "--model", "zoo:random-llama", "--model", str(tmp_path / "mamba"),
                 "--out", str(tmp_path / "r"), *ARGS])
    assert code == 0
    models = [r["model"] for r in read_rows(tmp_path / "r")]
    assert models == ["zoo:random-llama"] * 4 + [str(tmp_path / "mamba")] * 4


def test_config_file_equals_flags(tmp_path):
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({
        "experiment": "token-loss", "models": ["zoo:random-llama"], "out": str(tmp_path / "y"),
        "options": {"lengths": [16, 32], "n_samples": 2}}))
    assert main(["run", "--config", str(tmp_path / "run.yaml"), "--no-progress"]) == 0
    assert _run(tmp_path / "f") == 0
    strip = lambda rows: [{k: v for k, v in r.items()} for r in rows]  # noqa: E731
    assert strip(read_rows(tmp_path / "y")) == strip(read_rows(tmp_path / "f"))


def test_a_runs_own_config_yaml_runs_it_again(tmp_path):
    """``run --config RUN/config.yaml --out NEW`` (issue 46): a run's own config, with the keys the runner
    records for itself (fingerprints, resolved, model_info) and the caller's meta, runs the same experiment
    on the same models with the same options; the new run records the same config and the same rows."""
    from ctxlens.cli.run import CONFIG_KEYS
    from ctxlens.experiments.registry import get_experiment
    from ctxlens.runner.execute import run

    first, again = tmp_path / "first", tmp_path / "again"
    run("niah-depth", ["zoo:rope"], first, {"depths": [0, 100], "n_samples": 2, "max_new_tokens": 6},
        progress=False, meta={"profile_length": 512})  # lengths: filled from the model (resolved)
    config = yaml.safe_load((first / "config.yaml").read_text())
    assert {"fingerprints", "resolved", "model_info", "meta"} <= set(config) <= set(CONFIG_KEYS)
    assert main(["run", "--config", str(first / "config.yaml"), "--out", str(again), "--no-progress"]) == 0
    assert yaml.safe_load((again / "config.yaml").read_text()) == config
    timing = {name for name, column in get_experiment("niah-depth").declared.items() if column.unit == "s"}
    strip = lambda rows: [{k: v for k, v in r.items() if k not in timing} for r in rows]  # noqa: E731
    assert len(read_rows(first)) == 8 and strip(read_rows(again)) == strip(read_rows(first))


_RUN_ZOO = ["run", "token-loss", "--model", "zoo:random-llama", "--out", "{out}"]


@pytest.mark.parametrize("argv,message", [
    (["run", "token-los", "--model", "zoo:random-llama", "--out", "{out}"], "Did you mean 'token-loss'"),
    (["run", "token-loss", "--model", "./missing-model", "--out", "{out}"], "does not exist"),
    ([*_RUN_ZOO, "--n-samples", "abc"], "must be int"),
    ([*_RUN_ZOO, "--lengths", "-4"], "must be in [1, 4,194,304], got -4"),
    ([*_RUN_ZOO, "--lengths", "9000"], "at most 4096 positions"),
    ([*_RUN_ZOO, "--lenghts", "5"], "Did you mean 'lengths'"),
    ([*_RUN_ZOO, "--source", "nope.txt"], "nope.txt"),
    ([*_RUN_ZOO, "--rope-scaling", "{bad"], "must be JSON"),
    (["run", "token-loss", "--out", "{out}"], "No model given"),
])
def test_errors_are_one_sentence_and_exit_2(tmp_path, capsys, argv, message):
    argv = [a.replace("{out}", str(tmp_path / "r")) for a in argv]
    assert main(argv + ["--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ctxlens: error: ") and message in err and "\n" not in err and "Traceback" not in err


def test_rope_analysis_on_a_model_without_rope_is_refused(tmp_path, capsys):
    from tests.conftest import build_model

    build_model("mamba", vocab_size=257).save_pretrained(tmp_path / "mamba")
    assert _run(tmp_path / "r", "--rope-theta", "1e6", model=str(tmp_path / "mamba")) == 2
    assert "does not support the 'rope' analysis" in capsys.readouterr().err


def test_yaml_errors(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("experiment: [token-loss\n")
    assert main(["run", "--config", str(tmp_path / "bad.yaml")]) == 2
    assert "not valid YAML" in capsys.readouterr().err
    (tmp_path / "typo.yaml").write_text("experimnt: token-loss\n")
    assert main(["run", "--config", str(tmp_path / "typo.yaml")]) == 2
    assert "Did you mean 'experiment'" in capsys.readouterr().err


def test_changed_options_in_an_existing_run_fail_and_keep_results(tmp_path, capsys):
    assert _run(tmp_path / "r") == 0
    before = (tmp_path / "r" / "results.jsonl").read_bytes()
    assert main(["run", "token-loss", "--model", "zoo:random-llama", "--out", str(tmp_path / "r"),
                 "--lengths", "64", "--no-progress"]) == 2
    assert "different configuration" in capsys.readouterr().err
    assert (tmp_path / "r" / "results.jsonl").read_bytes() == before


def test_process_exit_status_and_debug_traceback(tmp_path):
    cmd = [sys.executable, "-m", "ctxlens", "run", "token-loss",
           "--model", str(tmp_path / "nope"), "--out", str(tmp_path / "r")]
    plain = subprocess.run(cmd, capture_output=True, text=True)
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    assert plain.stderr.strip().count("\n") == 0
    debug = subprocess.run(cmd[:3] + ["--debug"] + cmd[3:], capture_output=True, text=True)
    assert debug.returncode != 0 and "Traceback" in debug.stderr


def test_models_lists_every_family(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for family in ctxlens.lm.FAMILIES:
        assert family in out
