"""``anisotropy-compression``: anisotropy of suffix representations vs LZMA prefix compression rate.

The geometry paper ("How much do contextualized representations encode long-range context?"), Section
5.1, Figure 3, and Appendix D, Figure 7. Two ways of varying how compressible the prefix is:

- ``perturbation=local-shuffle``: the prefix is cut into consecutive windows of ``window``
  tokens and shuffled within each (window 1: untouched; 0: the whole prefix as one window);
  bigger windows destroy more structure and raise the compression rate.
- ``perturbation=none``: the unperturbed windows are split by their own prefix compression rate
  into ``n_bins`` bins of equal count (bin 0 the most compressible), without disturbing the
  language.

The rate is LZMA-compressed bytes / raw bytes of the prefix (decoded text with a tokenizer,
fixed-width token ids without). Anisotropy is the exact mean pairwise cosine of the suffix
representations of each condition. One unit per length; rows per (condition, stream, layer).

A model whose tokenizer adds a BOS reads it first (``bos``, unset: auto): the prefix shuffled, cut
into windows and compressed is then the text prefix after the BOS (positions 1 to the suffix;
``probes.suffix.prefix_shuffle``), and rows record ``bos``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ctxlens.core.columns import Column
from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import Layers, NonNegativeCount, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, summary
from ctxlens.experiments.columns import BOS, COMPRESSION_RATE, LENGTH, SEED, WINDOWS, declare, pick
from ctxlens.experiments.registry import DEMO_GEOMETRY, SMOKE_SEQUENCES, T, register
from ctxlens.metrics.geometry import AnisotropyAccumulator
from ctxlens.probes import suffix as sx
from ctxlens.probes.perturb import compression_rate, token_bytes

if TYPE_CHECKING:
    from ctxlens.lm.model import LM


@dataclass
class Config(sx.LengthOptions):
    windows: list[NonNegativeCount] = option(
        factory=lambda: [1, 4, 16, 64, 256, 0],
        help="local-shuffle window sizes, in tokens: the prefix is shuffled within each window (1: untouched; "
             "0: the whole prefix as one window)")
    n_bins: NonNegativeCount = option(4, "compression-rate bins of the unperturbed windows (equal counts); 0: none")
    layers: Layers = option(factory=lambda: [-1],
                            help="layers measured, negative from the end; unset (null): every layer")

    def validate(self) -> None:
        super().validate()
        if self.n_bins > self.n_sequences:
            raise CtxlensError(
                f"Option 'n_bins' must be at most n_sequences={self.n_sequences}, got {self.n_bins}; use fewer bins "
                "or more sequences."
            )


plan = sx.units  # one unit per length


def equal_count_bins(rates: list[float], n_bins: int) -> list[int]:
    """Bin of each rate: ranks split into ``n_bins`` groups of (near) equal size, lowest first."""
    order = sorted(range(len(rates)), key=lambda i: (rates[i], i))
    bins = [0] * len(rates)
    for rank, i in enumerate(order):
        bins[i] = rank * n_bins // len(rates)
    return bins


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    length = unit["length"]
    cut = sx.suffix_windows(lm, config, config.lengths, cache)
    windows = cut.at(length)  # [n, length]
    n, prefix_len = windows.shape[0], length - config.suffix_len
    start = sx.text_start(cut.bos)  # the text prefix: positions [start, prefix_len)
    shuffles = [sx.prefix_shuffle(prefix_len, 1.0, w, bos=cut.bos) for w in config.windows]
    samples = list(range(n))
    rates = [[compression_rate(token_bytes(row[start:prefix_len], lm.tokenizer, lm.vocab_size))
              for row in s.apply(windows, samples, config.seed)] for s in shuffles]  # [conditions][n]
    original = [compression_rate(token_bytes(row[start:prefix_len], lm.tokenizer, lm.vocab_size))
                for row in windows]
    bins = equal_count_bins(original, config.n_bins) if config.n_bins else [None] * n
    layers = lm.layer_indices(config.layers)
    positions = sx.suffix_positions(length, config.suffix_len, config.suffix_positions)

    def new() -> sx.Guarded:
        return sx.Guarded(AnisotropyAccumulator(config.condition_number))

    by_window = {(c, s, layer): new() for c in range(len(shuffles)) for s in config.streams for layer in layers}
    by_bin = {(b, s, layer): new() for b in range(config.n_bins) for s in config.streams for layer in layers}
    for b0 in range(0, n, config.batch_size):
        batch = windows[b0:b0 + config.batch_size]  # [B, length]
        rows = list(range(b0, b0 + batch.shape[0]))
        states = sx.suffix_states(lm, batch, positions, layers, config.streams)  # {(s, l): [B*m, d]}
        m = len(positions)
        for (stream, layer), x in states.items():
            for j, i in enumerate(rows):
                if (b := bins[i]) is not None:
                    by_bin[(b, stream, layer)].update(x[j * m:(j + 1) * m])
        for c, shuffle in enumerate(shuffles):
            ids = shuffle.apply(batch, rows, config.seed)
            got = states if torch.equal(ids, batch) else sx.suffix_states(lm, ids, positions, layers, config.streams)
            for key, x in got.items():
                by_window[(c,) + key].update(x)

    base = sx.window_coords(config, cut, length, positions=len(positions))
    out = []
    for c, shuffle in enumerate(shuffles):
        coords = {**base, "perturbation": "local-shuffle", "window": config.windows[c],
                  "effective_window": shuffle.window or prefix_len - start, "n_sequences": n,
                  "compression_rate": sum(rates[c]) / n}
        out += [_row(coords, s, layer, by_window[(c, s, layer)], config) for s in config.streams for layer in layers]
    for b in range(config.n_bins):
        members = [original[i] for i in range(n) if bins[i] == b]
        coords = {**base, "perturbation": "none", "bin": b, "n_bins": config.n_bins, "n_sequences": len(members),
                  "rate_low": min(members), "rate_high": max(members),
                  "compression_rate": sum(members) / len(members)}
        out += [_row(coords, s, layer, by_bin[(b, s, layer)], config) for s in config.streams for layer in layers]
    return out


def _row(coords: dict, stream: str, layer: int, acc: sx.Guarded, config: Config) -> Row:
    return {**coords, "stream": stream, "layer": layer,
            **sx.metric_columns(acc.result(), sx.POOL_METRICS, config.condition_number)}


COLUMNS = declare(
    LENGTH, SEED, WINDOWS, BOS, pick("positions", "window", "stream", "layer", "n", "anisotropy", "mean_dot"),
    COMPRESSION_RATE,
    Column("perturbation", str, "", "how the prefix was made more or less compressible ('local-shuffle', 'none')",
           choices=("local-shuffle", "none")),
    Column("effective_window", int, "tokens", "the shuffle window actually used (the prefix length for 0)"),
    Column("bin", int, "index", "compression-rate bin of the unperturbed windows"),
    Column("n_bins", int, "count", "number of compression-rate bins"),
    Column("rate_low", float, "bits/token", "lowest compression rate in the bin"),
    Column("rate_high", float, "bits/token", "highest compression rate in the bin"),
)


register(Experiment(
    "anisotropy-compression", Config, plan, run, needs=("residual",), doc=summary(__doc__),
    paper="geometry", section="Section 5.1, Figure 3, Appendix D, Figure 7",
    smoke=Smoke({"lengths": [64], "windows": [1, 4, 16, 0], "n_bins": 2, "n_sequences": 4, "suffix_len": 8},
                at_length=lambda L: {**SMOKE_SEQUENCES, "lengths": [L], "windows": [16, 0], "n_bins": 2,
                                     "layers": None}, every_layer=True),
    demo=(DemoStep("zoo", {**DEMO_GEOMETRY, "lengths": [T], "n_sequences": 8, "windows": [1, 0], "n_bins": 2},
                   {**DEMO_GEOMETRY, "lengths": [T], "n_sequences": 4, "windows": [1, 0], "n_bins": 2}),),
    columns=COLUMNS,
))
