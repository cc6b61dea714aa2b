"""The repository travels (issue 33 part 7): the GPU machine receives the whole tracked tree and
refuses one over 64 MiB, so the tracked tree stays under 30 MiB, leaving room for reference runs
at longer lengths. Archive a run's rows (``ctxlens archive DIR``) before committing them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 30 << 20


def _tracked() -> list[Path]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    done = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, timeout=60)
    if done.returncode != 0:
        pytest.skip("not a git checkout")
    return [ROOT / os.fsdecode(name) for name in done.stdout.split(b"\0") if name]


def test_the_tracked_tree_stays_under_30_mib():
    sizes = {path: path.lstat().st_size for path in _tracked() if os.path.lexists(path)}  # deleted: not counted
    total = sum(sizes.values())
    largest = ", ".join(f"{p.relative_to(ROOT)} ({s / 2**20:.1f} MiB)"
                        for p, s in sorted(sizes.items(), key=lambda kv: -kv[1])[:5])
    assert total < LIMIT, (f"the tracked tree is {total / 2**20:.1f} MiB, over {LIMIT >> 20} MiB; largest: {largest}. "
                           "Archive run rows with `ctxlens archive DIR` before committing them.")
