"""Issue 10, part 4: the same command with the same seed gives byte-identical rows, in this
process and in a fresh one (different hash seed), for every kind of experiment that touches
random perturbations, data sampling or models."""

import os
import subprocess
import sys

import pytest

from ctxlens.cli import main

COMMANDS = {
    "token-loss": ["--lengths", "24", "--n-samples", "2"],
    "accs-boundary": ["--lengths", "64", "--n-sequences", "2", "--suffix-len", "8"],
    "loss-vs-length": ["--lengths", "8,16", "--n-samples", "2"],
    "dominant-dimension": ["--lengths", "48", "--n-samples", "1"],
}


def _argv(name: str, out) -> list[str]:
    return ["run", name, "--model", "zoo:random-llama", "--out", str(out), "--no-progress", *COMMANDS[name]]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_same_command_same_bytes(name, tmp_path):
    assert main(_argv(name, tmp_path / "a")) == 0
    assert main(_argv(name, tmp_path / "b")) == 0
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    proc = subprocess.run([sys.executable, "-m", "ctxlens", *_argv(name, tmp_path / "c")], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    a = (tmp_path / "a" / "results.jsonl").read_bytes()
    assert a and a == (tmp_path / "b" / "results.jsonl").read_bytes() == (tmp_path / "c" / "results.jsonl").read_bytes()
