"""A real run killed with SIGKILL resumes to exactly the rows of an uninterrupted run."""

import os
import signal
import subprocess
import sys
import time

from ctxlens.runner import read_rows

CMD = ["-m", "ctxlens", "run", "token-loss", "--model", "zoo:random-llama", "--lengths", "48,96",
       "--n-samples", "60", "--no-progress", "--out"]


def _start(out, env):
    return subprocess.Popen([sys.executable, *CMD, str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _committed(out) -> int:
    units = out / "units.jsonl"
    return units.read_bytes().count(b"\n") if units.exists() else 0


def test_sigkill_then_resume_equals_uninterrupted(tmp_path):
    from ctxlens.cli import main

    env = dict(os.environ)
    assert main([*CMD[2:], str(tmp_path / "clean")]) == 0  # the uninterrupted run, in this process (one thread)
    clean = read_rows(tmp_path / "clean")
    assert len(clean) == 120

    out = tmp_path / "killed"
    kills = 0
    for target in (10, 50, 90):  # kill once each time more units have been committed
        proc = _start(out, env)
        deadline = time.time() + 60
        while _committed(out) < target and proc.poll() is None and time.time() < deadline:
            time.sleep(0.005)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
    subprocess.run([sys.executable, *CMD, str(out)], env=env, check=True, capture_output=True)
    assert kills >= 2
    resumed = read_rows(out)
    assert resumed == clean  # same rows, same order, no duplicates, nothing lost
    for line in (out / "results.jsonl").read_bytes().splitlines():
        assert line.startswith(b"{") and line.endswith(b"}")
