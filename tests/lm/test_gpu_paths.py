"""GPU paths (issue 9, part 3): bfloat16 / float16, sdpa and flash attention, device maps over GPUs.

The tests marked ``gpu`` need CUDA and are skipped (not failed) on CPU-only machines and CI; the
flash-attention one also needs the flash-attn package. Their truth is the same weights in
float32 on the CPU (tolerances of half precision), or the same model on one device. One CPU test
checks the mechanism flash attention relies on: a flash-named implementation is wrapped in place,
under its own name, and still records q/k for captures.
"""

import importlib.util

import pytest
import torch
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

import ctxlens
from ctxlens.lm import attention, from_model, placement
from tests.conftest import build_model

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
flash = pytest.mark.skipif(importlib.util.find_spec("flash_attn") is None, reason="needs the flash-attn package")
two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu") / "llama"
    build_model("llama", num_hidden_layers=4, vocab_size=257, head_dim=64, hidden_size=256,
                num_attention_heads=4, num_key_value_heads=2, intermediate_size=512).save_pretrained(path)
    return path


@pytest.fixture
def tokens():
    return torch.randint(0, 257, (2, 300), generator=torch.Generator().manual_seed(4))


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().cpu(), b.double().cpu()
    return float((a - b).norm() / b.norm())


REQUEST = dict(residual="all", positions=[0, 150, -1], qk=[0, 3], query_positions=[-1])


def assert_captures_close(got, want, tol: float) -> None:
    for name in ("residual", "queries", "kv_keys"):
        w, g = getattr(want, name), getattr(got, name)
        assert sorted(g) == sorted(w)
        for layer in w:
            assert relative_error(g[layer], w[layer]) < tol, (name, layer)


# -- CPU: the mechanism of the flash path ---------------------------------------------------------

def test_a_flash_named_implementation_records_under_its_own_name(tokens):
    """transformers finds flash kernels by the implementation's name, so ctxlens wraps a flash
    implementation in place instead of renaming it; captures must still see q/k."""
    name = "test_flash_wrapped"
    ALL_ATTENTION_FUNCTIONS.register(name, ALL_ATTENTION_FUNCTIONS["sdpa"])
    ALL_MASK_ATTENTION_FUNCTIONS.register(name, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    try:
        reference = from_model(build_model("llama"))
        model = build_model("llama")
        model.config._attn_implementation = name
        lm = from_model(model)
        assert lm.model.config._attn_implementation == name  # kept, not renamed to ctxlens-...
        assert attention.install(lm.model) == name and attention.wrap_in_place(name) == name  # idempotent
        assert ALL_ATTENTION_FUNCTIONS[name]._ctxlens_wraps is ALL_ATTENTION_FUNCTIONS["sdpa"]
        ids = tokens[:, :40]
        request = dict(residual="all", qk=[0, 1], positions=[-1], query_positions=[-3, -1])
        got, want = lm.capture(ids, **request), reference.capture(ids, **request)
        assert_captures_close(got, want, 1e-6)
    finally:
        del ALL_ATTENTION_FUNCTIONS._global_mapping[name]
        del ALL_MASK_ATTENTION_FUNCTIONS._global_mapping[name]


# -- GPU only -----------------------------------------------------------------------------------------

@cuda
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_on_the_gpu_matches_float32_on_the_cpu(saved, tokens, dtype):
    if dtype == "bfloat16" and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bfloat16")
    cpu = ctxlens.load(str(saved), device="cpu")
    gpu = ctxlens.load(str(saved), device="cuda", dtype=dtype)
    assert gpu.device.type == "cuda" and next(gpu.model.parameters()).dtype == getattr(torch, dtype)
    assert_captures_close(gpu.capture(tokens, **REQUEST), cpu.capture(tokens, **REQUEST), 0.05)
    torch.testing.assert_close(gpu.token_losses(tokens).cpu(), cpu.token_losses(tokens), atol=0.05, rtol=0.02)


@cuda
def test_sdpa_and_eager_agree_on_the_gpu(saved, tokens):
    sdpa = ctxlens.load(str(saved), device="cuda", attn_implementation="sdpa")
    eager = ctxlens.load(str(saved), device="cuda", attn_implementation="eager")
    assert_captures_close(sdpa.capture(tokens, **REQUEST), eager.capture(tokens, **REQUEST), 1e-4)


@cuda
@flash
def test_flash_attention_matches_sdpa(saved, tokens):
    sdpa = ctxlens.load(str(saved), device="cuda", dtype="bfloat16", attn_implementation="sdpa")
    fa = ctxlens.load(str(saved), device="cuda", dtype="bfloat16", attn_implementation="flash_attention_2")
    assert "flash" in fa.model.config._attn_implementation
    assert_captures_close(fa.capture(tokens, **REQUEST), sdpa.capture(tokens, **REQUEST), 0.02)
    torch.testing.assert_close(fa.token_losses(tokens), sdpa.token_losses(tokens), atol=0.05, rtol=0.02)


def _gpu_cpu_map(first: str) -> dict:
    dm = {"model.embed_tokens": first, "model.rotary_emb": first, "model.layers.0": first, "model.layers.1": first,
          "model.layers.2": "cpu", "model.layers.3": "cpu", "model.norm": "cpu", "lm_head": "cpu"}
    return dm


def _check_split_like_single(split, single, tokens):
    got, want = split.capture(tokens, **REQUEST), single.capture(tokens, **REQUEST)
    for _layer, x in got.residual.items():
        assert x.device.type == "cpu"  # moved off the GPU as soon as taken
    assert_captures_close(got, want, 1e-4)
    torch.testing.assert_close(split.token_losses(tokens).cpu(), single.token_losses(tokens).cpu(),
                               atol=1e-4, rtol=1e-4)
    with split.mask_heads({0: [1], 3: [0]}), single.mask_heads({0: [1], 3: [0]}):
        torch.testing.assert_close(split.token_losses(tokens).cpu(), single.token_losses(tokens).cpu(),
                                   atol=1e-4, rtol=1e-4)
    theta = single.config.rope_parameters["rope_theta"]
    split.set_rope(theta=theta * 20), single.set_rope(theta=theta * 20)
    torch.testing.assert_close(split.token_losses(tokens).cpu(), single.token_losses(tokens).cpu(),
                               atol=1e-4, rtol=1e-4)


@cuda
def test_device_map_over_gpu_and_cpu_matches_one_gpu(saved, tokens):
    single = ctxlens.load(str(saved), device="cuda")
    split = ctxlens.load(str(saved), device_map=_gpu_cpu_map("cuda:0"))
    assert placement.is_split(split.model)  # "cpu" in a GPU map: weights in RAM, streamed to the GPU
    _check_split_like_single(split, single, tokens)


@two_gpus
def test_device_map_over_two_gpus_matches_one_gpu(saved, tokens):
    single = ctxlens.load(str(saved), device="cuda:0")
    dm = {k: ("cuda:1" if v == "cpu" else v) for k, v in _gpu_cpu_map("cuda:0").items()}
    split = ctxlens.load(str(saved), device_map=dm)
    _check_split_like_single(split, single, tokens)


@cuda
def test_device_map_auto_loads_on_the_gpu(saved, tokens):
    lm = ctxlens.load(str(saved), device_map="auto", dtype="bfloat16")
    assert lm.device.type == "cuda"
    assert torch.isfinite(lm.token_losses(tokens)).all()
