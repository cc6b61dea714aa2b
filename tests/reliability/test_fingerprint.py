"""Issue 32, item 5: the weights fingerprint covers every byte, and its cache never hides a change.
Issue 45: the digest is never read back from a file (a planted ``fingerprints.json`` entry once let
changed weights pass under the old digest); a process remembers a digest only while the file's stat
is unchanged.

The earlier fingerprint read the first, middle and last MiB of each weight file; the sampled windows
are written out here (``old_windows``) so that each change below is shown to lie outside them."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import time
from pathlib import Path

import pytest

from ctxlens.cli import main
from ctxlens.core.errors import CtxlensError
from ctxlens.lm import fingerprint as fp

MIB = 1 << 20


@pytest.fixture(autouse=True)
def own_home(tmp_path, monkeypatch):
    """A fresh ctxlens home (the user's is not touched) and a process that has hashed nothing yet."""
    monkeypatch.setenv("CTXLENS_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(fp, "_HASHED", {})


def remembered(path: Path) -> bool:
    return any(key[0] == os.path.realpath(path) for key in fp._HASHED)


def old_windows(size: int) -> list[range]:
    """The byte ranges the sampling fingerprint read: first, middle and last MiB."""
    starts = {0, max(0, size // 2 - MIB // 2), max(0, size - MIB)}
    return [range(s, min(size, s + MIB)) for s in sorted(starts)]


def outside(size: int, offset: int) -> bool:
    return not any(offset in w for w in old_windows(size))


def weights_dir(path: Path, size: int = 6 * MIB) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"model_type": "llama"}')
    (path / "model.safetensors").write_bytes(bytes(range(256)) * (size // 256))
    return path


def flip(path: Path, offset: int, keep_mtime: bool = True) -> None:
    """Change one byte of ``path`` in place; with ``keep_mtime`` put its access and modification times back."""
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def settled(monkeypatch) -> None:
    """Files just written count as old enough to cache (the racy window is the test's clock tick)."""
    monkeypatch.setattr(fp, "RACY_NS", -10**12)


def test_one_byte_outside_the_old_windows_changes_the_fingerprint(tmp_path, monkeypatch):
    settled(monkeypatch)
    model = weights_dir(tmp_path / "m")
    weights = model / "model.safetensors"
    offset = 3 * MIB + MIB // 2 + 12345  # between the middle and the last MiB
    assert outside(weights.stat().st_size, offset)
    before = fp.directory_fingerprint(model)
    assert remembered(weights), "the first hash is remembered in this process"
    time.sleep(0.05)  # past the kernel's timestamp tick, as any real edit after a run is
    flip(weights, offset)  # same size, inode and modification time: only the change time moves
    assert fp.directory_fingerprint(model) != before
    flip(weights, offset)  # the byte back: the same fingerprint again
    assert fp.directory_fingerprint(model) == before


def test_the_digest_is_the_whole_file_sha256(tmp_path):
    model = weights_dir(tmp_path / "m", size=3 * MIB + 7)
    weights = model / "model.safetensors"
    assert fp.file_sha256(weights) == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert fp.hash_file(weights) == hashlib.sha256(weights.read_bytes()).hexdigest()


def test_a_process_hashes_an_unchanged_file_once(tmp_path, monkeypatch):
    settled(monkeypatch)
    model = weights_dir(tmp_path / "m")
    first = fp.directory_fingerprint(model)
    calls = []
    hash_file = fp.hash_file
    monkeypatch.setattr(fp, "hash_file", lambda path: calls.append(path) or hash_file(path))
    assert fp.directory_fingerprint(model) == first and calls == []
    (model / "model.safetensors").write_bytes((model / "model.safetensors").read_bytes())  # same bytes, new stamp
    fp.directory_fingerprint(model)
    assert len(calls) == 1
    monkeypatch.setattr(fp, "_HASHED", {})  # a new process: nothing on disk stands for the bytes
    assert fp.directory_fingerprint(model) == first and len(calls) == 2


def test_a_just_written_file_is_not_remembered(tmp_path):
    model = weights_dir(tmp_path / "m")
    fp.directory_fingerprint(model)
    assert not remembered(model / "model.safetensors")


def _entry(path: Path, sha256: str, **changes) -> dict:
    """A ``fingerprints.json`` entry as the earlier version wrote it: the file's path, its stat, a digest."""
    return {"path": str(path.resolve()), **fp.stamp(path), "sha256": sha256, **changes}


def _plant(entries: list[dict]) -> Path:
    home = Path(os.environ["CTXLENS_HOME"])
    home.mkdir(exist_ok=True)
    cache = home / fp.CACHE_NAME
    cache.write_text(json.dumps({"ctxlens_fingerprints": 1, "entries": entries}))
    return cache


@pytest.mark.parametrize("cache", [
    b"\x00\xff garbage", b"[]", b'{"ctxlens_fingerprints": 1, "entries": {}}', b"[" * 100_000 + b"]" * 100_000,
    b'{"ctxlens_fingerprints": 1, "entries": [{"path": 1}]}',
    b'{"ctxlens_fingerprints": 1, "entries": []}' + b" " * (2 * MIB),
])
def test_a_corrupt_cache_file_changes_nothing(tmp_path, cache):
    model = weights_dir(tmp_path / "m", size=2 * MIB)
    truth = fp.directory_fingerprint(model)
    home = Path(os.environ["CTXLENS_HOME"])
    home.mkdir(exist_ok=True)
    (home / fp.CACHE_NAME).write_bytes(cache)
    fp._HASHED.clear()
    assert fp.directory_fingerprint(model) == truth
    assert (home / fp.CACHE_NAME).read_bytes() == cache


def test_a_planted_entry_with_the_files_own_stat_is_not_trusted(tmp_path, monkeypatch):
    """Issue 45: the weights changed, then an entry naming the changed file's exact stat with the old digest
    planted in ``fingerprints.json``; the earlier version returned the old digest, so the resume went on."""
    settled(monkeypatch)
    model = weights_dir(tmp_path / "m", size=2 * MIB)
    weights = model / "model.safetensors"
    before = fp.directory_fingerprint(model)
    old_sha = hashlib.sha256(weights.read_bytes()).hexdigest()
    time.sleep(0.05)
    flip(weights, MIB + 17)
    _plant([_entry(weights, old_sha)])
    fp._HASHED.clear()  # the resume is a new process
    assert fp.file_sha256(weights) == hashlib.sha256(weights.read_bytes()).hexdigest() != old_sha
    assert fp.directory_fingerprint(model) != before
    for field in ("size", "mtime_ns", "ctime_ns", "ino", "dev"):  # nor with any other stamp
        _plant([_entry(weights, "0" * 64, **{field: fp.stamp(weights)[field] + 1})])
        fp._HASHED.clear()
        assert fp.file_sha256(weights) == hashlib.sha256(weights.read_bytes()).hexdigest(), field


def test_no_cache_file_is_written_and_a_linked_one_is_left_alone(tmp_path, monkeypatch):
    settled(monkeypatch)
    model = weights_dir(tmp_path / "m", size=2 * MIB)
    home = Path(os.environ["CTXLENS_HOME"])
    truth = hashlib.sha256((model / "model.safetensors").read_bytes()).hexdigest()
    assert fp.file_sha256(model / "model.safetensors") == truth
    assert not (home / fp.CACHE_NAME).exists()
    home.mkdir(exist_ok=True)
    target = tmp_path / "target"
    target.write_text("mine")
    (home / fp.CACHE_NAME).symlink_to(target)
    fp._HASHED.clear()
    assert fp.file_sha256(model / "model.safetensors") == truth
    assert target.read_text() == "mine"


# --- a resume against weights changed outside the old windows --------------------------------------


def _save_llama(path: Path) -> None:
    """A llama of about 8 MiB of weights (so most of its tensors lie outside the old windows)."""
    import torch
    from transformers import AutoModelForCausalLM

    from ctxlens.lm.tiny import tiny_config
    from ctxlens.zoo.tokenizer import byte_tokenizer

    tok = byte_tokenizer()
    torch.manual_seed(0)
    config = tiny_config("llama", vocab_size=len(tok), bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.eos_token_id, hidden_size=256, intermediate_size=1024,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4)
    AutoModelForCausalLM.from_config(config).save_pretrained(path)
    tok.save_pretrained(path)


def _tensor_outside(weights: Path) -> tuple[int, int, str]:
    """(start, end, dtype) in the file of an F32 tensor that no old window touches, from the safetensors header."""
    raw = weights.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    size = len(raw)
    for name, info in sorted(header.items()):
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        start, end = (8 + n + o for o in info["data_offsets"])
        if end - start >= 4096 and all(outside(size, b) for b in (start, end - 1)) and not any(
                start <= w.start < end for w in old_windows(size)):
            return start, end, info["dtype"]
    raise AssertionError("no tensor outside the old windows")


def test_a_tensor_scaled_outside_the_old_windows_refuses_the_resume(tmp_path, capsys):
    import numpy as np

    model = tmp_path / "model"
    _save_llama(model)
    weights = model / "model.safetensors"
    argv = ["run", "token-loss", "--model", str(model), "--no-progress", "--lengths", "16,24", "--n-samples", "1",
            "--out", str(tmp_path / "run")]
    original = weights.read_bytes()
    start, end, _ = _tensor_outside(weights)
    assert main(argv) == 0
    units = (tmp_path / "run" / "units.jsonl").read_bytes().splitlines(keepends=True)
    (tmp_path / "run" / "units.jsonl").write_bytes(b"".join(units[:-1]))  # as if killed before the last unit
    with open(tmp_path / "run" / "results.jsonl", "r+b") as f:
        f.truncate(json.loads(units[-2])["end"])
    before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
    time.sleep(0.05)
    scaled = (np.frombuffer(original[start:end], dtype="<f4") * 3).astype("<f4").tobytes()
    weights.write_bytes(original[:start] + scaled + original[end:])  # one tensor times 3, same size
    capsys.readouterr()
    assert main(argv) == 2
    assert "differ from those whose rows" in capsys.readouterr().err
    assert before == {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
    weights.write_bytes(original)  # the original weights back: the resume goes on
    assert main(argv) == 0



def test_a_run_recorded_with_an_old_sampled_fingerprint_is_refused_with_one_sentence(tmp_path):
    """An older ctxlens recorded 32 hex digits of sampled windows: a resume cannot check the weights
    against them, so it is refused by name (not taken for a change of weights, nor accepted)."""
    import yaml

    import ctxlens
    from ctxlens.runner import execute

    out = tmp_path / "run"
    assert main(["run", "token-loss", "--model", "zoo:random-llama", "--out", str(out), "--no-progress",
                 "--lengths", "8", "--n-samples", "2"]) == 0
    config = yaml.safe_load((out / "config.yaml").read_text())
    (spec, now), = config["fingerprints"].items()
    assert now.startswith(fp.FULL) and not fp.is_sampled(now)
    lm = ctxlens.load(spec)
    assert execute._same_weights(out, spec, lm) == now  # the same weights resume
    config["fingerprints"][spec] = "0123456789abcdef0123456789abcdef"  # as an older ctxlens wrote it
    (out / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(CtxlensError, match="older ctxlens"):
        execute._same_weights(out, spec, lm)


def test_a_gguf_file_has_one_fingerprint_whichever_conversion_it_loads_through(tmp_path):
    """Issue 45: the fingerprint of a GGUF file is its own sha256, not a digest of the directory
    transformers converted it into: a second conversion that writes other bytes (another transformers
    version's config.json) gives the same fingerprint, and a run recorded by the earlier scheme (the
    converted directory's digest) resumes on the same conversion. Before: the two conversions gave two
    fingerprints, so the same file's run was refused as "weights differ"."""
    import yaml

    import ctxlens
    from ctxlens.lm import gguf
    from ctxlens.runner import execute
    from tests.lm.test_gguf import write_tiny_gguf

    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    out = tmp_path / "run"
    argv = ["run", "token-loss", "--model", str(path), "--out", str(out), "--no-progress", "--lengths", "8",
            "--n-samples", "2"]
    assert main(argv) == 0
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["fingerprints"] == {str(path): fp.GGUF + sha}
    lm = ctxlens.load(str(path))
    earlier = fp.fingerprint(lm.model)  # what the earlier scheme recorded: the converted directory's digest
    assert earlier != fp.GGUF + sha

    cache = gguf.cache_dir(sha)  # as another transformers version converts it: other config.json bytes
    conf = json.loads((cache / "config.json").read_text())
    (cache / "config.json").write_text(json.dumps({**conf, "written_by": "another version"}, indent=3))
    record = json.loads((cache / gguf.SOURCE_FILE).read_text())
    record["files"]["config.json"] = hashlib.sha256((cache / "config.json").read_bytes()).hexdigest()
    (cache / gguf.SOURCE_FILE).write_text(json.dumps(record))
    fp._HASHED.clear()
    again = ctxlens.load(str(path))
    assert fp.fingerprint(again.model) != earlier  # the directory's digest moved with the conversion
    assert execute._same_weights(out, str(path), again) == fp.GGUF + sha  # the file's did not

    config["fingerprints"][str(path)] = fp.fingerprint(again.model)  # a run recorded by the earlier scheme
    (out / "config.yaml").write_text(yaml.safe_dump(config))
    assert execute._same_weights(out, str(path), again) == fp.GGUF + sha
    config["fingerprints"][str(path)] = earlier  # ... on a conversion whose bytes have changed since
    (out / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(CtxlensError, match="differ from those whose rows"):
        execute._same_weights(out, str(path), again)
