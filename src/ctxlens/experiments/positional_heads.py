"""``positional-heads``: heads ranked by their distance-dimension correlation; the top 5% / 10% are Positional Heads.

The rope-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"),
Section 4.3.1 and Appendix A.3: Spearman's rho between relative distance and dominant
dimension (Section 4.2.1, see ``dominant-dimension``) ranks every attention head; the paper
reads |rho| as the strength of the correlation (``rank_by=abs``; ``positive`` / ``negative``
rank by signed rho). Rows: ``kind="head"`` one per (layer, head) with rho, p_value, rank and
whether p < alpha; ``kind="selection"`` one per fraction with the selected heads as
[[layer, head], ...] (what ``head-masking`` masks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxlens.core.errors import CtxlensError
from ctxlens.probes import rope as common
from ctxlens.probes.dominant import RANK_BY, correlation_rows, n_selected, rank_heads
from ctxlens.experiments.base import Experiment, positive
from ctxlens.experiments.dominant_dimension import measure
from ctxlens.experiments.registry import DEMO_ROPE, T, DemoStep, Smoke, register, summary


@dataclass
class Config:
    source: str = "builtin"  # text source spec, or "random" token ids
    lengths: list[int] = field(default_factory=lambda: [512])  # detection length(s), e.g. the training length
    n_samples: int = 4  # inputs (the paper uses 17)
    top_k: int = 100  # attended keys per query
    n_queries: int = 0  # queries per input, evenly spaced; 0: every token
    fractions: list[float] = field(default_factory=lambda: [0.05, 0.1])
    rank_by: str = "abs"  # abs | positive | negative
    alpha: float = 0.05  # significance level of the per-head test (no multiple-test correction)
    transforms: list[str] = field(default_factory=lambda: ["none"])
    layers: list[int] = field(default_factory=list)  # empty: every attention layer
    train_length: int | None = None
    seed: int = 0
    text_field: str = "text"

    def validate(self) -> None:
        common.validate(self)
        positive("top_k", self.top_k)
        validate_fractions(self.fractions)
        if self.rank_by not in RANK_BY:
            raise CtxlensError(f"Option 'rank_by' must be one of {', '.join(RANK_BY)}, got '{self.rank_by}'.")
        if not 0 < self.alpha < 1:
            raise CtxlensError(f"Option 'alpha' must lie in (0, 1), got {self.alpha}; pass e.g. 0.05.")


def validate_fractions(fractions: list[float]) -> None:
    if not fractions or any(not 0 < f <= 1 for f in fractions):
        raise CtxlensError(f"Option 'fractions' must hold fractions in (0, 1], got {fractions}; pass e.g. 0.05,0.1.")


def plan(config: Config) -> list[dict]:
    return common.units(config)


def ranked_heads(lm, config, unit: dict, cache: dict) -> list[dict]:
    """Correlation rows of every head, strongest first, with ``rank`` (cached per unit)."""
    key = ("ranked", unit["transform"], unit["length"], config.n_samples, config.top_k, config.n_queries,
           config.rank_by, tuple(config.layers))
    if key not in cache:
        cache[key] = rank_heads(correlation_rows(measure(lm, config, unit, cache)), config.rank_by)
    return cache[key]


def run(lm, config: Config, unit: dict, cache: dict) -> list[dict]:
    ranked = ranked_heads(lm, config, unit, cache)
    extra = {**common.coordinates(lm, config, unit), "rank_by": config.rank_by, "n_heads_total": len(ranked)}
    rows = [{"kind": "head", **r, "significant": r["p_value"] is not None and r["p_value"] < config.alpha, **extra}
            for r in ranked]
    for f in config.fractions:
        n = n_selected(f, len(ranked))
        rows.append({"kind": "selection", "fraction": f, "n_selected": n,
                     "heads": [[r["layer"], r["head"]] for r in ranked[:n]], **extra})
    return rows


register(Experiment(
    "positional-heads", Config, plan, run, needs=("rope",), doc=summary(__doc__),
    paper="rope-distance", section="Sections 4.2.1, 4.3.1",
    smoke=Smoke({"lengths": [64], "n_samples": 2, "top_k": 8, "fractions": [0.25, 0.5]},
                at_length=lambda L: {"source": "random", "lengths": [L], "n_samples": 1, "n_queries": 64}),
    demo=(DemoStep("rope", {**DEMO_ROPE, "lengths": [T], "n_samples": 8, "n_queries": 128},
                   {**DEMO_ROPE, "lengths": [T], "n_samples": 1, "n_queries": 32}),),
))
