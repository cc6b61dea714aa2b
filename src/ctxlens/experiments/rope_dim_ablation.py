"""``rope-dim-ablation``: zero chosen RoPE frequency pairs in q and k; loss and attention change around the training length.

The rope-distance paper ("On the token distance modeling ability of higher RoPE attention dimension"),
Section 4.2.3, Figure 4: removing dimensions of the rotary encoding changes little within
the pre-training length and removes the abrupt change beyond it. An ablation names pairs:
``high:K`` the K highest pair indices (lowest frequencies, the paper's "higher dimensions"),
``low:K`` the K lowest, ``pairs:A-B`` an inclusive range; K may be a percentage (``high:25%``).

Measures per (transform, ablation, length):
- ``loss``: mean next-token loss with and without the pairs zeroed in every ablated layer;
- ``attention``: per (layer, head), mean total-variation distance between a query's attention
  row with and without the pairs, both from the same captured q/k (the direct effect on that
  layer), chunked over queries;
- ``dominant``: dominant dimension vs distance of the ablated model (removed pairs left out of
  the softmax): correlation and curve rows as in ``dominant-dimension``.
"""  # noqa: E501 -- line 1 is the one-line summary `ctxlens experiments` shows (base.summary)

from __future__ import annotations

import re
import typing
from dataclasses import dataclass
from typing import Annotated

import torch

from ctxlens.core.columns import Column
from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import Count, Layers, NonEmpty, NonNegativeCount, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, summary
from ctxlens.experiments.columns import CORRELATION, DISTANCE_BINS, KIND, ROPE_LAYER, ROPE_UNIT, declare, narrow
from ctxlens.experiments.registry import DEMO_ROPE, EXTRAPOLATE, T, register
from ctxlens.lm.analysis.selfextend import zero_pairs_edit
from ctxlens.probes import rope as common
from ctxlens.probes.dominant import DistanceSums, accumulate, correlation_rows, curve_rows
from ctxlens.probes.extrapolation import applied, train_length
from ctxlens.probes.perplexity import window_nll
from ctxlens.probes.qk import LayerQK, chunk_size, scan

if typing.TYPE_CHECKING:
    from ctxlens.lm.model import LM

Measure = typing.Literal["loss", "attention", "dominant"]
MEASURES = typing.get_args(Measure)
_SPEC = re.compile(r"^(?:(high|low):(\d+)(%?)|pairs:(\d+)-(\d+))$")


@dataclass
class Config(common.DominantOptions):
    n_samples: Count = option(2, "windows (inputs) per length")
    layers: Layers = option(None, "ablated and measured attention layers, negative from the end; unset: every "
                                    "attention layer")
    n_queries: NonNegativeCount = option(64, "queries per input of the attention and dominant measures, evenly "
                                           "spaced; 0: every token")
    ablations: Annotated[list[str], NonEmpty] = option(
        factory=lambda: ["high:25%", "low:25%"],
        help="frequency pairs zeroed, one unit each: high:K, low:K (K pairs or K%), pairs:A-B; pair 0 is the highest "
             "frequency")
    measures: Annotated[list[Measure], NonEmpty] = option(factory=lambda: list(MEASURES),
                                                          help="what is measured with and without the ablation")
    n_bins: Count = option(32, "relative-distance bins of the dominant measure's curve rows")

    def validate(self) -> None:
        super().validate()
        for spec in self.ablations:
            _parse(spec)


def _parse(spec: str) -> re.Match:
    m = _SPEC.match(spec.strip())
    if m is None:
        raise CtxlensError(f"Ablation '{spec}' is not understood; write high:K, low:K, high:K% or pairs:A-B.")
    return m


def pairs_of(spec: str, n_pairs: int) -> list[int]:
    """The pair indices an ablation spec names, for a model with ``n_pairs`` frequency pairs."""
    m = _parse(spec)
    if m.group(1):
        k = int(m.group(2))
        k = max(1, round(k * n_pairs / 100)) if m.group(3) else k
        chosen = list(range(k)) if m.group(1) == "low" else list(range(n_pairs - k, n_pairs))
    else:
        chosen = list(range(int(m.group(4)), int(m.group(5)) + 1))
    if not chosen or chosen[0] < 0 or chosen[-1] >= n_pairs or len(chosen) >= n_pairs:
        raise CtxlensError(f"Ablation '{spec}' names pairs outside 0..{n_pairs - 1} or all of them; pick fewer pairs.")
    return chosen


def plan(config: Config) -> list[Unit]:
    return [{"transform": t, "ablation": a, "length": length, "seed": config.seed}
            for t in config.transforms for a in config.ablations for length in config.lengths]


def _loss_row(lm: LM, ids: torch.Tensor, pairs: list[int], layers: list[int]) -> Row:
    base = window_nll(lm, ids).mean()
    with lm.ablate_pairs(pairs, layers):
        ablated = window_nll(lm, ids).mean()
    return {"kind": "loss", "nll_base": float(base), "nll_ablated": float(ablated), "delta": float(ablated - base)}


def _attention_rows(lm: LM, ids: torch.Tensor, pairs: list[int], layers: list[int], n_queries: int) -> list[Row]:
    tv = torch.zeros(len(layers), lm.n_heads, dtype=torch.float64)
    n = torch.zeros(len(layers), dtype=torch.long)
    length = ids.shape[1]
    qpos_all = torch.arange(length) if not n_queries or n_queries >= length else \
        torch.linspace(0, length - 1, n_queries).round().long().unique()

    def per_layer(view: LayerQK) -> None:
        q_ab, k_ab = zero_pairs_edit(pairs, view.layout, view.rotary_dims)(view.q, view.k)
        step = max(1, chunk_size(view.n_heads, length) // 2)
        for s in range(0, len(qpos_all), step):
            qpos = qpos_all[s:s + step].to(view.q.device)
            n_keys = int(qpos.max()) + 1
            diff = view.probs(qpos, n_keys=n_keys) - view.probs(qpos, n_keys=n_keys, q=q_ab, k=k_ab)  # [H, c, n]
            li = layers.index(view.layer)
            tv[li] += 0.5 * diff.abs().sum(-1).sum(-1).double().cpu()
            n[li] += len(qpos)

    for i in range(len(ids)):
        scan(lm, ids[i:i + 1], layers, per_layer)
    info = common.layer_info(lm, layers)
    return [{"kind": "attention", "layer": layer, **info[layer], "head": h, "tv": float(tv[li, h] / n[li]),
             "n_queries": int(n[li])}
            for li, layer in enumerate(layers) for h in range(lm.n_heads)]


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    layers = lm.layer_indices(config.layers, attention=True)
    n_dims = common.shared_pairs(lm, layers)
    pairs = pairs_of(unit["ablation"], n_dims)
    rows = []
    with applied(lm, unit["transform"], train_length(lm, config.train_length)):
        ids = common.windows(lm, config, unit["length"], cache)  # [n_samples, length]
        if "loss" in config.measures:
            rows.append(_loss_row(lm, ids, pairs, layers))
        if "attention" in config.measures:
            rows += _attention_rows(lm, ids, pairs, layers, config.n_queries)
        if "dominant" in config.measures:
            sums = DistanceSums(layers, lm.n_heads, unit["length"], lm.device, common.layer_info(lm, layers))
            with lm.ablate_pairs(pairs, layers):
                for i in range(len(ids)):
                    accumulate(lm, ids[i:i + 1], layers, sums, config.top_k, config.n_queries, pairs)
            rows += [{"kind": "correlation", **r} for r in correlation_rows(sums)]
            rows += [{"kind": "curve", **r} for r in curve_rows(sums, config.n_bins)]
    extra = {**common.coordinates(lm, config, unit), "pairs": pairs, "n_dims": n_dims}
    return [{**row, **extra} for row in rows]


COLUMNS = declare(
    ROPE_UNIT, narrow(KIND, kind=("loss", "attention", "correlation", "curve")), ROPE_LAYER, CORRELATION, DISTANCE_BINS,
    Column("ablation", str, "", "the pairs zeroed: 'high:K', 'low:K' or 'pairs:A-B' (K may be a percentage)"),
    Column("nll_base", float, "nats", "mean next-token loss with every pair", low=0.0),
    Column("nll_ablated", float, "nats", "mean next-token loss with the pairs zeroed", low=0.0),
    Column("delta", float, "nats", "nll_ablated - nll_base"),
    Column("pairs", list, "pair index", "the frequency pairs zeroed"),
    Column("tv", float, "", "total-variation distance between the attention with and without the pairs", low=0.0,
           high=1.0),
    Column("n_queries", int, "count", "queries the attention change is measured over"),
)


register(Experiment(
    "rope-dim-ablation", Config, plan, run, needs=("rope",), doc=summary(__doc__),
    paper="rope-distance", section="Section 4.2.3, Figure 4",
    smoke=Smoke({"lengths": [32, 64], "n_samples": 1, "n_queries": 8, "top_k": 8, "n_bins": 4, "train_length": 48},
                at_length=lambda L: {"source": "random", "lengths": [L], "n_samples": 1, "ablations": ["high:25%"],
                                     "n_queries": 64}),
    demo=(DemoStep("rope", {**DEMO_ROPE, "lengths": [T, 2 * T], "n_samples": 2, "n_queries": 32},
                   {**DEMO_ROPE, "lengths": [T], "n_samples": 1, "n_queries": 16, "measures": ["loss", "attention"]},
                   model_options=EXTRAPOLATE),),
    columns=COLUMNS,
))
