"""Issue 24: a run directory has one writer, never follows links, never touches files that are not
ours, refuses corruption before changing a byte, and turns machine problems into one sentence.

Every case checks the files involved byte for byte before and after, with real processes where the
break involved two of them."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxlens.cli import main
from ctxlens.core.errors import CtxlensError
from ctxlens.runner import RunStore, read_rows

RUN = ["run", "token-loss", "--model", "zoo:random-llama", "--no-progress", "--lengths", "16,24",
       "--n-samples", "2"]


def run_cli(out: Path, *extra: str) -> int:
    return main([*RUN, "--out", str(out), *extra])


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file() and not p.is_symlink()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished token-loss run (4 units), made once; tests copy it."""
    out = tmp_path_factory.mktemp("finished") / "run"
    assert run_cli(out) == 0
    return out


def copy_run(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    for p in src.iterdir():
        if p.is_file():
            (dst / p.name).write_bytes(p.read_bytes())
    return dst


def partial(src: Path, dst: Path) -> Path:
    """A copy of a finished run with its last unit not yet done (as if stopped between units)."""
    out = copy_run(src, dst)
    units = (out / "units.jsonl").read_bytes().splitlines(keepends=True)
    (out / "units.jsonl").write_bytes(b"".join(units[:-1]))
    end = __import__("json").loads(units[-2])["end"]
    with open(out / "results.jsonl", "r+b") as f:
        f.truncate(end)
    return out


def refused(capsys, out: Path, *extra: str) -> str:
    assert run_cli(out, *extra) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ctxlens: error:") and "\n" not in err and "Traceback" not in err
    return err


# --- one writer ----------------------------------------------------------------------------------

HOLD = """
import sys, time
from ctxlens.runner import RunStore
store = RunStore(sys.argv[1])
store.commit("held", [{"x": 1}])
print("ready", flush=True)
time.sleep(60)
"""


def test_second_writer_is_refused_naming_the_first(tmp_path, capsys):
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        before = snapshot(out)
        err = refused(capsys, out)
        assert f"process {holder.pid}" in err
        with pytest.raises(CtxlensError, match=f"process {holder.pid}"):
            RunStore(out)
        assert snapshot(out) == before
    finally:
        holder.kill()
        holder.wait()
    # the killed holder's lock does not block the next writer
    store = RunStore(out)
    store.commit("after", [{"x": 2}])
    assert [r["x"] for r in store.rows()] == [1, 2]


def test_two_concurrent_runs_leave_a_resumable_directory(tmp_path):
    """Two real processes started together on one --out: one writes, the other is refused (or, if
    the first finished before the second began, finds nothing to do); the rows equal one run's."""
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "ctxlens", *RUN, "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert sorted(code for code, _ in results) in ([0, 0], [0, 2])
    for code, err in results:
        if code == 2:
            assert "is being written by process" in err
    assert run_cli(tmp_path / "alone") == 0
    assert (out / "results.jsonl").read_bytes() == (tmp_path / "alone" / "results.jsonl").read_bytes()
    assert b"\0" not in (out / "results.jsonl").read_bytes()


# --- links, special files, foreign files ---------------------------------------------------------


@pytest.mark.parametrize("name", ["results.jsonl", "units.jsonl", "config.yaml"])
@pytest.mark.parametrize("state", ["finished", "work left"])
def test_run_file_that_is_a_link_is_refused_and_its_target_untouched(name, state, finished, tmp_path, capsys):
    out = (copy_run if state == "finished" else partial)(finished, tmp_path / "run")
    target = tmp_path / "outside.txt"
    target.write_bytes((out / name).read_bytes())
    (out / name).unlink()
    (out / name).symlink_to(target)
    before, target_before = snapshot(out), target.read_bytes()
    assert "symbolic link" in refused(capsys, out)
    assert target.read_bytes() == target_before and snapshot(out) == before
    with pytest.raises(CtxlensError, match="symbolic link"):
        read_rows(out)


def test_foreign_results_file_is_never_truncated(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.jsonl").write_bytes(b'{"mine": 1}\n{"mine": 2}\n')
    before = snapshot(out)
    err = refused(capsys, out)
    assert "commit log units.jsonl is missing" in err
    assert snapshot(out) == before


def test_folder_of_other_files_is_not_a_run(tmp_path, capsys):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "thesis.tex").write_text("mine")
    assert "not a ctxlens run directory" in refused(capsys, out)
    assert snapshot(out) == {"thesis.tex": b"mine"}


def test_deleted_commit_log_does_not_delete_committed_rows(finished, tmp_path, capsys):
    out = copy_run(finished, tmp_path / "run")
    (out / "units.jsonl").unlink()
    before = snapshot(out)
    err = refused(capsys, out)
    assert "restore units.jsonl" in err and "start the run afresh" in err
    assert snapshot(out) == before and len(before["results.jsonl"].splitlines()) == 4


def test_corrupt_line_in_the_middle_is_refused_before_any_change(finished, tmp_path, capsys):
    out = copy_run(finished, tmp_path / "run")
    lines = (out / "results.jsonl").read_bytes().splitlines(keepends=True)
    lines[1] = b"#" * (len(lines[1]) - 1) + b"\n"  # same length: offsets still line up
    (out / "results.jsonl").write_bytes(b"".join(lines) + b'{"uncommitted": ')  # and a crash's tail
    before = snapshot(out)
    assert "not a JSON row" in refused(capsys, out)
    assert snapshot(out) == before
    lines[1] = b'{"x":1}\n'  # shorter: the logged offsets no longer fall on this unit's rows
    (out / "results.jsonl").write_bytes(b"".join(lines))
    before = snapshot(out)
    assert "changed by something other than ctxlens" in refused(capsys, out)
    assert snapshot(out) == before


def test_fifo_commit_log_is_refused_not_waited_on(finished, tmp_path):
    out = copy_run(finished, tmp_path / "run")
    (out / "units.jsonl").unlink()
    os.mkfifo(out / "units.jsonl")
    code = ("import sys\nfrom ctxlens.runner import read_rows\ntry:\n    read_rows(sys.argv[1])\n"
            "except Exception as e:\n    print(type(e).__name__, e)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=60)
    assert "CtxlensError" in proc.stdout and "not a regular file" in proc.stdout
    report = subprocess.run([sys.executable, "-m", "ctxlens", "report", str(out), "--out", str(tmp_path / "r.html")],
                            capture_output=True, text=True, timeout=60)
    assert report.returncode == 2 and "not a regular file" in report.stderr


# --- machine problems ----------------------------------------------------------------------------


def test_finished_run_writes_nothing_even_read_only(finished, tmp_path, capsys):
    out = copy_run(finished, tmp_path / "run")
    stamps = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    before = snapshot(out)
    out.chmod(0o555)
    for p in out.iterdir():
        p.chmod(0o444)
    try:
        assert run_cli(out) == 0
    finally:
        out.chmod(0o755)
    assert snapshot(out) == before
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == stamps


def test_read_only_directory_with_work_left_is_one_sentence(finished, tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root writes through read-only permissions; the ENOSPC test covers the error path")
    out = partial(finished, tmp_path / "run")
    before = snapshot(out)
    out.chmod(0o555)
    try:
        refused(capsys, out)
    finally:
        out.chmod(0o755)
    assert snapshot(out) == before


def test_full_disk_is_one_sentence_and_resumes(finished, tmp_path, capsys, monkeypatch):
    out = partial(finished, tmp_path / "run")
    real_write = os.write

    def full(fd, data):
        if os.fstat(fd).st_size > 0 and len(data) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    before = snapshot(out)
    err = refused(capsys, out)
    assert "disk is full" in err
    assert {k: v for k, v in snapshot(out).items() if k != ".ctxlens-lock"} == \
        {k: v for k, v in before.items() if k != ".ctxlens-lock"}
    monkeypatch.setattr(os, "write", real_write)
    assert run_cli(out) == 0
    assert (out / "results.jsonl").read_bytes() == (finished / "results.jsonl").read_bytes()


def test_out_is_a_file(tmp_path, capsys):
    out = tmp_path / "file.txt"
    out.write_text("keep")
    assert "is a file" in refused(capsys, out)
    assert out.read_text() == "keep"


def test_broken_config_yaml_in_the_run_is_one_sentence(finished, tmp_path, capsys):
    out = copy_run(finished, tmp_path / "run")
    (out / "config.yaml").write_text("experiment: [unclosed\n")
    before = snapshot(out)
    assert "config.yaml is not valid YAML" in refused(capsys, out)
    assert snapshot(out) == before


def test_alias_bomb_is_refused_fast(tmp_path, capsys):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    path = tmp_path / "run.yaml"
    path.write_text(f"experiment: token-loss\nmodel: zoo:random-llama\nout: {tmp_path / 'o'}\noptions:\n  " +
                    bomb.replace("\n", "\n  "))
    start = time.perf_counter()
    assert main(["run", "--config", str(path)]) == 2
    assert time.perf_counter() - start < 5
    err = capsys.readouterr().err
    assert "aliases" in err and len(err) < 400
    assert not (tmp_path / "o").exists()


# --- weights changed under the same name ---------------------------------------------------------


def _save_llama(path: Path, seed: int) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from ctxlens.lm.tiny import tiny_config
    from ctxlens.zoo.tokenizer import byte_tokenizer

    tok = byte_tokenizer()
    torch.manual_seed(seed)
    config = tiny_config("llama", vocab_size=len(tok), bos_token_id=tok.eos_token_id,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    tok.save_pretrained(path)


def test_swapped_weights_are_refused_on_resume(tmp_path, capsys):
    model, spare = tmp_path / "model", tmp_path / "spare"
    _save_llama(model, seed=0)
    argv = ["run", "token-loss", "--model", str(model), "--no-progress", "--lengths", "16,24", "--n-samples", "2"]
    assert main([*argv, "--out", str(tmp_path / "full")]) == 0
    out = partial(tmp_path / "full", tmp_path / "run")  # killed between units
    assert "fingerprints" in (out / "config.yaml").read_text()
    (tmp_path / "original").mkdir()
    for f in model.glob("*.safetensors"):
        f.rename(tmp_path / "original" / f.name)
    _save_llama(spare, seed=1)  # same architecture and sizes, other weights
    for f in spare.glob("*.safetensors"):
        f.rename(model / f.name)
    capsys.readouterr()
    before = snapshot(out)
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    assert line.startswith("ctxlens: error:") and "differ from those whose rows" in line
    assert snapshot(out) == before
    for f in (tmp_path / "original").glob("*.safetensors"):
        f.replace(model / f.name)  # the original weights back: the resume goes on
    assert main([*argv, "--out", str(out)]) == 0
    assert (out / "results.jsonl").read_bytes() == (tmp_path / "full" / "results.jsonl").read_bytes()
    assert main([*argv, "--model", "zoo:random-llama", "--out", str(out)]) == 0  # an added model still works
    assert read_rows(out)[-1]["model"] == "zoo:random-llama"
