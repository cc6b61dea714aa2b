"""``token-loss``: mean next-token loss of windows of a text source at several lengths.

The core's smoke analysis: one forward per (length, sample) window through the chunked loss
(``LM.token_losses``), one row per window. It checks that a model, a source and the run
directory work end to end; the paper-grade loss-vs-visible-context curve (the intrinsic-entropy paper, Section
2.2.2) is the ``loss-vs-length`` experiment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxlens.core.columns import Column
from ctxlens.core.options import Tokens, option
from ctxlens.core.units import Cache, Row, Unit
from ctxlens.experiments.base import DemoStep, Experiment, Smoke, summary
from ctxlens.experiments.columns import BOS, FLAG, LENGTH, SAMPLE, SEED, SOURCE, declare, pick
from ctxlens.experiments.registry import T, register
from ctxlens.probes.source import SourceOptions
from ctxlens.probes.windows import source_windows

if TYPE_CHECKING:
    from ctxlens.lm.model import LM


@dataclass
class Config(SourceOptions):
    source: str = option("random", "text source: random (uniform random token ids), builtin[:SPLIT], "
                                   "a .txt/.jsonl/.parquet file or folder, or hf:DATASET")
    lengths: list[Tokens] = option(factory=lambda: [128, 256], help="window lengths, in tokens")


def plan(config: Config) -> list[Unit]:
    return [
        {"source": config.source, "length": length, "sample": i, "seed": config.seed}
        for length in config.lengths
        for i in range(config.n_samples)
    ]


def run(lm: LM, config: Config, unit: Unit, cache: Cache) -> list[Row]:
    length = unit["length"]
    lm.check_length(length)
    windows = source_windows(lm, config.source, [length], config.n_samples, config.seed, cache,
                             text_field=config.text_field, bos=config.bos)  # ids [n_samples, length]
    ids = windows.at(length)[unit["sample"]][None]  # [1, length], BOS first when the tokenizer adds one
    nll = lm.token_losses(ids)[0]  # [length - 1]
    finite = bool(nll.isfinite().all())
    mean = float(nll.mean()) if finite else None
    return [{
        "n_tokens": length - 1, "bos": windows.bos,
        "nll": mean,
        "ppl": math.exp(mean) if mean is not None else None,
        "nll_last": float(nll[-1]) if finite else None,
        "flag": None if finite else "non-finite loss",
    }]


COLUMNS = declare(
    SOURCE, LENGTH, SAMPLE, SEED, BOS, FLAG, pick("n_tokens", "nll", "ppl"),
    Column("nll_last", float, "nats", "NLL of the window's last token", low=0.0),
)


register(Experiment(
    "token-loss", Config, plan, run, needs=("token_loss",), doc=summary(__doc__),
    paper="", section="the core's smoke analysis",
    smoke=Smoke({"lengths": [16, 32], "n_samples": 2},
                at_length=lambda L: {"source": "random", "lengths": [L], "n_samples": 1}),
    demo=(DemoStep("zoo", {"source": "builtin:test", "lengths": [T], "n_samples": 2},
                   {"source": "builtin:test", "lengths": [T], "n_samples": 1}),),
    columns=COLUMNS,
))
