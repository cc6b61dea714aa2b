"""``accs-length``: ACCS vs length on periodic-regularity sequences with the whole prefix shuffled.

The geometry paper ("How much do contextualized representations encode long-range context?"), Section
5.3, Figure 5, Tables 6-7: random token sequences with one ``period_len``-token string repeated
after every ``stride`` random tokens (``ctxlens.data.periodic``) grow more regular, hence more
compressible, as they get longer; shuffling the whole prefix destroys that regularity. A model
that picks up the pattern shows ACCS falling with length.

Suffix tokens fixed across lengths: every sequence is cut so that a copy of its pattern starts
exactly at the suffix, so the suffix is the first ``suffix_len`` tokens of the pattern at every
length (the prefix ends with the random gap before that copy). Sample i uses the same pattern
at every length. One unit per length; one row per (stream, layer), with the mean LZMA
compression rate of the original prefixes (token ids as fixed-width integers: the sequences are
token-level, not text).

BOS: the sequences are synthetic ids, not text, so by default (``bos`` unset) none is put first, as
before random ids; ``bos=true`` puts the tokenizer's BOS first: the window is then the BOS and a
``length - 1``-token periodic sequence (the same suffix), and only the text prefix after the BOS is
shuffled and compressed (``probes.suffix.prefix_shuffle``). Rows record ``bos``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ctxlens.core.columns import Column
from ctxlens.core.errors import CtxlensError
from ctxlens.core.options import Layers, NonNegativeTokens, Tokens, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.data.periodic import periodic_sequence, sample_seed
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, summary
from ctxlens.experiments.columns import ACCS, COMPRESSION_RATE, LENGTH, SEED, declare, pick
from ctxlens.experiments.registry import DEMO_GEOMETRY, EXTRAPOLATE, SMOKE_SEQUENCES, T, register
from ctxlens.probes import suffix as sx
from ctxlens.probes.perturb import compression_rate, token_bytes
from ctxlens.probes.windows import bos_id

if TYPE_CHECKING:
    from ctxlens.lm.model import LM


@dataclass
class Config(sx.LengthOptions):
    lengths: list[Tokens] = option(factory=lambda: [512, 1024, 2048, 4096],
                                        help="sequence lengths (prefix + suffix), in tokens")
    period_len: Tokens = option(200, "L: tokens of the repeated string (the paper: 200)")
    stride: NonNegativeTokens = option(56, "k: random tokens between copies of the string (the paper: 56)")
    layers: Layers = option(factory=lambda: [-1],
                            help="layers measured, negative from the end; unset (null): every layer")

    def validate(self) -> None:
        super().validate()
        if self.suffix_len > self.period_len:
            raise CtxlensError(
                f"suffix_len={self.suffix_len} is longer than period_len={self.period_len}; the suffix is the start "
                "of a pattern copy, so use a suffix no longer than the pattern."
            )


plan = sx.units  # one unit per length


def periodic_windows(n: int, length: int, suffix_len: int, *, period_len: int, stride: int, seed: int,
                     low: int, high: int) -> torch.Tensor:
    """[n, length] periodic sequences whose last ``suffix_len`` tokens start a pattern copy."""
    period = period_len + stride
    prefix_len = length - suffix_len
    copy_start = -(-prefix_len // period) * period  # first copy start at or after prefix_len
    rows = []
    for i in range(n):
        seq = periodic_sequence(copy_start + suffix_len, vocab_size=high, period_len=period_len, stride=stride,
                                seed=sample_seed(seed, i), low=low)  # [copy_start + suffix_len]
        rows.append(seq[copy_start - prefix_len:])
    return torch.stack(rows)  # [n, length]


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    length = unit["length"]
    low, high = sx.token_range(lm)
    bos = bos_id(lm, True) if config.bos else None  # synthetic ids: a BOS only when asked for
    start = sx.text_start(bos is not None)
    windows = periodic_windows(config.n_sequences, length - start, config.suffix_len, period_len=config.period_len,
                               stride=config.stride, seed=config.seed, low=low, high=high)  # [n, length - start]
    if bos is not None:
        windows = torch.cat([torch.full_like(windows[:, :1], bos), windows], 1)  # [n, length]
    prefix_len = length - config.suffix_len
    shuffle = sx.prefix_shuffle(prefix_len, 1.0, bos=bos is not None)
    layers = lm.layer_indices(config.layers)
    positions, results = sx.measure(lm, config, windows, [shuffle], layers)
    rate = sum(compression_rate(token_bytes(w[start:prefix_len], None, high)) for w in windows)  # token-level bytes
    coords = {"source": "periodic", "bos": bos is not None, "prefix_len": prefix_len, "suffix_len": config.suffix_len,
              "positions": len(positions), "n_sequences": windows.shape[0], "boundary": 1.0,
              "period_len": config.period_len, "stride": config.stride,
              "compression_rate": rate / windows.shape[0]}
    return [sx.geometry_row(coords, shuffle, stream, layer, results[(0, stream, layer)], config.condition_number)
            for stream in config.streams for layer in layers]


COLUMNS = declare(
    LENGTH, SEED, pick("source", "prefix_len", "suffix_len", "n_sequences", "flag"), ACCS, COMPRESSION_RATE,
    Column("period_len", int, "tokens", "length of the repeated period"),
    Column("stride", int, "tokens", "offset between consecutive periods' starts"),
)


register(Experiment(
    "accs-length", Config, plan, run, needs=("residual",), doc=summary(__doc__),
    paper="geometry", section="Section 5.3, Figure 5, Tables 6-7",
    smoke=Smoke({"lengths": [64, 128], "n_sequences": 4, "suffix_len": 8, "period_len": 16, "stride": 4},
                at_length=lambda L: {**SMOKE_SEQUENCES, "lengths": [L]}),
    demo=(DemoStep("zoo", {**DEMO_GEOMETRY, "lengths": [T, 2 * T], "n_sequences": 2},
                   {**DEMO_GEOMETRY, "lengths": [T, 2 * T], "n_sequences": 2}, model_options=EXTRAPOLATE),),
    columns=COLUMNS,
))
