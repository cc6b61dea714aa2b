"""Issue 10, part 2: bad input ends in one clear sentence, a non-zero exit, and nothing lost.

Two layers: hypothesis fuzzes every registered experiment's options (any key, any value, on top
of its defaults or of the small option set it declares, ``Experiment.smoke``) and checks that config
building either succeeds with a plan of JSON-able units or raises ``CtxlensError``, never
another exception; then a catalogue of bad command lines is run against
an existing run directory, whose files must stay byte-identical.
"""

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxlens.cli import main
from ctxlens.core.errors import CtxlensError
from ctxlens.experiments.base import make_config
from ctxlens.experiments.registry import experiments

EXPERIMENTS = experiments()

values = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**7), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.lists(st.integers(-100, 10**6), max_size=4),
    st.lists(st.text(max_size=5), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def _option_names(name: str) -> list[str]:
    return [f.name for f in dataclasses.fields(EXPERIMENTS[name].Config)]


@st.composite
def options(draw, name: str):
    keys = _option_names(name)
    chosen = draw(st.lists(st.sampled_from(keys), max_size=3, unique=True)) if keys else []
    base = EXPERIMENTS[name].smoke.options if draw(st.booleans()) else {}  # the declared small set, or defaults
    opts = {**base, **{k: draw(values) for k in chosen}}
    if draw(st.booleans()):
        opts[draw(st.text(min_size=1, max_size=8))] = draw(values)  # unknown or misspelt key
    return opts


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_options_give_a_config_or_one_clear_error(name, data):
    opts = data.draw(options(name))
    try:
        config = make_config(EXPERIMENTS[name].Config, opts)
    except CtxlensError as err:
        message = str(err)
        assert message and "\n" not in message and "Traceback" not in message
        return
    units = EXPERIMENTS[name].plan(config)  # planning needs no model and must not fail
    assert isinstance(units, list)
    for unit in units:
        json.dumps(unit, allow_nan=False)


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_declared_smoke_options_give_a_config_and_a_plan(name):
    smoke = EXPERIMENTS[name].smoke
    assert EXPERIMENTS[name].plan(make_config(EXPERIMENTS[name].Config, smoke.options))
    for length in (256, 1024) if smoke.at_length else ():
        assert EXPERIMENTS[name].plan(make_config(EXPERIMENTS[name].Config, smoke.at_length(length)))


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("existing") / "run"
    assert main(["run", "token-loss", "--model", "zoo:random-llama", "--out", str(out),
                 "--lengths", "16", "--n-samples", "2", "--no-progress"]) == 0
    return out


def _bad_sources(tmp: Path) -> dict[str, str]:
    (tmp / "empty.txt").write_text("")
    (tmp / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (tmp / "empty_dir").mkdir(exist_ok=True)
    return {"empty": str(tmp / "empty.txt"), "binary": str(tmp / "binary.bin"), "folder": str(tmp / "empty_dir")}


BAD = {
    "unknown experiment": ["run", "tokn-loss", "--model", "zoo:random-llama"],
    "unknown option": ["run", "token-loss", "--model", "zoo:random-llama", "--lenghts", "16"],
    "wrong type": ["run", "token-loss", "--model", "zoo:random-llama", "--n-samples", "two"],
    "negative length": ["run", "token-loss", "--model", "zoo:random-llama", "--lengths", "-16"],
    "zero length": ["run", "token-loss", "--model", "zoo:random-llama", "--lengths", "0"],
    "beyond positions": ["run", "token-loss", "--model", "zoo:random-llama", "--lengths", "100000"],
    "missing file": ["run", "token-loss", "--model", "zoo:random-llama", "--source", "no/such/file.txt"],
    "empty source": ["run", "token-loss", "--model", "zoo:random-llama", "--source", "{empty}"],
    "binary source": ["run", "token-loss", "--model", "zoo:random-llama", "--source", "{binary}"],
    "empty folder": ["run", "token-loss", "--model", "zoo:random-llama", "--source", "{folder}"],
    "missing model": ["run", "token-loss", "--model", "./no-such-model"],
    "unknown zoo model": ["run", "token-loss", "--model", "zoo:rpoe"],
    "no model": ["run", "token-loss"],
    "family cannot": ["run", "rope-dims", "--model", "{mamba}"],
    "bad config file": ["run", "--config", "{badyaml}"],
    "no chat template": ["run", "ruler", "--model", "zoo:random-llama", "--template", "chat", "--lengths", "512",
                         "--tasks", "niah_single_1", "--n-samples", "1"],
    "missing QA file": ["run", "ruler", "--model", "zoo:random-llama", "--lengths", "2048", "--tasks", "qa_1",
                        "--squad", "no/such/squad.json", "--n-samples", "1"],
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_command_is_one_sentence_exit_2_and_keeps_results(case, finished_run, tmp_path, capsys):
    from tests.conftest import build_model

    subs = _bad_sources(tmp_path)
    if case == "family cannot":
        build_model("mamba", vocab_size=257).save_pretrained(tmp_path / "mamba")
        subs["mamba"] = str(tmp_path / "mamba")
    (tmp_path / "bad.yaml").write_text("experiment: token-loss\nmodels: [zoo:random-llama]\nlengths: [16\n")
    subs["badyaml"] = str(tmp_path / "bad.yaml")
    argv = [a.format(**subs) if a.startswith("{") else a for a in BAD[case]]
    before = _snapshot(finished_run)
    for out in (finished_run, tmp_path / "fresh"):  # into the finished run, and into a new directory
        capsys.readouterr()
        assert main([*argv, "--out", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("ctxlens: error: "), err
        assert "\n" not in err and "Traceback" not in err, err
    assert _snapshot(finished_run) == before
