"""Sharded runs (issue 9 part 1): 2 gloo ranks under torchrun produce a 1-process run's rows."""

import json
import os
import subprocess
import sys

import pytest

from ctxlens.runner import read_rows
from ctxlens.runner.dist import Shard

RUN = ["-m", "ctxlens", "run", "token-loss", "--model", "zoo:random-llama", "--lengths", "32,64",
       "--n-samples", "3", "--no-progress", "--out"]


def _key(row: dict) -> str:
    return json.dumps(row, sort_keys=True)


def _torchrun(n: int, out, env) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}", *RUN, str(out)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


def test_shard_assignment_partitions_the_plan():
    for world in (1, 2, 3, 5):
        owners = [[r for r in range(world) if Shard(r, world).owns(i)] for i in range(17)]
        assert all(len(o) == 1 for o in owners)  # every unit exactly one rank


def test_two_gloo_ranks_equal_one_process_and_resume_after_changing_n(tmp_path):
    from ctxlens.cli import main

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    assert main([*RUN[2:], str(tmp_path / "one")]) == 0  # the one-process run, in this process (one thread)
    expected = sorted(map(_key, read_rows(tmp_path / "one")))
    assert len(expected) == 6

    proc = _torchrun(2, tmp_path / "two", env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    files = sorted(p.name for p in (tmp_path / "two").glob("results*.jsonl"))
    assert files == ["results.rank0.jsonl", "results.rank1.jsonl"]
    assert all((tmp_path / "two" / f).stat().st_size > 0 for f in files)  # both ranks did work
    assert sorted(map(_key, read_rows(tmp_path / "two"))) == expected

    # resume with a different N: drop rank 1's log, rerun with 3 ranks; only rank 1's units are redone
    for name in ("results.rank1.jsonl", "units.rank1.jsonl"):
        (tmp_path / "two" / name).unlink()
    proc = _torchrun(3, tmp_path / "two", env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(map(_key, read_rows(tmp_path / "two"))) == expected  # none lost, none duplicated


@pytest.mark.parametrize("env", [{"RANK": "2", "WORLD_SIZE": "2"}, {"RANK": "x", "WORLD_SIZE": "2"}])
def test_bad_rank_variables_are_one_clear_error(env, monkeypatch):
    from ctxlens.core.errors import CtxlensError
    from ctxlens.runner.dist import from_env

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(CtxlensError):
        from_env()
