"""Dominant dimension vs relative distance per head, and the Positional Heads it ranks.

The RoPE-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"),
Section 4.2.1: for every query, its top-k keys by attention score (the paper uses 100); for
each such (query, key) pair the dominant dimension (equations 13-15) and the relative
distance; dominant dimensions sharing a distance are averaged, per head, over all inputs.
Section 4.3.1: Spearman's rho between distance and mean dominant dimension ranks the heads;
the top 5% / 10% are the Positional Heads.

``DistanceSums`` holds, per (layer, head, distance), the sum of dominant dimensions and the
pair count: [layers, H, L] each, independent of how many queries or inputs went in.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Sequence

import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.metrics.rope import dominant_dimension, spearman
from ctxlens.probes.qk import LayerQK, chunk_size, scan

if typing.TYPE_CHECKING:
    from ctxlens.lm.model import LM

RankBy = typing.Literal["abs", "positive", "negative"]  # |rho|, or signed rho
RANK_BY = typing.get_args(RankBy)


class DistanceSums:
    """Sums and counts of dominant dimensions per (layer, head, distance)."""

    def __init__(self, layers: Sequence[int], n_heads: int, max_len: int, device: torch.device | str,
                 info: dict | None = None) -> None:
        self.layers, self.n_heads, self.max_len = list(layers), n_heads, max_len
        self.info = info or {}  # {layer: columns naming its RoPE}, carried into every row of that layer
        self.sums = torch.zeros(len(self.layers), n_heads, max_len, dtype=torch.float64, device=device)
        self.counts = torch.zeros(len(self.layers), n_heads, max_len, dtype=torch.long, device=device)

    def add(self, layer: int, distance: torch.Tensor, dominant: torch.Tensor, valid: torch.Tensor) -> None:
        """distance [H, ...] (int), dominant [H, ...], valid [H, ...] (bool) of one layer."""
        li = self.layers.index(layer)
        dev = self.sums[li].device  # layers of a device-mapped model arrive from several devices
        distance, dominant, valid = distance.to(dev), dominant.to(dev), valid.to(dev)
        d = distance.reshape(self.n_heads, -1).clamp(0, self.max_len - 1)
        w = valid.reshape(self.n_heads, -1)
        self.sums[li].scatter_add_(1, d, dominant.reshape(self.n_heads, -1).double() * w)
        self.counts[li].scatter_add_(1, d, w.long())

    def head(self, layer: int, head: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(distances [u], mean dominant dimension [u], pairs per distance [u]) of one head, on CPU."""
        li = self.layers.index(layer)
        counts = self.counts[li, head].cpu()
        dist = torch.nonzero(counts).flatten()
        return dist, self.sums[li, head].cpu()[dist] / counts[dist], counts[dist]


def query_positions(length: int, n_queries: int = 0) -> torch.Tensor:
    """[c] the queries of an input of ``length`` tokens: every token, or ``n_queries`` evenly spaced ones."""
    if not n_queries or n_queries >= length:
        return torch.arange(length)
    return torch.linspace(0, length - 1, n_queries).round().long().unique()


def query_key_pairs(length: int, n_queries: int, top_k: int) -> int:
    """(query, key) pairs ``accumulate`` computes for one input of ``length`` tokens: ``top_k`` keys (at
    most ``length``) for each of its queries (``query_positions``), at every layer and head."""
    return len(query_positions(length, n_queries)) * min(top_k, length)


def accumulate(lm: LM, ids: torch.Tensor, layers: Sequence[int], sums: DistanceSums, top_k: int,
               n_queries: int = 0, drop_pairs: Sequence[int] = ()) -> None:
    """Add one input ids [1, L] to ``sums``: top-k keys of each query (all tokens, or ``n_queries``
    evenly spaced ones), dominant dimension of each pair (``drop_pairs`` left out of the softmax)."""
    length = ids.shape[1]
    qpos_all = query_positions(length, n_queries)  # [c]

    def per_layer(view: LayerQK) -> None:
        t = min(top_k, length)
        d, n_pairs = view.q.shape[-1], view.rotary_dims // 2
        step = chunk_size(view.n_heads, length, t * (16 * d + 8 * n_pairs))
        qall = qpos_all.to(view.q.device)
        for s in range(0, len(qall), step):
            qpos = qall[s:s + step]  # [c]
            vals, keys = view.logits(qpos).topk(min(t, int(qpos.max()) + 1), dim=-1)  # [H, c, t]
            pairs = view.pair_contributions(qpos, keys)  # [H, c, t, n_pairs]
            if len(drop_pairs):
                pairs[..., list(drop_pairs)] = float("-inf")
            dist = qpos[None, :, None] - keys
            sums.add(view.layer, dist, dominant_dimension(pairs), torch.isfinite(vals))

    scan(lm, ids, layers, per_layer)


def correlation_rows(sums: DistanceSums) -> list[dict]:
    """One row per (layer, head): Spearman rho and p-value over (distance, mean dominant dimension)."""
    rows = []
    for layer in sums.layers:
        for h in range(sums.n_heads):
            dist, mean, counts = sums.head(layer, h)
            rho, p = spearman(dist.double(), mean)
            rows.append({"layer": layer, **sums.info.get(layer, {}), "head": h, "rho": _num(rho), "p_value": _num(p),
                         "n_distances": len(dist), "n_pairs": int(counts.sum())})
    return rows


def curve_rows(sums: DistanceSums, n_bins: int) -> list[dict]:
    """One row per (layer, head, distance bin): mean over the bin's distances of the mean dominant
    dimension (the paper's scatter of dominant dimension vs distance, binned)."""
    edges = torch.linspace(0, sums.max_len, n_bins + 1).round().long().tolist()
    rows = []
    for layer in sums.layers:
        for h in range(sums.n_heads):
            dist, mean, counts = sums.head(layer, h)
            for lo, hi in zip(edges[:-1], edges[1:]):
                inside = (dist >= lo) & (dist < hi)
                if hi > lo and inside.any():
                    rows.append({"layer": layer, **sums.info.get(layer, {}), "head": h, "distance_lo": lo,
                                 "distance_hi": hi,
                                 "dominant_dim": float(mean[inside].mean()), "n_distances": int(inside.sum()),
                                 "n_pairs": int(counts[inside].sum())})
    return rows


def _num(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def rank_heads(correlations: list[dict], rank_by: str = "abs") -> list[dict]:
    """Correlation rows sorted strongest first (NaN last), each with its ``rank`` (1 = strongest)."""
    if rank_by not in RANK_BY:
        raise CtxlensError(f"rank_by must be one of {', '.join(RANK_BY)}, got '{rank_by}'.")
    sign = {"abs": None, "positive": 1.0, "negative": -1.0}[rank_by]

    def key(row: dict) -> tuple:
        rho = row["rho"]
        if rho is None:
            return (1, 0.0, row["layer"], row["head"])
        return (0, -(abs(rho) if sign is None else sign * rho), row["layer"], row["head"])

    return [{**row, "rank": i + 1} for i, row in enumerate(sorted(correlations, key=key))]


def n_selected(fraction: float, total: int) -> int:
    """Heads in the top ``fraction`` of ``total``: rounded, at least one."""
    return max(1, min(total, round(fraction * total)))


def random_heads(all_heads: Sequence[tuple[int, int]], n: int, seed: int, draw: int) -> list[tuple[int, int]]:
    """``n`` heads drawn without replacement from ``all_heads``, fixed by (seed, draw)."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + draw)
    order = torch.randperm(len(all_heads), generator=g)[:n].tolist()
    return sorted(all_heads[i] for i in order)


def as_mask(heads: Sequence[tuple[int, int]]) -> dict[int, list[int]]:
    """[(layer, head), ...] -> {layer: [head, ...]} for ``LM.mask_heads``."""
    out: dict[int, list[int]] = {}
    for layer, h in heads:
        out.setdefault(int(layer), []).append(int(h))
    return out
