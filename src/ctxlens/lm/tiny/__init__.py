"""Tiny, randomly initialisable causal-LM configs, one per supported architecture.

These exist for tests, benchmarks and ``ctxlens`` smoke runs with random
weights: nothing is downloaded, every model is a few hundred kB, and a forward
pass over a short batch takes milliseconds on a CPU.

All configs share the same shape so that results are comparable across families:

* ``vocab_size=256`` (a byte-level tokenizer is used), so every special token
  id is kept below 256;
* hidden size 64, two to four layers, 4 attention heads where there are heads
  and 2 key-value heads (GQA) where the family supports grouped queries;
* a position limit of 2048 where the family has one;
* dropout off, so a model is a deterministic function of ``torch.manual_seed``.

Hybrid families (jamba, bamba, zamba2, falcon_h1, recurrent_gemma) get enough
layers to contain both attention and SSM / recurrent layers.  Everything that
is not set here keeps the family's own default (tied embeddings, logit
soft-capping, ALiBi, ...).

Usage::

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(tiny_config("llama", num_hidden_layers=3))
"""

from __future__ import annotations

from typing import Any

from transformers import AutoConfig, PretrainedConfig

# Special token ids that are valid for a 256-entry vocabulary.
_TOKENS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}

# Llama-like decoder: 4 query heads of 16 dims, 2 key-value heads.
_DECODER = {
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 2048,
    "attention_dropout": 0.0,
    **_TOKENS,
}
# The same without `head_dim`, for configs that derive it (or have no such field).
_DECODER_NO_HEAD_DIM = {k: v for k, v in _DECODER.items() if k != "head_dim"}

_FAMILY_KWARGS: dict[str, dict[str, Any]] = {
    # --- attention-only decoders, RoPE ----------------------------------------
    "llama": {**_DECODER},
    "mistral": {**_DECODER, "sliding_window": 16},
    "qwen2": {**_DECODER},
    "qwen3": {**_DECODER},
    # layer 0 sliding (window 16), layer 1 global; attn/final logit soft-capping keep
    # their defaults (50 / 30); query_pre_attn_scalar = head_dim as in gemma-2-2b/9b.
    "gemma2": {**_DECODER, "sliding_window": 16, "query_pre_attn_scalar": 16},
    # five sliding layers (window 16, RoPE base 1e4) then one global layer (base 1e6), as Gemma 3
    "gemma3_text": {**_DECODER, "num_hidden_layers": 6, "sliding_window": 16, "query_pre_attn_scalar": 16},
    # Gemma 3 with its (tiny, unused by text-only inputs) vision tower
    "gemma3": {
        "text_config": {**_DECODER, "num_hidden_layers": 6, "sliding_window": 16, "query_pre_attn_scalar": 16},
        "vision_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                          "image_size": 32, "patch_size": 8},
        "mm_tokens_per_image": 4, "image_token_index": 255, "boi_token_index": 253, "eoi_token_index": 254,
        **_TOKENS,
    },
    "olmo2": {**_DECODER},
    # 25% of each head's dims are rotated; attention and MLP read the same input.
    "gpt_neox": {
        **{k: v for k, v in _DECODER_NO_HEAD_DIM.items() if k != "num_key_value_heads"},  # no GQA
        "intermediate_size": 256,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        "use_parallel_residual": True,
        "hidden_dropout": 0.0,
    },
    # parallel attention + MLP, interleaved RoPE, logits scaled by logit_scale (0.0625).
    "cohere": {**_DECODER_NO_HEAD_DIM},
    # --- attention-only decoders, learned positions / ALiBi -------------------
    "gpt2": {
        "vocab_size": 256,
        "n_embd": 64,
        "n_layer": 2,
        "n_head": 4,
        "n_positions": 2048,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        **_TOKENS,
    },
    "bloom": {  # ALiBi, no position limit
        "vocab_size": 256,
        "hidden_size": 64,
        "n_layer": 2,
        "n_head": 4,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
        **_TOKENS,
    },
    "mpt": {  # ALiBi (attn_config.alibi defaults to True)
        "vocab_size": 256,
        "d_model": 64,
        "n_layers": 2,
        "n_heads": 4,
        "expansion_ratio": 4,
        "max_seq_len": 2048,
        "resid_pdrop": 0.0,
        "emb_pdrop": 0.0,
        **_TOKENS,
    },
    # --- state-space / recurrent models ---------------------------------------
    "mamba": {
        "vocab_size": 256,
        "hidden_size": 64,
        "state_size": 16,
        "num_hidden_layers": 2,
        "expand": 2,
        "time_step_rank": "auto",
        **_TOKENS,
    },
    "mamba2": {  # 4 SSM heads of 32 dims (= expand * hidden_size), one group
        "vocab_size": 256,
        "hidden_size": 64,
        "state_size": 16,
        "num_hidden_layers": 2,
        "expand": 2,
        "num_heads": 4,
        "head_dim": 32,
        "n_groups": 1,
        "time_step_rank": "auto",
        **_TOKENS,
    },
    "falcon_mamba": {},  # mamba's config (filled in below)
    "rwkv": {  # has no pad token
        "vocab_size": 256,
        "hidden_size": 64,
        "attention_hidden_size": 64,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "context_length": 2048,
        "bos_token_id": 0,
        "eos_token_id": 0,
    },
    # mLSTM blocks with 4 heads.  The layers size q/k as hidden_size * qk_dim_factor
    # while the state cache rounds that up to a multiple of 64, so keep the product
    # a multiple of 64; run the kernels in float32 rather than bfloat16.
    "xlstm": {
        "vocab_size": 256,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_heads": 4,
        "qk_dim_factor": 1.0,
        "autocast_kernel_dtype": "float32",
        **_TOKENS,
    },
    # --- hybrids ----------------------------------------------------------------
    # layers: recurrent, recurrent, local attention (one KV head, as in recurrentgemma-2b;
    # attention window keeps its default of 2048).
    "recurrent_gemma": {
        "vocab_size": 256,
        "hidden_size": 64,
        "lru_width": 64,
        "intermediate_size": 192,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "attention_dropout": 0.0,
        **_TOKENS,
    },
    # layers: mamba, attention + 4-expert top-2 MoE, mamba, attention + MoE (no RoPE)
    "jamba": {
        **_DECODER_NO_HEAD_DIM,
        "num_hidden_layers": 4,
        "attn_layer_period": 2,
        "attn_layer_offset": 1,
        "expert_layer_period": 2,
        "expert_layer_offset": 1,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "mamba_d_state": 16,
        "mamba_dt_rank": "auto",
    },
    # layers: mamba2, attention, mamba2, attention (attention on odd layers, see tiny_config)
    "bamba": {
        **_DECODER_NO_HEAD_DIM,
        "num_hidden_layers": 4,
        "mamba_n_heads": 4,
        "mamba_d_head": 32,
        "mamba_d_state": 16,
    },
    # layers: mamba2, shared transformer + mamba2, mamba2, shared transformer + mamba2
    # (hybrid on odd layers, see tiny_config; both hybrids share one transformer block).
    # Attention dims are derived: input 2 * hidden_size, head_dim 2 * hidden_size / heads.
    "zamba2": {
        **_DECODER_NO_HEAD_DIM,
        "num_hidden_layers": 4,
        "num_key_value_heads": 4,
        "n_mamba_heads": 4,
        "mamba_d_state": 16,
        "use_mem_rope": True,  # RoPE in the shared attention (the config default has none)
    },
    # every layer runs attention and mamba2 side by side on the same input
    "falcon_h1": {
        **_DECODER_NO_HEAD_DIM,
        "mamba_d_ssm": 128,
        "mamba_n_heads": 4,
        "mamba_d_head": 32,
        "mamba_d_state": 16,
    },
}
_FAMILY_KWARGS["falcon_mamba"] = dict(_FAMILY_KWARGS["mamba"])  # the same tiny shape: its own class

TINY_FAMILIES: tuple[str, ...] = tuple(_FAMILY_KWARGS)


def tiny_config(family: str, **overrides: Any) -> PretrainedConfig:
    """Return a tiny config of ``model_type == family`` for random-weight models.

    ``overrides`` are passed to the config constructor together with the tiny
    defaults (they win), so derived fields such as ``layer_types`` follow them.
    """
    if family not in _FAMILY_KWARGS:
        raise ValueError(f"unknown tiny family {family!r}; expected one of {', '.join(TINY_FAMILIES)}")
    kwargs = {**_FAMILY_KWARGS[family], **overrides}
    # Layer layouts that depend on the (possibly overridden) depth: alternate
    # mamba / attention, starting with mamba.
    odd_layers = range(1, kwargs.get("num_hidden_layers", 0), 2)
    if family == "bamba":
        kwargs.setdefault("attn_layer_indices", list(odd_layers))
    if family == "zamba2":
        kwargs.setdefault(
            "layers_block_type",
            ["hybrid" if i in odd_layers else "mamba" for i in range(kwargs["num_hidden_layers"])],
        )
    return AutoConfig.for_model(family, **kwargs)


__all__ = ["TINY_FAMILIES", "tiny_config"]
