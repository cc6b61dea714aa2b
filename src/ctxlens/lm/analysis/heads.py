"""Head masking: zero chosen heads' outputs before the attention output projection.

The rope-distance paper (Section 5) ablates positional heads by masking them. A head's output is its slice
``[h * head_dim, (h + 1) * head_dim)`` of the input to the output projection; a forward
pre-hook multiplies that input by a 0/1 vector, so it works for every family with an output
projection (sdpa, flash, eager, ALiBi code), during prefill and generation alike.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ctxlens.core.errors import CtxlensError

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle

    from ctxlens.lm.analysis.face import LMFace


def head_gate(n_heads: int, head_dim: int, heads: Sequence[int], like: torch.Tensor) -> torch.Tensor:
    """[n_heads * head_dim] vector of ones with zeros on the slices of ``heads``."""
    gate = torch.ones(n_heads, head_dim, dtype=like.dtype, device=like.device)
    gate[list(heads)] = 0
    return gate.reshape(-1)


@contextlib.contextmanager
def mask_heads(lm: LMFace, heads: Mapping[int, Sequence[int]]) -> Iterator[None]:
    """Within the block, heads ``{layer: [head, ...]}`` of ``lm`` output zero."""
    lm.family.require("head_mask", lm.name)
    handles: list[RemovableHandle] = []
    try:
        for layer, hs in heads.items():
            hs = sorted(set(int(h) for h in hs))
            if not hs:
                continue
            if not 0 <= layer < lm.n_layers:
                raise CtxlensError(f"Layer {layer} does not exist; this model has layers 0..{lm.n_layers - 1}.")
            bad = [h for h in hs if not 0 <= h < lm.n_heads]
            if bad:
                raise CtxlensError(f"Heads {bad} do not exist; this model has heads 0..{lm.n_heads - 1} per layer.")
            proj = lm.out_proj(layer)

            def pre(module: torch.nn.Module, args: tuple[Any, ...], hs: list[int] = hs) -> tuple[Any, ...]:
                x = args[0]  # [batch, seq, heads * head_dim]
                gate = head_gate(lm.n_heads, x.shape[-1] // lm.n_heads, hs, x)
                return (x * gate,) + tuple(args[1:])

            handles.append(proj.register_forward_pre_hook(pre))
        yield
    finally:
        for h in handles:
            h.remove()
