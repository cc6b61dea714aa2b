"""``positional-heads``: heads ranked by their distance-dimension correlation; the top 5% / 10% are Positional Heads.

The rope-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"),
Section 4.3.1 and Appendix A.3: Spearman's rho between relative distance and dominant
dimension (Section 4.2.1, see ``dominant-dimension``) ranks every attention head; the paper
reads |rho| as the strength of the correlation (``rank_by=abs``; ``positive`` / ``negative``
rank by signed rho). Rows: ``kind="head"`` one per (layer, head) with rho, p_value, rank,
whether p < alpha (``significant``, per head) and, corrected for testing every head at once,
the Bonferroni p-value min(1, p x heads) (``p_bonferroni``) and whether it is < alpha
(``significant_bonferroni``); ``kind="selection"`` one per fraction with the selected heads as
[[layer, head], ...] (what ``head-masking`` masks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ctxlens.core.options import PositiveInt, between, option
from ctxlens.experiments.base import Experiment
from ctxlens.experiments.registry import DEMO_ROPE, DemoStep, Smoke, T, register, summary
from ctxlens.probes import rope as common
from ctxlens.probes.dominant import n_selected
from ctxlens.probes.positional_heads import ranked_heads


@dataclass
class Config(common.HeadOptions):
    lengths: list[PositiveInt] = option(factory=lambda: [512],
                                        help="detection lengths, in tokens (e.g. the training length)")
    alpha: Annotated[float, between(0, 1, open_low=True, open_high=True)] = option(
        0.05, "significance level of each head's test (significant: uncorrected; significant_bonferroni: over "
              "all heads)")


def plan(config: Config) -> list[dict]:
    return common.units(config)


def significance(p: float | None, n_tests: int, alpha: float) -> dict:
    """A head's test at ``alpha``, uncorrected and Bonferroni-corrected over ``n_tests`` heads."""
    if p is None:
        return {"significant": False, "p_bonferroni": None, "significant_bonferroni": False}
    corrected = min(1.0, p * n_tests)
    return {"significant": p < alpha, "p_bonferroni": corrected, "significant_bonferroni": corrected < alpha}


def run(lm, config: Config, unit: dict, cache: dict) -> list[dict]:
    ranked = ranked_heads(lm, config, unit, cache)
    extra = {**common.coordinates(lm, config, unit), "rank_by": config.rank_by, "n_heads_total": len(ranked)}
    rows = [{"kind": "head", **r, **significance(r["p_value"], len(ranked), config.alpha), **extra} for r in ranked]
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
