"""SmolLM2-135M-Instruct and Gemma-3-270M, dequantised from their GGUF files: real language models
whose token losses, head masking and RoPE override equal transformers' own computations.

Prose: the "History of the software" section of CPython's LICENSE.txt (about 290 tokens of
narrative English, shipped with every CPython), so perplexity needs nothing from a hub.
"""

import copy
import math
import sysconfig
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from tests.real.conftest import load_ref

pytestmark = pytest.mark.real
MODELS = ["smollm2", "gemma3"]


@pytest.fixture(scope="module")
def prose() -> str:
    text = (Path(sysconfig.get_path("stdlib")) / "LICENSE.txt").read_text()
    history = text[text.index("Python was created"):text.index("    Release")]
    return " ".join(history.split())


def _ids(lm, text: str, n: int | None = None) -> torch.Tensor:
    return lm.tokenizer(text, return_tensors="pt").input_ids[:, :n]  # [1, seq]


def _ce(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """transformers' logits -> per-token cross-entropy [batch, seq-1]."""
    return torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2).float(), ids[:, 1:], reduction="none")


@pytest.mark.parametrize("name", MODELS)
def test_token_losses_equal_cross_entropy_and_perplexity_is_a_real_lm(name, prose, request):
    lm = request.getfixturevalue(name)
    ids = _ids(lm, prose)  # ~290 tokens
    ours = lm.token_losses(ids)  # [1, seq-1] from final hidden states, in chunks
    with torch.no_grad():
        truth = _ce(lm.model(ids, use_cache=False).logits, ids)
    # float32 over 30 layers and a 49k / 262k vocabulary: summation order alone moves a loss by ~2e-4 nats
    torch.testing.assert_close(ours, truth, rtol=1e-4, atol=1e-3)
    perplexity = math.exp(ours.mean().item())  # measured: SmolLM2 15.7, Gemma 3 13.4; uniform: ~50k / 262k
    assert 3 < perplexity < 25, perplexity


@pytest.mark.parametrize("name, layer, heads", [("smollm2", 10, [0, 4]), ("gemma3", 5, [1, 3])])
def test_head_masking_equals_zeroed_output_projection_columns(name, layer, heads, prose, request):
    lm = request.getfixturevalue(name)
    ids = _ids(lm, prose, 64)
    proj = lm.out_proj(layer)
    hd = proj.weight.shape[1] // lm.n_heads
    with torch.no_grad():
        base = lm.model(ids, use_cache=False).logits  # [1, seq, vocab]
        with lm.mask_heads({layer: heads}):
            masked = lm.model(ids, use_cache=False).logits
        saved = proj.weight.clone()
        try:
            for h in heads:
                proj.weight[:, h * hd:(h + 1) * hd] = 0  # the surgery: [d_model, heads * head_dim]
            truth = lm.model(ids, use_cache=False).logits
        finally:
            proj.weight.copy_(saved)
    torch.testing.assert_close(masked, truth, rtol=1e-4, atol=1e-4)
    assert (masked - base).abs().max() > 1e-2


def _logits_equal_a_model_built_from(config, lm, ids):
    """The edited LM's logits [1, n, vocab], checked equal to a fresh model built from ``config``
    with the same weights (the independent route for set_rope)."""
    fresh = AutoModelForCausalLM.from_config(config).eval()
    fresh.load_state_dict(lm.model.state_dict())
    with torch.no_grad():
        ours, truth = lm.model(ids, use_cache=False).logits, fresh(ids, use_cache=False).logits
    torch.testing.assert_close(ours, truth, rtol=1e-4, atol=1e-4)
    return ours


def test_set_rope_equals_a_model_built_from_the_edited_config(ref_home, prose):
    lm = load_ref(ref_home, "smollm2-135m")  # its own copy: set_rope edits in place
    ids = _ids(lm, prose, 128)
    with torch.no_grad():
        before = lm.model(ids, use_cache=False).logits
    params = lm.set_rope(theta=1e4)  # SmolLM2's own base is 1e5
    assert params["rope_theta"] == 1e4
    config = copy.deepcopy(lm.config)
    config.rope_parameters = params
    ours = _logits_equal_a_model_built_from(config, lm, ids)
    assert (ours - before).abs().max() > 1e-1


def test_gemma3_set_rope_changes_the_global_layers_as_a_hand_edited_config_does(ref_home, prose):
    """Gemma 3's own long-context recipe raises the base of its global layers only."""
    lm = load_ref(ref_home, "gemma3-270m")  # its own copy: set_rope edits in place
    edited = copy.deepcopy(lm.config)  # the hand edit, made before ctxlens touches anything
    assert edited.rope_parameters["sliding_attention"]["rope_theta"] == 1e4
    edited.rope_parameters["full_attention"]["rope_theta"] = 4e6  # Gemma 3's own global base is 1e6
    ids = _ids(lm, prose, 128)
    with torch.no_grad():
        before = lm.model(ids, use_cache=False).logits
    assert set(lm.set_rope(theta=4e6)) == {"full_attention"}
    ours = _logits_equal_a_model_built_from(edited, lm, ids)
    assert (ours - before).abs().max() > 1e-2


@pytest.mark.parametrize("name", MODELS)
def test_the_adapter_inferred_on_real_weights_agrees_with_the_hand_written_one(name, request):
    """Inference is what every type without a hand-written family gets: on the real reference
    weights it must confirm every analysis and read the same points as the hand-written record."""
    from ctxlens.lm.infer import infer_family

    lm = request.getfixturevalue(name)
    inferred = infer_family(lm.model)
    assert not inferred.unsupported, inferred.unsupported
    assert set(inferred.supports) == set(lm.family.supports)
    assert inferred.rope_layout == lm.family.rope_layout and inferred.layers == lm.family.layers
    assert inferred.resid_mode(lm.config) == lm.family.resid_mode(lm.config)
    from ctxlens.lm.model import LM  # the same weights under the inferred adapter

    ids = torch.arange(100, 164)[None]  # [1, 64]
    torch.testing.assert_close(LM(lm.model, lm.tokenizer, inferred, name).token_losses(ids), lm.token_losses(ids))
