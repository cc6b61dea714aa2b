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

import math

import torch

from ctxlens.lm.rope import LAYOUTS, pair_index  # noqa: F401 - the model's rotary layout, defined once in lm


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
    """[n] -> [n] float64 ranks from 1, ties given the mean of the ranks they span."""
    x = x.flatten().double()
    order = torch.argsort(x, stable=True)
    sorted_x = x[order]
    new_group = torch.ones(len(x), dtype=torch.bool, device=x.device)
    new_group[1:] = sorted_x[1:] != sorted_x[:-1]
    group = torch.cumsum(new_group.long(), 0) - 1  # [n] group id of each sorted entry
    n_groups = int(group[-1]) + 1 if len(x) else 0
    first = torch.zeros(n_groups, dtype=torch.float64, device=x.device).scatter_reduce_(
        0, group, torch.arange(len(x), dtype=torch.float64, device=x.device), "amin", include_self=False)
    size = torch.zeros(n_groups, dtype=torch.float64, device=x.device).scatter_add_(
        0, group, torch.ones(len(x), dtype=torch.float64, device=x.device))
    mean_rank = first + (size + 1) / 2  # ranks first+1 .. first+size
    ranks = torch.empty(len(x), dtype=torch.float64, device=x.device)
    ranks[order] = mean_rank[group]
    return ranks


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def spearman(x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """Spearman rank correlation of x [n] and y [n] and its two-sided p-value.

    rho is the Pearson correlation of the tie-averaged ranks; the p-value uses
    t = rho sqrt((n - 2) / (1 - rho^2)) with n - 2 degrees of freedom (the usual large-sample
    test). NaN for n < 3 or a constant input.
    """
    if x.numel() != y.numel():
        raise ValueError(f"x and y must have the same length, got {x.numel()} and {y.numel()}")
    n = x.numel()
    if n < 3:
        return math.nan, math.nan
    rx, ry = rankdata(x), rankdata(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = float(torch.sqrt((rx * rx).sum() * (ry * ry).sum()))
    if denom == 0.0:
        return math.nan, math.nan
    rho = max(-1.0, min(1.0, float((rx * ry).sum()) / denom))
    if abs(rho) == 1.0:
        return rho, 0.0
    return rho, t_two_sided_p(rho * math.sqrt((n - 2) / (1.0 - rho * rho)), n - 2)


def distance_dimension_correlation(distance: torch.Tensor, dominant: torch.Tensor) -> tuple[float, float, int]:
    """(relative distance [n], dominant dimension [n]) pairs of one head -> (rho, p, n_distances).

    Dominant dimensions sharing a distance are averaged first (Section 4.2.1), then Spearman's
    rho is taken over (distance, mean dominant dimension), one point per distinct distance.
    """
    dist, mean, _ = mean_by_distance(distance, dominant)
    rho, p = spearman(dist.double(), mean)
    return rho, p, len(dist)
