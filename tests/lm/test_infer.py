"""Inferred adapters: read from the module tree, checked on the model, equal to the hand-written records.

The hand-written families were each tested against transformers; an adapter inferred for the
same tiny model must give the same captures. Types with no hand-written family load through
the same path and are checked against transformers' own forward. Sabotaged models show that
each load-time check can refuse.
"""

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModelForCausalLM

import ctxlens
from ctxlens import CtxlensError
from ctxlens.lm import attention, from_model, infer
from ctxlens.lm.families import FAMILIES
from ctxlens.lm.infer.attention import check_head_mask
from ctxlens.lm.infer.probe import probe_ids
from ctxlens.lm.model import LM
from tests.conftest import build_model

AGREE = ["llama", "gemma2", "gpt2", "gpt_neox", "cohere", "qwen3", "olmo2", "mamba2", "xlstm",
         "recurrent_gemma", "jamba", "bamba", "falcon_h1"]


def _inferred(model) -> LM:
    attention.install(model)
    return LM(model, None, infer.infer_family(model), name=model.config.model_type)


@pytest.mark.parametrize("name", AGREE)
def test_inferred_adapter_captures_what_the_hand_written_one_does(name, ids):
    model = build_model(name)
    hand, auto = from_model(model), _inferred(model)
    assert set(hand.family.supports) == set(auto.family.supports), dict(auto.family.unsupported)
    assert hand.family.rope_layout == auto.family.rope_layout
    torch.testing.assert_close(auto.token_losses(ids), hand.token_losses(ids))
    layers = list(range(hand.n_layers))
    positions = [0, 7, -1]
    a = auto.capture(ids, residual=layers, positions=positions)
    b = hand.capture(ids, residual=layers, positions=positions)
    for layer in layers:
        torch.testing.assert_close(a.residual[layer], b.residual[layer])
    if "qk" in hand.family.supports:
        assert auto.attention_layers() == hand.attention_layers()
        layer = hand.attention_layers()[-1]
        qa, qb = auto.capture(ids, qk=[layer]), hand.capture(ids, qk=[layer])
        torch.testing.assert_close(qa.queries[layer], qb.queries[layer])
        torch.testing.assert_close(qa.keys[layer], qb.keys[layer])


def _tiny(model_type: str, **extra):
    kw = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=2048, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **{**kw, **extra})).eval()


# types with no hand-written family: (model_type, config extras, expected rope layout from transformers' code)
UNKNOWN = [("phi3", {}, "half"), ("granite", {"logits_scaling": 4.0}, "half"), ("glm4", {}, "interleaved"),
           ("llama4_text", {"intermediate_size_mlp": 128, "num_local_experts": 2, "head_dim": 16}, "interleaved"),
           ("stablelm", {}, "half"), ("phi", {}, "half")]


@pytest.mark.parametrize("model_type,extra,layout", UNKNOWN)
def test_a_type_with_no_family_loads_from_a_directory_and_matches_transformers(tmp_path, ids, model_type, extra,
                                                                              layout):
    assert model_type not in FAMILIES
    model = _tiny(model_type, **extra)
    model.save_pretrained(tmp_path)
    lm = ctxlens.load(str(tmp_path))
    assert lm.family.inferred and lm.family.rope_layout == layout
    assert {"token_loss", "residual", "qk", "rope", "head_mask"} <= set(lm.family.supports)
    with torch.no_grad():
        logits = model(ids, use_cache=False).logits.float()  # [batch, seq, vocab]
    want = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    torch.testing.assert_close(lm.token_losses(ids), want, atol=1e-5, rtol=1e-5)


def test_the_residual_read_is_layer_input_plus_attention_output(ids):
    """Independent route: phi3's decoder layer computes x + o_proj(attention) before its MLP norm."""
    lm = from_model(_tiny("phi3"))
    block, got = lm.layers[1], {}
    h1 = block.register_forward_pre_hook(lambda m, a, k: got.__setitem__("in", (a[0] if a else k["hidden_states"])),
                                         with_kwargs=True)
    h2 = block.self_attn.register_forward_hook(lambda m, a, o: got.__setitem__("attn", o[0]))
    with torch.no_grad():
        lm.model(ids, use_cache=False)
    h1.remove(), h2.remove()
    cap = lm.capture(ids, residual=[1])
    torch.testing.assert_close(cap.residual[1], got["in"] + got["attn"])


def test_partial_softmax_attention_is_captured_only_where_it_runs():
    """minimax: lightning (linear) attention layers are *Attention classes but not softmax attention."""
    lm = from_model(_tiny("minimax", layer_types=["linear_attention", "full_attention"]))
    assert lm.attention_layers() == [1] and "qk" in lm.family.supports
    with pytest.raises(CtxlensError, match="has no attention"):
        lm.attention(0)


def test_logit_post_processing_is_found_in_the_config(ids):
    lm = from_model(_tiny("granite", logits_scaling=4.0))
    with torch.no_grad():
        hidden = lm.decoder(ids).last_hidden_state
        torch.testing.assert_close(lm.model(ids, use_cache=False).logits, lm.model.lm_head(hidden) / 4.0)
    assert lm.family.logits_post is not None


def test_unexplained_logits_refuse_token_losses(ids):
    model = _tiny("phi3")

    def bend(module, args, out):  # the model's logits get a transform its config does not name
        out.logits = out.logits * 2 + 1
        return out

    model.register_forward_hook(bend)
    with pytest.raises(CtxlensError, match="do not reproduce the model's logits"):
        from_model(model)


def test_a_rotary_module_that_lies_about_its_frequencies_refuses_rope():
    model = _tiny("phi3")
    rotary = model.model.rotary_emb
    forward = rotary.forward
    rotary.forward = lambda x, position_ids, **kw: forward(x, position_ids * 2, **kw)  # rotates twice as fast
    lm = from_model(model)
    assert "rope" not in lm.family.supports and "qk" in lm.family.supports
    with pytest.raises(CtxlensError, match="not the unrotated queries turned by position"):
        lm.family.require("rope", lm.name)


def test_a_block_that_adds_a_term_outside_its_sublayers_refuses_the_residual(ids):
    model = _tiny("phi3")
    for block in model.model.layers:  # block output = input + attention + MLP + a term no sublayer makes
        block.register_forward_hook(lambda m, a, out: out + 0.5)
    lm = from_model(model)
    assert "residual" not in lm.family.supports
    with pytest.raises(CtxlensError, match="residual after the mixer"):
        lm.family.require("residual")


def test_head_masking_is_refused_when_heads_do_not_tile_the_projection(monkeypatch):
    model = _tiny("phi3")
    attention.install(model)
    family = infer.infer_family(model)
    lm = LM(model, None, dataclasses.replace(family, unsupported=()), name="phi3")
    monkeypatch.setattr(type(lm), "n_heads", property(lambda self: 3), raising=False)
    assert "whole number" in check_head_mask(lm, 0, probe_ids(model))


@pytest.mark.parametrize("model_type", ["minicpm3", "modernbert-decoder"])
def test_a_transform_between_decoder_and_head_is_found(model_type, ids):
    """minicpm3 divides hidden states by a config property; modernbert-decoder runs a prediction head."""
    from ctxlens.lm.tiny.every_type import build_tiny

    model = build_tiny(model_type)
    lm = from_model(model)
    with torch.no_grad():
        logits = model(ids, use_cache=False).logits.float()  # [batch, seq, vocab]
    want = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    torch.testing.assert_close(lm.token_losses(ids), want, atol=1e-5, rtol=1e-5)


# Each type exercises one path of the inference; the coverage checks (transformers' own forward,
# eager attention, zeroed weights, a model from an edited config) are the independent truth.
PATHS = {
    "olmo_hybrid": "residual",   # per-layer read points: linear-attention and attention blocks differ
    "nemotron_h": "residual",    # MLP-only blocks: the residual is the block input ("in")
    "opt": "qk",                 # q scaled before the attention call: the passed scale is used
    "granitemoeshared": "residual",  # a shared MLP beside the experts is zeroed too
    "flint": "rope",             # RoPE checked on the first layer it reaches (layer 0 has none)
    "llama4_text": "qk",         # base_model is the whole model: the decoder is found by its blocks
    "granite_swa": "qk",         # attention sinks scale whole rows
}


@pytest.mark.parametrize("model_type,analysis", sorted(PATHS.items()))
def test_inferred_path_passes_its_independent_check(model_type, analysis):
    from ctxlens.lm import coverage

    row = coverage.check_type(model_type, checks=("token_loss", analysis))
    assert {a: c.status for a, c in row.checks.items()} == {"token_loss": "pass", analysis: "pass"}, row.checks


REFUSED = {  # what the load-time checks cannot confirm is refused with the reason
    ("dory", "qk"): "more than once per module in one forward",
    ("inkling_text", "qk"): "adds position_bias to the q.k scores",
    ("deepseek_v3", "rope"): "last 8 of each 16-dim head",
    ("nanochat", "rope"): "minus position x inv_freq",
    ("hrm_text", "residual"): "cannot find the list of 16 blocks",
}


@pytest.mark.parametrize("model_type,analysis", sorted(REFUSED))
def test_what_the_checks_cannot_confirm_is_refused_with_its_reason(model_type, analysis):
    from ctxlens.lm.tiny.every_type import build_tiny

    lm = from_model(build_tiny(model_type))
    assert analysis not in lm.family.supports and "token_loss" in lm.family.supports
    with pytest.raises(CtxlensError, match=REFUSED[model_type, analysis].replace(".", r"\.")):
        lm.family.require(analysis, lm.name)


@pytest.mark.parametrize("model_type", ["phi3", "glm4", "granite"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_inference_holds_in_half_precision(model_type, dtype, ids):
    """A GPU user loads in bf16: the probe's tolerances follow the dtype, the verdicts do not change."""
    extra = {"logits_scaling": 4.0} if model_type == "granite" else {}
    full = from_model(_tiny(model_type, **extra))
    half = from_model(_tiny(model_type, **extra).to(dtype))
    assert half.family.supports == full.family.supports and half.family.rope_layout == full.family.rope_layout
    assert half.family.resid == full.family.resid and not half.family.unsupported
