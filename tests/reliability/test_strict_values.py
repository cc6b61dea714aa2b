"""Issue 24 parts 2 and 9: booleans parse strictly wherever they come from (a quoted "false" in
YAML once ran a model directory's own code), and an option given twice is an error."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from ctxlens.cli import main
from ctxlens.core.errors import CtxlensError
from ctxlens.experiments import experiments, make_config
from ctxlens.runner.model_options import ModelOptions, parse_model_options
from tests.reliability.test_safety import evil_model

BOOL_MODEL_OPTIONS = [f.name for f in dataclasses.fields(ModelOptions) if "bool" in str(f.type)]


def test_the_boolean_model_options_are_known():
    assert sorted(BOOL_MODEL_OPTIONS) == ["allow_extrapolation", "trust_remote_code"]


@pytest.mark.parametrize("name", BOOL_MODEL_OPTIONS)
@pytest.mark.parametrize("text,value", [("false", False), ("no", False), ("0", False), ("False", False),
                                        ("true", True), ("yes", True), ("1", True), (False, False), (True, True)])
def test_boolean_model_option_parses_strictly(name, text, value):
    assert parse_model_options({name: text}) == {name: value}


@pytest.mark.parametrize("name", BOOL_MODEL_OPTIONS)
@pytest.mark.parametrize("bad", ["maybe", "", "off!", 2, 0.5, [True]])
def test_boolean_model_option_refuses_anything_else(name, bad):
    with pytest.raises(CtxlensError, match=name):
        parse_model_options({name: bad})


def _bool_options():
    for exp_name, exp in sorted(experiments().items()):
        hints = typing.get_type_hints(exp.Config)
        for f in dataclasses.fields(exp.Config):
            if hints[f.name] in (bool, bool | None):  # bool | None == Optional[bool]: both spellings match
                yield exp_name, f.name


@pytest.mark.parametrize("exp_name,option", list(_bool_options()))
def test_every_boolean_experiment_option_is_strict(exp_name, option):
    Config = experiments()[exp_name].Config
    for text, value in (("false", False), ("no", False), ("0", False), ("true", True)):
        try:
            config = make_config(Config, {option: text})
        except CtxlensError as err:  # a cross-field check may refuse the value itself: not a parse result
            assert option not in str(err) or "must be" not in str(err)
            continue
        assert getattr(config, option) is value
    with pytest.raises(CtxlensError, match=option):
        make_config(Config, {option: "maybe"})


@pytest.mark.parametrize("value", ['"false"', "'no'", '"0"', "false"])
def test_quoted_false_in_yaml_does_not_run_remote_code(value, tmp_path, capsys):
    model, marker = evil_model(tmp_path)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"experiment: token-loss\nmodel: {model}\nout: {tmp_path / 'r'}\n"
                   f"model_options:\n  trust_remote_code: {value}\n")
    assert main(["run", "--config", str(cfg), "--no-progress"]) == 2
    assert not marker.exists() and not (tmp_path / "r").exists()


def test_unparseable_boolean_in_yaml_is_one_sentence(tmp_path, capsys):
    model, marker = evil_model(tmp_path)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"experiment: token-loss\nmodel: {model}\nout: {tmp_path / 'r'}\n"
                   "model_options:\n  trust_remote_code: 'nope'\n")
    assert main(["run", "--config", str(cfg), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "trust_remote_code" in err and "\n" not in err.strip()
    assert not marker.exists()


def test_option_given_twice_is_an_error(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "token-loss", "--model", "zoo:random-llama", "--out", str(out), "--no-progress",
                 "--lengths", "8", "--lengths", "16"]) == 2
    assert "given twice" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("digits", ["١٢٨", "１２８", "१२८"])
def test_non_ascii_digits_are_refused(digits, tmp_path, capsys):
    assert main(["run", "token-loss", "--model", "zoo:random-llama", "--out", str(tmp_path / "r"), "--no-progress",
                 "--lengths", digits]) == 2
    assert "Option 'lengths' must be" in capsys.readouterr().err
    with pytest.raises(CtxlensError, match="must be"):
        make_config(experiments()["token-loss"].Config, {"n_samples": digits})


def test_config_stores_parsed_values_and_a_resume_compares_them(tmp_path, capsys):
    import yaml

    out = tmp_path / "r"
    argv = ["run", "token-loss", "--model", "zoo:random-llama", "--out", str(out), "--no-progress", "--n-samples", "1"]
    assert main([*argv, "--lengths", "16"]) == 0
    assert yaml.safe_load((out / "config.yaml").read_text())["options"] == {"n_samples": 1, "lengths": [16]}
    before = (out / "results.jsonl").read_bytes()
    assert main([*argv, "--lengths", "016"]) == 0  # the same length, written differently: a resume
    assert main([*argv, "--lengths", "16", "--seed", "0"]) == 0  # the default, given: the same run
    assert (out / "results.jsonl").read_bytes() == before
    assert main([*argv, "--lengths", "17"]) == 2
    assert "lengths: [16] -> [17]" in capsys.readouterr().err


def test_a_run_that_stored_strings_still_resumes(tmp_path):
    out = tmp_path / "r"
    argv = ["run", "token-loss", "--model", "zoo:random-llama", "--out", str(out), "--no-progress",
            "--n-samples", "1", "--lengths", "16,24"]
    assert main(argv) == 0
    config = (out / "config.yaml").read_text()
    (out / "config.yaml").write_text(config.replace("n_samples: 1", "n_samples: '1'"))  # as older versions wrote
    assert main(argv) == 0


def test_errors_echo_a_bounded_part_of_a_value(tmp_path, capsys):
    huge = "x" * 1_000_000
    assert main(["run", "token-loss", "--model", "zoo:random-llama", "--out", str(tmp_path / "r"), "--no-progress",
                 "--n-samples", huge]) == 2
    assert len(capsys.readouterr().err) < 500
    assert main(["run", "token-loss", "--model", "zoo:random-llama", "--out", str(tmp_path / "r"), "--no-progress",
                 f"--{huge}", "1"]) == 2
    assert len(capsys.readouterr().err) < 2000


@pytest.mark.parametrize("name,options", [("dominant-dimension", {"transforms": "0\n"}),
                                          ("rope-dim-ablation", {"ablations": "high:\r\x00"})])
def test_a_control_character_in_a_value_keeps_the_error_on_one_line(name, options):
    """Found by the options fuzz: a newline in a transform spec was echoed raw into the message."""
    with pytest.raises(CtxlensError) as caught:
        make_config(experiments()[name].Config, options)
    message = str(caught.value)
    assert "\n" not in message and "\r" not in message and "\x00" not in message
    assert "\\n" in message or "\\r" in message
