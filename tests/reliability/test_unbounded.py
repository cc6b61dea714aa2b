"""Issue 24 part 7: work is bounded by what the run needs and what the machine has, checked before
any work starts."""

from __future__ import annotations

import subprocess
import sys
import time
import tracemalloc

from ctxlens.cli import main
from ctxlens.data.sources import open_source
from ctxlens.data.windows import token_windows
from ctxlens.zoo.tokenizer import byte_tokenizer


def test_a_huge_length_is_refused_at_once(tmp_path, capsys):
    start = time.perf_counter()
    code = main(["run", "token-loss", "--model", "zoo:random-llama", "--out", str(tmp_path / "r"), "--no-progress",
                 "--lengths", "1000000000000", "--n-samples", "1", "--allow-extrapolation"])
    assert code == 2 and time.perf_counter() - start < 60
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("ctxlens: error:") and "Option 'lengths' must be in [1, 4,194,304]" in err  # at parsing
    assert not (tmp_path / "r").exists()


def test_a_big_text_file_is_read_only_as_far_as_needed(tmp_path):
    big = tmp_path / "big.txt"
    line = "the quick brown fox jumps over the lazy dog and keeps running through the field\n"
    with open(big, "w") as f:
        for _ in range(600_000):  # about 48 MB
            f.write(line)
    tok = byte_tokenizer()
    whole = tok.encode(line * 200, add_special_tokens=False)
    tracemalloc.start()
    windows = token_windows(open_source(str(big)), tok, 1024, 4)  # [4, 1024]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 * 2**20  # the 48 MB file was not read whole
    assert windows.flatten().tolist() == whole[:4096]  # the same ids as the whole file gives


def test_alias_bomb_in_a_run_config_yaml_costs_nothing(tmp_path):
    """The bomb inside a run directory's own config.yaml, read by `ctxlens report` in a fresh process."""
    run = tmp_path / "run"
    run.mkdir()
    levels = "".join(f"  {c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    (run / "config.yaml").write_text("experiment: token-loss\noptions:\n  a: &a [x, x, x, x, x, x, x, x, x]\n" + levels)
    (run / "units.jsonl").write_text("")
    (run / "results.jsonl").write_text("")
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ctxlens", "report", str(run), "--out", str(tmp_path / "r.html")],
                          capture_output=True, text=True, timeout=120)
    assert time.perf_counter() - start < 60
    assert len(proc.stderr) < 2000
