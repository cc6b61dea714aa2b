"""``dominant-dimension``: dominant RoPE dimension vs relative distance per head, below and beyond the training length.

Seed 003 ("On the token distance modeling ability of higher RoPE attention dimension"),
Sections 4.2.1-4.2.2, Figure 3 and Appendix A.1-A.3: for each query its top-k keys by
attention score (100 in the paper); for each (query, key) pair the dominant dimension
(equations 13-15) and the relative distance; dominant dimensions sharing a distance averaged
over all inputs; per head Spearman's rho (with p-value) between distance and dominant
dimension. Lengths below and beyond the training length, and transforms (``yarn:4``,
``selfextend:4:128``, ...), show the change past the pre-training length the paper reports.

Rows: ``kind="correlation"`` one per (layer, head) with rho, p_value; ``kind="curve"`` one per
(layer, head, distance bin) with the mean dominant dimension ("dim" axis of the paper's plot).
Every row names its layer's RoPE (layer_type, rope_theta, rope_type, n_dims).
Logit rows are computed from captured q/k in chunks of queries: memory stays at the forward's
plus a bounded working set.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxlens.core.options import Layers
from ctxlens.probes import rope as common
from ctxlens.probes.dominant import correlation_rows, curve_rows
from ctxlens.probes.positional_heads import distance_sums
from ctxlens.experiments.base import Experiment, positive
from ctxlens.experiments.registry import register


@dataclass
class Config:
    source: str = "builtin"  # text source spec, or "random" token ids
    lengths: list[int] = field(default_factory=lambda: [256, 512, 1024])
    n_samples: int = 4  # inputs per length (the paper uses 17)
    top_k: int = 100  # attended keys per query
    n_queries: int = 0  # queries per input, evenly spaced; 0: every token
    n_bins: int = 32  # distance bins of the curve rows
    transforms: list[str] = field(default_factory=lambda: ["none"])
    layers: Layers = None  # None: every attention layer; negatives count from the end
    train_length: int | None = None  # default: from the model (zoo record or config)
    seed: int = 0
    text_field: str = "text"

    def validate(self) -> None:
        common.validate(self)
        positive("top_k", self.top_k)
        positive("n_bins", self.n_bins)
        if self.n_queries < 0:
            positive("n_queries", self.n_queries)


def plan(config: Config) -> list[dict]:
    return common.units(config)


def run(lm, config: Config, unit: dict, cache: dict) -> list[dict]:
    sums = distance_sums(lm, config, unit, cache)
    extra = {**common.coordinates(lm, config, unit), "top_k": config.top_k}
    return ([{"kind": "correlation", **row, **extra} for row in correlation_rows(sums)]
            + [{"kind": "curve", **row, **extra} for row in curve_rows(sums, config.n_bins)])


register(Experiment("dominant-dimension", Config, plan, run, needs=("rope",), doc=__doc__.splitlines()[0]))
