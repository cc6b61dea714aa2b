"""Options and inputs shared by the RoPE experiments of the RoPE-distance paper.

The RoPE-distance paper ("On the token distance modeling ability of higher RoPE attention dimension") samples
a handful of inputs (17 in the paper) and analyses them at lengths below and beyond the
training length, with and without an extrapolation transform (Section 4.2.2). Every RoPE
experiment's unit is one (transform, length) and aggregates its inputs, since the per-head
statistics pool pairs across inputs. Every per-layer row names the RoPE that layer used
(``layer_info``): on local/global hybrids (Gemma 3) sliding and global layers differ in base.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import (
    Count,
    Layers,
    NonEmpty,
    NonNegativeCount,
    PositiveFraction,
    Tokens,
    option,
)
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.probes.dominant import RankBy
from ctxlens.probes.extrapolation import parse_transform, train_length
from ctxlens.probes.source import SourceOptions
from ctxlens.probes.windows import bos_id, is_random, source_windows

if TYPE_CHECKING:
    from ctxlens.lm.model import LM


@dataclass
class RopeOptions(SourceOptions):
    """The options of every RoPE experiment (rope-dims, dominant-dimension, positional-heads,
    rope-dim-ablation, head-masking): inputs from a source at lengths below and beyond the
    training length, under extrapolation transforms ("On the token distance modeling ability of
    higher RoPE attention dimension", Section 4.2.2)."""

    lengths: list[Tokens] = option(factory=lambda: [256, 512, 1024],
                                        help="input lengths, in tokens, below and beyond the training length")
    transforms: Annotated[list[str], NonEmpty] = option(
        factory=lambda: ["none"], help="extrapolation transforms, one unit each: none, theta:BASE, linear:F, "
                                       "dynamic:F, yarn:F (optionally @global, @sliding or @all) or selfextend:G:W")
    layers: Layers = option(None, "attention layers analysed, negative from the end; unset: every attention layer")
    train_length: Tokens | None = option(
        None, "training length in tokens (splits rows into beyond_train or not; the transforms' original length); "
              "unset: from the model (zoo record or config)")

    def validate(self) -> None:
        for spec in self.transforms:
            parse_transform(spec)


@dataclass
class DominantOptions(RopeOptions):
    """RoPE options of the experiments that take each query's dominant dimension over its top-k
    attended keys (Section 4.2.1, equations 13-15)."""

    top_k: Count = option(100, "attended keys per query whose dominant dimension is taken (the paper uses 100)")
    n_queries: NonNegativeCount = option(0, "queries per input, evenly spaced; 0: every token")


@dataclass
class HeadOptions(DominantOptions):
    """Dominant-dimension options plus the selection of Positional Heads (Section 4.3.1):
    heads ranked by Spearman's rho between relative distance and dominant dimension."""

    fractions: Annotated[list[PositiveFraction], NonEmpty] = option(
        factory=lambda: [0.05, 0.1], help="fractions of all heads selected as Positional Heads (the paper: 5% and 10%)")
    rank_by: RankBy = option("abs", "rank heads by |rho| (abs), or by signed rho (positive, negative)")


def units(config: RopeOptions) -> list[Unit]:
    """One unit per (transform, length)."""
    return [{"transform": t, "length": length, "seed": config.seed}
            for t in config.transforms for length in config.lengths]


def windows(lm: LM, config: SourceOptions, length: int, cache: Cache, n: int | None = None,
            seed: int | None = None) -> torch.Tensor:
    """[n, length] token ids from ``config.source``, each input a window of its own length
    (``ctxlens.probes.windows``, cached per length, n and seed)."""
    n = config.n_samples if n is None else n
    seed = config.seed if seed is None else seed
    lm.check_length(length)
    return source_windows(lm, config.source, [length], n, seed, cache, text_field=config.text_field,
                          bos=getattr(config, "bos", False)).at(length)  # BOS first when the tokenizer adds one


def layer_info(lm: LM, layers: Iterable[int]) -> dict[int, dict]:
    """{layer: columns naming its RoPE now (layer_type, rope_theta, rope_type, n_dims)}; call it
    inside ``applied`` so a transform's parameters are the ones recorded."""
    return {layer: {**lm.rope_info(layer), "n_dims": lm.layer_rotary_dims(layer) // 2} for layer in layers}


def shared_pairs(lm: LM, layers: Iterable[int]) -> int:
    """The number of frequency pairs of ``layers``, which must agree (e.g. to name pairs to ablate)."""
    counts = {layer: lm.layer_rotary_dims(layer) // 2 for layer in layers}
    if len(set(counts.values())) > 1:
        raise CtxlensError(f"Layers of '{lm.name}' have different numbers of RoPE pairs ({counts}); pass --layers "
                           "with layers of one type.")
    return next(iter(counts.values()))


def coordinates(lm: LM, config: RopeOptions, unit: Unit) -> Row:
    """Columns every row of a unit carries: training length, whether the unit is beyond it, and the
    text source its windows were cut from."""
    trained = train_length(lm, config.train_length)
    return {"train_length": trained, "beyond_train": unit["length"] > trained, "bos": reads_bos(lm, config),
            "source": config.source}


def reads_bos(lm: LM, config: SourceOptions) -> bool:
    """Whether ``windows`` puts a BOS first for ``config`` on ``lm`` (the rows' ``bos`` column): its
    ``bos`` option, or unset (auto) whether the tokenizer adds one, never before random ids."""
    bos = getattr(config, "bos", False)
    if bos is None and is_random(config.source):
        return False
    return bos_id(lm, bos) is not None
