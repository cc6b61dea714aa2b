"""Feedback inside a unit (issue 26 part 4): a token meter on stderr, and task samples kept across an interrupt."""

from __future__ import annotations

import os

import pytest

from ctxlens.core import progress
from ctxlens.core.errors import CtxlensError
from ctxlens.runner.execute import run
from ctxlens.runner.store import read_rows
from ctxlens.tasks.backends import TransformersBackend

NIAH = {"lengths": "512", "depths": "50", "n_samples": 4, "batch_size": 1, "max_new_tokens": 3}


REAL_DECODE = TransformersBackend._decode


class FakeClock:
    """One second passes at every reading."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_meter_lines_state_tokens_rate_and_time_left():
    lines: list[str] = []
    clock = iter([0.0, 1.0, 5.0, 6.0])  # start, then three readings
    progress.clock, saved = (lambda: next(clock)), progress.clock
    try:
        meter = progress.Meter("unit 1/1", 1000, lines.append, quiet=3.0, every=5.0)
        meter.add(100)  # t=1: quiet
        meter.add(400)  # t=5: 500 tokens in 5 s -> 100 tokens/s, 500 left -> 5 s
        meter.add(100)  # t=6: within the 5 s interval
    finally:
        progress.clock = saved
    assert lines == ["  unit 1/1: 500 / 1,000 tokens (50%), 100 tokens/s, about 5 s left, 5 s so far"]

    clock = iter([0.0, 4.0])
    progress.clock = lambda: next(clock)
    try:
        meter = progress.Meter("unit 2/3", None, lines.append)
        meter.at(2, 10, "training steps")  # t=4: 0.5 steps/s, 8 steps left -> 16 s
    finally:
        progress.clock = saved
    assert lines[-1] == "  unit 2/3: 2 / 10 training steps (20%), 0.5 steps/s, about 16 s left, 4 s so far"


def test_progress_lines_for_a_slow_unit_none_without_progress_and_same_rows(tmp_path, monkeypatch, capsys):
    run("niah-depth", ["zoo:random-llama"], tmp_path / "fast", NIAH, progress=True, announce=False)
    assert "tokens/s" not in capsys.readouterr().err  # a unit well under 3 s prints no progress line
    monkeypatch.setattr(progress, "clock", FakeClock())
    run("niah-depth", ["zoo:random-llama"], tmp_path / "slow", NIAH, progress=True, announce=False)
    lines = [line for line in capsys.readouterr().err.splitlines() if "tokens/s" in line]
    assert len(lines) > 1 and all(line.lstrip().startswith("unit 1/1: ") for line in lines)
    assert all("/ 2,048 tokens" in line for line in lines)  # the work hook's total: 4 prompts of 512 tokens
    monkeypatch.setattr(progress, "clock", FakeClock())
    run("niah-depth", ["zoo:random-llama"], tmp_path / "silent", NIAH, progress=False)
    assert "tokens/s" not in capsys.readouterr().err
    rows = {name: (tmp_path / name / "results.jsonl").read_bytes() for name in ("fast", "slow", "silent")}
    assert rows["fast"] == rows["slow"] == rows["silent"]


def _decoding(monkeypatch, stop_after: int | None = None) -> list[int]:
    """Count the samples the transformers backend decodes; raise KeyboardInterrupt after ``stop_after``."""
    calls: list[int] = []

    def decode(self, new_ids):
        if stop_after is not None and len(calls) == stop_after:
            raise KeyboardInterrupt
        calls.append(1)
        return REAL_DECODE(self, new_ids)

    monkeypatch.setattr(TransformersBackend, "_decode", decode)
    return calls


def _interrupted(tmp_path, monkeypatch, k: int = 2):
    out = tmp_path / "interrupted"
    _decoding(monkeypatch, stop_after=k)
    with pytest.raises(KeyboardInterrupt):
        run("niah-depth", ["zoo:random-llama"], out, NIAH, progress=False)
    (part,) = (out / "partial").iterdir()
    assert len(part.read_bytes().splitlines()) == 1 + k  # the header, then one line per finished sample
    assert not (out / "units.jsonl").read_bytes()  # nothing committed
    return out, part


def test_interrupted_task_unit_resumes_to_the_uninterrupted_rows_decoding_only_the_rest(tmp_path, monkeypatch,
                                                                                         capsys):
    clean = tmp_path / "clean"
    calls = _decoding(monkeypatch)
    run("niah-depth", ["zoo:random-llama"], clean, NIAH, progress=False)
    assert len(calls) == 4
    out, _ = _interrupted(tmp_path, monkeypatch, k=2)
    calls = _decoding(monkeypatch)
    monkeypatch.setattr(progress, "clock", FakeClock())
    capsys.readouterr()
    run("niah-depth", ["zoo:random-llama"], out, NIAH, progress=True, announce=False)
    assert len(calls) == 2  # only the samples the interrupt lost
    assert (out / "results.jsonl").read_bytes() == (clean / "results.jsonl").read_bytes()
    assert not (out / "partial").exists()  # removed when the unit committed
    rows = read_rows(out)
    left = 2048 - sum(r["n_tokens"] + r["budget"] for r in rows if r["sample"] in (0, 1))  # the first batches
    lines = [line for line in capsys.readouterr().err.splitlines() if "tokens/s" in line]
    assert lines and all(f"/ {left:,} tokens" in line for line in lines)  # the meter plans only what is left


def test_a_partial_file_of_other_weights_or_options_is_rebuilt(tmp_path, monkeypatch):
    clean = tmp_path / "clean"
    _decoding(monkeypatch)
    run("niah-depth", ["zoo:random-llama"], clean, NIAH, progress=False)
    out, part = _interrupted(tmp_path, monkeypatch)
    lines = part.read_bytes().splitlines()
    part.write_bytes(lines[0].replace(b'"fingerprint":"', b'"fingerprint":"other') + b"\n" + b"\n".join(lines[1:])
                     + b'\n{"key":"cut')  # and a line cut off by a kill
    calls = _decoding(monkeypatch)
    run("niah-depth", ["zoo:random-llama"], out, NIAH, progress=False)
    assert len(calls) == 4
    assert (out / "results.jsonl").read_bytes() == (clean / "results.jsonl").read_bytes()


def test_a_partial_file_that_is_not_ours_or_a_link_is_refused_untouched(tmp_path, monkeypatch):
    out, part = _interrupted(tmp_path, monkeypatch)
    part.write_bytes(b"not a ctxlens file\n")
    _decoding(monkeypatch)
    with pytest.raises(CtxlensError, match="not a partial-unit file"):
        run("niah-depth", ["zoo:random-llama"], out, NIAH, progress=False)
    assert part.read_bytes() == b"not a ctxlens file\n"
    target = tmp_path / "elsewhere.jsonl"
    target.write_bytes(b"theirs\n")
    part.unlink()
    os.symlink(target, part)
    with pytest.raises(CtxlensError, match="symbolic link"):
        run("niah-depth", ["zoo:random-llama"], out, NIAH, progress=False)
    assert target.read_bytes() == b"theirs\n" and part.is_symlink()
    folder = out / "partial"
    os.rename(folder, tmp_path / "moved")
    os.symlink(tmp_path / "moved", folder)
    with pytest.raises(CtxlensError, match="symbolic link"):
        run("niah-depth", ["zoo:random-llama"], out, NIAH, progress=False)


def test_a_partial_file_left_by_a_kill_after_its_commit_is_swept(tmp_path, monkeypatch):
    from ctxlens.runner import partial

    out, part = _interrupted(tmp_path, monkeypatch)
    foreign = out / "partial" / "notes.txt"
    foreign.write_text("mine")
    monkeypatch.setattr(partial.PartialUnit, "remove", lambda self: None)  # killed right after the commit
    _decoding(monkeypatch)
    run("niah-depth", ["zoo:random-llama"], out, NIAH, progress=False)
    assert not part.exists() and foreign.read_text() == "mine"  # ours swept, a foreign file left alone


def test_a_forward_counts_its_tokens_layer_by_layer():
    import torch

    from ctxlens.lm.loading import load
    from ctxlens.runner.meter import count_tokens

    lm = load("zoo:random-llama")
    meter, seen = progress.Meter("unit", None, lambda line: None), []
    with count_tokens(lm), progress.unit(meter):
        probe = lm.layers[0].register_forward_hook(lambda *_: seen.append(meter.done))  # after the counter's
        with torch.inference_mode():
            lm.model(torch.zeros(2, 48, dtype=torch.long))  # [B=2, L=48]
        probe.remove()
    assert seen == [pytest.approx(96 / lm.n_layers)] and meter.done == pytest.approx(96)
    assert not lm.layers[0]._forward_hooks  # the counter's hooks are gone after the block
