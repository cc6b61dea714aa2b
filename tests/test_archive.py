"""Archived runs (issue 33 part 7): rows stored gzip-compressed (``results.jsonl.gz``), read by every
reader as they are, written by ``ctxlens archive`` atomically and only removing the plain file once
the ``.gz`` is proven to hold its bytes. The independent truth throughout is the plain file itself
(its bytes, its lines parsed with ``json``) and Python's own ``gzip`` module."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path

import pytest

from ctxlens.cli import main
from ctxlens.core.errors import CtxlensError
from ctxlens.results import read_run
from ctxlens.runner import RunStore, compression, read_rows
from ctxlens.runner.archive import archive_run
from ctxlens.runner.store import committed_units


def _rows(i: int) -> list[dict]:
    return [{"model": "m", "experiment": "e", "unit": i, "row": j, "text": f"é ✓ {i}/{j}", "v": i * 0.5 + j}
            for j in range(4)]


def _run(directory: Path, *, tail: bytes = b"", rank: int | None = None, units: int = 5) -> Path:
    """A run directory with ``units`` committed units (and ``tail`` appended uncommitted)."""
    suffix = "" if rank is None else f".rank{rank}"
    store = RunStore(directory, results_name=f"results{suffix}.jsonl", units_name=f"units{suffix}.jsonl")
    for i in range(units):
        store.commit(RunStore.unit_key({"i": i, "rank": rank}), _rows(i))
    store.close()
    if tail:
        with open(directory / f"results{suffix}.jsonl", "ab") as f:
            f.write(tail)
    return directory


def _committed_lines(results: Path, units: Path) -> list[dict]:
    """The truth: the plain file's lines up to the last committed offset, parsed with json."""
    end = json.loads(units.read_text().splitlines()[-1])["end"]
    return [json.loads(line) for line in results.read_bytes()[:end].splitlines()]


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file() and not p.is_symlink()}


def _one_sentence(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


# --- reading ---------------------------------------------------------------------------------------


def test_the_gz_form_reads_the_same_committed_rows_as_the_plain_file(tmp_path):
    run = _run(tmp_path / "run", tail=b'{"model":"m","experiment":"e","half":')
    _run(run, rank=1, units=2)
    truth = (_committed_lines(run / "results.jsonl", run / "units.jsonl")
             + _committed_lines(run / "results.rank1.jsonl", run / "units.rank1.jsonl"))
    plain_bytes = {name: (run / name).read_bytes() for name in ("results.jsonl", "results.rank1.jsonl")}
    assert read_rows(run) == truth and len(truth) == 28
    archive_run(run)
    assert sorted(p.name for p in run.glob("results*")) == ["results.jsonl.gz", "results.rank1.jsonl.gz"]
    for name, data in plain_bytes.items():
        assert gzip.decompress((run / f"{name}.gz").read_bytes()) == data  # Python's gzip: the same bytes
    assert read_rows(run) == truth
    got = read_run(run)
    assert got.rows == truth and got.uncommitted == 1  # the cut-off line still counts as uncommitted
    assert committed_units(run) == {RunStore.unit_key({"i": i, "rank": r}) for r, n in ((None, 5), (1, 2))
                                    for i in range(n)}


@pytest.mark.parametrize("damage", ["truncated", "flipped", "empty", "not gzip"])
def test_a_damaged_gz_is_one_sentence_and_nothing_changes(tmp_path, capsys, damage):
    run = _run(tmp_path / "run")
    archive_run(run)
    gz = run / "results.jsonl.gz"
    raw = gz.read_bytes()
    gz.write_bytes({"truncated": raw[:len(raw) // 2], "flipped": raw[:30] + bytes([raw[30] ^ 0xFF]) + raw[31:],
                    "empty": b"", "not gzip": b'{"model":"m"}\n'}[damage])
    before = _snapshot(run)
    with pytest.raises(CtxlensError, match="not a complete gzip file"):
        read_rows(run)
    assert main(["card", str(run)]) == 2
    assert "results.jsonl.gz is not a complete gzip file" in _one_sentence(capsys)
    assert _snapshot(run) == before


def test_a_decompression_bomb_is_refused_within_the_bound(tmp_path, monkeypatch, capsys):
    run = _run(tmp_path / "run")
    archive_run(run)
    bomb = 64 << 20
    (run / "results.jsonl.gz").write_bytes(gzip.compress(b"\n" * bomb, compresslevel=9))
    monkeypatch.setattr(compression, "MAX_ARCHIVED_BYTES", 8 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(CtxlensError, match="decompresses to more than 8,388,608 bytes"):
            read_rows(run)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 24 << 20  # the limit plus a few chunks, never the bomb's 64 MiB
    assert main(["card", str(run)]) == 2
    assert "decompresses to more than" in _one_sentence(capsys)


# --- archiving -------------------------------------------------------------------------------------


def test_archive_and_unpack_round_trip_byte_for_byte_and_deterministically(tmp_path, capsys):
    profile = tmp_path / "profile"
    run = _run(profile / "ref-m" / "part", tail=b'{"cut":')
    original = (run / "results.jsonl").read_bytes()
    others = {n: b for n, b in _snapshot(run).items() if n != "results.jsonl"}
    assert main(["archive", str(profile)]) == 0
    assert "archived: " in capsys.readouterr().out
    first = (run / "results.jsonl.gz").read_bytes()
    assert not (run / "results.jsonl").exists() and gzip.decompress(first) == original
    assert {n: b for n, b in _snapshot(run).items() if n != "results.jsonl.gz"} == others  # log and config as they were
    assert main(["archive", str(run)]) == 0 and "already archived" in capsys.readouterr().out
    assert (run / "results.jsonl.gz").read_bytes() == first
    assert main(["archive", "--unpack", str(profile)]) == 0
    assert (run / "results.jsonl").read_bytes() == original and not (run / "results.jsonl.gz").exists()
    assert main(["archive", str(run)]) == 0
    assert (run / "results.jsonl.gz").read_bytes() == first  # re-archiving gives the same bytes


def test_an_interrupted_archive_is_finished_by_running_it_again(tmp_path):
    run = _run(tmp_path / "run")
    original = (run / "results.jsonl").read_bytes()
    (run / "results.jsonl.gz").write_bytes(gzip.compress(original))  # written, plain not yet removed
    assert read_rows(run) == _committed_lines(run / "results.jsonl", run / "units.jsonl")
    archive_run(run)
    assert not (run / "results.jsonl").exists() and gzip.decompress((run / "results.jsonl.gz").read_bytes()) == original


@pytest.mark.parametrize("foreign", [b"not gzip at all", gzip.compress(b'{"other":"rows"}\n', mtime=0)])
def test_archive_refuses_to_overwrite_a_foreign_gz(tmp_path, capsys, foreign):
    run = _run(tmp_path / "run")
    (run / "results.jsonl.gz").write_bytes(foreign)
    before = _snapshot(run)
    assert main(["archive", str(run)]) == 2
    assert "does not hold the same rows" in _one_sentence(capsys)
    assert _snapshot(run) == before


@pytest.mark.parametrize("which", ["results.jsonl.gz", "results.jsonl"])
def test_archive_never_follows_a_link(tmp_path, capsys, which):
    run = _run(tmp_path / "run")
    target = tmp_path / "elsewhere"
    if which == "results.jsonl":
        (run / which).rename(target)
    else:
        target.write_bytes(b"outside")
    before = target.read_bytes()
    (run / which).symlink_to(target)
    assert main(["archive", str(run)]) == 2
    assert "symbolic link" in _one_sentence(capsys)
    assert target.read_bytes() == before and (run / which).is_symlink()
    assert not any(p.name.endswith(".tmp") for p in run.iterdir())


def test_archive_refuses_a_run_that_is_being_written(tmp_path):
    run = _run(tmp_path / "run")
    live = RunStore(run)
    try:
        before = _snapshot(run)
        with pytest.raises(CtxlensError, match="is being written by process"):
            archive_run(run)
        assert _snapshot(run) == before
    finally:
        live.close()


# --- writing into an archived run -----------------------------------------------------------------


def test_a_writer_refuses_an_archived_run_before_changing_anything(tmp_path):
    run = _run(tmp_path / "run", tail=b'{"cut":')
    archive_run(run)
    before = _snapshot(run)
    with pytest.raises(CtxlensError, match=r"archived run .*`ctxlens archive --unpack"):
        RunStore(run)
    assert _snapshot(run) == before  # the commit log is not cut back to match a missing results.jsonl


def test_ctxlens_run_reads_a_finished_archived_run_and_refuses_to_resume_an_unfinished_one(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["run", "token-loss", "--model", "zoo:random-llama", "--out", str(out), "--no-progress",
            "--n-samples", "2", "--lengths", "16,24"]
    assert main(argv) == 0
    truth = _committed_lines(out / "results.jsonl", out / "units.jsonl")
    archive_run(out)
    capsys.readouterr()
    before = _snapshot(out)
    assert main(argv) == 0  # nothing left to do: read, not written
    assert f"{len(truth)} rows in" in capsys.readouterr().out
    assert read_rows(out) == truth and _snapshot(out) == before
    log = (out / "units.jsonl").read_bytes()
    (out / "units.jsonl").write_bytes(log[:log.rstrip(b"\n").rindex(b"\n") + 1])  # the last unit uncommitted
    before = _snapshot(out)
    assert main(argv) == 2
    assert "ctxlens archive --unpack" in _one_sentence(capsys)
    assert _snapshot(out) == before
    assert main(["archive", "--unpack", str(out)]) == 0 and main(argv) == 0  # unpacked, it resumes
    assert read_rows(out) == truth
