"""``accs-boundary``: ACCS as the shuffled prefix range grows from its start towards the suffix.

The geometry paper ("How much do contextualized representations encode long-range context?"), Section
5.2, Figure 4, Tables 4-5: the prefix is shuffled from its first token up to a relative right
boundary b in {0.1, ..., 1.0} (b = 1.0: the whole prefix). A flat ACCS while b is small (only
distant tokens perturbed) followed by a drop near b = 1 marks a model that relies on local
context (recurrent models, ALiBi); a steady fall marks one that uses the whole prefix (hybrids).
b = 0 perturbs nothing (self-similarity 1, a control). A model whose tokenizer adds a BOS reads it first
(``bos``, unset: auto); the BOS is never shuffled: b is a fraction of the text prefix after it
(``probes.suffix.prefix_shuffle``), and rows record ``bos``.

One unit per length: each batch of original sequences is run once and each boundary's perturbed
copy once. One pooled row per (boundary, stream, layer), by default the last layer, and the per-window
rows of the card's window bootstrap beside it (``probes.suffix.window_rows``: ``level`` "window" / "pair").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from ctxlens.core.options import Fraction, Layers, NonEmpty, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, Work, summary
from ctxlens.experiments.columns import ACCS, ACCS_SAMPLES, LENGTH, SEED, WINDOWS, declare
from ctxlens.experiments.registry import DEMO_GEOMETRY, EXTRAPOLATE, SMOKE_SEQUENCES, T, register
from ctxlens.probes import suffix as sx

if TYPE_CHECKING:
    from ctxlens.lm.model import LM


@dataclass
class Config(sx.LengthOptions):
    boundaries: Annotated[list[Fraction], NonEmpty] = option(
        factory=lambda: [round(0.1 * i, 1) for i in range(1, 11)],
        help="relative right boundaries b: the first b x (text prefix length) tokens after the BOS, if any, are "
             "shuffled (1: the whole text prefix)")
    layers: Layers = option(factory=lambda: [-1],
                            help="layers measured, negative from the end; unset (null): every layer")


plan = sx.units  # one unit per length


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    length = unit["length"]
    cut = sx.suffix_windows(lm, config, config.lengths, cache)
    windows = cut.at(length)  # [n, length]
    shuffles = [sx.prefix_shuffle(length - config.suffix_len, b, bos=cut.bos) for b in config.boundaries]
    layers = lm.layer_indices(config.layers)
    positions, results = sx.measure(lm, config, windows, shuffles, layers)
    rows = []
    for c, (boundary, shuffle) in enumerate(zip(config.boundaries, shuffles)):
        coords = sx.window_coords(config, cut, length, positions=len(positions), n_sequences=windows.shape[0],
                                  boundary=boundary)
        for stream in config.streams:
            for layer in layers:
                got = results[(c, stream, layer)]
                rows.append(sx.geometry_row(coords, shuffle, stream, layer, got, config.condition_number))
                rows += sx.window_rows(coords, shuffle, stream, layer, got)
    return rows


def work(config: Config, unit: Unit) -> list[Work]:
    """Forwards of the original and one perturbed copy per boundary, ``n_sequences`` each."""
    return [Work((1 + len(config.boundaries)) * config.n_sequences, unit["length"])]


BOUNDARIES = [0.1, 0.3, 0.5, 0.7, 0.9, 1.0]  # the demo's; b_min, 0.5 and 1.0 are what the plateau criterion reads

COLUMNS = declare(LENGTH, SEED, WINDOWS, ACCS, ACCS_SAMPLES)


register(Experiment(
    "accs-boundary", Config, plan, run, needs=("residual",), doc=summary(__doc__), work=work,
    paper="geometry", section="Section 5.2, Figure 4, Tables 4-5",
    smoke=Smoke({"lengths": [64], "n_sequences": 4, "suffix_len": 8, "boundaries": [0, 0.25, 0.5, 0.75, 1.0]},
                at_length=lambda L: {**SMOKE_SEQUENCES, "lengths": [L], "boundaries": [0.5, 1.0]}),
    demo=(DemoStep("zoo", {**DEMO_GEOMETRY, "lengths": [T], "n_sequences": 8, "boundaries": BOUNDARIES},
                   {**DEMO_GEOMETRY, "lengths": [T], "n_sequences": 4, "boundaries": [0.1, 0.5, 1.0]},
                   controls=("alibi", "mamba2", "mlstm", "griffin", "hybrid")),
          DemoStep("rope", {**DEMO_GEOMETRY, "lengths": [4 * T], "n_sequences": 4, "boundaries": BOUNDARIES},
                   None, controls=("rope",), model_options=EXTRAPOLATE, run="accs-boundary-beyond-training")),
    columns=COLUMNS,
))
