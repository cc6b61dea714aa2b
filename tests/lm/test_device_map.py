"""Device maps (issue 9, part 2): a model split over placements behaves like the same weights on one device.

A tiny llama is saved to disk and loaded twice through ``ctxlens.load``: once on the CPU, once
with accelerate's device map putting the embeddings and half of the blocks on the CPU and the
other blocks, the final norm, the rotary embedding and the LM head on disk (``offload_folder``:
their weights stay on the "meta" device and are streamed in for each forward). The single-device
model is the truth: losses, every kind of capture, head masking and RoPE overrides must match it.
The guards of the GPU-only paths (flash attention, bfloat16 GPUs, device-map mistakes) are
checked here too, since they must fail clearly on a CPU-only machine.
"""

import importlib.util
import json

import pytest
import torch

import ctxlens
from ctxlens import CtxlensError
from ctxlens.lm import placement
from tests.conftest import build_model

LAYERS = 4


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("device-map") / "llama"
    build_model("llama", num_hidden_layers=LAYERS, vocab_size=257).save_pretrained(path)
    return path


def split_map() -> dict:
    """Embeddings and blocks 0-1 on the CPU; blocks 2-3, final norm, rotary embedding, LM head on disk."""
    dm = {"model.embed_tokens": "cpu", "model.norm": "disk", "model.rotary_emb": "disk", "lm_head": "disk"}
    dm.update({f"model.layers.{i}": "cpu" if i < LAYERS // 2 else "disk" for i in range(LAYERS)})
    return dm


@pytest.fixture(scope="module")
def pair(saved, tmp_path_factory):
    single = ctxlens.load(str(saved), device="cpu")
    split = ctxlens.load(str(saved), device_map=split_map(), offload_folder=str(tmp_path_factory.mktemp("offload")))
    return single, split


@pytest.fixture
def tokens():
    return torch.randint(0, 257, (2, 48), generator=torch.Generator().manual_seed(3))


def test_the_split_model_really_offloads_to_disk(pair):
    _, split = pair
    assert placement.placements(split.model) == {"cpu", "disk"} and placement.is_split(split.model)
    offloaded = [n for n, p in split.model.named_parameters() if p.device.type == "meta"]
    assert any(n.startswith(f"model.layers.{LAYERS - 1}.") for n in offloaded) and "lm_head.weight" in offloaded
    assert split.device == torch.device("cpu")


def test_token_losses_match_one_device(pair, tokens):
    single, split = pair
    torch.testing.assert_close(split.token_losses(tokens), single.token_losses(tokens))


def test_captures_match_one_device_and_land_on_the_cpu(pair, tokens):
    single, split = pair
    request = dict(residual="all", block=[1, LAYERS - 1], positions=[0, 17, -1], qk=[0, LAYERS - 1],
                   query_positions=[-2, -1])
    want, got = single.capture(tokens, **request), split.capture(tokens, **request)
    assert placement.capture_device(split.model) == "cpu" and placement.capture_device(single.model) is None
    for name in ("residual", "block", "queries", "kv_keys"):
        w, g = getattr(want, name), getattr(got, name)
        assert sorted(g) == sorted(w) and g, name
        for layer in w:
            assert g[layer].device.type == "cpu"
            torch.testing.assert_close(g[layer], w[layer], msg=f"{name}[{layer}]")


def test_head_masking_matches_one_device(pair, tokens):
    single, split = pair
    heads = {1: [0, 2], LAYERS - 1: [1]}  # a block on the CPU and one offloaded to disk
    with single.mask_heads(heads):
        want = single.token_losses(tokens)
    with split.mask_heads(heads):
        got = split.token_losses(tokens)
    torch.testing.assert_close(got, want)
    assert not torch.allclose(got, split.token_losses(tokens))  # the mask changed the offloaded model


def test_set_rope_matches_one_device(pair, tokens):
    single, split = pair
    own = single.config.rope_parameters["rope_theta"]
    before = split.token_losses(tokens)
    try:
        single.set_rope(theta=own * 50)
        split.set_rope(theta=own * 50)
        after = split.token_losses(tokens)
        torch.testing.assert_close(after, single.token_losses(tokens))
        assert not torch.allclose(after, before)
    finally:
        single.set_rope(theta=own)
        split.set_rope(theta=own)
    torch.testing.assert_close(split.token_losses(tokens), before)


def test_a_json_device_map_from_the_command_line_loads(pair, saved, tokens, tmp_path):
    lm = ctxlens.load(str(saved), device_map=json.dumps(split_map()), offload_folder=str(tmp_path))
    assert lm.model.hf_device_map == split_map()
    torch.testing.assert_close(lm.token_losses(tokens), pair[0].token_losses(tokens))


def test_device_map_mistakes_are_clear_errors(saved, tmp_path):
    with pytest.raises(CtxlensError, match="offload folder"):
        ctxlens.load(str(saved), device_map=split_map())
    with pytest.raises(CtxlensError, match="not valid JSON"):
        ctxlens.load(str(saved), device_map="{model.layers.0: cpu")
    offloaded_embeddings = {**split_map(), "model.embed_tokens": "disk"}
    with pytest.raises(CtxlensError, match="input embeddings"):
        ctxlens.load(str(saved), device_map=offloaded_embeddings, offload_folder=str(tmp_path))


def test_device_maps_without_accelerate_are_a_clear_error(saved, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "accelerate" else real(name, *a))
    with pytest.raises(CtxlensError, match="accelerate"):
        ctxlens.load(str(saved), device_map="auto")


# -- guards of the GPU-only paths (they must fail clearly on a CPU-only machine) ----------------------

def test_flash_attention_on_a_cpu_is_a_clear_error(saved):
    with pytest.raises(CtxlensError, match="needs a CUDA GPU"):
        ctxlens.load(str(saved), device="cpu", attn_implementation="flash_attention_2")


def test_flash_attention_without_its_package_is_a_clear_error(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("flash_attn", "kernels") else real(name, *a))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(CtxlensError, match="flash-attn package"):
        placement.check_attention("flash_attention_2", "cuda")
    placement.check_attention("sdpa", "cuda")  # no extra needed


def test_bfloat16_on_a_gpu_without_it_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    with pytest.raises(CtxlensError, match="float16"):
        placement.check_dtype(torch.bfloat16, "cuda")
    placement.check_dtype(torch.bfloat16, "cpu")  # bfloat16 runs on any CPU
    placement.check_dtype(torch.float16, "cuda")
