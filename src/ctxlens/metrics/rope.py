"""Per-frequency-pair contributions of RoPE dimensions to attention logits.

Seed 003 ("On the token distance modeling ability of higher RoPE attention dimension"),
Section 3: the attention logit q.k splits into a sum over the rotary frequency pairs, each
pair's contribution being the product of q and k summed over the pair's two dims. Pair i holds
dims (i, i + r/2) in the half-split layout of most HF checkpoints (``rotate_half``) and
(2i, 2i + 1) in the interleaved layout (cohere, gpt-j); dims beyond the rotary ones (partial
rotary) are summed separately. ``scaling * (pairs.sum(-1) + rest)`` is exactly the logit.
"""

from __future__ import annotations

import torch

LAYOUTS = ("half", "interleaved")


def pair_index(rotary_dims: int, layout: str) -> torch.Tensor:
    """[rotary_dims/2, 2] dim indices of each frequency pair, lowest frequency index first."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if rotary_dims % 2:
        raise ValueError(f"rotary_dims must be even, got {rotary_dims}")
    half = rotary_dims // 2
    i = torch.arange(half)
    return torch.stack([i, i + half], -1) if layout == "half" else torch.stack([2 * i, 2 * i + 1], -1)


def rope_pair_contributions(
    q: torch.Tensor, k: torch.Tensor, layout: str = "half", rotary_dims: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Post-RoPE q [..., head_dim] and k [..., head_dim] (broadcastable) ->
    (pairs [..., rotary_dims/2], rest [...]): per-pair q*k sums, and the non-rotary remainder.

    Pair i rotates with frequency theta_i = base^(-2i/rotary_dims), so a higher index is a
    lower frequency (a longer wavelength), the "higher dimensions" of the paper.
    """
    head_dim = q.shape[-1]
    rotary_dims = head_dim if rotary_dims is None else rotary_dims
    prod = (q * k).float()  # [..., head_dim]
    idx = pair_index(rotary_dims, layout).to(prod.device)
    pairs = prod[..., idx].sum(-1)  # [..., rotary_dims/2]
    rest = prod[..., rotary_dims:].sum(-1)  # [...]
    return pairs, rest
