"""Options and inputs shared by the RoPE experiments of seed 003.

Seed 003 ("On the token distance modeling ability of higher RoPE attention dimension") samples
a handful of inputs (17 in the paper) and analyses them at lengths below and beyond the
training length, with and without an extrapolation transform (Section 4.2.2). Every RoPE
experiment's unit is one (transform, length) and aggregates its inputs, since the per-head
statistics pool pairs across inputs. Every per-layer row names the RoPE that layer used
(``layer_info``): on local/global hybrids (Gemma 3) sliding and global layers differ in base.
"""

from __future__ import annotations

import torch

from ctxlens.core.errors import CtxlensError
from ctxlens.probes.extrapolation import parse_transform, train_length
from ctxlens.probes.windows import source_windows
from ctxlens.core.options import positive


def validate(config) -> None:
    """Checks every RoPE experiment's Config shares (lengths, samples, transforms, layers)."""
    positive("lengths", config.lengths)
    positive("n_samples", config.n_samples)
    if not config.transforms:
        raise CtxlensError("Option 'transforms' is empty; pass at least one, e.g. --transforms none,yarn:4.")
    for spec in config.transforms:
        parse_transform(spec)
    if config.train_length is not None:
        positive("train_length", config.train_length)


def units(config) -> list[dict]:
    """One unit per (transform, length)."""
    return [{"transform": t, "length": length, "seed": config.seed} for t in config.transforms for length in config.lengths]


def windows(lm, config, length: int, cache: dict, n: int | None = None, seed: int | None = None) -> torch.Tensor:
    """[n, length] token ids from ``config.source``, each input a window of its own length
    (``ctxlens.probes.windows``, cached per length, n and seed)."""
    n = config.n_samples if n is None else n
    seed = config.seed if seed is None else seed
    lm.check_length(length)
    return source_windows(lm, config.source, [length], n, seed, cache, text_field=config.text_field).ids


def layer_info(lm, layers) -> dict[int, dict]:
    """{layer: columns naming its RoPE now (layer_type, rope_theta, rope_type, n_dims)}; call it
    inside ``applied`` so a transform's parameters are the ones recorded."""
    return {layer: {**lm.rope_info(layer), "n_dims": lm.layer_rotary_dims(layer) // 2} for layer in layers}


def shared_pairs(lm, layers) -> int:
    """The number of frequency pairs of ``layers``, which must agree (e.g. to name pairs to ablate)."""
    counts = {layer: lm.layer_rotary_dims(layer) // 2 for layer in layers}
    if len(set(counts.values())) > 1:
        raise CtxlensError(f"Layers of '{lm.name}' have different numbers of RoPE pairs ({counts}); pass --layers "
                           "with layers of one type.")
    return next(iter(counts.values()))


def coordinates(lm, config, unit: dict) -> dict:
    """Columns every row of a unit carries: training length and whether the unit is beyond it."""
    trained = train_length(lm, config.train_length)
    return {"train_length": trained, "beyond_train": unit["length"] > trained}
