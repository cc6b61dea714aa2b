"""Loading through from_pretrained: local directories, zoo:NAME, missing tokenizers, errors."""

import json

import pytest
import torch

import ctxlens
from ctxlens import CtxlensError
from ctxlens.zoo.tokenizer import byte_tokenizer
from tests.conftest import build_model


@pytest.fixture
def saved(tmp_path):
    model = build_model("llama", vocab_size=257)
    model.save_pretrained(tmp_path / "m")
    byte_tokenizer().save_pretrained(tmp_path / "m")
    return tmp_path / "m", model


def test_local_directory_loads_like_the_original(saved, ids):
    path, model = saved
    lm = ctxlens.load(str(path))
    assert lm.family.name == "llama" and lm.tokenizer is not None and lm.name == str(path)
    assert lm.model.config._attn_implementation == "ctxlens-sdpa"
    with torch.no_grad():
        torch.testing.assert_close(lm.model(ids).logits, model(ids).logits)
    assert lm.tokenizer("ab", add_special_tokens=False)["input_ids"] == [97, 98]


def test_bfloat16_and_eager_options(saved, ids):
    lm = ctxlens.load(str(saved[0]), dtype="bfloat16", attn_implementation="eager")
    assert next(lm.model.parameters()).dtype == torch.bfloat16
    assert lm.model.config._attn_implementation == "ctxlens-eager"
    cap = lm.capture(ids, qk=[0], residual=[0], positions=[-1])
    assert cap.queries[0].dtype == torch.bfloat16 and cap.residual[0].shape == (2, 1, 64)
    assert torch.isfinite(lm.token_losses(ids)).all()


def test_device_map_loading(saved, ids):
    lm = ctxlens.load(str(saved[0]), device_map={"": "cpu"})
    assert lm.device.type == "cpu" and lm.token_losses(ids).shape == (2, 39)


def test_directory_without_tokenizer_loads_for_token_level_work(tmp_path, ids):
    build_model("llama").save_pretrained(tmp_path)
    lm = ctxlens.load(str(tmp_path))
    assert lm.tokenizer is None
    assert lm.token_losses(ids).shape == (2, 39)
    with pytest.raises(CtxlensError, match="has no tokenizer"):
        lm.require_tokenizer("the text source")


def test_zoo_model_is_an_ordinary_saved_directory(tmp_path):
    from ctxlens.zoo.registry import zoo_path

    lm = ctxlens.load("zoo:random-llama")
    assert (zoo_path("random-llama") / "config.json").is_file()
    assert lm.tokenizer.eos_token_id == 256 and lm.vocab_size == 257
    with pytest.raises(CtxlensError, match="Did you mean 'random-llama'"):
        ctxlens.load("zoo:random-lama")


def test_load_errors(tmp_path):
    with pytest.raises(CtxlensError, match="does not exist"):
        ctxlens.load(str(tmp_path / "missing"))
    with pytest.raises(CtxlensError, match="has no config.json"):
        ctxlens.load(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(CtxlensError, match="is a 'bert' model, an encoder with a masked-LM head"):
        ctxlens.load(str(tmp_path))
    with pytest.raises(CtxlensError, match="Could not load a model config for 'nobody/no-such-model'"):
        ctxlens.load("nobody/no-such-model")  # HF_HUB_OFFLINE=1 in tests
    with pytest.raises(CtxlensError, match="Unknown dtype 'float8'"):
        ctxlens.load("zoo:random-llama", dtype="float8")


def test_families_listing_covers_the_required_families():
    required = {"llama", "mistral", "qwen2", "qwen3", "gemma2", "olmo2", "gpt2", "gpt_neox", "cohere", "bloom",
                "mpt", "mamba", "mamba2", "falcon_mamba", "rwkv", "xlstm", "recurrent_gemma", "jamba", "bamba",
                "zamba2", "falcon_h1"}
    rows = {r["family"]: r for r in ctxlens.families()}
    assert required <= set(rows)
    assert rows["mamba"]["rope"] is False and rows["llama"]["rope"] is True
    assert rows["cohere"]["rope_layout"] == "interleaved"
