"""Family adapters: where each architecture keeps what the analyses need.

An adapter is data, not code: paths to the layer list, to the point where the residual
stream after the context-mixing sublayer can be read, to the attention module and its output
projection, and the RoPE pair layout. ``ctxlens.families()`` lists them with the analyses each
supports. Adding a family is adding one ``Family(...)`` entry (and a tiny config in
``ctxlens.lm.tiny`` to test it).

Residual-after-mixer modes (``resid``), the quantity the geometry paper (Section 3) measures:

- ``"pre:SUB"``  the input of submodule SUB of the layer (its pre-MLP norm, or the MLP itself
  when there is no pre-norm): in these blocks that input *is* layer input + mixer output.
- ``"sum:SUB"``  layer input + output of SUB, for parallel-residual blocks whose MLP reads the
  layer input (gpt_neox with ``use_parallel_residual``, cohere).
- ``"post:SUB"`` the (first) output of SUB, for blocks whose mixer sublayer returns the stream
  itself (dbrx's norm_attn_norm).
- ``"out"``      the block output, for blocks with no MLP (mamba, mamba2, zamba2, ...).
- ``"in"``       the block input, for blocks that hold only an MLP (nemotron_h): no mixer ran.

An inferred adapter (``ctxlens.lm.infer``) may give one mode per layer (a tuple), for hybrids
whose layer kinds differ in structure (olmo_hybrid, nemotron_h).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.core.registry import Registry

if TYPE_CHECKING:
    from transformers import PretrainedConfig  # checked as Any (pyproject: follow_imports = "skip")

ANALYSES = ("residual", "token_loss", "qk", "rope", "head_mask")


@dataclass(frozen=True)
class Family:
    """What ctxlens needs to know about one transformers ``model_type``."""

    name: str  # transformers model_type
    kind: str  # transformer | ssm | recurrent | hybrid
    position: str  # rope | alibi | learned | none (SSM / recurrence)
    layers: str  # dotted path from the *ForCausalLM module to the nn.ModuleList of blocks
    resid: str | tuple[str, ...] | Callable[[Any], str]  # see docstring; callable: config -> mode; tuple: per layer
    attn: str | None = None  # attribute of the attention module inside a block (absent on SSM blocks)
    out_proj: str | None = None  # attribute of the output projection inside the attention module
    interface: bool = False  # attention goes through transformers' AttentionInterface
    rope_layout: str | None = None  # "half" (rotate_half) | "interleaved" (cohere, gpt-j)
    # logits = post(config, lm_head(h)): family-specific scaling/capping after the LM head
    logits_post: Callable[[object, torch.Tensor], torch.Tensor] | None = None
    notes: str = ""
    # dotted path of the decoder that returns last_hidden_state (default: transformers' base_model)
    base: str | None = None
    # module applied to the decoder's final hidden states before the LM head (modernbert-decoder)
    pre_head: str | None = None
    # blocks whose attention is softmax attention through the interface (None: any *Attention class)
    attn_layers: tuple[int, ...] | None = None
    # analyses an inferred adapter could not confirm on the model itself: ((analysis, reason), ...)
    unsupported: tuple[tuple[str, str], ...] = ()
    inferred: bool = False  # built by ctxlens.lm.infer from the module tree and checked at load
    supports: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        s = ["residual", "token_loss"]
        if self.attn and self.interface:
            s.append("qk")
        if self.rope_layout and self.interface:
            s.append("rope")
        if self.attn and self.out_proj:
            s.append("head_mask")
        refused = dict(self.unsupported)
        object.__setattr__(self, "supports", tuple(a for a in s if a not in refused))

    def resid_mode(self, config: PretrainedConfig, layer: int = 0) -> str:
        if isinstance(self.resid, tuple):
            return self.resid[layer]
        return self.resid(config) if callable(self.resid) else self.resid

    def require(self, analysis: str, model_name: str = "") -> None:
        """Raise a clear error when this family cannot do ``analysis``."""
        if analysis not in self.supports:
            who = f"Model '{model_name}' ({self.name})" if model_name else f"Family '{self.name}'"
            why = dict(self.unsupported).get(analysis)
            if why:
                raise CtxlensError(f"{who} does not support the '{analysis}' analysis: {why}")
            raise CtxlensError(
                f"{who} does not support the '{analysis}' analysis (it supports: "
                f"{', '.join(self.supports)}); pick a model of a family that lists it in `ctxlens models`."
            )


def softcap(attr: str) -> Callable[[object, torch.Tensor], torch.Tensor]:
    def post(config: PretrainedConfig, logits: torch.Tensor) -> torch.Tensor:  # logits [..., vocab]
        cap = getattr(config, attr, None)
        return logits if cap is None else torch.tanh(logits / cap) * cap

    return post


def scale(attr: str) -> Callable[[object, torch.Tensor], torch.Tensor]:
    def post(config: PretrainedConfig, logits: torch.Tensor) -> torch.Tensor:  # logits [..., vocab]
        return logits * getattr(config, attr, 1.0)

    return post


_LLAMA_LIKE: dict[str, Any] = dict(
    kind="transformer", position="rope", layers="model.layers", resid="pre:post_attention_layernorm",
    attn="self_attn", out_proj="o_proj", interface=True, rope_layout="half",
)

_FAMILIES = [
    Family("llama", **_LLAMA_LIKE),
    Family("mistral", **_LLAMA_LIKE, notes="sliding-window attention"),
    Family("qwen2", **_LLAMA_LIKE),
    Family("qwen3", **_LLAMA_LIKE),
    Family(
        "gemma2", **{**_LLAMA_LIKE, "resid": "pre:pre_feedforward_layernorm"},
        logits_post=softcap("final_logit_softcapping"),
        notes="attention logit soft-capping (eager path), sliding windows on alternate layers",
    ),
    Family(
        "gemma3_text", **{**_LLAMA_LIKE, "resid": "pre:pre_feedforward_layernorm"},
        logits_post=softcap("final_logit_softcapping"),
        notes="five sliding-window layers (RoPE base 1e4) per global layer (RoPE base 1e6)",
    ),
    Family(
        "gemma3", **{**_LLAMA_LIKE, "layers": "model.language_model.layers", "resid": "pre:pre_feedforward_layernorm"},
        logits_post=softcap("final_logit_softcapping"),
        notes="the text model of Gemma 3 (vision tower unused); sliding and global layers as gemma3_text",
    ),
    Family("olmo2", **{**_LLAMA_LIKE, "resid": "pre:mlp"}, notes="norms after the sublayers"),
    Family(
        "gpt2", kind="transformer", position="learned", layers="transformer.h", resid="pre:ln_2",
        attn="attn", out_proj="c_proj", interface=True,
    ),
    Family(
        "gpt_neox", kind="transformer", position="rope", layers="gpt_neox.layers",
        resid=lambda c: "sum:post_attention_dropout" if c.use_parallel_residual else "pre:post_attention_layernorm",
        attn="attention", out_proj="dense", interface=True, rope_layout="half",
        notes="partial rotary; parallel residual",
    ),
    Family(
        "cohere", **{**_LLAMA_LIKE, "resid": "sum:self_attn", "rope_layout": "interleaved"},
        logits_post=scale("logit_scale"), notes="parallel residual; interleaved RoPE pairs",
    ),
    Family(
        "bloom", kind="transformer", position="alibi", layers="transformer.h", resid="pre:post_attention_layernorm",
        attn="self_attention", out_proj="dense", notes="ALiBi; own attention code",
    ),
    Family(
        "mpt", kind="transformer", position="alibi", layers="transformer.blocks", resid="pre:norm_2",
        attn="attn", out_proj="out_proj", notes="ALiBi; own attention code",
    ),
    Family("mamba", kind="ssm", position="none", layers="backbone.layers", resid="out"),
    Family("mamba2", kind="ssm", position="none", layers="backbone.layers", resid="out"),
    Family("falcon_mamba", kind="ssm", position="none", layers="backbone.layers", resid="out"),
    Family("rwkv", kind="recurrent", position="none", layers="rwkv.blocks", resid="pre:ln2"),
    Family(
        "xlstm", kind="recurrent", position="none", layers="backbone.blocks", resid="pre:norm_ffn",
        logits_post=softcap("output_logit_soft_cap"),
    ),
    Family(
        "recurrent_gemma", kind="hybrid", position="rope", layers="model.layers", resid="pre:channel_pre_norm",
        attn="temporal_block", out_proj="o_proj", interface=True, rope_layout="half",
        logits_post=softcap("logits_soft_cap"), notes="RG-LRU recurrence + local attention (partial rotary)",
    ),
    Family(
        "jamba", kind="hybrid", position="none", layers="model.layers", resid="pre:pre_ff_layernorm",
        attn="self_attn", out_proj="o_proj", interface=True, notes="mamba + attention without positions; MoE",
    ),
    Family(
        "bamba", kind="hybrid", position="rope", layers="model.layers", resid="pre:pre_ff_layernorm",
        attn="self_attn", out_proj="o_proj", interface=True, rope_layout="half",
    ),
    Family(
        "zamba2", kind="hybrid", position="rope", layers="model.layers", resid="out",
        notes="shared attention blocks feed the mamba layers; attention analyses not supported",
    ),
    Family(
        "falcon_h1", kind="hybrid", position="rope", layers="model.layers", resid="pre:pre_ff_layernorm",
        attn="self_attn", out_proj="o_proj", interface=True, rope_layout="half",
        logits_post=scale("lm_head_multiplier"), notes="attention and mamba in parallel in every layer",
    ),
]

FAMILIES: Registry[Family] = Registry("model family")
for _family in _FAMILIES:
    FAMILIES.add(_family.name, _family)


def known_family(model_type: str) -> Family | None:
    """The hand-written adapter for ``model_type``, or None (then ``ctxlens.lm.infer`` builds one)."""
    return FAMILIES.get(model_type)


def get_family(model_type: str) -> Family:
    """The hand-written adapter for a ``model_type``, or a clear error naming the known ones."""
    return FAMILIES[model_type]


def families() -> list[dict]:
    """One row per supported family: name, kind, position encoding and the analyses it supports."""
    return [
        {"family": f.name, "kind": f.kind, "position": f.position, "rope_layout": f.rope_layout or "",
         **{a: a in f.supports for a in ANALYSES}, "notes": f.notes}
        for f in _FAMILIES
    ]
