"""Tiny random configs for every model type in transformers' causal-LM mapping, and which are in scope.

``ctxlens models --all`` (``ctxlens.lm.coverage``) checks every decoder-only text type that
transformers lists in ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``. For that it needs a model of each
type that builds in milliseconds: ``tiny_config_for(model_type)`` starts from the type's own
defaults (``AutoConfig.for_model``) and shrinks every size field the config has, with the same
shape as ``ctxlens.lm.tiny`` (hidden size 64, 4 heads of 16 dims, 2 key-value heads, a
256-entry vocabulary with every special token id below it, 2048 positions, dropout off).
Hybrids keep enough layers to contain each kind of layer their default layout has (the
prefix of ``layer_types`` / ``layers_block_type`` ... up to the first occurrence of its last
new kind, or one attention period). The hand-written configs of ``ctxlens.lm.tiny`` are used
where they exist, and ``_OVERRIDES`` fixes the few types the generic shrink gets wrong.

``scope(model_type)`` says whether a type is a decoder-only text model ("in") or why not:
encoder-decoder, vision / audio / multimodal, BERT-style (an encoder with a causal-LM head,
causal only with ``is_decoder=True``) or a speculative-decoding drafter (runs on a target
model's states). ``gemma3`` is the exception: its text model is in scope (issue 22, part 3).
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig
from transformers.models.auto.modeling_auto import (
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_MASKED_LM_MAPPING_NAMES,
)

from ctxlens.core.errors import CtxlensError
from ctxlens.lm.tiny import TINY_FAMILIES, tiny_config

IN_SCOPE = "in"
OUT_OF_SCOPE = ("encoder-decoder", "multimodal", "bert-style", "drafter")

# Types whose config does not say what they are (no sub-config, no is_encoder_decoder flag).
_KNOWN_OUT = {
    "trocr": ("encoder-decoder", "the text decoder of a vision encoder-decoder (cross-attends to image features)"),
    "fuyu": ("multimodal", "a vision-language model (image patches enter through its text config)"),
    "bert-generation": ("bert-style", "a BERT encoder used as a decoder (causal only with is_decoder=True)"),
    "xlnet": ("bert-style", "a permutation language model with two-stream bidirectional attention"),
}
_MULTIMODAL_SUBCONFIGS = ("vision_config", "audio_config", "vq_config", "audio_encoder_config", "depth_decoder_config")
_TEXT_MODEL_IN_SCOPE = ("gemma3",)  # multimodal wrappers whose text model ctxlens analyses

# -- the shape every tiny model shares (as ctxlens.lm.tiny) --------------------------------------
VOCAB = 256
_SIZES: dict[str, int] = {
    # width
    "hidden_size": 64, "hidden_size_global": 64, "d_model": 64, "n_embd": 64, "dim": 64, "embedding_size": 64,
    "emb_dim": 64,
    "intermediate_size": 128, "ffn_dim": 128, "ffn_hidden_size": 128, "feed_forward_size": 128, "d_inner": 128,
    "dim_ff": 128, "dff": 128, "n_inner": 128, "intermediate_size_mlp": 128, "dense_intermediate_size": 128,
    "shared_intermediate_size": 32, "shared_expert_intermediate_size": 32, "shared_experts_intermediate_size": 32,
    "moe_shared_expert_intermediate_size": 32, "moe_intermediate_size": 32, "expert_ffn_hidden_size": 32,
    # attention heads (4 x 16 with 2 kv heads)
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "num_heads": 4, "attention_heads": 4,
    "num_key_value_heads": 2, "num_kv_heads": 2, "num_query_groups": 2,
    "head_dim": 16, "kv_channels": 16, "attention_head_dim": 16, "attention_head_size": 16, "dim_head": 16,
    "d_head": 16,
    "swa_num_attention_heads": 4, "swa_num_key_value_heads": 2, "swa_head_dim": 16,
    # multi-head latent attention (deepseek-style)
    "q_lora_rank": 32, "kv_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
    "qk_head_dim": 16, "o_lora_rank": 32, "index_n_heads": 2, "index_head_dim": 16,
    # sparse-attention indexers keep every visible key (as the real 2048 at <= 2048 tokens): with a top-k below
    # the probe length transformers' DSA indexer makes earlier positions depend on later tokens
    "index_topk": 64,
    # linear attention / gated delta net
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16,
    "linear_num_heads": 4, "linear_head_dim": 16,
    # state-space layers
    "mamba_n_heads": 4, "mamba_d_head": 32, "mamba_num_heads": 4, "mamba_head_dim": 32, "mamba_headdim": 32,
    "mamba_d_state": 16, "ssm_state_size": 16, "state_size": 16, "mamba_d_ssm": 128, "n_mamba_heads": 4,
    "mamba_chunk_size": 16, "chunk_size": 16, "n_groups": 1, "mamba_n_groups": 1, "rotary_dim": 8,
    # mixtures of experts: 4 experts, 2 per token, one group
    "num_experts": 4, "n_routed_experts": 4, "num_local_experts": 4, "moe_num_experts": 4,
    "num_experts_per_tok": 2, "num_experts_per_token": 2, "moe_topk": 2, "moe_k": 2, "top_k": 2,
    "n_group": 1, "topk_group": 1, "num_expert_group": 1, "n_shared_experts": 1, "num_shared_experts": 1,
    "moe_num_shared_experts": 1, "zero_expert_num": 2,  # longcat-flash identity experts (256 of 768 by default)
    # positions
    "max_position_embeddings": 2048, "n_positions": 2048, "max_seq_len": 2048, "n_ctx": 2048,
    "context_length": 2048, "original_max_position_embeddings": 2048, "max_window_layers": 1,
    "sliding_window": 16, "sliding_window_size": 16, "attention_window_size": 16, "window_size": 16,
    "local_attention_window_len": 16, "attention_chunk_size": 16,
}
_TOKEN_IDS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
# layer-layout lists: keep the prefix that contains every kind once
_LAYOUT_LISTS = ("layer_types", "layers_block_type", "mlp_layer_types", "block_types", "attention_types",
                 "hybrid_override_pattern", "layers_types")

# Per-type fixes where the generic shrink is wrong (applied last; a callable gets the kwargs).
_OVERRIDES: dict[str, dict[str, Any]] = {
    # the defaults have attention layers only; the real models interleave short convolutions
    "lfm2": {"num_hidden_layers": 3, "layer_types": ["conv", "full_attention", "conv"]},
    "lfm2_moe": {"num_hidden_layers": 3, "layer_types": ["conv", "full_attention", "conv"], "num_dense_layers": 1},
    # the default is mamba layers only; the real models (granite-4.0-h) interleave attention
    "granitemoehybrid": {"num_hidden_layers": 3, "layer_types": ["mamba", "attention", "mamba"]},
    # the shared transformer block is tied across hybrid layers: it needs two of them
    "zamba": {"num_hidden_layers": 4, "attn_layer_period": 2, "attn_layer_offset": 1,
              "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid"]},
    "zaya": {"num_experts_per_tok": 1},
    # hash n-gram embeddings: 500002 rows by default; with use_cache the forward builds a DynamicCache from
    # the top config, which has no num_hidden_layers (transformers 5.24 raises AttributeError)
    "blt": {"encoder_hash_byte_group_vocab": 512, "use_cache": False},
    "nemotron": {"partial_rotary_factor": 0.5, "num_key_value_heads": 2},  # kv heads default None
    "dots1": {"n_routed_experts": 4, "num_experts_per_tok": 2, "n_group": 1, "topk_group": 1, "n_shared_experts": 1},
    # the attention reads attn_config.rope_theta (absent by default) and always clamps q/k/v (clip_qkv 8 as dbrx-base)
    "dbrx": {"attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
             "ffn_config": {"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2}},
    # two (4 sliding, 1 full) periods so the last period can reuse the first one's KV (num_kv_shared_layers);
    # per-layer lists and the per-layer-input embedding (262144 x layers x 256 by default) sized to match
    "gemma3n_text": {"num_hidden_layers": 10, "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 2,
                     "num_kv_shared_layers": 5, "intermediate_size": 128,
                     "activation_sparsity_pattern": [0.95] * 5 + [0.0] * 5,
                     "vocab_size_per_layer_input": 256, "hidden_size_per_layer_input": 16, "laurel_rank": 8},
    # to_dict lists each block as (attention, "mlp"); the constructor takes the attention layers only:
    # 1 input layer, 2 recurrent layers looped twice, 1 output layer, one (3 sliding, 1 full) period
    "dory": {"num_hidden_layers": 4, "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
             "n_input_layers": 1, "n_recurrent_layers": 2, "n_output_layers": 1, "n_recurrent_loops": 2},
    # no RoPE by default (rope_parameters {}); per layer type, as Cohere2: 3 sliding RoPE layers, 1 full NoPE
    # layer, M-RoPE sections summing to head_dim / 2 (text positions repeat on all three axes)
    "cohere_compass_text": {"num_hidden_layers": 4, "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
                            "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0,
                                                                      "mrope_section": [4, 2, 2]},
                                                "full_attention": None}},
    # the QSA token indexer of the indexed-attention layers has no defaults (all None): 4 query heads and the one
    # key head it requires, 8-token budget in blocks of 4 (below the 24-token probe, so the selection bites)
    "qwen4_exp_text": {"indexer_n_heads": 4, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 8,
                       "indexer_compress_ratio": 4},
    # full-attention layers get head_dim global_head_dim (512) through per_layer_config; the per-layer-input
    # embedding is 262144 x layers x 256 by default (400M parameters at 6 layers)
    "gemma4_text": {"global_head_dim": 32, "vocab_size_per_layer_input": 256, "hidden_size_per_layer_input": 16},
    # the sliding layers' MLA sizes come from swa_* kwargs (per_layer_config); head_dim x partial_rotary_factor
    # (0.25) is the rotary width, so it is 4 x qk_rope_head_dim, and swa head_dim - swa nope is the swa rope width
    "dots3_note_text": {"head_dim": 32, "swa_num_attention_heads": 2, "swa_num_key_value_heads": 2,
                        "swa_q_lora_rank": 32, "swa_kv_lora_rank": 64, "swa_head_dim": 32, "swa_qk_nope_head_dim": 24,
                        "swa_v_head_dim": 16},
    # (global, local) attention: the pattern repeated once for two layers
    "gpt_neo": {"num_layers": 2, "attention_types": [[["global", "local"], 1]], "window_size": 16},
}


def causal_lm_types() -> list[str]:
    """Every key of transformers' causal-LM mapping, in its order."""
    return list(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def _default_config(model_type: str) -> PretrainedConfig:
    try:
        return AutoConfig.for_model(model_type)
    except Exception as err:  # noqa: BLE001 - transformers raises several kinds for a default that does not validate
        raise CtxlensError(f"transformers cannot build a default '{model_type}' config ({first_line(err)}).") from None


def first_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return f"{type(err).__name__}: {lines[-1] if lines and lines[0].endswith(':') else (lines[0] if lines else '')}"


def scope(model_type: str) -> tuple[str, str]:
    """("in", "") for a decoder-only text type, else (category, one-sentence reason)."""
    if model_type in _KNOWN_OUT:
        return _KNOWN_OUT[model_type]
    cls = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type, "")
    if "Assistant" in cls:
        return "drafter", "a speculative-decoding drafter that runs on a target model's hidden states and KV cache"
    if model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES and model_type not in ("mvp", "bart", "mbart"):
        return "bert-style", "an encoder with a masked-LM head whose causal-LM head needs is_decoder=True"
    try:
        config = _default_config(model_type)
    except CtxlensError:
        return IN_SCOPE, ""  # a decoder whose default config does not build: a failure, reported as such
    if getattr(config, "is_encoder_decoder", False):
        return "encoder-decoder", "an encoder-decoder model (is_encoder_decoder)"
    subs = [a for a in _MULTIMODAL_SUBCONFIGS if hasattr(config, a)]
    if subs and model_type not in _TEXT_MODEL_IN_SCOPE:
        has_text = getattr(config, "text_config", None)
        text = f"; its text model is type '{config.text_config.model_type}'" if has_text else ""
        return "multimodal", f"a multimodal model ({', '.join(subs)}){text}"
    return IN_SCOPE, ""


def in_scope_types() -> list[str]:
    return [t for t in causal_lm_types() if scope(t)[0] == IN_SCOPE]


# -- shrinking ----------------------------------------------------------------------------------
def _layout_depth(defaults: dict) -> int:
    """Fewest layers that still contain every kind of layer the default layout has (at least 2)."""
    depth = 2
    for key in _LAYOUT_LISTS:
        seq = defaults.get(key)
        if isinstance(seq, str):  # nemotron_h's "M-M*-" pattern
            seq = list(seq)
        if isinstance(seq, (list, tuple)) and seq:
            first: dict[str, int] = {}
            for i, kind in enumerate(seq):
                first.setdefault(str(kind), i)
            depth = max(depth, max(first.values()) + 1)
    for period, offset in (("attn_layer_period", "attn_layer_offset"), ("expert_layer_period", "expert_layer_offset")):
        if isinstance(defaults.get(period), int):
            depth = max(depth, int(defaults.get(offset) or 0) + 1, 2)
    for key in ("sliding_window_pattern", "_sliding_window_pattern", "global_attn_every_n_layers",
                "no_rope_layer_interval", "layer_group_size"):
        if isinstance(defaults.get(key), int) and not isinstance(defaults.get(key), bool):
            depth = max(depth, int(defaults[key]))
    if isinstance(defaults.get("first_k_dense_replace"), int):
        depth = max(depth, 2)
    return min(depth, 12)


def _shrunk_layouts(defaults: dict, depth: int) -> dict:
    out: dict[str, str | list] = {}
    for key in _LAYOUT_LISTS:
        seq = defaults.get(key)
        if isinstance(seq, str):
            out[key] = seq[:depth]
        elif isinstance(seq, (list, tuple)) and seq:
            out[key] = list(seq[:depth])
    return out


def _token_ids(defaults: dict) -> dict:
    """Every ``*_token_id`` / ``*_token_index`` below the vocabulary, distinct from pad/bos/eos."""
    out, spare = {}, iter(range(3, VOCAB))
    for key, value in defaults.items():
        if not (key.endswith("_token_id") or key.endswith("_token_index") or key.endswith("_token_ids")):
            continue
        if key in _TOKEN_IDS:
            out[key] = _TOKEN_IDS[key] if not isinstance(value, list) else [_TOKEN_IDS[key]]
        elif isinstance(value, int) and not isinstance(value, bool):
            out[key] = next(spare)
        elif isinstance(value, list):
            out[key] = [next(spare) for _ in value]
    return out


def shrink_kwargs(defaults: dict) -> dict:
    """Constructor kwargs that make the config described by ``defaults`` (its ``to_dict``) tiny."""
    kw: dict[str, Any] = {}
    for key, value in defaults.items():
        if key in _SIZES and isinstance(value, int) and not isinstance(value, bool):
            kw[key] = _SIZES[key]
        elif ("dropout" in key or "pdrop" in key) and isinstance(value, float):
            kw[key] = 0.0
    if "kv_lora_rank" in defaults and "num_key_value_heads" in defaults:  # MLA: keys have every head
        kw["num_key_value_heads"] = _SIZES["num_attention_heads"]
    if "head_dim" in defaults:  # also where the default is None (derived later, sometimes wrongly)
        kw["head_dim"] = _SIZES["qk_rope_head_dim"] if "kv_lora_rank" in defaults else _SIZES["head_dim"]
    if isinstance(defaults.get("n_routed_experts") or defaults.get("num_experts"), int):
        kw.update({k: _SIZES[k] for k in ("num_experts_per_tok", "n_group", "topk_group") if k in defaults})
    for key in ("vocab_size", "n_vocab", "unpadded_vocab_size"):
        if isinstance(defaults.get(key), int):
            kw[key] = VOCAB
    depth = _layout_depth(defaults)
    for key in ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "num_blocks"):
        if isinstance(defaults.get(key), int):
            kw[key] = depth
    kw.update(_shrunk_layouts(defaults, depth))
    kw.update(_token_ids(defaults))
    rope = defaults.get("rope_parameters")
    if isinstance(rope, dict) and _shrunk_rope(rope) != rope:
        kw["rope_parameters"] = _shrunk_rope(rope)
    return kw


def _shrunk_rope(params: dict) -> dict:
    """Scaling factors that refer to the original length stay consistent with 2048 positions."""
    params = copy.deepcopy(params)
    nested = all(isinstance(v, dict) for v in params.values()) and params
    for p in (params.values() if nested else [params]):
        if isinstance(p.get("original_max_position_embeddings"), int):
            p["original_max_position_embeddings"] = min(p["original_max_position_embeddings"], 1024)
    return params


def _tiny_sub(config: PretrainedConfig) -> dict:
    """A shrunk sub-config (text / vision / attention ...) as the dict its parent's constructor takes."""
    return {**config.to_dict(), **shrink_kwargs(config.to_dict())}


def tiny_config_for(model_type: str, **overrides: Any) -> PretrainedConfig:
    """A tiny random-weight config of ``model_type`` (any type of the causal-LM mapping)."""
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise CtxlensError(f"'{model_type}' is not in transformers' causal-LM mapping; pick a type listed by "
                           "`ctxlens models --all`.")
    if model_type in TINY_FAMILIES:
        return tiny_config(model_type, **overrides)
    default = _default_config(model_type)
    kwargs = shrink_kwargs(default.to_dict())
    for key in default.to_dict():  # composite configs: shrink each sub-config too
        sub = getattr(default, key, None) if key.endswith("_config") else None  # (per-layer fields raise on get)
        if isinstance(sub, PretrainedConfig):
            kwargs[key] = _tiny_sub(sub)
    fix = _OVERRIDES.get(model_type, {})
    kwargs.update(fix(kwargs) if callable(fix) else fix)
    kwargs.update(overrides)
    return AutoConfig.for_model(model_type, **kwargs)


def build_tiny(model_type: str, seed: int = 0, **overrides: Any) -> torch.nn.Module:
    """``AutoModelForCausalLM.from_config`` of the tiny config, float32, eval mode, seeded.

    Parameters initialised to exactly zero (biases, some output projections and gates) get
    small random values, so that every branch of every block contributes to what is checked.
    """
    config = tiny_config_for(model_type, **overrides)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point() and p.numel() and p.abs().max() == 0:
                p.normal_(0.0, 0.02)
    return model.eval()


__all__ = ["OUT_OF_SCOPE", "build_tiny", "causal_lm_types", "in_scope_types", "scope", "shrink_kwargs",
           "tiny_config_for"]
