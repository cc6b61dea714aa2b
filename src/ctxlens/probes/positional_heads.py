"""Positional Heads: heads ranked by the correlation of relative distance and dominant dimension.

The RoPE distance paper ("On the token distance modeling ability of higher RoPE attention
dimension"), Section 4.2.1: the dominant dimension of each top-k (query, key) pair, averaged per
distance over the inputs of one (transform, length) unit (``distance_sums``); Section 4.3.1:
Spearman's rho between distance and that mean ranks every attention head, and the top 5% / 10%
are the Positional Heads (``ranked_heads``); the same rho per input (``detection``) is what a
test across inputs reads. ``dominant-dimension`` writes the sums,
``positional-heads`` the ranking, ``head-masking`` masks the top of it.

The paper makes no control. ctxlens's negative control (``condition="rope-zeroed"``) repeats the
detection with every rotary frequency set to 0 (``ctxlens.lm.analysis.rope.zero_rotation``): q and k reach
attention unrotated at every layer (so deeper layers also read a forward without positions), and
the statistic is computed as in the real detection (the same inputs and queries, the top-k keys of
each query by the model's logits, now unrotated, under the same causal mask; the per-pair
contributions q_i k_i summed over each frequency pair's two dims, which exist without rotation,
and the dominant dimension over them, Section 4.2.1). Whatever distance dependence the dominant
dimension keeps there comes from the statistic and the model without RoPE (keys per distance, the
mask, the content), not from RoPE's rotation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxlens.core.errors import CtxlensError
from ctxlens.core.units import Cache, Unit
from ctxlens.lm.analysis.rope import zero_rotation
from ctxlens.probes import rope as common
from ctxlens.probes.dominant import DistanceSums, accumulate, correlation_rows, rank_heads
from ctxlens.probes.extrapolation import applied, train_length

if TYPE_CHECKING:
    from ctxlens.lm.model import LM

REAL, ROPE_ZEROED = "none", "rope-zeroed"  # the detection's conditions: the model as loaded, no rotation


def validate_fractions(fractions: list[float]) -> None:
    """Head fractions must lie in (0, 1]."""
    if not fractions or any(not 0 < f <= 1 for f in fractions):
        raise CtxlensError(f"Option 'fractions' must hold fractions in (0, 1], got {fractions}; pass e.g. 0.05,0.1.")


def distance_sums(lm: LM, config: common.DominantOptions, unit: Unit, cache: Cache, drop_pairs: Sequence[int] = (),
                  per_prompt: list | None = None,
                  condition: str = REAL) -> DistanceSums:
    """Distance sums of one (transform, length) unit over ``config.n_samples`` inputs of
    ``config.source`` (config: source, text_field, seed, n_samples, top_k, n_queries, layers,
    train_length); with ``per_prompt`` a list, each input's own correlation rows (one per layer
    and head, with ``prompt``, its index) are appended to it: the paper's 17 prompts are the
    independent items a test across prompts needs (Section 4.2.1). ``condition``: ``REAL``, or
    ``ROPE_ZEROED`` (the same inputs with every rotary frequency 0, after the unit's transform)."""
    layers = lm.layer_indices(config.layers, attention=True)
    with applied(lm, unit["transform"], train_length(lm, config.train_length)):
        info = common.layer_info(lm, layers)
        ids = common.windows(lm, config, unit["length"], cache)  # [n_samples, length]
        sums = DistanceSums(layers, lm.n_heads, unit["length"], lm.device, info)
        with rotation(lm, condition):
            for sample in range(len(ids)):
                if per_prompt is None:
                    accumulate(lm, ids[sample:sample + 1], layers, sums, config.top_k, config.n_queries, drop_pairs)
                    continue
                one = DistanceSums(layers, lm.n_heads, unit["length"], lm.device, info)
                accumulate(lm, ids[sample:sample + 1], layers, one, config.top_k, config.n_queries, drop_pairs)
                sums.sums += one.sums  # [layers, H, L]
                sums.counts += one.counts  # [layers, H, L]
                per_prompt += [{**r, "prompt": sample} for r in correlation_rows(one)]
            check_zeroed(lm, layers, condition)
    return sums


def rotation(lm: LM, condition: str) -> contextlib.AbstractContextManager:
    """The model's RoPE as loaded (``REAL``) or with every rotary frequency 0 (``ROPE_ZEROED``)."""
    if condition == REAL:
        return contextlib.nullcontext()
    if condition == ROPE_ZEROED:
        return zero_rotation(lm.model, lm.text_prefix)
    raise CtxlensError(f"Unknown detection condition '{condition}'; use '{REAL}' or '{ROPE_ZEROED}'.")


def check_zeroed(lm: LM, layers: Sequence[int], condition: str) -> None:
    """Under ``ROPE_ZEROED``, refuse a model whose rotary module recomputed its frequencies during
    the forward (dynamic or long RoPE types grow them past a length): its control would be rotated."""
    if condition != ROPE_ZEROED:
        return
    moved = [layer for layer in layers if bool(lm.inv_freq(layer).abs().max() > 0)]
    if moved:
        raise CtxlensError(f"The RoPE-zeroed control of '{lm.name}' is not unrotated: its rotary module recomputed "
                           f"the frequencies of layers {moved} during the forward (a dynamic RoPE type); run the "
                           "control at a length inside the model's positions or with control=none.")


def detection(lm: LM, config: common.HeadOptions, unit: Unit, cache: Cache,
              condition: str = REAL) -> tuple[list[dict], list[dict]]:
    """(correlation rows of every head pooled over the inputs, strongest first by ``config.rank_by``
    with ``rank``; the per-input correlation rows), cached per unit, detection options and
    ``condition`` (``REAL`` or ``ROPE_ZEROED``)."""
    key = ("ranked", unit["transform"], unit["length"], config.source, config.seed, config.n_samples, config.top_k,
           config.n_queries, config.rank_by, tuple(config.layers or ()), config.bos, condition)
    if key not in cache:
        prompts: list[dict] = []
        sums = distance_sums(lm, config, unit, cache, per_prompt=prompts, condition=condition)
        cache[key] = rank_heads(correlation_rows(sums), config.rank_by), prompts
    return cache[key]


def ranked_heads(lm: LM, config: common.HeadOptions, unit: Unit, cache: Cache) -> list[dict]:
    """Correlation rows of every head, strongest first by ``config.rank_by``, with ``rank``
    (cached per unit and detection options)."""
    return detection(lm, config, unit, cache)[0]
