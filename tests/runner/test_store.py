"""RunStore: round trips, repair after crashes (by hand, by SIGKILL, by arbitrary truncation)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxlens.core.errors import CtxlensError
from ctxlens.runner import RunStore, read_rows


def unit_rows(i: int, n: int = 3) -> list[dict]:
    return [{"unit": i, "row": j, "value": i * 10 + j} for j in range(n)]


def fill(directory, units=3, n=3) -> RunStore:
    store = RunStore(directory)
    for i in range(units):
        store.commit(RunStore.unit_key({"i": i}), unit_rows(i, n))
    return store


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


# --- round trip -------------------------------------------------------------------------------


def test_round_trip(tmp_path):
    store = fill(tmp_path / "run")
    store.commit("empty", [])
    again = RunStore(tmp_path / "run")
    assert again.repairs == []
    assert again.done() == store.done() == {RunStore.unit_key({"i": i}) for i in range(3)} | {"empty"}
    assert again.rows() == store.rows() == [r for i in range(3) for r in unit_rows(i)]
    units = [json.loads(line) for line in (tmp_path / "run" / "units.jsonl").read_text().splitlines()]
    assert [u["rows"] for u in units] == [3, 3, 3, 0]
    assert units[-1]["end"] == units[-2]["end"] == (tmp_path / "run" / "results.jsonl").stat().st_size


def test_non_finite_and_numpy_scalars(tmp_path):
    row = {
        "nan": float("nan"), "inf": float("inf"), "np_nan": np.float64("nan"), "np_ninf": np.float32("-inf"),
        "f32": np.float32(1.5), "i64": np.int64(7), "b": np.bool_(True), "s": "x", "none": None,
    }
    try:
        import torch

        row["torch"] = torch.tensor(2.5)
    except ImportError:
        pass
    store = RunStore(tmp_path)
    store.commit("u", [row])
    got = RunStore(tmp_path).rows()[0]
    assert got["nan"] is got["inf"] is got["np_nan"] is got["np_ninf"] is None
    assert got["f32"] == 1.5 and got["i64"] == 7 and got["b"] is True and got["s"] == "x"
    assert got.get("torch", 2.5) == 2.5
    assert "NaN" not in (tmp_path / "results.jsonl").read_text()


def test_unit_key_is_stable():
    assert RunStore.unit_key({"b": 1, "a": "x"}) == RunStore.unit_key({"a": "x", "b": np.int64(1)})
    assert RunStore.unit_key({"a": "x", "b": 1}) == '{"a":"x","b":1}'


def test_double_commit_raises(tmp_path):
    store = fill(tmp_path)
    with pytest.raises(ValueError):
        store.commit(RunStore.unit_key({"i": 1}), unit_rows(1))
    with pytest.raises(ValueError):  # also after reopening
        RunStore(tmp_path).commit(RunStore.unit_key({"i": 0}), unit_rows(0))
    assert len(RunStore(tmp_path).rows()) == 9


# --- repair by hand ---------------------------------------------------------------------------


def test_repair_uncommitted_rows(tmp_path):
    fill(tmp_path)
    size = (tmp_path / "results.jsonl").stat().st_size
    append(tmp_path / "results.jsonl", b'{"unit":3,"row":0}\n{"unit":3,"row":1}\n')  # died before commit line
    store = RunStore(tmp_path)
    assert (tmp_path / "results.jsonl").stat().st_size == size
    assert any("2 uncommitted rows" in r for r in store.repairs)
    assert store.rows() == [r for i in range(3) for r in unit_rows(i)]
    store.commit(RunStore.unit_key({"i": 3}), unit_rows(3))  # resume redoes the unit
    assert RunStore(tmp_path).rows() == [r for i in range(4) for r in unit_rows(i)]


def test_repair_truncated_units_line(tmp_path):
    fill(tmp_path)
    append(tmp_path / "results.jsonl", b"".join(json.dumps(r).encode() + b"\n" for r in unit_rows(3)))
    units_size = (tmp_path / "units.jsonl").stat().st_size
    append(tmp_path / "units.jsonl", b'{"unit":"{\\"i\\":3}","rows":3,"en')
    store = RunStore(tmp_path)
    assert (tmp_path / "units.jsonl").stat().st_size == units_size
    assert any("units.jsonl" in r for r in store.repairs)
    assert any("3 uncommitted rows" in r for r in store.repairs)
    assert store.done() == {RunStore.unit_key({"i": i}) for i in range(3)}
    assert len(store.rows()) == 9


def test_repair_results_cut_mid_line(tmp_path):
    fill(tmp_path)
    append(tmp_path / "results.jsonl", b'{"unit":3,"row":0}\n{"unit":3,"ro')
    store = RunStore(tmp_path)
    assert any("mid-line" in r for r in store.repairs)
    assert (tmp_path / "results.jsonl").read_bytes().endswith(b"}\n")
    assert store.rows() == [r for i in range(3) for r in unit_rows(i)]
    assert RunStore(tmp_path).repairs == []


def test_failed_commit_leaves_no_orphan_rows(tmp_path):
    store = fill(tmp_path, units=1)
    append(tmp_path / "results.jsonl", b'{"orphan":1}\n')  # e.g. a commit that raised half way
    store.commit("next", [{"x": 1}])
    assert store.rows() == unit_rows(0) + [{"x": 1}]


# --- config and env ---------------------------------------------------------------------------


def test_config(tmp_path):
    store = RunStore(tmp_path)
    assert store.read_config() is None
    config = {"experiment": "token-loss", "models": ["tiny"], "options": {"lengths": (128, 256)}, "model_options": {}}
    store.write_config(config)
    store.write_config(dict(config))  # same options: resume is fine
    assert RunStore(tmp_path).read_config() == {"schema": 1, "experiment": "token-loss", "models": ["tiny"],
                                                "options": {"lengths": [128, 256]}, "model_options": {}}
    seeded = {**config, "model_options": {"seed": 1}}
    with pytest.raises(CtxlensError, match=r"already holds a run .*\(model_options: \{\} -> \{'seed': 1\}\)"):
        store.write_config(seeded)
    store.write_config(seeded, compare_keys=["experiment", "options"])  # model options not compared
    assert store.read_config()["model_options"] == {"seed": 1}
    assert not list(tmp_path.glob(".*.tmp"))


def test_env(tmp_path):
    RunStore(tmp_path).write_env({"torch": "2.4", "gpu": None, "mem": np.int64(80)})
    assert json.loads((tmp_path / "env.json").read_text()) == {"schema": 1, "torch": "2.4", "gpu": None, "mem": 80}


# --- read_rows --------------------------------------------------------------------------------


def test_read_rows_does_not_modify(tmp_path):
    fill(tmp_path)
    append(tmp_path / "results.jsonl", b'{"unit":3,"row":0}\n{"unit":3,"ro')
    append(tmp_path / "units.jsonl", b'{"unit":"x","ro')
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert read_rows(tmp_path) == [r for i in range(3) for r in unit_rows(i)]
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_read_rows_merges_ranks(tmp_path):
    for rank in (10, 2):
        names = {"results_name": f"results.rank{rank}.jsonl", "units_name": f"units.rank{rank}.jsonl"}
        store = RunStore(tmp_path, **names)
        store.commit("u", [{"rank": rank, "k": 0}, {"rank": rank, "k": 1}])
    fill(tmp_path, units=1, n=1)
    assert [(r.get("rank"), r.get("k")) for r in read_rows(tmp_path)] == [
        (None, None), (2, 0), (2, 1), (10, 0), (10, 1)
    ]
    with pytest.raises(CtxlensError, match="not a ctxlens run directory"):
        read_rows(tmp_path / "missing")


# --- SIGKILL ----------------------------------------------------------------------------------

N_UNITS = 400
CHILD = textwrap.dedent(
    """
    import importlib.util, sys, types

    # Import the store without running ctxlens/__init__.py (it loads torch: seconds per child).
    package = types.ModuleType("ctxlens")
    package.__path__ = list(importlib.util.find_spec("ctxlens").submodule_search_locations)
    sys.modules["ctxlens"] = package
    from ctxlens.runner.store import RunStore

    store = RunStore(sys.argv[1])
    done = store.done()
    print("ready", flush=True)
    for i in range(int(sys.argv[2])):
        key = RunStore.unit_key({"i": i})
        if key not in done:
            store.commit(key, [{"unit": i, "row": j, "payload": f"{i}:{j}:" + "x" * 300} for j in range(3)])
    """
)


def expected_rows(n: int) -> list[dict]:
    return [{"unit": i, "row": j, "payload": f"{i}:{j}:" + "x" * 300} for i in range(n) for j in range(3)]


def start_child(script: Path, directory: Path) -> subprocess.Popen:
    child = subprocess.Popen(
        [sys.executable, str(script), str(directory), str(N_UNITS)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout.readline().strip() == "ready"
    return child


def test_sigkill_resume(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    expected = expected_rows(N_UNITS)

    reference = tmp_path / "reference"
    child = start_child(script, reference)
    t0 = time.perf_counter()
    assert child.wait(timeout=60) == 0
    full = time.perf_counter() - t0
    assert read_rows(reference) == expected

    run, rng, interrupted = tmp_path / "run", random.Random(20240501), 0
    for _ in range(6):
        remaining = N_UNITS - len(read_rows(run)) // 3 if run.exists() else N_UNITS
        child = start_child(script, run)
        time.sleep(rng.uniform(0.05, 0.6) * full * remaining / N_UNITS)
        child.send_signal(signal.SIGKILL)
        interrupted += child.wait(timeout=60) == -signal.SIGKILL
        got = read_rows(run)
        assert got == expected[: len(got)] and len(got) % 3 == 0  # whole units, in order
    assert interrupted >= 3, "the kills should land while the child is still writing"

    child = start_child(script, run)
    assert child.wait(timeout=60) == 0
    assert read_rows(run) == RunStore(run).rows() == expected
    lines = (run / "results.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == expected  # no stray, partial or duplicated line
    units = [json.loads(line)["unit"] for line in (run / "units.jsonl").read_text().splitlines()]
    assert units == [RunStore.unit_key({"i": i}) for i in range(N_UNITS)]


# --- arbitrary truncation ---------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(0, 3), min_size=1, max_size=5), data=st.data())
def test_truncation_yields_committed_prefix(sizes, data):
    with tempfile.TemporaryDirectory() as tmp:
        base, run = Path(tmp) / "base", Path(tmp) / "run"
        store = RunStore(base)
        keys = [RunStore.unit_key({"i": i}) for i in range(len(sizes))]
        for i, n in enumerate(sizes):
            store.commit(keys[i], unit_rows(i, n))
        results = (base / "results.jsonl").read_bytes()
        units = (base / "units.jsonl").read_bytes()
        r_cut = data.draw(st.integers(0, len(results)), label="results cut")
        u_cut = data.draw(st.integers(0, len(units)), label="units cut")
        run.mkdir()
        (run / "results.jsonl").write_bytes(results[:r_cut])
        (run / "units.jsonl").write_bytes(units[:u_cut])

        k, offset = 0, 0  # units whose commit line and rows both survived the cut
        for line in units.splitlines(keepends=True):
            offset += len(line)
            if offset > u_cut or json.loads(line)["end"] > r_cut:
                break
            k += 1

        reopened = RunStore(run)
        assert reopened.done() == set(keys[:k])
        assert reopened.rows() == read_rows(run) == [r for i in range(k) for r in unit_rows(i, sizes[i])]
        assert all(line.endswith(b"\n") for line in (run / "results.jsonl").read_bytes().splitlines(True))
        for i in range(k, len(sizes)):  # resume finishes the run exactly
            reopened.commit(keys[i], unit_rows(i, sizes[i]))
        final = RunStore(run)
        assert final.repairs == [] and final.rows() == read_rows(base)
