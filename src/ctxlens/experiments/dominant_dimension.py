"""``dominant-dimension``: dominant RoPE dimension vs relative distance per head, below and beyond the training length.

The rope-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"),
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

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxlens.core.columns import Column
from ctxlens.core.options import Count, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, Work, summary
from ctxlens.experiments.columns import CORRELATION, DISTANCE_BINS, KIND, ROPE_LAYER, ROPE_UNIT, declare, narrow
from ctxlens.experiments.registry import DEMO_ROPE, EXTRAPOLATE, T, register
from ctxlens.probes import rope as common
from ctxlens.probes.dominant import correlation_rows, curve_rows, query_key_pairs
from ctxlens.probes.positional_heads import distance_sums

if TYPE_CHECKING:
    from ctxlens.lm.model import LM


@dataclass
class Config(common.DominantOptions):
    n_bins: Count = option(32, "relative-distance bins of the curve rows")


def plan(config: Config) -> list[Unit]:
    return common.units(config)


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    sums = distance_sums(lm, config, unit, cache)
    extra = {**common.coordinates(lm, config, unit), "top_k": config.top_k}
    return ([{"kind": "correlation", **row, **extra} for row in correlation_rows(sums)]
            + [{"kind": "curve", **row, **extra} for row in curve_rows(sums, config.n_bins)])


def work(config: Config, unit: Unit) -> list[Work]:
    """One forward per input and its queries' top-k pairs."""
    n = config.n_samples
    return [Work(n, unit["length"], pairs=n * query_key_pairs(unit["length"], config.n_queries, config.top_k))]


COLUMNS = declare(
    ROPE_UNIT, narrow(KIND, kind=("correlation", "curve")), ROPE_LAYER, CORRELATION, DISTANCE_BINS,
    Column("top_k", int, "count", "frequency pairs taken as a query-key pair's top contributors"),
)


register(Experiment(
    "dominant-dimension", Config, plan, run, needs=("rope",), doc=summary(__doc__),
    paper="rope-distance", section="Section 4.2, equations 13-15", work=work,
    smoke=Smoke({"lengths": [32, 64], "n_samples": 2, "top_k": 8, "n_bins": 4, "train_length": 48},
                at_length=lambda L: {"source": "random", "lengths": [L], "n_samples": 1, "n_queries": 64}),
    demo=(DemoStep("rope", {**DEMO_ROPE, "lengths": [T, 2 * T], "n_samples": 2, "n_queries": 64},
                   {**DEMO_ROPE, "lengths": [T], "n_samples": 1, "n_queries": 16}, model_options=EXTRAPOLATE),),
    columns=COLUMNS,
))
