"""``accs-boundary``: ACCS as the shuffled prefix range grows from its start towards the suffix.

Seed 000 ("How much do contextualized representations encode long-range context?"), Section
5.2, Figure 4, Tables 4-5: the prefix is shuffled from its first token up to a relative right
boundary b in {0.1, ..., 1.0} (b = 1.0: the whole prefix). A flat ACCS while b is small (only
distant tokens perturbed) followed by a drop near b = 1 marks a model that relies on local
context (recurrent models, ALiBi); a steady fall marks one that uses the whole prefix (hybrids).
b = 0 perturbs nothing (self-similarity 1, a control).

One unit per length: each batch of original sequences is run once and each boundary's perturbed
copy once. One row per (boundary, stream, layer); by default the last layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxlens.core.options import Layers
from ctxlens.probes import suffix as sx
from ctxlens.experiments.base import Experiment
from ctxlens.experiments.registry import register


@dataclass
class Config(sx.GeometryOptions):
    lengths: list[int] = field(default_factory=lambda: [512])
    boundaries: list[float] = field(default_factory=lambda: [round(0.1 * i, 1) for i in range(1, 11)])
    layers: Layers = field(default_factory=lambda: [-1])  # None: every layer

    def validate(self) -> None:
        super().validate()
        self.check_lengths(self.lengths)
        sx.check_boundaries("boundaries", self.boundaries)


def plan(config: Config) -> list[dict]:
    return [{"length": length, "seed": config.seed} for length in config.lengths]


def run(lm, config: Config, unit: dict, cache: dict) -> list[dict]:
    length = unit["length"]
    cut = sx.suffix_windows(lm, config, config.lengths, cache)
    windows = cut.at(length)  # [n, length]
    prefix_len = length - config.suffix_len
    shuffles = [sx.prefix_shuffle(prefix_len, b) for b in config.boundaries]
    layers = lm.layer_indices(config.layers)
    positions = sx.suffix_positions(length, config.suffix_len, config.suffix_positions)
    results = sx.measure_accs(lm, windows, shuffles, layers=layers, streams=config.streams, positions=positions,
                              batch_size=config.batch_size, seed=config.seed, covariance=config.condition_number)
    rows = []
    for c, (boundary, shuffle) in enumerate(zip(config.boundaries, shuffles)):
        coords = {"source": config.source, "cut_length": cut.cut_length,
                  "prefix_len": prefix_len, "suffix_len": config.suffix_len,
                  "positions": len(positions), "n_sequences": windows.shape[0], "boundary": boundary}
        rows += [sx.geometry_row(coords, shuffle, stream, layer, results[(c, stream, layer)], config.condition_number)
                 for stream in config.streams for layer in layers]
    return rows


register(Experiment("accs-boundary", Config, plan, run, needs=("residual",), doc=__doc__.splitlines()[0]))
