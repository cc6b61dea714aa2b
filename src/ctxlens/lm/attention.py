"""A registered attention function that records post-RoPE queries and keys.

transformers routes attention through ``AttentionInterface``: the model computes q and k,
applies RoPE, and hands them to the function named by ``config._attn_implementation``. We
register ``ctxlens-<base>`` for a base implementation (``sdpa`` by default, or a flash
kernel), together with the base's mask function under the same name, so padding, causal and
sliding-window masks stay exactly those of the base. The function slices out what an active
recorder asked for and then calls the base unchanged: no L x L matrix is built.

Families with attention logit soft-capping (gemma2) cannot use sdpa; for them the family's
own ``eager_attention_forward`` runs, as it would in transformers.

Flash-attention kernels are the exception to the ``ctxlens-<base>`` name: transformers finds the
kernel to load from the implementation's own name (``flash_attention_2``, a kernels-hub id, ...)
inside the attention call, so a flash implementation keeps its name and its registry entry is
wrapped in place by the same recording function (it records only for modules an active
recorder asked about, so other models are unaffected).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

PREFIX = "ctxlens-"

# Active recorders, innermost last. A recorder is any object with a ``record(module, q, k)``.
RECORDERS: list = []


def push(recorder) -> None:
    RECORDERS.append(recorder)


def pop(recorder) -> None:
    RECORDERS.remove(recorder)


def _eager_of(module: torch.nn.Module) -> Callable:
    """The eager attention function defined next to ``module``'s class (transformers convention)."""
    return sys.modules[type(module).__module__].eager_attention_forward


SCORE_TERMS = ("position_bias", "alibi", "attention_bias")  # added to q k^T by the attention function


def _note_scaling(module, kwargs: dict) -> None:
    """Keep the softmax scale the model passes (opt scales q itself and passes 1.0), and the names
    of any extra terms it adds to the scores (inkling's position bias)."""
    if kwargs.get("scaling") is not None:
        module._ctxlens_scaling = float(kwargs["scaling"])
    module._ctxlens_score_terms = tuple(t for t in SCORE_TERMS if kwargs.get(t) is not None)


def scaling_of(module) -> float:
    """The scale the attention function applies to q k^T for ``module`` (after one forward)."""
    noted = getattr(module, "_ctxlens_scaling", None)
    return noted if noted is not None else float(getattr(module, "scaling", module.head_dim ** -0.5))


def _recording(name: str, fn: Callable) -> Callable:
    """``fn`` preceded by handing (module, q, k) to the active recorders."""
    def attention(module, query, key, value, attention_mask, *args, **kwargs):
        _note_scaling(module, kwargs)
        for rec in RECORDERS:
            rec.record(module, query, key)
        return fn(module, query, key, value, attention_mask, *args, **kwargs)

    attention.__name__ = f"ctxlens_{name}_attention"
    attention._ctxlens_wraps = fn  # type: ignore[attr-defined]  # a marker on a function object: not declarable
    return attention


def wrap_in_place(name: str) -> str:
    """Make the registered attention function ``name`` record q/k (once); returns ``name``."""
    fn = ALL_ATTENTION_FUNCTIONS[name]
    if getattr(fn, "_ctxlens_wraps", None) is None:
        ALL_ATTENTION_FUNCTIONS.register(name, _recording(name, fn))
    return name


def _make(base: str) -> Callable:
    def attention(module, query, key, value, attention_mask, *args, **kwargs):
        # query: [batch, heads, q_len, head_dim] post-RoPE; key/value: [batch, kv_heads, k_len, head_dim]
        _note_scaling(module, kwargs)
        for rec in RECORDERS:
            rec.record(module, query, key)
        if kwargs.get("softcap") is not None or base == "eager":
            return _eager_of(module)(module, query, key, value, attention_mask, *args, **kwargs)
        return ALL_ATTENTION_FUNCTIONS[base](module, query, key, value, attention_mask, *args, **kwargs)

    attention.__name__ = f"ctxlens_{base}_attention"
    return attention


def register(base: str = "sdpa") -> str:
    """Register ``ctxlens-<base>`` (attention + mask) and return its name."""
    name = PREFIX + base
    if name not in ALL_ATTENTION_FUNCTIONS.valid_keys():
        ALL_ATTENTION_FUNCTIONS.register(name, _make(base))
        mask_base = base if base in ALL_MASK_ATTENTION_FUNCTIONS.valid_keys() else "sdpa"
        ALL_MASK_ATTENTION_FUNCTIONS.register(name, ALL_MASK_ATTENTION_FUNCTIONS[mask_base])
    return name


def install(model, base: str | None = None) -> str:
    """Route ``model``'s attention through the recording wrapper of its current implementation."""
    current = model.config._attn_implementation or "sdpa"
    if current.startswith(PREFIX):
        return current
    if "flash" in (base or current):
        name = wrap_in_place(base or current)
        if name != current:
            model.set_attn_implementation(name)
        return name
    name = register(base or current)
    model.set_attn_implementation(name)
    return name
