"""``rope-dims``: how often each RoPE frequency pair is among the top-k contributors, per layer and head.

The rope-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"),
Section 4.1, Figure 1: for sampled query-key pairs (query at m, key at n <= m, uniform over
such pairs) of every input, layer and head, the per-pair contributions to the logit
(Section 3) and the top 5 pairs; the rows give each pair's count and share of the top-k slots
per (layer, head). Pair ("dim") 0 is the highest frequency; the paper's "higher dimensions"
are the high indices. Each row names its layer's RoPE (layer_type, rope_theta, rope_type,
n_dims): the frequencies of pair d differ between sliding and global layers of Gemma 3.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ctxlens.core.columns import Column
from ctxlens.core.options import Count, Tokens, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, Work, summary
from ctxlens.experiments.columns import ROPE_LAYER, ROPE_UNIT, declare
from ctxlens.experiments.registry import DEMO_ROPE, T, register
from ctxlens.metrics.rope import top_pair_counts
from ctxlens.probes import rope as common
from ctxlens.probes.extrapolation import applied, train_length
from ctxlens.probes.qk import LayerQK, scan

if TYPE_CHECKING:
    from ctxlens.lm.model import LM


@dataclass
class Config(common.RopeOptions):
    lengths: list[Tokens] = option(factory=lambda: [512], help="input lengths, in tokens")
    n_pairs: Count = option(1000, "query-key pairs sampled per input and layer (shared by its heads)")
    top_k: Count = option(5, "frequency pairs counted per query-key pair: those contributing most (Figure 1: 5)")


def plan(config: Config) -> list[Unit]:
    return common.units(config)


def sample_pairs(length: int, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(m [n], k [n]) uniform over the causal pairs k <= m < length: m drawn with weight m + 1."""
    m = torch.multinomial(torch.arange(1, length + 1, dtype=torch.float), n, replacement=True, generator=generator)
    k = (torch.rand(n, generator=generator) * (m + 1)).long().clamp(max=m)
    return m, k


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    length = unit["length"]
    layers = lm.layer_indices(config.layers, attention=True)
    g = torch.Generator().manual_seed(config.seed)
    with applied(lm, unit["transform"], train_length(lm, config.train_length)):
        info = common.layer_info(lm, layers)
        n_dims = {layer: info[layer]["n_dims"] for layer in layers}  # pairs per layer (per layer type)
        top_k = {layer: min(config.top_k, n) for layer, n in n_dims.items()}
        counts = torch.zeros(len(layers), lm.n_heads, max(n_dims.values()), dtype=torch.long)
        ids = common.windows(lm, config, length, cache)  # [n_samples, length]
        for sample in range(len(ids)):
            m, n = sample_pairs(length, config.n_pairs, g)

            def per_layer(view: LayerQK, m: torch.Tensor = m, n: torch.Tensor = n) -> None:  # m, n: [n_pairs]
                keys = n.to(view.q.device)[None, :, None].expand(view.n_heads, -1, 1)  # [H, n_pairs, 1]
                pairs = view.pair_contributions(m.to(view.q.device), keys)[:, :, 0]  # [H, n_pairs, P]
                counts[layers.index(view.layer), :, :pairs.shape[-1]] += top_pair_counts(pairs, top_k[view.layer]).cpu()

            scan(lm, ids[sample:sample + 1], layers, per_layer)
    extra = common.coordinates(lm, config, unit)
    n_qk = len(ids) * config.n_pairs
    return [
        {"layer": layer, **info[layer], "head": h, "dim": d, "count": int(counts[li, h, d]),
         "share": float(counts[li, h, d]) / (n_qk * top_k[layer]), "top_k": top_k[layer], "n_query_key_pairs": n_qk,
         **extra}
        for li, layer in enumerate(layers) for h in range(lm.n_heads) for d in range(n_dims[layer])
    ]


COLUMNS = declare(
    ROPE_UNIT, ROPE_LAYER,
    Column("dim", int, "pair index", "RoPE frequency pair (0: the highest frequency)"),
    Column("count", int, "count", "top-k slots the pair takes over the sampled query-key pairs"),
    Column("share", float, "fraction", "count / all top-k slots"),
    Column("top_k", int, "count", "top contributors counted per query-key pair"),
    Column("n_query_key_pairs", int, "count", "query-key pairs sampled"),
)


def work(config: Config, unit: Unit) -> list[Work]:
    """One forward per input and its ``n_pairs`` sampled (query, key) pairs."""
    return [Work(config.n_samples, unit["length"], pairs=config.n_samples * config.n_pairs)]


register(Experiment(
    "rope-dims", Config, plan, run, needs=("rope",), doc=summary(__doc__),
    paper="rope-distance", section="Section 4.1", work=work,
    smoke=Smoke({"lengths": [64], "n_samples": 2, "n_pairs": 100},
                at_length=lambda L: {"source": "random", "lengths": [L], "n_samples": 1, "n_pairs": 500}),
    demo=(DemoStep("rope", {**DEMO_ROPE, "lengths": [T], "n_samples": 2, "n_pairs": 500},
                   {**DEMO_ROPE, "lengths": [T], "n_samples": 1, "n_pairs": 100}),),
    columns=COLUMNS,
))
