"""Chunked token losses against the naive full-logit computation; RoPE overrides against
models built fresh from the edited config."""

import copy

import pytest
import torch
from transformers import AutoModelForCausalLM

from ctxlens import CtxlensError
from ctxlens.lm import from_model
from ctxlens.lm.families import FAMILIES
from tests.conftest import build_lm, build_model


def _naive_nll(model, ids) -> torch.Tensor:
    with torch.no_grad():
        logits = model(ids, use_cache=False).logits.float()  # [batch, seq, vocab]
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")  # [batch, seq-1]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_chunked_losses_equal_naive(family, ids):
    lm = build_lm(family)
    naive = _naive_nll(lm.model, ids)
    for chunk in (None, 7):
        ours = lm.token_losses(ids, chunk=chunk)
        assert ours.shape == (2, 39) and ours.dtype == torch.float32
        torch.testing.assert_close(ours, naive, rtol=1e-5, atol=1e-5)


ROPE_FAMILIES = sorted(f for f, fam in FAMILIES.items() if "rope" in fam.supports)
SCALINGS = [
    {"theta": 2500.0},
    {"scaling": {"rope_type": "linear", "factor": 4.0}},
    {"scaling": {"rope_type": "dynamic", "factor": 2.0}},
    {"scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}},
    {"scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 16}},
]


def _build_24(family):
    model = build_model(family, max_position_embeddings=24)
    model.config.get_text_config().max_position_embeddings = 24  # gemma3 keeps the override on its outer config
    return model


@pytest.mark.parametrize("family", ROPE_FAMILIES)
@pytest.mark.parametrize("change", SCALINGS, ids=lambda c: str(c.get("theta") or c["scaling"]["rope_type"]))
def test_set_rope_equals_model_built_from_edited_config(family, change, ids):
    # max positions 24 < 40 tokens, so dynamic NTK actually rescales
    model = _build_24(family)
    lm = from_model(model)
    with torch.no_grad():
        before = model(ids, use_cache=False).logits
    if family == "recurrent_gemma" and "scaling" in change:  # its rotary module takes no scaling
        with pytest.raises(CtxlensError, match="Cannot apply RoPE parameters"):
            lm.set_rope(**change)
        with torch.no_grad():  # nothing changed
            torch.testing.assert_close(model(ids, use_cache=False).logits, before, rtol=0, atol=0)
        return
    params = lm.set_rope(**change)
    fresh_config = copy.deepcopy(_build_24(family).config)
    text = fresh_config.get_text_config()  # gemma3: the text model's config
    per_type = all(isinstance(v, dict) for v in params.values())  # {layer type: parameters} (gemma3: global only)
    text.rope_parameters = {**text.rope_parameters, **params} if per_type else params
    torch.manual_seed(1)
    fresh = AutoModelForCausalLM.from_config(fresh_config).eval()
    fresh.load_state_dict(model.state_dict())
    with torch.no_grad():
        ours, truth = model(ids, use_cache=False).logits, fresh(ids, use_cache=False).logits
    torch.testing.assert_close(ours, truth, rtol=1e-5, atol=1e-5)
    assert (ours - before).abs().max() > 1e-6  # the change did something
    assert lm.extrapolate


def test_set_rope_errors():
    with pytest.raises(CtxlensError, match="does not support the 'rope'"):
        build_lm("mamba").set_rope(theta=1e6)
    lm = build_lm("llama")
    with pytest.raises(CtxlensError, match="Unknown RoPE scaling type 'yarm'. Did you mean 'yarn'"):
        lm.set_rope(scaling={"rope_type": "yarm", "factor": 2})
    with pytest.raises(CtxlensError, match="positive"):
        lm.set_rope(theta=-1)
    with pytest.raises(CtxlensError, match="Cannot apply RoPE parameters"):
        lm.set_rope(scaling={"rope_type": "linear"})  # no factor


def test_length_limits():
    llama = build_lm("llama", max_position_embeddings=32)
    with pytest.raises(CtxlensError, match="at most 32 positions.*--allow-extrapolation"):
        llama.token_losses(torch.zeros(1, 40, dtype=torch.long))
    llama.allow_extrapolation()
    assert llama.token_losses(torch.zeros(1, 40, dtype=torch.long)).shape == (1, 39)
    gpt2 = build_lm("gpt2", n_positions=32)
    gpt2.allow_extrapolation()  # learned positions cannot extrapolate
    with pytest.raises(CtxlensError, match="learned positions for at most 32"):
        gpt2.token_losses(torch.zeros(1, 40, dtype=torch.long))
    assert build_lm("mamba").token_losses(torch.zeros(1, 4000, dtype=torch.long)).shape == (1, 3999)
