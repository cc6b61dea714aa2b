"""BOS by default where the tokenizer adds one, and the card's weights line.

Independent truths: the tokenizer's own encoding of a text (its first id, its ids without special
tokens), a plain transformers forward computed here, and hand-written weights records.
"""

from __future__ import annotations

import math

import pytest
import torch
from tokenizers import processors
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

from ctxlens.data.tokenizer import byte_backend
from ctxlens.findings.lines.length import weights_line
from ctxlens.lm.loading import from_model
from ctxlens.lm.tiny import tiny_config
from ctxlens.probes.windows import bos_id, source_windows, tokenizer_adds_bos

BOS, EOS = "<s>", "</s>"


def _tokenizer(adds_bos: bool) -> PreTrainedTokenizerFast:
    """A byte tokenizer with BOS and EOS tokens; ``adds_bos``: its post-processor puts the BOS first."""
    backend = byte_backend()
    backend.add_special_tokens([BOS, EOS])
    if adds_bos:
        bos = backend.token_to_id(BOS)
        backend.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, bos)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=BOS, eos_token=EOS, pad_token=EOS)


def _lm(adds_bos: bool):
    tok = _tokenizer(adds_bos)
    torch.manual_seed(0)
    config = tiny_config("llama", vocab_size=len(tok), num_hidden_layers=2)
    return from_model(AutoModelForCausalLM.from_config(config).eval(), tok, name=f"tiny-bos-{adds_bos}")


@pytest.mark.parametrize("adds_bos", [True, False])
def test_auto_bos_follows_what_the_tokenizer_does_on_text(adds_bos):
    lm = _lm(adds_bos)
    first = lm.tokenizer.encode("a", add_special_tokens=True)[0]
    assert (first == lm.tokenizer.bos_token_id) is adds_bos  # the fixture is what it says
    assert tokenizer_adds_bos(lm.tokenizer) is adds_bos
    cut = source_windows(lm, "builtin:test", [16, 32], 2, 0, {}, bos=None)
    assert cut.bos is adds_bos
    stream = lm.tokenizer.encode(next(iter(_docs())), add_special_tokens=False)
    for length in (16, 32):
        w = cut.at(length)  # [2, length]
        assert w.shape == (2, length)
        if adds_bos:
            assert (w[:, 0] == lm.tokenizer.bos_token_id).all()
            assert w[0, 1:].tolist() == stream[32 - length + 1:32]  # the same last tokens at every length
        else:
            assert w[0].tolist() == stream[32 - length:32]


def _docs():
    from ctxlens.data.sources import open_source

    return open_source("builtin:test").documents()


def test_explicit_bos_wins_and_random_ids_get_none_by_default():
    on, off = _lm(True), _lm(False)
    assert bos_id(on, False) is None and bos_id(off, True) == off.tokenizer.bos_token_id
    assert source_windows(on, "random", [8], 2, 0, {}, bos=None).bos is False
    assert source_windows(on, "random", [8], 2, 0, {}, bos=True).bos is True


def test_loss_vs_length_default_scores_bos_then_window_like_a_plain_forward():
    from ctxlens.experiments.loss_vs_length import Config, run

    lm = _lm(True)
    config = Config(source="builtin:test", lengths=[4, 8], n_samples=2, n_scored=3)
    rows = run(lm, config, {"stage": "measure", "source": "builtin:test", "length": 4}, {})
    assert all(r["bos"] is True for r in rows)
    ids = lm.tokenizer.encode(next(iter(_docs())), add_special_tokens=False)[: 8 + 3]  # sample 0
    bos = lm.tokenizer.bos_token_id
    nll = []
    with torch.no_grad():
        for k in range(3):  # target ids[8 + k] read after [BOS] + the 4 tokens before it
            window = torch.tensor([[bos, *ids[8 + k - 4 : 8 + k]]])
            logits = lm.model(window).logits[0, -1].double()
            nll.append(float(torch.logsumexp(logits, 0) - logits[ids[8 + k]]))
    assert math.isclose(rows[0]["ce"], sum(nll) / 3, rel_tol=1e-4)


def test_weights_line_shows_format_quantisation_file_and_digest():
    sha = "ab" * 32
    info = {"weights": {"format": "GGUF", "quantization": "Q4_K_M", "file": "m.gguf", "digest": f"sha256:{sha}"},
            "fingerprint": "f" * 32}
    line = weights_line("m", info)
    assert line.text == f"format GGUF; quantisation Q4_K_M; file m.gguf; digest sha256:{sha[:16]}"
    assert line.uncertainty == f"ctxlens fingerprint {'f' * 32}" and line.verdict == "recorded at load"


def test_weights_line_of_an_old_run_says_not_recorded():
    line = weights_line("m", {"train_length": 512, "fingerprint": "0123"})
    assert line.text.count("not recorded") == 4 and "0123" in line.uncertainty
    assert "re-run" in line.verdict
    assert weights_line("m", None).uncertainty == "ctxlens fingerprint not recorded"


def test_weights_record_of_a_saved_directory(tmp_path):
    from transformers import AutoConfig

    from ctxlens.lm.fingerprint import directory_fingerprint
    from ctxlens.lm.info import info_from_config

    _lm(False).model.save_pretrained(tmp_path)  # float32 safetensors
    record = info_from_config(AutoConfig.from_pretrained(tmp_path)).weights
    assert record == {"format": "safetensors", "quantization": "F32", "file": "model.safetensors",
                      "digest": f"fingerprint:{directory_fingerprint(tmp_path)}"}  # what the runner records
    assert info_from_config(AutoConfig.from_pretrained(tmp_path), origin="zoo").weights["format"] == "zoo"


@pytest.mark.parametrize("kind", [2, 15])  # MOSTLY_Q4_0, MOSTLY_Q4_K_M
def test_gguf_file_type_reads_the_key_a_writer_wrote(tmp_path, kind):
    gg = pytest.importorskip("gguf")
    from ctxlens.lm.gguf import file_type

    path = tmp_path / "m.gguf"
    writer = gg.GGUFWriter(str(path), "llama")
    writer.add_array("tokenizer.ggml.tokens", ["a", "b", "c"])  # a string array before the key
    writer.add_file_type(kind)
    writer.add_tensor("w", torch.zeros(4, 4).numpy())
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert file_type(path) == {2: "Q4_0", 15: "Q4_K_M"}[kind]
