"""Every tiny config builds a randomly initialised causal LM that runs and is sane.

The family lists come from the adapter registry (``ctxlens.lm.families.FAMILIES``): every family
with a hand-written adapter has a tiny config; its hybrids are those whose adapter says so; GQA
is expected of every transformer family whose transformers config takes ``num_key_value_heads``.
"""

from __future__ import annotations

import pytest
import torch
from transformers import CONFIG_MAPPING, AutoModelForCausalLM

from ctxlens.lm.families import FAMILIES
from ctxlens.lm.tiny import TINY_FAMILIES, tiny_config

HYBRIDS = [name for name, family in FAMILIES.items() if family.kind == "hybrid"]
GQA = [name for name, family in FAMILIES.items() if family.kind == "transformer"
       and getattr(CONFIG_MAPPING[name]().get_text_config(), "num_key_value_heads", None) is not None]
VOCAB = 256


def _build(family: str, **overrides) -> torch.nn.Module:
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(tiny_config(family, **overrides)).eval()


def _logits(model: torch.nn.Module) -> torch.Tensor:
    ids = torch.randint(0, VOCAB, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(ids).logits


def _layer_kinds(layer: torch.nn.Module) -> set[str]:
    """Which kinds of context mixer a decoder layer contains."""
    kinds = set()
    for module in layer.modules():
        name = type(module).__name__
        if name.endswith("Attention"):
            kinds.add("attention")
        elif name.endswith(("Mixer", "RecurrentBlock")):  # mamba / mamba2 / RG-LRU
            kinds.add("recurrent")
    return kinds


def test_every_adapter_family_has_a_tiny_config():
    assert set(TINY_FAMILIES) == set(FAMILIES)
    assert len(TINY_FAMILIES) == len(set(TINY_FAMILIES))
    assert HYBRIDS and GQA  # the derived lists are not empty: the tests below run


def test_unknown_family():
    with pytest.raises(ValueError, match="unknown tiny family"):
        tiny_config("not_a_model")


@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_config(family):
    cfg = tiny_config(family)
    assert cfg.model_type == family
    cfg = cfg.get_text_config()  # gemma3: the text model's config
    assert cfg.vocab_size == VOCAB
    assert cfg.hidden_size == 64
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        value = getattr(cfg, key, None)
        assert value is None or 0 <= value < VOCAB, (key, value)
    if family in GQA:
        assert (cfg.num_attention_heads, cfg.num_key_value_heads) == (4, 2)
    limit = getattr(cfg, "max_position_embeddings", None)
    if family == "mpt":
        limit = cfg.max_seq_len
    assert limit in (None, 2048)


@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_forward(family):
    logits = _logits(_build(family))
    assert logits.shape == (2, 40, VOCAB)
    assert logits.dtype == torch.float32
    assert torch.isfinite(logits).all()
    assert logits.std() > 0
    torch.testing.assert_close(_logits(_build(family)), logits, rtol=0, atol=0)  # same seed, same model


@pytest.mark.parametrize("family", HYBRIDS)
def test_hybrids_mix_attention_and_recurrence(family):
    model = _build(family)
    layers = model.base_model.layers
    kinds = [_layer_kinds(layer) for layer in layers]
    assert any("attention" in k for k in kinds), kinds
    assert any("recurrent" in k for k in kinds), kinds
    if family != "falcon_h1":  # falcon_h1 runs both in every layer
        assert {"recurrent"} in kinds, kinds


def test_overrides_are_applied():
    cfg = tiny_config("llama", num_hidden_layers=3, max_position_embeddings=512)
    assert (cfg.num_hidden_layers, cfg.max_position_embeddings) == (3, 512)
    assert len(_build("llama", num_hidden_layers=3).model.layers) == 3
    # depth-dependent hybrid layouts follow an overridden depth
    assert tiny_config("zamba2", num_hidden_layers=6).hybrid_layer_ids == [1, 3, 5]
    assert tiny_config("bamba", num_hidden_layers=6).attn_layer_indices == [1, 3, 5]


def test_family_specific_settings():
    assert tiny_config("mistral").sliding_window == 16
    gemma2 = tiny_config("gemma2")
    assert gemma2.sliding_window == 16
    assert gemma2.attn_logit_softcapping is not None and gemma2.final_logit_softcapping is not None
    neox = tiny_config("gpt_neox")
    assert neox.rope_parameters["partial_rotary_factor"] == 0.25 and neox.use_parallel_residual
    assert tiny_config("mpt").attn_config.alibi
