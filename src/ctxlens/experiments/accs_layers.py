"""``accs-layers``: self-similarity, anisotropy and ACCS per layer when the distant prefix is shuffled.

The geometry paper ("How much do contextualized representations encode long-range context?"), Section 4,
Figure 1: windows of a text source at a given length; the first ``boundary`` fraction of the
text prefix (by default its distant half) is shuffled with a seed that depends only on the sample,
so every model sees the same perturbed prefixes; the suffix representations on the residual
stream after the context-mixing sublayer (``stream=residual``; ``block`` for block outputs)
are compared with their unperturbed counterparts at every layer. ACCS is expected to fall with
depth as representations gather more context. A model whose tokenizer adds a BOS reads it first
(``bos``, unset: auto); the BOS is never shuffled: the boundary is a fraction of the text prefix after
it (``probes.suffix.prefix_shuffle``), and rows record ``bos``.

One unit per length; one pooled row per (stream, layer) (``self_sim``, ``anisotropy``, ``accs`` over every
window together, anisotropy over all pairs of the pool), and beside it the per-window rows the card's
window bootstrap reads (``probes.suffix.window_rows``): ``level="window"`` per (stream, layer, sample) and
``level="pair"`` per (stream, layer, sample, other_sample). Rows carry the layer's ``layer_type``
(sliding_attention / full_attention) where the model names one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxlens.core.options import Fraction, Layers, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, Work, summary
from ctxlens.experiments.columns import ACCS, ACCS_SAMPLES, LAYER_TYPE, LENGTH, SEED, WINDOWS, declare
from ctxlens.experiments.registry import DEMO_GEOMETRY, SMOKE_SEQUENCES, T, register
from ctxlens.probes import suffix as sx

if TYPE_CHECKING:
    from ctxlens.lm.model import LM


@dataclass
class Config(sx.LengthOptions):
    boundary: Fraction = option(0.5, "relative right boundary b: the first b x (text prefix length) tokens after "
                                      "the BOS, if any, are shuffled")
    layers: Layers = option(None, "layers measured, negative from the end; unset: every layer")


plan = sx.units  # one unit per length


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    length = unit["length"]
    cut = sx.suffix_windows(lm, config, config.lengths, cache)
    windows = cut.at(length)  # [n, length]
    shuffle = sx.prefix_shuffle(length - config.suffix_len, config.boundary, bos=cut.bos)
    layers = lm.layer_indices(config.layers)
    positions, results = sx.measure(lm, config, windows, [shuffle], layers)
    coords = sx.window_coords(config, cut, length, positions=len(positions), n_sequences=windows.shape[0],
                              boundary=config.boundary)
    types = {layer: sx.layer_type_of(lm, layer) for layer in layers}
    rows = []
    for stream in config.streams:
        for layer in layers:
            got = results[(0, stream, layer)]
            row = sx.geometry_row(coords, shuffle, stream, layer, got, config.condition_number)
            rows.append(row if types[layer] is None else {**row, "layer_type": types[layer]})
            rows += sx.window_rows(coords, shuffle, stream, layer, got, types[layer])
    return rows


def work(config: Config, unit: Unit) -> list[Work]:
    """Forwards of the original and the shuffled sequences, ``n_sequences`` each."""
    return [Work(2 * config.n_sequences, unit["length"])]


COLUMNS = declare(LENGTH, SEED, WINDOWS, ACCS, ACCS_SAMPLES, LAYER_TYPE)


register(Experiment(
    "accs-layers", Config, plan, run, needs=("residual",), doc=summary(__doc__), work=work,
    paper="geometry", section="Section 4, Figure 1",
    smoke=Smoke({"lengths": [48, 96], "n_sequences": 4, "suffix_len": 8},
                at_length=lambda L: {**SMOKE_SEQUENCES, "lengths": [L], "layers": None}, every_layer=True),
    demo=(DemoStep("zoo", {**DEMO_GEOMETRY, "lengths": [T], "n_sequences": 16},
                   {**DEMO_GEOMETRY, "lengths": [T], "n_sequences": 4}, controls=("rope",)),),
    columns=COLUMNS,
))
