"""``positional-heads``: heads ranked by their distance-dimension correlation; the top 5% / 10% are Positional Heads.

Seed 003 ("On the token distance modeling ability of higher RoPE attention dimension"),
Section 4.3.1 and Appendix A.3: Spearman's rho between relative distance and dominant
dimension (Section 4.2.1, see ``dominant-dimension``) ranks every attention head; the paper
reads |rho| as the strength of the correlation (``rank_by=abs``; ``positive`` / ``negative``
rank by signed rho). Rows: ``kind="head"`` one per (layer, head) with rho, p_value, rank and
whether p < alpha; ``kind="selection"`` one per fraction with the selected heads as
[[layer, head], ...] (what ``head-masking`` masks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxlens.core.options import Layers
from ctxlens.core.errors import CtxlensError
from ctxlens.probes import rope as common
from ctxlens.probes.dominant import RANK_BY, n_selected
from ctxlens.probes.positional_heads import ranked_heads, validate_fractions
from ctxlens.experiments.base import Experiment, positive
from ctxlens.experiments.registry import register


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
    layers: Layers = None  # None: every attention layer; negatives count from the end
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


def plan(config: Config) -> list[dict]:
    return common.units(config)


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


register(Experiment("positional-heads", Config, plan, run, needs=("rope",), doc=__doc__.splitlines()[0]))
