"""One declared schema for every file ctxlens writes (issue 46, part 1; ``ctxlens.core.schema``): each file
written by its real writer reads back equal and carries its version; a wrong-typed field is one sentence
naming the file, the field, what was found and what was expected; a newer version is refused by name and
nothing is changed; files written before versions (the committed reference runs) read as version 1."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import yaml

from ctxlens.cli import main
from ctxlens.core import schema
from ctxlens.core.errors import CtxlensError

MODEL = "zoo:random-llama"
ARGV = ["run", "token-loss", "--model", MODEL, "--no-progress", "--lengths", "8", "--n-samples", "2"]
REFERENCE = Path(__file__).resolve().parents[1] / "reference" / "profile-t"


@pytest.fixture(scope="module")
def zoo_run(tmp_path_factory) -> Path:
    """A finished two-unit run of token-loss on the zoo's random llama, written by ``ctxlens run``."""
    out = tmp_path_factory.mktemp("schema") / "run"
    assert main([*ARGV, "--out", str(out)]) == 0
    return out


def _copy(run: Path, to: Path) -> Path:
    return Path(shutil.copytree(run, to))


def _record() -> dict:
    """A profile record of one planned part, as ``ctxlens profile`` writes it."""
    from ctxlens.lm.info import ModelInfo

    info = ModelInfo("llama", "transformer", "rope", 128, False, 128, None, 64).as_dict()
    part = {"name": "niah-depth", "experiment": "niah-depth", "options": {"lengths": [128], "n_samples": 1},
            "model_options": {}, "units": 1, "tokens": 128, "planned_s": 1.0, "estimate_s": 1.0, "notes": [],
            "status": "planned"}
    state = {"label": "zoo-random-llama", "info": info,
             "throughput": {"prefill": 2000.0, "at": 512, "slope": 1e-8, "decode": 20.0, "seconds": 0.0},
             "setup_s": 0.1, "load_average": None,
             "size": {"length": 128, "scale": 0.1, "extrapolate": True, "reduced": [], "tokenizer": True},
             "notes": [], "skipped": {}, "left_out": {}, "adjustments": [], "parts": [part]}
    return {"budget_minutes": 1, "length": 128, "source": "sotu", "models": {MODEL: state}}


# ------------------------------------------------------------------------------------ round trips
def test_a_run_reads_back_what_its_writers_wrote(zoo_run):
    from ctxlens.results import read_run
    from ctxlens.runner.rundir import read_config
    from ctxlens.runner.store import committed_units, read_rows

    text = (zoo_run / "config.yaml").read_text()
    assert text.startswith("schema: 1\nexperiment: token-loss\n")
    config = read_config(zoo_run)
    assert config == yaml.safe_load(text) and config["model_info"][MODEL]["model_type"] == "llama"
    env = json.loads((zoo_run / "env.json").read_text())
    assert list(env)[0] == "schema" and env["schema"] == 1
    run = read_run(zoo_run)
    assert run.problems == [] and run.config == config and run.env == env
    lines = [json.loads(line) for line in (zoo_run / "units.jsonl").read_text().splitlines()]
    assert [line["schema"] for line in lines] == [1, 1] and all(schema.problem("units.jsonl", x) is None for x in lines)
    assert committed_units(zoo_run) == {line["unit"] for line in lines} and len(read_rows(zoo_run)) == 2


def test_the_environment_is_declared():
    from ctxlens.core.env import environment

    env = environment("cpu")
    assert schema.validate("env.json", schema.stamp("env.json", env), "env.json")["argv"] == env["argv"]
    assert set(env) == set(schema.ENV.shape.fields)  # every field the writer writes is declared, and no other


def test_model_info_is_declared_field_for_field():
    """The declaration in core (which may not import lm) lists exactly the fields of ``ModelInfo.as_dict``."""
    from ctxlens.lm.info import ModelInfo

    assert set(schema.MODEL_INFO.fields) == {f.name for f in dataclasses.fields(ModelInfo)} | {"zoo"}


def test_a_profile_record_reads_back_what_write_wrote(tmp_path):
    from ctxlens.profile import record as records

    records.write(tmp_path, _record())
    assert (tmp_path / records.RECORD).read_text().startswith('{\n "schema": 1,\n "budget_minutes": 1,')
    assert records.read_record(tmp_path) == {"schema": 1, **_record()}
    records.write(tmp_path, records.read_record(tmp_path))  # what was read is written again as it was
    assert records.read_record(tmp_path) == {"schema": 1, **_record()}


def test_files_written_before_versions_are_version_one(zoo_run, tmp_path):
    """The committed reference profile (no version anywhere) reads; a run whose files carry no version
    resumes, keeps its rows, and adds versioned lines after the old ones."""
    from ctxlens.profile.record import read_record
    from ctxlens.results import read_run
    from ctxlens.runner.store import read_rows

    record = read_record(REFERENCE)
    assert schema.VERSION_KEY not in record and schema.check_version("profile.json", record, "x") == 1
    part = read_run(REFERENCE / "ref-smollm2-135m" / "ruler")
    assert part.problems == [] and part.config and schema.VERSION_KEY not in part.config and part.env

    old = _copy(zoo_run, tmp_path / "old")
    config = yaml.safe_load((old / "config.yaml").read_text())
    del config["schema"]
    (old / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = json.loads((old / "env.json").read_text())
    del env["schema"]
    (old / "env.json").write_text(json.dumps(env, indent=2) + "\n")
    lines = [{k: v for k, v in json.loads(x).items() if k != "schema"} for x in (old / "units.jsonl").open()]
    (old / "units.jsonl").write_text(json.dumps(lines[0], separators=(",", ":")) + "\n")  # killed before unit 2
    assert main([*ARGV, "--out", str(old)]) == 0
    logged = [json.loads(x) for x in (old / "units.jsonl").open()]
    assert [x.get("schema") for x in logged] == [None, 1] and len(read_rows(old)) == 2
    assert read_run(old).problems == []


# ------------------------------------------------------------------------------- one sentence each
def _one_sentence(err: CtxlensError, *parts: str) -> None:
    text = str(err)
    assert "\n" not in text and text.endswith("."), text
    for part in parts:
        assert part in text, text


def test_a_wrong_field_of_config_yaml_is_one_sentence(zoo_run, tmp_path):
    from ctxlens.results import read_run
    from ctxlens.runner.rundir import read_config

    run = _copy(zoo_run, tmp_path / "run")
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["model_info"][MODEL]["d_model"] = "wide"
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(CtxlensError) as err:
        read_config(run)
    _one_sentence(err.value, f"{run / 'config.yaml'} is not a run configuration ctxlens wrote (model_info["
                  f"'{MODEL}'].d_model: found 'wide', expected a whole number); restore it, or start the run again")
    assert read_run(run).config is None and "d_model: found 'wide'" in read_run(run).problems[0]
    before = (run / "units.jsonl").read_bytes()
    assert main([*ARGV, "--out", str(run)]) == 2  # a resume refuses it, and touches nothing
    assert (run / "units.jsonl").read_bytes() == before


def test_a_wrong_field_of_env_json_is_said_in_the_runs_problems(zoo_run, tmp_path):
    from ctxlens.results import read_run

    run = _copy(zoo_run, tmp_path / "run")
    env = json.loads((run / "env.json").read_text())
    env["torch_threads"] = "many"
    (run / "env.json").write_text(json.dumps(env))
    got = read_run(run)
    assert got.env is None and len(got.rows) == 2
    assert got.problems == ["env.json is not an environment record ctxlens wrote (torch_threads: found 'many', "
                            "expected a whole number); restore it from the run that wrote it, or delete it (it is "
                            "read for the report's environment table only)."]


@pytest.mark.parametrize("line, said", [
    ({"rows": "1"}, "(rows: found '1', expected a whole number)"),
    ({"seconds": "fast"}, "(seconds: found 'fast', expected a finite number)"),
    ({"extra": 1}, "(the top level: found the key 'extra', expected only unit, rows, end, seconds, schema)"),
    ({"schema": 0}, "(schema: found 0, expected a version number from 1)")])
def test_a_wrong_field_of_a_commit_log_line_is_one_sentence_and_nothing_is_cut(zoo_run, tmp_path, line, said):
    """A complete line that is not a commit-log entry was not cut by a crash: refused, never repaired away."""
    from ctxlens.runner.store import RunStore, read_rows

    run = _copy(zoo_run, tmp_path / "run")
    first, second = (run / "units.jsonl").read_text().splitlines(keepends=True)
    (run / "units.jsonl").write_text(json.dumps({**json.loads(first), **line}) + "\n" + second)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    for read in (read_rows, RunStore):
        with pytest.raises(CtxlensError) as err:
            read(run)
        _one_sentence(err.value, f"{run / 'units.jsonl'} line 1 is not a commit log line ctxlens wrote {said}")
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


def test_a_wrong_field_of_profile_json_is_one_sentence(tmp_path):
    from ctxlens.profile import record as records

    record = _record()
    record["models"][MODEL]["parts"][0]["status"] = "half"
    (tmp_path / records.RECORD).write_text(json.dumps(record))
    with pytest.raises(CtxlensError) as err:
        records.read_record(tmp_path)
    _one_sentence(err.value, f"{tmp_path / 'profile.json'} is not a profile record ctxlens wrote (models['{MODEL}']"
                  ".parts[0].status: found 'half', expected one of planned, done, failed, left out); restore it")


@pytest.mark.parametrize("where, key", [("part", "spent_s"), ("part", "units"), ("state", "throughput"),
                                        ("state", "size"), ("size", "reserve_s"), ("top", "length")])
def test_a_null_where_ctxlens_never_writes_one_is_one_sentence(tmp_path, capsys, where, key):
    """Issue 45, item 10: an optional key of the profile record holding null passed the declaration, and the
    command failed where it read it (``"spent_s": null`` a TypeError in the pacing, ``"throughput": null`` in
    the planner). Null is allowed only where ctxlens writes it (a part's error, the load averages, the setup
    and model facts not known); anywhere else the record is refused at reading, in one sentence."""
    from ctxlens.profile import record as records

    record = _record()
    state = record["models"][MODEL]
    target = {"part": state["parts"][0], "state": state, "size": state["size"], "top": record}[where]
    target[key] = None
    (tmp_path / records.RECORD).write_text(json.dumps(record))
    with pytest.raises(CtxlensError, match=rf"{key}: found null, expected"):
        records.read_record(tmp_path)
    assert main(["profile", MODEL, "--out", str(tmp_path), "--budget", "1", "--no-progress"]) == 2
    assert f"{key}: found null" in capsys.readouterr().err
    record = _record()
    record["models"][MODEL]["parts"][0]["error"] = None  # where ctxlens writes null: read as it is
    record["models"][MODEL]["load_average_after"] = None
    (tmp_path / records.RECORD).write_text(json.dumps(record))
    assert records.read_record(tmp_path)["models"][MODEL]["parts"][0]["error"] is None


# ------------------------------------------------------------------------------------ newer versions
NEWER = "of schema version 7, written by a newer ctxlens (this one reads versions 1 to 1); upgrade ctxlens to read it."


def test_a_newer_version_of_each_file_is_refused_by_name(zoo_run, tmp_path, capsys):
    from ctxlens.profile import record as records
    from ctxlens.results import read_run
    from ctxlens.runner.rundir import read_config
    from ctxlens.runner.store import RunStore

    run = _copy(zoo_run, tmp_path / "config")
    (run / "config.yaml").write_text((run / "config.yaml").read_text().replace("schema: 1", "schema: 7"))
    with pytest.raises(CtxlensError) as err:
        read_config(run)
    _one_sentence(err.value, f"{run / 'config.yaml'} holds a run configuration {NEWER}")
    capsys.readouterr()
    assert main(["run", "--config", str(run / "config.yaml"), "--out", str(tmp_path / "again")]) == 2  # nor run again
    assert f"Config file '{run / 'config.yaml'}' holds a run configuration {NEWER}" in capsys.readouterr().err

    run = _copy(zoo_run, tmp_path / "env")
    (run / "env.json").write_text((run / "env.json").read_text().replace('"schema": 1', '"schema": 7'))
    assert read_run(run).problems == [f"env.json holds an environment record {NEWER}"]

    run = _copy(zoo_run, tmp_path / "units")
    newer = [json.dumps({**json.loads(x), "schema": 7, "new": True}) + "\n" for x in (run / "units.jsonl").open()]
    (run / "units.jsonl").write_text("".join(newer))
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    with pytest.raises(CtxlensError) as err:
        RunStore(run)
    _one_sentence(err.value, f"{run / 'units.jsonl'} line 1 holds a commit log line {NEWER}")
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before  # an older ctxlens cuts nothing

    (tmp_path / records.RECORD).write_text(json.dumps({"schema": 7, **_record(), "new": 1}))
    with pytest.raises(CtxlensError) as err:
        records.read_record(tmp_path)
    _one_sentence(err.value, f"{tmp_path / 'profile.json'} holds a profile record {NEWER}")


def test_an_older_version_is_upgraded_on_read(monkeypatch):
    """The mechanism a future change uses: version 2 renames a field; a version-1 file reads through it."""
    old = schema.CONFIG
    renamed = {**old.shape.fields, "runs": old.shape.fields["models"]}
    del renamed["models"]
    v2 = dataclasses.replace(old, version=2, shape=schema.Shape(renamed, ("experiment", "runs")), upgrades={
        1: lambda d: {**{k: v for k, v in d.items() if k != "models"}, "runs": d["models"], "schema": 2}})
    monkeypatch.setitem(schema.SCHEMAS, "config.yaml", v2)
    schema._versioned.cache_clear()
    try:
        got = schema.validate("config.yaml", {"experiment": "x", "models": ["m"]}, "config.yaml")
        assert got == {"experiment": "x", "runs": ["m"], "schema": 2}
        assert schema.stamp("config.yaml", got) == {"schema": 2, "experiment": "x", "runs": ["m"]}
    finally:
        monkeypatch.undo()
        schema._versioned.cache_clear()


def test_rows_are_versioned_by_their_layouts():
    from ctxlens.row_access import LAYOUTS, row_version

    assert row_version("head-masking") == max(x.version for x in LAYOUTS if x.experiment == "head-masking") == 2
    assert row_version("token-loss") == 1
