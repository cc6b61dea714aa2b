"""Per-frequency-pair contributions of RoPE dimensions to attention logits.

The rope-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"),
Section 3: the attention logit q.k splits into a sum over the rotary frequency pairs, each
pair's contribution being the product of q and k summed over the pair's two dims. Pair i holds
dims (i, i + r/2) in the half-split layout of most HF checkpoints (``rotate_half``) and
(2i, 2i + 1) in the interleaved layout (cohere, gpt-j); dims beyond the rotary ones (partial
rotary) are summed separately. ``scaling * (pairs.sum(-1) + rest)`` is exactly the logit.

On top of the contributions: the top-k pairs per query-key pair (Section 4.1, Figure 1), the
dominant dimension, i.e. the expected pair index under a softmax over the contributions
(Section 4.2.1, equations 13-15), and the per-head Spearman correlation between relative
distance and dominant dimension, dominant dimensions sharing a distance averaged first
(Sections 4.2.1 and 4.3.1, Appendix A.3). Spearman's p-value is computed here (Student's t on
n - 2 degrees of freedom through the regularised incomplete beta function), so that no
statistics package is needed.
"""

from __future__ import annotations

import torch

from ctxlens.core import stats
from ctxlens.core.stats import betainc, t_two_sided_p  # noqa: F401 - re-exported: the RoPE tests' p-values
from ctxlens.lm.analysis.rope import LAYOUTS, pair_index  # noqa: F401 - the model's rotary layout, defined once in lm


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
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if rotary_dims % 2:
        raise ValueError(f"rotary_dims must be even, got {rotary_dims}")
    prod = (q * k).float()  # [..., head_dim]
    half = rotary_dims // 2
    # pair i's two dims (``pair_index``): (i, i + r/2) or (2i, 2i + 1); one addition each, as a sum
    # over the pair would make, without gathering the product (a gather of it took most of the time)
    first, second = ((prod[..., :half], prod[..., half:rotary_dims]) if layout == "half"
                     else (prod[..., 0:rotary_dims:2], prod[..., 1:rotary_dims:2]))
    pairs = first + second  # [..., rotary_dims/2]
    rest = prod[..., rotary_dims:].sum(-1)  # [...]
    return pairs, rest


# -- Section 4.1: which pairs contribute most --------------------------------------------------


def top_pairs(pairs: torch.Tensor, k: int = 5) -> torch.Tensor:
    """[..., n_pairs] contributions -> [..., k] indices of the k largest (signed) contributions."""
    if not 1 <= k <= pairs.shape[-1]:
        raise ValueError(f"k must lie in [1, {pairs.shape[-1]}], got {k}")
    return pairs.topk(k, dim=-1).indices


def top_pair_counts(pairs: torch.Tensor, k: int = 5) -> torch.Tensor:
    """[..., n_samples, n_pairs] contributions -> [..., n_pairs] int64: how many samples have each
    pair among their top k (each sample counts k times in all)."""
    idx = top_pairs(pairs, k)  # [..., n_samples, k]
    counts = torch.zeros(*pairs.shape[:-2], pairs.shape[-1], dtype=torch.long, device=pairs.device)
    return counts.scatter_add_(-1, idx.flatten(-2), torch.ones_like(idx.flatten(-2)))


# -- Section 4.2.1, equations 13-15: the dominant dimension ------------------------------------


def dominant_dimension(pairs: torch.Tensor) -> torch.Tensor:
    """[..., n_pairs] contributions -> [...]: the expected pair index under softmax(contributions).

    Pair indices count from 0 (highest frequency) to n_pairs - 1 (lowest); the softmax is taken
    over the raw (unscaled) per-pair products, as in the paper.
    """
    weights = torch.softmax(pairs.float(), dim=-1)  # [..., n_pairs]
    index = torch.arange(pairs.shape[-1], dtype=weights.dtype, device=weights.device)
    return weights @ index


# -- Sections 4.2.1 and 4.3.1: distance-dimension rank correlation ------------------------------


def mean_by_distance(distance: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """distance [n] (int), value [n] -> (distances [u] sorted, mean value per distance [u], counts [u])."""
    uniq, inverse = torch.unique(distance.flatten(), return_inverse=True)
    counts = torch.zeros(len(uniq), dtype=torch.long, device=distance.device).scatter_add_(
        0, inverse, torch.ones_like(inverse))
    sums = torch.zeros(len(uniq), dtype=torch.float64, device=distance.device).scatter_add_(
        0, inverse, value.flatten().double())
    return uniq, sums / counts, counts


def rankdata(x: torch.Tensor) -> torch.Tensor:
    """[n] -> [n] float64 ranks from 1, ties given the mean of the ranks they span (``core.stats``)."""
    return torch.from_numpy(stats.rankdata(x.detach().flatten().double().cpu().numpy())).to(x.device)


def spearman(x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """Spearman rank correlation of x [n] and y [n] and its two-sided p-value (``core.stats.spearman``,
    the one implementation, shared with the torch-free findings)."""
    if x.numel() != y.numel():
        raise ValueError(f"x and y must have the same length, got {x.numel()} and {y.numel()}")
    as_np = lambda t: t.detach().flatten().double().cpu().numpy()  # noqa: E731
    return stats.spearman(as_np(x), as_np(y))


def distance_dimension_correlation(distance: torch.Tensor, dominant: torch.Tensor) -> tuple[float, float, int]:
    """(relative distance [n], dominant dimension [n]) pairs of one head -> (rho, p, n_distances).

    Dominant dimensions sharing a distance are averaged first (Section 4.2.1), then Spearman's
    rho is taken over (distance, mean dominant dimension), one point per distinct distance.
    """
    dist, mean, _ = mean_by_distance(distance, dominant)
    rho, p = spearman(dist.double(), mean)
    return rho, p, len(dist)
