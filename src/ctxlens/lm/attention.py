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
from typing import TYPE_CHECKING, Any, Protocol

import torch
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

if TYPE_CHECKING:
    from transformers import PreTrainedModel  # checked as Any (pyproject: follow_imports = "skip")

PREFIX = "ctxlens-"

# An attention function of transformers' ``AttentionInterface``: (module, query, key, value, attention_mask,
# ...) -> (attn_output [batch, q_len, heads, head_dim], attn_weights or None)
AttentionFn = Callable[..., tuple[torch.Tensor, torch.Tensor | None]]


class Recorder(Protocol):
    """What ``push`` takes: ``record`` gets each attention call's module and post-RoPE query
    [batch, heads, q_len, head_dim] and key [batch, kv_heads, k_len, head_dim]."""

    def record(self, module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, /) -> None: ...


# Active recorders, innermost last. A recorder is any object with a ``record(module, q, k)``.
RECORDERS: list[Recorder] = []


def push(recorder: Recorder) -> None:
    RECORDERS.append(recorder)


def pop(recorder: Recorder) -> None:
    RECORDERS.remove(recorder)


def _eager_of(module: torch.nn.Module) -> AttentionFn:
    """The eager attention function defined next to ``module``'s class (transformers convention)."""
    return sys.modules[type(module).__module__].eager_attention_forward


SCORE_TERMS = ("position_bias", "alibi", "attention_bias")  # added to q k^T by the attention function


def _note_scaling(module: torch.nn.Module, kwargs: dict[str, Any]) -> None:
    """Keep the softmax scale the model passes (opt scales q itself and passes 1.0), and the names
    of any extra terms it adds to the scores (inkling's position bias)."""
    if kwargs.get("scaling") is not None:
        setattr(module, "_ctxlens_scaling", float(kwargs["scaling"]))  # noqa: B010 - nn.Module types its attributes
    setattr(module, "_ctxlens_score_terms", tuple(t for t in SCORE_TERMS if kwargs.get(t) is not None))  # noqa: B010


def scaling_of(module: torch.nn.Module) -> float:
    """The scale the attention function applies to q k^T for ``module`` (after one forward)."""
    noted = getattr(module, "_ctxlens_scaling", None)
    if noted is not None:
        return noted
    head_dim: int = getattr(module, "head_dim")  # noqa: B009 - a foreign attention module's attribute
    return float(getattr(module, "scaling", head_dim ** -0.5))


def _recording(name: str, fn: AttentionFn) -> AttentionFn:
    """``fn`` preceded by handing (module, q, k) to the active recorders."""
    def attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attention_mask: torch.Tensor | None, *args: Any, **kwargs: Any
                  ) -> tuple[torch.Tensor, torch.Tensor | None]:
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


def _make(base: str) -> AttentionFn:
    def attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attention_mask: torch.Tensor | None, *args: Any, **kwargs: Any
                  ) -> tuple[torch.Tensor, torch.Tensor | None]:
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


def install(model: PreTrainedModel, base: str | None = None) -> str:
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
