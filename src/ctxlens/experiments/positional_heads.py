"""``positional-heads``: heads ranked by their distance-dimension correlation; the top 5% / 10% are Positional Heads.

The rope-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"),
Section 4.3.1 and Appendix A.3: Spearman's rho between relative distance and dominant
dimension (Section 4.2.1, see ``dominant-dimension``) ranks every attention head; the paper
reads |rho| as the strength of the correlation (``rank_by=abs``; ``positive`` / ``negative``
rank by signed rho). The paper makes no test; ctxlens's test that a head tracks distance takes
the inputs (the paper's 17 prompts) as the independent items: one rho per (head, input), and per
head a one-sample t test across inputs that their mean rho is 0 (the rho pooled over ~1000
distances of a few inputs counts correlated points as independent: its p-value cannot fail).

Rows: ``kind="head"`` one per (layer, head) with rho (pooled over the inputs, the paper's
ranking quantity) and rank, the mean per-input rho (``rho_mean``), the t test's two-sided
``p_value`` over ``n_prompts`` inputs, whether p < alpha (``significant``, per head) and,
corrected for testing every head at once, the Bonferroni p-value min(1, p x heads)
(``p_bonferroni``) and whether it is < alpha (``significant_bonferroni``); ``kind="prompt"`` one
per (layer, head, prompt) with that input's rho; ``kind="selection"`` one per fraction with the
selected heads as [[layer, head], ...] (what ``head-masking`` masks when it is given the same
detection options: length, inputs, source, seed, queries, top-k).

Every row has a ``condition``: ``none`` (the model as loaded). With ``control="rope-zeroed"`` the
same detection runs again on the same inputs with every rotary frequency 0 (q and k unrotated;
``ctxlens.probes.positional_heads``), written as ``kind="head"`` and ``kind="prompt"`` rows with
``condition="rope-zeroed"`` (no selection: the heads masked are the real ones). ctxlens's negative
control, which the paper does not make: a head whose dominant dimension tracks distance through
RoPE should beat its own unrotated twin on the same prompts (``ctxlens.findings.positional``).
About twice the cost of the detection alone.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Annotated, Literal

from ctxlens.core.columns import Column
from ctxlens.core.options import Tokens, between, option
from ctxlens.core.stats import one_sample_t
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, Work, summary
from ctxlens.experiments.columns import CONDITION, FRACTION, KIND, ROPE_LAYER, ROPE_UNIT, declare, narrow, pick
from ctxlens.experiments.registry import DEMO_ROPE, T, register
from ctxlens.probes import rope as common
from ctxlens.probes.dominant import RANK_BY, n_selected, query_key_pairs
from ctxlens.probes.positional_heads import REAL, ROPE_ZEROED, detection

if typing.TYPE_CHECKING:
    from ctxlens.lm.model import LM

Control = Literal["none", "rope-zeroed"]


@dataclass
class Config(common.HeadOptions):
    lengths: list[Tokens] = option(factory=lambda: [512],
                                        help="detection lengths, in tokens (e.g. the training length)")
    alpha: Annotated[float, between(0, 1, open_low=True, open_high=True)] = option(
        0.05, "significance level of each head's t test across inputs (significant: uncorrected; "
              "significant_bonferroni: over all heads)")
    control: Control = option("none", "ctxlens's negative control: rope-zeroed repeats the detection on the same "
                                      "inputs with every rotary frequency 0 (q and k unrotated), written as "
                                      "condition=rope-zeroed rows (about twice the cost); none: the model as loaded")


def plan(config: Config) -> list[Unit]:
    return common.units(config)


def significance(p: float | None, n_tests: int, alpha: float) -> dict:
    """A head's test at ``alpha``, uncorrected and Bonferroni-corrected over ``n_tests`` heads."""
    if p is None:
        return {"significant": False, "p_bonferroni": None, "significant_bonferroni": False}
    corrected = min(1.0, p * n_tests)
    return {"significant": p < alpha, "p_bonferroni": corrected, "significant_bonferroni": corrected < alpha}


def _across_prompts(prompt_rows: list[Row]) -> dict[tuple[int, int], dict]:
    """Per (layer, head): the mean of its per-input rho, the t test's p and the inputs counted."""
    by: dict[tuple[int, int], list[float]] = {}
    for r in prompt_rows:
        cell = by.setdefault((r["layer"], r["head"]), [])
        if r["rho"] is not None:
            cell.append(r["rho"])
    out = {}
    for key, rhos in by.items():
        mean, _, p = one_sample_t(rhos) if len(rhos) >= 2 else (rhos[0] if rhos else None, None, None)
        out[key] = {"rho_mean": mean, "p_value": p if len(rhos) >= 2 else None, "n_prompts": len(rhos)}
    return out


def _condition_rows(ranked: list[Row], prompts: list[Row], alpha: float, extra: dict) -> list[Row]:
    """The ``kind="head"`` rows (pooled rho and rank, the test across inputs) and ``kind="prompt"``
    rows of one detection condition."""
    tests = _across_prompts(prompts)
    rows = []
    for r in ranked:
        test = tests.get((r["layer"], r["head"]), {"rho_mean": None, "p_value": None, "n_prompts": 0})
        pooled = {k: v for k, v in r.items() if k != "p_value"}  # the pooled points' p: not a valid test
        rows.append({"kind": "head", **pooled, **test, **significance(test["p_value"], len(ranked), alpha), **extra})
    return rows + [{"kind": "prompt", **{k: v for k, v in r.items() if k != "p_value"}, **extra} for r in prompts]


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    ranked, prompts = detection(lm, config, unit, cache)
    extra = {**common.coordinates(lm, config, unit), "rank_by": config.rank_by, "n_heads_total": len(ranked),
             "condition": REAL}
    rows = _condition_rows(ranked, prompts, config.alpha, extra)
    if config.control == ROPE_ZEROED:
        zeroed, zeroed_prompts = detection(lm, config, unit, cache, condition=ROPE_ZEROED)
        rows += _condition_rows(zeroed, zeroed_prompts, config.alpha, {**extra, "condition": ROPE_ZEROED})
    for f in config.fractions:
        n = n_selected(f, len(ranked))
        rows.append({"kind": "selection", "fraction": f, "n_selected": n,
                     "heads": [[r["layer"], r["head"]] for r in ranked[:n]], **extra})
    return rows


def work(config: Config, unit: Unit) -> list[Work]:
    """One forward per input and its queries' top-k pairs, twice with the RoPE-zeroed control."""
    n = config.n_samples * (2 if config.control == ROPE_ZEROED else 1)
    return [Work(n, unit["length"], pairs=n * query_key_pairs(unit["length"], config.n_queries, config.top_k))]



register(Experiment(
    "positional-heads", Config, plan, run, needs=("rope",), doc=summary(__doc__),
    paper="rope-distance", section="Sections 4.2.1, 4.3.1", work=work,
    smoke=Smoke({"lengths": [64], "n_samples": 2, "top_k": 8, "fractions": [0.25, 0.5]},
                at_length=lambda L: {"source": "random", "lengths": [L], "n_samples": 1, "n_queries": 64}),
    demo=(DemoStep("rope", {**DEMO_ROPE, "lengths": [T], "n_samples": 8, "n_queries": 128},
                   {**DEMO_ROPE, "lengths": [T], "n_samples": 1, "n_queries": 32}),),
    columns=declare(
        ROPE_UNIT, narrow(KIND, kind=("head", "prompt", "selection")), ROPE_LAYER,
        pick("rho", "n_distances", "n_pairs", "p_value"), narrow(CONDITION, condition=typing.get_args(Control)),
        FRACTION,
        Column("rank", int, "rank", "the head's rank by rho (1 = strongest)"),
        Column("rho_mean", float, "rho", "mean over the inputs of each input's rho"),
        Column("n_prompts", int, "count", "inputs of the t test"),
        Column("significant", bool, "", "p_value < alpha"),
        Column("p_bonferroni", float, "p", "min(1, p_value x heads)"),
        Column("significant_bonferroni", bool, "", "p_bonferroni < alpha"),
        Column("rank_by", str, "", "how heads are ranked: 'abs', 'positive' or 'negative' rho", choices=RANK_BY),
        Column("n_heads_total", int, "count", "heads ranked"),
        Column("prompt", int, "index", "index of the input of a kind='prompt' row"),
        Column("n_selected", int, "count", "heads selected at this fraction"),
        Column("heads", list, "", "the selected heads as [[layer, head], ...]"),
    ),
))
